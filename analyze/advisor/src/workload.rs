//! The workload: named statements in groups that carry a weight per workload mix.
//!
//! Format (see docs/advisor.md):
//! ```text
//! group Search default=10 browsing=20
//!   Q1: SELECT Guest.GuestName FROM Guest.Reservation.Room.Hotel
//!       WHERE Hotel.HotelCity = ?city AND Room.RoomRate > ?rate ORDER BY Room.RoomRate LIMIT 5;
//!   U1 0.5: UPDATE Reservation FROM Reservation.Guest SET ResEndDate = ? WHERE Guest.GuestID = ?;
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::error::{AdvisorError, Result, Span};
use crate::graph::QueryGraph;
use crate::lex::{Cursor, Tok, tokenize};
use crate::model::{Attr, Model};
use crate::query::{Query, Update, UpdateKind};

/// A statement: a query or an update.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Body {
    /// A query.
    Query(Query),
    /// An update.
    Update(Update),
}

/// A named, weighted statement of the workload.
#[derive(Debug, Clone, Serialize)]
pub struct Statement {
    /// The statement's name.
    pub name: String,
    /// The statement text as written (whitespace collapsed).
    pub text: String,
    /// Weight per mix (group weight times the statement's own factor).
    pub weights: BTreeMap<String, f64>,
    /// What it does.
    pub body: Body,
    /// Where it starts.
    #[serde(skip)]
    pub span: Span,
}

/// A parsed workload.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// Statements in file order.
    pub statements: Vec<Statement>,
}

impl Workload {
    /// The names of all mixes.
    pub fn mixes(&self) -> BTreeSet<String> {
        self.statements
            .iter()
            .flat_map(|s| s.weights.keys().cloned())
            .collect()
    }

    /// Parses a workload file against `model`.
    pub fn parse(file: &str, text: &str, model: &Model) -> Result<Workload> {
        let toks = tokenize(file, text, false)?;
        // Keep the raw lines to quote statements.
        let lines: Vec<&str> = text.lines().collect();
        let mut c = Cursor::new(file, toks);
        let mut group: BTreeMap<String, f64> = BTreeMap::from([("default".to_string(), 1.0)]);
        let mut statements: Vec<Statement> = Vec::new();
        while !c.at_end() {
            if c.eat_kw("group") {
                c.ident("a group name")?;
                group = BTreeMap::new();
                while matches!(c.peek(), Some(Tok::Ident(_))) && !next_is_statement(&c) {
                    let (mix, _) = c.ident("a mix name")?;
                    c.expect_sym("=")?;
                    let w = c.number("the group's weight in this mix")?;
                    if w < 0.0 {
                        return Err(c.error("weights must not be negative"));
                    }
                    group.insert(mix, w);
                }
                if group.is_empty() {
                    group.insert("default".into(), 1.0);
                }
                continue;
            }
            let (name, span) = c.ident("a statement name (`NAME: SELECT ...;`) or `group`")?;
            if statements.iter().any(|s| s.name == name) {
                return Err(AdvisorError::input(
                    &span,
                    format!("statement `{name}` is defined twice"),
                ));
            }
            let mut factor = 1.0;
            if let Some(Tok::Num(n)) = c.peek() {
                factor = *n;
                c.next();
            }
            c.expect_sym(":")?;
            let start = c.span();
            let body = parse_statement(&mut c, model)?;
            let end = c.span();
            c.expect_sym(";")?;
            let text = quote(&lines, &start, &end);
            statements.push(Statement {
                name,
                text,
                weights: group.iter().map(|(k, v)| (k.clone(), v * factor)).collect(),
                body,
                span,
            });
        }
        if statements.is_empty() {
            return Err(c.error(
                "the workload has no statements: add `NAME: SELECT ... FROM ... WHERE ...;`",
            ));
        }
        Ok(Workload { statements })
    }
}

fn next_is_statement(c: &Cursor) -> bool {
    // `NAME :` or `NAME NUMBER :` starts a statement; `mix = w` continues a group header.
    !matches!(c.peek_at(1), Some(Tok::Sym("=")))
}

