//! The conceptual model (entity graph) and its parser.
//!
//! Format (one declaration a line, `#` comments; see docs/advisor.md):
//! ```text
//! entity Hotel 100                      # name, row count
//!   id HotelID                          # exactly one id per entity: [type] [size]
//!   field HotelCity string 20 distinct 10
//! fk Room.Hotel -> Hotel.Rooms          # N:1: each Room has one Hotel; a Hotel has many Rooms
//! ```

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::error::{AdvisorError, Result, Span};
use crate::lex::{Cursor, Tok, tokenize};

/// The type of a field, which gives its CQL type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    /// A 64-bit integer.
    Int,
    /// A double.
    Float,
    /// Text.
    String,
    /// A boolean.
    Bool,
    /// A timestamp.
    Date,
}

impl FieldType {
    fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "int" | "integer" => FieldType::Int,
            "float" | "double" => FieldType::Float,
            "string" | "text" => FieldType::String,
            "bool" | "boolean" => FieldType::Bool,
            "date" | "timestamp" => FieldType::Date,
            _ => return None,
        })
    }

    /// The default size in bytes.
    fn default_size(self) -> f64 {
        match self {
            FieldType::String => 20.0,
            FieldType::Bool => 1.0,
            _ => 8.0,
        }
    }

    /// The CQL type name.
    pub fn cql(self) -> &'static str {
        match self {
            FieldType::Int => "bigint",
            FieldType::Float => "double",
            FieldType::String => "text",
            FieldType::Bool => "boolean",
            FieldType::Date => "timestamp",
        }
    }
}

/// A field of an entity; field 0 of every entity is its id.
#[derive(Debug, Clone, Serialize)]
pub struct Field {
    /// The name (unique within the entity).
    pub name: String,
    /// The type.
    pub ty: FieldType,
    /// Size in bytes.
    pub size: f64,
    /// Number of distinct values.
    pub distinct: f64,
}

/// An entity set.
#[derive(Debug, Clone, Serialize)]
pub struct Entity {
    /// The name.
    pub name: String,
    /// Number of entities.
    pub count: f64,
    /// Fields; `fields[0]` is the id.
    pub fields: Vec<Field>,
}

/// An N:1 relationship: each `from` entity refers to one `to` entity through `name`; the reverse
/// 1:N side is called `reverse` on `to`.
#[derive(Debug, Clone, Serialize)]
pub struct Relationship {
    /// The entity holding the foreign key (the many side).
    pub from: usize,
    /// The foreign key's name on `from`.
    pub name: String,
    /// The referenced entity (the one side).
    pub to: usize,
    /// The name of the reverse (1:N) side on `to`.
    pub reverse: String,
}

/// An attribute: (entity index, field index); field 0 is the entity's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Attr {
    /// The entity.
    pub entity: usize,
    /// The field within the entity.
    pub field: usize,
}

impl Attr {
    /// The id attribute of `entity`.
    pub fn id(entity: usize) -> Self {
        Attr { entity, field: 0 }
    }

    /// Whether this is an entity id.
    pub fn is_id(self) -> bool {
        self.field == 0
    }
}

/// The conceptual model.
#[derive(Debug, Clone, Serialize)]
pub struct Model {
    /// Entity sets.
    pub entities: Vec<Entity>,
    /// Relationships.
    pub relationships: Vec<Relationship>,
}

impl Model {
    /// Looks an entity up by name.
    pub fn entity(&self, name: &str) -> Option<usize> {
        self.entities.iter().position(|e| e.name == name)
    }

    /// Looks a field of `entity` up by name.
    pub fn field(&self, entity: usize, name: &str) -> Option<Attr> {
        self.entities[entity]
            .fields
            .iter()
            .position(|f| f.name == name)
            .map(|field| Attr { entity, field })
    }

    /// The field of an attribute.
    pub fn attr(&self, a: Attr) -> &Field {
        &self.entities[a.entity].fields[a.field]
    }

