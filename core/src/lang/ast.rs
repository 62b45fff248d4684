//! The syntax tree of the evolution language.
//!
//! Equality ignores source positions: two statements are equal when they mean
//! the same thing, which is what `parse(print(ast)) == ast` checks.

use std::fmt;

use crate::model::Value;

/// A byte range in the source text, with the 1-based line and column of its start.
#[derive(Debug, Clone, Copy, Default)]
pub struct Span {
    /// Byte offset of the first character.
    pub start: usize,
    /// Byte offset one past the last character.
    pub end: usize,
    /// 1-based line of `start`.
    pub line: usize,
    /// 1-based column (in characters) of `start`.
    pub col: usize,
}

impl PartialEq for Span {
    /// Spans never make two nodes different.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Span {}

/// A property reference `kind.name`, or `kind.a.b` for a nested property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropRef {
    /// The kind (`kname`).
    pub kind: String,
    /// The property path (`pname`, then nested names). Never empty.
    pub path: Vec<String>,
    /// Where it was written.
    pub span: Span,
}

impl PropRef {
    /// The top-level property name.
    pub fn name(&self) -> &str {
        self.path.first().map_or("", String::as_str)
    }

    /// Is this a top-level property (no nesting)?
    pub fn is_top_level(&self) -> bool {
        self.path.len() == 1
    }
}

impl fmt::Display for PropRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        for p in &self.path {
            write!(f, ".{p}")?;
        }
        Ok(())
    }
}

/// An equality atom `kind.prop = literal`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Atom {
    /// The property tested.
    pub prop: PropRef,
    /// The literal.
    pub value: Value,
}

/// The join atom of a move or copy, normalized so that `source` is on the
/// source kind and `target` on the target kind (`c1.a = c2.b` in \[SE\] Fig. 7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Join {
    /// `c1.a`: a property of the source kind.
    pub source: PropRef,
    /// `c2.b`: a property of the target kind.
    pub target: PropRef,
}

/// A move or copy: `move|copy c1.n to c2 [where join and conds]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// `c1.n`: the property moved or copied (top-level).
    pub prop: PropRef,
    /// `c2`: the target kind. The property keeps its name there.
    pub to_kind: String,
    /// The join atom, if any. Without one, every source meets every target.
    pub join: Option<Join>,
    /// θ1: atoms on the source kind.
    pub source_conditions: Vec<Atom>,
    /// θ2: atoms on the target kind.
    pub target_conditions: Vec<Atom>,
}

/// One `join K on a.p = b.q` of a [`Build`]: kind `kind` joins the row built so far where
/// `known` (a property of a kind already named) equals `new` (a property of `kind`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildJoin {
    /// The kind joined.
    pub kind: String,
    /// The property of a kind named earlier (`from` or an earlier join).
    pub known: PropRef,
    /// The property of `kind`.
    pub new: PropRef,
}

/// `build KIND from c1 [join c2 on c1.a = c2.b ...] key c1.x ... [cluster ...] [select ...]`: a
/// new kind filled by an inner join of existing kinds (docs/language.md, "build").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    /// The new kind.
    pub kind: String,
    /// The first kind of the join.
    pub from: String,
    /// The joins, in order; each kind appears once in `from` and the joins.
    pub joins: Vec<BuildJoin>,
    /// The partition key: one entity of `kind` per distinct value. Never empty.
    pub key: Vec<PropRef>,
    /// The clustering properties: the order of an entity's rows.
    pub cluster: Vec<PropRef>,
    /// The other properties each row holds.
    pub select: Vec<PropRef>,
}

impl Build {
    /// The kinds read, `from` first.
    pub fn sources(&self) -> Vec<&str> {
        std::iter::once(self.from.as_str())
            .chain(self.joins.iter().map(|j| j.kind.as_str()))
            .collect()
    }

    /// Every property a row holds: key, cluster, select, in that order.
    pub fn columns(&self) -> impl Iterator<Item = &PropRef> {
        self.key.iter().chain(&self.cluster).chain(&self.select)
    }

    /// The name of a row's column for `p`: `kind_property` (nested names joined by `_`),
    /// lower-case, as `tern advise` names CQL columns.
    pub fn column_name(p: &PropRef) -> String {
        let mut name = p.kind.clone();
        for part in &p.path {
            name.push('_');
            name.push_str(part);
        }
        name.to_ascii_lowercase()
    }
}

/// One statement of the evolution language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    /// `add kind.prop = value [where conds]`: set (create or replace) a property.
    Add {
        /// The property set.
        prop: PropRef,
        /// The value.
        value: Value,
        /// Only entities matching all atoms.
        conditions: Vec<Atom>,
    },
    /// `delete kind.prop [where conds]`: remove a property.
    Delete {
        /// The property removed.
        prop: PropRef,
        /// Only entities matching all atoms.
        conditions: Vec<Atom>,
    },
    /// `rename kind.prop to name [where conds]`: rename a property within its kind.
    Rename {
        /// The property renamed.
        prop: PropRef,
        /// The new name (same parent, same kind).
        to: String,
        /// Only entities matching all atoms.
        conditions: Vec<Atom>,
    },
    /// `move kind.prop to kind2 [where ...]`.
    Move(Transfer),
    /// `copy kind.prop to kind2 [where ...]`.
    Copy(Transfer),
    /// `build KIND from ...`: a language extension; a new kind filled by a join.
    Build(Build),
    /// `rename kind a to b`: a language extension; renames a whole kind
    /// (a Redis key prefix, a MongoDB collection).
    RenameKind {
        /// The old kind.
        from: String,
        /// The new kind.
        to: String,
    },
}

impl Statement {
    /// The operator keyword.
    pub fn operator(&self) -> &'static str {
        match self {
            Statement::Add { .. } => "add",
            Statement::Delete { .. } => "delete",
            Statement::Rename { .. } | Statement::RenameKind { .. } => "rename",
            Statement::Move(_) => "move",
            Statement::Copy(_) => "copy",
            Statement::Build(_) => "build",
        }
    }

    /// The kinds whose entities this statement writes, in step order: each is
    /// one version step of that kind. A move writes its target kind and its
    /// source kind; a copy only its target kind; add, delete and rename the
    /// kind they name. A kind rename writes no entity data and is no step.
    pub fn written_kinds(&self) -> Vec<&str> {
        match self {
            Statement::Add { prop, .. }
            | Statement::Delete { prop, .. }
            | Statement::Rename { prop, .. } => {
                vec![prop.kind.as_str()]
            }
            Statement::Move(t) => vec![t.to_kind.as_str(), t.prop.kind.as_str()],
            Statement::Copy(t) => vec![t.to_kind.as_str()],
            // A build's kind is new: its entities are written at version 0, no step.
            Statement::RenameKind { .. } | Statement::Build(_) => vec![],
        }
    }

    /// Is this statement safe by construction (\[SE\] Proposition 1: add,
    /// delete, rename)? move, copy and build need the data-dependent check.
    pub fn is_safe_by_construction(&self) -> bool {
        !matches!(
            self,
            Statement::Move(_) | Statement::Copy(_) | Statement::Build(_)
        )
    }
}

/// A statement with where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spanned {
    /// The statement.
    pub statement: Statement,
    /// Its position in the source.
    pub span: Span,
}

/// A parsed migration script: statements in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    /// The statements, in the order they run.
    pub statements: Vec<Spanned>,
}

impl Script {
    /// The statements without positions.
    pub fn statements(&self) -> impl Iterator<Item = &Statement> {
        self.statements.iter().map(|s| &s.statement)
    }
}