fn quote(lines: &[&str], start: &Span, end: &Span) -> String {
    let mut out = String::new();
    for l in start.line..=end.line {
        let Some(line) = lines.get(l - 1) else { break };
        let chars: Vec<char> = line.chars().collect();
        let from = if l == start.line { start.col - 1 } else { 0 };
        let to = if l == end.line {
            (end.col - 1).min(chars.len())
        } else {
            chars.len()
        };
        let piece: String = chars[from.min(to)..to].iter().collect();
        let piece = piece.split('#').next().unwrap_or("");
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(piece.trim());
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Builds a query graph from a FROM path and attribute paths, with node aliases.
struct GraphBuilder<'m> {
    model: &'m Model,
    graph: QueryGraph,
    aliases: BTreeMap<String, usize>,
    root: usize,
}

impl<'m> GraphBuilder<'m> {
    fn new(model: &'m Model, c: &mut Cursor) -> Result<Self> {
        let (first, span) = c.ident("an entity name")?;
        let root = model
            .entity(&first)
            .ok_or_else(|| unknown_entity(model, &span, &first))?;
        let mut b = GraphBuilder {
            model,
            graph: QueryGraph::single(root),
            aliases: BTreeMap::from([(first, root)]),
            root,
        };
        let mut at = root;
        let mut walk = vec![root];
        while c.eat_sym(".") {
            let (step, span) = c.ident("a relationship name")?;
            at = b.follow(at, &step, &span, &mut walk)?;
            b.aliases.insert(step, at);
        }
        for (i, e) in model.entities.iter().enumerate() {
            if b.graph.entities.contains(&i) {
                b.aliases.entry(e.name.clone()).or_insert(i);
            }
        }
        Ok(b)
    }

    /// Follows relationship `step` from `at`; `walk` holds the entities of the current path.
    fn follow(
        &mut self,
        at: usize,
        step: &str,
        span: &Span,
        walk: &mut Vec<usize>,
    ) -> Result<usize> {
        let model = self.model;
        let Some((rel, next)) = model.step(at, step) else {
            let rels: Vec<String> = model
                .relationships
                .iter()
                .filter_map(|r| {
                    if r.from == at {
                        Some(r.name.clone())
                    } else if r.to == at {
                        Some(r.reverse.clone())
                    } else {
                        None
                    }
                })
                .collect();
            return Err(AdvisorError::input(
                span,
                format!(
                    "`{}` has no relationship `{step}`; its relationships are: {}",
                    model.entities[at].name,
                    if rels.is_empty() {
                        "none".into()
                    } else {
                        name_list(rels.iter().map(String::as_str), rels.len())
                    }
                ),
            ));
        };
        if !walk.contains(&next) && self.graph.edges.contains(&rel) {
            // Walking an edge already in the graph, away from where this path has been: fine.
            walk.push(next);
            return Ok(next);
        }
        if self.graph.entities.contains(&next) || walk.contains(&next) {
            return Err(AdvisorError::input(
                span,
                format!(
                    "cyclic query graph: `{step}` leads back to `{}`, which the query already reaches; query graphs must be acyclic",
                    model.entities[next].name
                ),
            ));
        }
        self.graph.entities.insert(next);
        self.graph.edges.insert(rel);
        walk.push(next);
        Ok(next)
    }

    /// Parses `alias(.rel)*.Field`, extending the graph with branches.
    fn attr(&mut self, c: &mut Cursor) -> Result<Attr> {
        let (first, span) = c.ident("an attribute (`Entity.Field`)")?;
        let Some(&start) = self.aliases.get(&first) else {
            return Err(AdvisorError::input(
                &span,
                format!(
                    "`{first}` is not an entity of this query; write paths starting at one of: {}",
                    name_list(self.aliases.keys().map(String::as_str), self.aliases.len())
                ),
            ));
        };
        let mut at = start;
        let mut walk = vec![start];
        c.expect_sym(".")?;
        loop {
            let (name, span) = c.ident("a relationship or field name")?;
            if c.eat_sym(".") {
                at = self.follow(at, &name, &span, &mut walk)?;
                continue;
            }
            return self
                .model
                .field(at, &name)
                .ok_or_else(|| unknown_field(self.model, at, &span, &name));
        }
    }
}

/// Names an error lists before it says how many more there are.
const LISTED_NAMES: usize = 20;

/// `a, b, c` — at most [`LISTED_NAMES`] of the `total` names, then `... and N more`: an error on a
/// model of 100,000 fields stays one line.
pub(crate) fn name_list<'a>(names: impl Iterator<Item = &'a str>, total: usize) -> String {
    let mut out = names.take(LISTED_NAMES).collect::<Vec<_>>().join(", ");
    if total > LISTED_NAMES {
        out.push_str(&format!(", ... and {} more", total - LISTED_NAMES));
    }
    out
}