    /// `Entity.Field`.
    pub fn attr_name(&self, a: Attr) -> String {
        format!("{}.{}", self.entities[a.entity].name, self.attr(a).name)
    }

    /// Follows the relationship called `name` from `entity`: (relationship, other entity).
    pub fn step(&self, entity: usize, name: &str) -> Option<(usize, usize)> {
        self.relationships.iter().enumerate().find_map(|(i, r)| {
            if r.from == entity && r.name == name {
                Some((i, r.to))
            } else if r.to == entity && r.reverse == name {
                Some((i, r.from))
            } else {
                None
            }
        })
    }

    /// The other end of relationship `rel` seen from `entity`.
    pub fn other(&self, rel: usize, entity: usize) -> usize {
        let r = &self.relationships[rel];
        if r.from == entity { r.to } else { r.from }
    }

    /// Parses a model file.
    pub fn parse(file: &str, text: &str) -> Result<Model> {
        let mut c = Cursor::new(file, tokenize(file, text, true)?);
        let mut entities: Vec<Entity> = Vec::new();
        let mut entity_spans: Vec<Span> = Vec::new();
        let mut fks: Vec<FkDecl> = Vec::new();
        // Names seen so far (the checks for repeats stay linear in the model's size).
        let mut entity_names: HashMap<String, usize> = HashMap::new();
        let mut field_names: HashSet<String> = HashSet::new();
        while !c.at_end() {
            if c.eat_newline() {
                continue;
            }
            let (kw, kw_span) = c.ident("`entity`, `id`, `field` or `fk`")?;
            match kw.as_str() {
                "entity" => {
                    let (entity, span) = parse_entity(&mut c, &entity_names)?;
                    entity_names.insert(entity.name.clone(), entities.len());
                    field_names.clear();
                    entities.push(entity);
                    entity_spans.push(span);
                }
                "id" | "field" => {
                    let Some(entity) = entities.last_mut() else {
                        return Err(AdvisorError::input(
                            &kw_span,
                            format!("`{kw}` outside an entity: write `entity NAME COUNT` first"),
                        ));
                    };
                    let field = parse_field(&mut c, entity, &field_names, kw == "id", &kw_span)?;
                    field_names.insert(field.name.clone());
                    entity.fields.push(field);
                }
                "fk" => fks.push(parse_fk(&mut c)?),
                other => {
                    return Err(AdvisorError::input(
                        &kw_span,
                        format!(
                            "unknown declaration `{other}`: use `entity`, `id`, `field` or `fk`"
                        ),
                    ));
                }
            }
            if !c.eat_newline() && !c.at_end() {
                return Err(c.error(format!(
                    "expected the end of the line, found {}",
                    c.describe()
                )));
            }
        }
        for (e, span) in entities.iter().zip(&entity_spans) {
            if e.fields.is_empty() {
                return Err(AdvisorError::input(
                    span,
                    format!("entity `{}` has no `id` line", e.name),
                ));
            }
        }
        let mut model = Model {
            entities,
            relationships: Vec::new(),
        };
        // Every entity's taken names: its fields, then the relationships added.
        let mut taken: HashSet<(usize, String)> = model
            .entities
            .iter()
            .enumerate()
            .flat_map(|(e, ent)| ent.fields.iter().map(move |f| (e, f.name.clone())))
            .collect();
        for fk in fks {
            model.link(fk, &entity_names, &mut taken)?;
        }
        Ok(model)
    }

    /// Adds the relationship a `fk` line declares, once every entity is known.
    fn link(
        &mut self,
        (span, from, name, to, reverse): FkDecl,
        entity_names: &HashMap<String, usize>,
        taken: &mut HashSet<(usize, String)>,
    ) -> Result<()> {
        let f = *entity_names
            .get(&from)
            .ok_or_else(|| AdvisorError::input(&span, format!("unknown entity `{from}`")))?;
        let t = *entity_names
            .get(&to)
            .ok_or_else(|| AdvisorError::input(&span, format!("unknown entity `{to}`")))?;
        if f == t {
            return Err(AdvisorError::input(
                &span,
                format!(
                    "self reference `{from}.{name}`: the advisor supports acyclic entity graphs only; model it through an intermediate entity"
                ),
            ));
        }
        for (e, n) in [(f, &name), (t, &reverse)] {
            if !taken.insert((e, n.clone())) {
                return Err(AdvisorError::input(
                    &span,
                    format!(
                        "`{}.{n}` is already a field or relationship",
                        self.entities[e].name
                    ),
                ));
            }
        }
        self.relationships.push(Relationship {
            from: f,
            name,
            to: t,
            reverse,
        });
        Ok(())
    }
}