fn unknown_entity(model: &Model, span: &Span, name: &str) -> AdvisorError {
    AdvisorError::input(
        span,
        format!(
            "unknown entity `{name}`; the model has: {}",
            name_list(
                model.entities.iter().map(|e| e.name.as_str()),
                model.entities.len()
            )
        ),
    )
}

fn unknown_field(model: &Model, entity: usize, span: &Span, name: &str) -> AdvisorError {
    let e = &model.entities[entity];
    AdvisorError::input(
        span,
        format!(
            "`{}` has no field `{name}`; its fields are: {}",
            e.name,
            name_list(e.fields.iter().map(|f| f.name.as_str()), e.fields.len())
        ),
    )
}

fn parse_statement(c: &mut Cursor, model: &Model) -> Result<Body> {
    let start = c.span();
    if c.eat_kw("select") {
        parse_select(c, model, &start)
    } else if c.eat_kw("insert") {
        parse_insert(c, model)
    } else if c.eat_kw("update") {
        parse_update(c, model, &start)
    } else if c.eat_kw("delete") {
        parse_delete(c, model, &start)
    } else if c.is_kw("connect") || c.is_kw("disconnect") {
        parse_connect(c, model)
    } else {
        Err(c.error(format!(
            "expected SELECT, INSERT, UPDATE, DELETE, CONNECT or DISCONNECT, found {}",
            c.describe()
        )))
    }
}

/// Attribute paths are resolved after the FROM clause, so SELECT is read twice.
fn parse_select(c: &mut Cursor, model: &Model, start: &Span) -> Result<Body> {
    let select_at = c.save();
    while !c.is_kw("from") {
        if c.next().is_none() {
            return Err(c.error("expected FROM"));
        }
    }
    c.expect_kw("from")?;
    let mut b = GraphBuilder::new(model, c)?;
    let after_from = c.save();
    c.restore(select_at);
    let mut select = BTreeSet::new();
    loop {
        select.insert(b.attr(c)?);
        if !c.eat_sym(",") {
            break;
        }
    }
    c.expect_kw("from")?;
    c.restore(after_from);
    let (eq, range) = if c.eat_kw("where") {
        parse_where(c, &mut b)?
    } else {
        Default::default()
    };
    let mut order = Vec::new();
    if c.eat_kw("order") {
        c.expect_kw("by")?;
        loop {
            let a = b.attr(c)?;
            if !order.contains(&a) {
                order.push(a);
            }
            if !c.eat_sym(",") {
                break;
            }
        }
    }
    let mut limit = None;
    if c.eat_kw("limit") {
        let n = c.number("the limit")?;
        if n < 1.0 || n.fract() != 0.0 {
            return Err(c.error("LIMIT takes a positive whole number"));
        }
        limit = Some(n as u64);
    }
    if eq.is_empty() {
        return Err(AdvisorError::input(
            start,
            "the query has no equality predicate: a get needs a key, so add `WHERE Entity.Field = ?` somewhere in the query graph",
        ));
    }
    Ok(Body::Query(Query {
        graph: b.graph,
        select,
        eq,
        range,
        order,
        limit,
    }))
}