/// A `fk FROM.NAME -> TO.REVERSE` line: its place and the four names.
type FkDecl = (Span, String, String, String, String);

/// The rest of an `entity NAME COUNT` line.
fn parse_entity(c: &mut Cursor, entities: &HashMap<String, usize>) -> Result<(Entity, Span)> {
    let (name, span) = c.ident("an entity name")?;
    if entities.contains_key(&name) {
        return Err(AdvisorError::input(
            &span,
            format!("entity `{name}` is declared twice"),
        ));
    }
    let count = c.number("the entity's row count")?;
    if count < 1.0 {
        return Err(AdvisorError::input(
            &span,
            "an entity needs a row count of at least 1",
        ));
    }
    Ok((
        Entity {
            name,
            count,
            fields: Vec::new(),
        },
        span,
    ))
}

/// The rest of an `id` or `field` line of `entity`.
fn parse_field(
    c: &mut Cursor,
    entity: &Entity,
    names: &HashSet<String>,
    is_id: bool,
    kw_span: &Span,
) -> Result<Field> {
    let (name, span) = c.ident("a field name")?;
    if names.contains(&name) {
        return Err(AdvisorError::input(
            &span,
            format!("field `{name}` is declared twice"),
        ));
    }
    if is_id && !entity.fields.is_empty() {
        return Err(AdvisorError::input(
            kw_span,
            format!(
                "entity `{}` has a second id or its id is not first: an entity has exactly one `id` line, before its fields",
                entity.name
            ),
        ));
    }
    if !is_id && entity.fields.is_empty() {
        return Err(AdvisorError::input(
            kw_span,
            format!(
                "entity `{}` needs its `id` line before its fields",
                entity.name
            ),
        ));
    }
    let mut ty = FieldType::Int;
    if let Some(Tok::Ident(t)) = c.peek()
        && !t.eq_ignore_ascii_case("distinct")
    {
        let tspan = c.span();
        ty = FieldType::parse(t).ok_or_else(|| {
            AdvisorError::input(
                &tspan,
                format!("unknown type `{t}`: use int, float, string, bool or date"),
            )
        })?;
        c.next();
    }
    let mut size = ty.default_size();
    if let Some(Tok::Num(n)) = c.peek() {
        size = *n;
        c.next();
    }
    let mut distinct = entity.count;
    if c.eat_kw("distinct") {
        let dspan = c.span();
        distinct = c.number("the number of distinct values")?;
        if is_id {
            return Err(AdvisorError::input(
                &dspan,
                "an id is distinct by definition: drop `distinct`",
            ));
        }
        if distinct < 1.0 || distinct > entity.count {
            return Err(AdvisorError::input(
                &dspan,
                format!(
                    "distinct values must be between 1 and the entity's count {}",
                    entity.count
                ),
            ));
        }
    }
    Ok(Field {
        name,
        ty,
        size,
        distinct,
    })
}

/// The rest of an `fk` line.
fn parse_fk(c: &mut Cursor) -> Result<FkDecl> {
    let span = c.span();
    let (from, _) = c.ident("the entity holding the foreign key")?;
    c.expect_sym(".")?;
    let (name, _) = c.ident("the foreign key's name")?;
    c.expect_sym("->")?;
    let (to, _) = c.ident("the referenced entity")?;
    c.expect_sym(".")?;
    let (reverse, _) = c.ident("the name of the reverse (1:N) side")?;
    Ok((span, from, name, to, reverse))
}