fn parse_where(
    c: &mut Cursor,
    b: &mut GraphBuilder<'_>,
) -> Result<(BTreeSet<Attr>, BTreeSet<Attr>)> {
    let mut eq = BTreeSet::new();
    let mut range = BTreeSet::new();
    loop {
        let a = b.attr(c)?;
        let op_span = c.span();
        let op = match c.next().map(|t| t.tok) {
            Some(Tok::Sym(s)) if ["=", "<", ">", "<=", ">="].contains(&s) => s,
            _ => {
                return Err(AdvisorError::input(
                    &op_span,
                    "expected a comparison: =, <, >, <= or >=",
                ));
            }
        };
        match c.peek() {
            Some(Tok::Param) | Some(Tok::Num(_)) => {
                c.next();
            }
            _ => {
                return Err(c.error(format!(
                    "expected a parameter `?name`, found {}",
                    c.describe()
                )));
            }
        }
        if op == "=" {
            eq.insert(a);
        } else {
            range.insert(a);
        }
        if !c.eat_kw("and") {
            break;
        }
    }
    for a in &eq {
        range.remove(a);
    }
    Ok((eq, range))
}

fn parse_set(c: &mut Cursor, b: &mut GraphBuilder<'_>, entity: usize) -> Result<BTreeSet<Attr>> {
    let mut set = BTreeSet::new();
    loop {
        let span = c.span();
        let a = if matches!(c.peek_at(1), Some(Tok::Sym("."))) {
            b.attr(c)?
        } else {
            let (name, span) = c.ident("a field name")?;
            b.model
                .field(entity, &name)
                .ok_or_else(|| unknown_field(b.model, entity, &span, &name))?
        };
        if a.entity != entity {
            return Err(AdvisorError::input(
                &span,
                format!(
                    "SET writes fields of `{}` only",
                    b.model.entities[entity].name
                ),
            ));
        }
        c.expect_sym("=")?;
        match c.next().map(|t| t.tok) {
            Some(Tok::Param) | Some(Tok::Num(_)) => {}
            _ => return Err(c.error("expected a parameter `?name`")),
        }
        set.insert(a);
        if !c.eat_sym(",") {
            break;
        }
    }
    Ok(set)
}

fn parse_insert(c: &mut Cursor, model: &Model) -> Result<Body> {
    c.expect_kw("into")?;
    let mut b = GraphBuilder::new(model, c)?;
    if b.graph.entities.len() != 1 {
        return Err(c.error("INSERT INTO takes one entity, not a path"));
    }
    let entity = *b.graph.entities.iter().next().unwrap_or(&0);
    let mut set = BTreeSet::from([Attr::id(entity)]);
    if c.eat_kw("set") {
        set.extend(parse_set(c, &mut b, entity)?);
    }
    let mut connections = BTreeSet::new();
    if c.eat_kw("and") {
        c.expect_kw("connect")?;
        c.expect_kw("to")?;
        loop {
            let (rel_name, span) = c.ident("a relationship name")?;
            let (rel, _) = model.step(entity, &rel_name).ok_or_else(|| {
                AdvisorError::input(
                    &span,
                    format!(
                        "`{}` has no relationship `{rel_name}`",
                        model.entities[entity].name
                    ),
                )
            })?;
            c.expect_sym("(")?;
            if !matches!(c.next().map(|t| t.tok), Some(Tok::Param)) {
                return Err(c.error("expected a parameter `?id`"));
            }
            c.expect_sym(")")?;
            connections.insert(rel);
            if !c.eat_sym(",") {
                break;
            }
        }
    }
    Ok(Body::Update(Update {
        kind: UpdateKind::Insert,
        entity,
        graph: QueryGraph::single(entity),
        set,
        eq: BTreeSet::from([Attr::id(entity)]),
        range: BTreeSet::new(),
        connections,
    }))
}

fn parse_update(c: &mut Cursor, model: &Model, start: &Span) -> Result<Body> {
    let (name, span) = c.ident("the entity to update")?;
    let entity = model
        .entity(&name)
        .ok_or_else(|| unknown_entity(model, &span, &name))?;
    let mut b = if c.eat_kw("from") {
        let b = GraphBuilder::new(model, c)?;
        if !b.graph.entities.contains(&entity) {
            return Err(AdvisorError::input(
                &span,
                format!("the FROM path does not contain `{name}`"),
            ));
        }
        b
    } else {
        GraphBuilder {
            model,
            graph: QueryGraph::single(entity),
            aliases: BTreeMap::from([(name.clone(), entity)]),
            root: entity,
        }
    };
    c.expect_kw("set")?;
    let set = parse_set(c, &mut b, entity)?;
    if set.contains(&Attr::id(entity)) {
        return Err(AdvisorError::input(
            start,
            "an UPDATE cannot change an id: delete and insert instead",
        ));
    }
    finish_where(c, b, start, (UpdateKind::Update, "UPDATE"), entity, set)
}

fn parse_delete(c: &mut Cursor, model: &Model, start: &Span) -> Result<Body> {
    c.expect_kw("from")?;
    let b = GraphBuilder::new(model, c)?;
    let entity = b.root;
    finish_where(
        c,
        b,
        start,
        (UpdateKind::Delete, "DELETE"),
        entity,
        BTreeSet::new(),
    )
}

/// The `WHERE` clause that ends an UPDATE or a DELETE (`kind`, with the
/// statement's word for messages): it must hold an equality predicate.
fn finish_where(
    c: &mut Cursor,
    mut b: GraphBuilder<'_>,
    start: &Span,
    (kind, word): (UpdateKind, &str),
    entity: usize,
    set: BTreeSet<Attr>,
) -> Result<Body> {
    c.expect_kw("where")?;
    let (eq, range) = parse_where(c, &mut b)?;
    if eq.is_empty() {
        return Err(AdvisorError::input(
            start,
            format!("the {word} has no equality predicate: add `WHERE Entity.Field = ?`"),
        ));
    }
    Ok(Body::Update(Update {
        kind,
        entity,
        graph: b.graph,
        set,
        eq,
        range,
        connections: BTreeSet::new(),
    }))
}

fn parse_connect(c: &mut Cursor, model: &Model) -> Result<Body> {
    let kind = if c.eat_kw("connect") {
        UpdateKind::Connect
    } else {
        c.expect_kw("disconnect")?;
        UpdateKind::Disconnect
    };
    let (name, span) = c.ident("an entity")?;
    let entity = model
        .entity(&name)
        .ok_or_else(|| unknown_entity(model, &span, &name))?;
    c.expect_sym("(")?;
    if !matches!(c.next().map(|t| t.tok), Some(Tok::Param)) {
        return Err(c.error("expected a parameter `?id`"));
    }
    c.expect_sym(")")?;
    if kind == UpdateKind::Connect {
        c.expect_kw("to")?;
    } else {
        c.expect_kw("from")?;
    }
    let (rel_name, span) = c.ident("a relationship name")?;
    let (rel, other) = model.step(entity, &rel_name).ok_or_else(|| {
        AdvisorError::input(&span, format!("`{name}` has no relationship `{rel_name}`"))
    })?;
    c.expect_sym("(")?;
    if !matches!(c.next().map(|t| t.tok), Some(Tok::Param)) {
        return Err(c.error("expected a parameter `?id`"));
    }
    c.expect_sym(")")?;
    let graph = QueryGraph {
        entities: BTreeSet::from([entity, other]),
        edges: BTreeSet::from([rel]),
    };
    Ok(Body::Update(Update {
        kind,
        entity,
        graph,
        set: BTreeSet::new(),
        eq: BTreeSet::from([Attr::id(entity), Attr::id(other)]),
        range: BTreeSet::new(),
        connections: BTreeSet::from([rel]),
    }))
}
