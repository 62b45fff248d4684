//! From migrations to version steps and stages.
//!
//! Each statement that writes a kind is one **version step** of that kind
//! (a move is a step of its target kind and then of its source kind; a copy a
//! step of its target kind). The plan of a migration groups its steps into
//! **stages**, the units the engine runs with a checkpoint per batch:
//!
//! - a *local* stage: per-entity steps (add, delete, rename, Rust code) of
//!   one kind, applied to each entity in one write. Per-entity steps of
//!   different kinds commute, so all per-entity steps between two transfers
//!   are grouped by kind;
//! - a *transfer* stage: one move or copy, run target-first;
//! - a *kind rename*.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::source::{Body, EntityMigration, Migration, MigrationSet};
use crate::lang::{Statement, Transfer};
use crate::model::{Map, Value, Version};
use crate::store::SchemaChange;

/// What one version step does to an entity of its kind.
#[derive(Clone)]
pub enum StepOp {
    /// add, delete or rename: a pure function of the entity.
    Local(Statement),
    /// A transform written in Rust.
    Code(Arc<dyn EntityMigration>),
    /// The target side of a move or copy: the target kind's step.
    TransferTarget {
        /// The statement.
        transfer: Transfer,
        /// Is it a move (else a copy)?
        is_move: bool,
    },
    /// The source side of a move: the source kind's step.
    MoveSource {
        /// The statement.
        transfer: Transfer,
    },
}

impl std::fmt::Debug for StepOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepOp::Local(s) => write!(f, "Local({s:?})"),
            StepOp::Code(c) => write!(f, "Code({})", c.kind()),
            StepOp::TransferTarget { is_move, .. } => write!(f, "TransferTarget(move={is_move})"),
            StepOp::MoveSource { .. } => write!(f, "MoveSource"),
        }
    }
}

impl StepOp {
    /// Is it a pure function of one entity (no lookups)?
    pub fn is_per_entity(&self) -> bool {
        matches!(self, StepOp::Local(_) | StepOp::Code(_))
    }
}

/// One version step: entities of `kind` at `version - 1` pass it to `version`.
#[derive(Debug, Clone)]
pub struct Step {
    /// The kind.
    pub kind: String,
    /// The version an entity has after this step.
    pub version: Version,
    /// What it does.
    pub op: StepOp,
    /// The migration it belongs to.
    pub migration: u32,
}

/// A unit of work of the engine.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Stage {
    /// Consecutive per-entity steps of one kind: entities at `from` go to `from + steps.len()`.
    Local {
        /// The kind.
        kind: String,
        /// The version the first step applies to.
        from: Version,
        /// The steps, in order.
        steps: Vec<Step>,
    },
    /// A move or copy.
    Transfer {
        /// The statement.
        transfer: Transfer,
        /// Is it a move (else a copy)?
        is_move: bool,
        /// The target kind's version before the step.
        target_from: Version,
        /// The source kind's version (before its step, for a move).
        source_version: Version,
        /// The statement as text, for messages.
        text: String,
    },
    /// A kind rename.
    RenameKind {
        /// The old kind.
        from: String,
        /// The new kind.
        to: String,
    },
    /// A new kind filled by a join (`build`): no version step; its entities are written at
    /// version 0.
    Build {
        /// The statement.
        build: crate::lang::Build,
        /// The statement as text, for messages.
        text: String,
        /// The kinds read and their versions when the build runs (entities below are
        /// brought forward first).
        sources: Vec<(String, Version)>,
    },
}

impl Stage {
    /// A short description for progress and logs.
    pub fn describe(&self) -> String {
        match self {
            Stage::Local { kind, from, steps } => {
                format!(
                    "{kind}: v{from} -> v{} ({} step(s))",
                    from + steps.len() as u64,
                    steps.len()
                )
            }
            Stage::Transfer { text, .. } | Stage::Build { text, .. } => text.clone(),
            Stage::RenameKind { from, to } => format!("rename kind {from} to {to}"),
        }
    }

    /// Number of phases (a move has a target phase and a source phase).
    pub fn phases(&self) -> u32 {
        match self {
            Stage::Transfer { is_move: true, .. } => 2,
            _ => 1,
        }
    }
}

/// The property changes of a stage, for stores with a fixed schema
/// ([`crate::store::SchemaHooks::prepare_schema`], [`crate::store::SchemaHooks::finish_schema`]).
///
/// Nested renames and deletes change no top-level property and give nothing; a nested `add`
/// gives the top-level property holding the nested literal; code steps give only
/// [`SchemaChange::Versioned`] (what they write is not known in advance).
pub fn schema_changes(stage: &Stage) -> Vec<SchemaChange> {
    let mut out = Vec::new();
    // A set, not `out.contains`: a stage of N steps would cost N² comparisons.
    let mut seen = std::collections::HashSet::new();
    let mut push = |change: SchemaChange| {
        if seen.insert(change.clone()) {
            out.push(change);
        }
    };
    match stage {
        Stage::Local { kind, steps, .. } => {
            push(SchemaChange::Versioned { kind: kind.clone() });
            for step in steps {
                let StepOp::Local(statement) = &step.op else {
                    continue;
                };
                match statement {
                    Statement::Add { prop, value, .. } => {
                        let mut value = value.clone();
                        for name in prop.path.iter().skip(1).rev() {
                            let mut map = Map::new();
                            map.insert(name.clone(), value);
                            value = Value::Map(map);
                        }
                        push(SchemaChange::Add {
                            kind: prop.kind.clone(),
                            name: prop.name().to_owned(),
                            value,
                        });
                    }
                    Statement::Delete { prop, .. } if prop.is_top_level() => {
                        push(SchemaChange::Remove {
                            kind: prop.kind.clone(),
                            name: prop.name().to_owned(),
                        });
                    }
                    Statement::Rename { prop, to, .. } if prop.is_top_level() => {
                        push(SchemaChange::Rename {
                            kind: prop.kind.clone(),
                            from: prop.name().to_owned(),
                            to: to.clone(),
                        });
                        push(SchemaChange::Remove {
                            kind: prop.kind.clone(),
                            name: prop.name().to_owned(),
                        });
                    }
                    _ => {}
                }
            }
        }
        Stage::Transfer {
            transfer, is_move, ..
        } => {
            push(SchemaChange::Versioned {
                kind: transfer.to_kind.clone(),
            });
            push(SchemaChange::Transfer {
                source: transfer.prop.kind.clone(),
                target: transfer.to_kind.clone(),
                name: transfer.prop.name().to_owned(),
            });
            if *is_move {
                push(SchemaChange::Versioned {
                    kind: transfer.prop.kind.clone(),
                });
                push(SchemaChange::Remove {
                    kind: transfer.prop.kind.clone(),
                    name: transfer.prop.name().to_owned(),
                });
            }
        }
        Stage::RenameKind { .. } => {}
        Stage::Build { build, .. } => {
            push(SchemaChange::Versioned {
                kind: build.kind.clone(),
            });
            push(SchemaChange::Add {
                kind: build.kind.clone(),
                name: crate::lang::build::ROWS.to_owned(),
                value: Value::Array(Vec::new()),
            });
        }
    }
    out
}

/// A kind rename of a plan, placed among its steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRename {
    /// How many of the plan's steps come before it.
    pub after_steps: usize,
    /// The old kind.
    pub from: String,
    /// The new kind.
    pub to: String,
}

/// The plan of one migration.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The migration.
    pub migration: u32,
    /// The stages, in order.
    pub stages: Vec<Stage>,
    /// Every step, in statement order.
    pub steps: Vec<Step>,
    /// Each kind's version after the migration (only kinds it writes, or that a
    /// kind rename gives a version).
    pub targets: BTreeMap<String, Version>,
    /// The kind renames, in order.
    pub renames: Vec<PlannedRename>,
    /// Every kind's version after the migration: the kinds it was planned with,
    /// the steps applied, each renamed kind's version moved to its new name.
    pub kinds_after: BTreeMap<String, Version>,
}

/// Plans `migration` given the current kind versions.
pub fn plan(migration: &Migration, kinds: &BTreeMap<String, Version>) -> Plan {
    let mut p = Planner {
        migration: migration.id,
        versions: kinds.clone(),
        stages: Vec::new(),
        steps: Vec::new(),
        renames: Vec::new(),
        open: Vec::new(),
    };
    match &migration.body {
        Body::Code(code) => {
            let kind = code.kind().to_owned();
            p.local(&kind, StepOp::Code(Arc::clone(code)));
        }
        Body::Script(script) => {
            for statement in script.statements() {
                p.statement(statement);
            }
        }
    }
    p.flush();
    let Planner {
        versions,
        stages,
        steps,
        renames,
        ..
    } = p;
    let targets = versions
        .iter()
        .filter(|(k, v)| kinds.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    Plan {
        migration: migration.id,
        stages,
        steps,
        targets,
        renames,
        kinds_after: versions,
    }
}

/// A plan being built, statement by statement.
struct Planner {
    migration: u32,
    /// Every kind's version so far.
    versions: BTreeMap<String, Version>,
    stages: Vec<Stage>,
    steps: Vec<Step>,
    renames: Vec<PlannedRename>,
    /// Open local stages, by kind, in order of first appearance.
    open: Vec<(String, Version, Vec<Step>)>,
}

impl Planner {
    /// The next version of `kind` (taken).
    fn next(&mut self, kind: &str) -> Version {
        let v = self.versions.entry(kind.to_owned()).or_insert(0);
        *v += 1;
        *v
    }

    /// Closes the open local stages.
    fn flush(&mut self) {
        for (kind, from, steps) in self.open.drain(..) {
            self.stages.push(Stage::Local { kind, from, steps });
        }
    }

    /// A per-entity step of `kind`, added to the kind's open local stage.
    fn local(&mut self, kind: &str, op: StepOp) {
        let step = Step {
            kind: kind.to_owned(),
            version: self.next(kind),
            op,
            migration: self.migration,
        };
        self.steps.push(step.clone());
        if let Some(stage) = self.open.iter_mut().find(|(k, _, _)| *k == step.kind) {
            stage.2.push(step);
        } else {
            self.open
                .push((step.kind.clone(), step.version - 1, vec![step]));
        }
    }

    fn statement(&mut self, statement: &Statement) {
        match statement {
            Statement::Add { prop, .. }
            | Statement::Delete { prop, .. }
            | Statement::Rename { prop, .. } => {
                self.local(&prop.kind, StepOp::Local(statement.clone()));
            }
            Statement::Move(t) | Statement::Copy(t) => self.transfer(statement, t),
            Statement::RenameKind { from, to } if from == to => {}
            Statement::RenameKind { from, to } => self.rename_kind(from, to),
            Statement::Build(b) => {
                self.flush();
                let sources = b
                    .sources()
                    .into_iter()
                    .map(|k| (k.to_owned(), self.versions.get(k).copied().unwrap_or(0)))
                    .collect();
                self.stages.push(Stage::Build {
                    build: b.clone(),
                    text: statement.to_string(),
                    sources,
                });
            }
        }
    }

    /// A move/copy: a stage of its own, with a step of the target kind and
    /// (move) one of the source kind.
    fn transfer(&mut self, statement: &Statement, t: &Transfer) {
        self.flush();
        let is_move = matches!(statement, Statement::Move(_));
        let target_to = self.next(&t.to_kind);
        self.steps.push(Step {
            kind: t.to_kind.clone(),
            version: target_to,
            op: StepOp::TransferTarget {
                transfer: t.clone(),
                is_move,
            },
            migration: self.migration,
        });
        let source_version = if is_move {
            let v = self.next(&t.prop.kind);
            self.steps.push(Step {
                kind: t.prop.kind.clone(),
                version: v,
                op: StepOp::MoveSource {
                    transfer: t.clone(),
                },
                migration: self.migration,
            });
            v - 1
        } else {
            *self.versions.get(&t.prop.kind).unwrap_or(&0)
        };
        self.stages.push(Stage::Transfer {
            transfer: t.clone(),
            is_move,
            target_from: target_to - 1,
            source_version,
            text: statement.to_string(),
        });
    }

    /// A kind rename: a stage of its own.
    fn rename_kind(&mut self, from: &str, to: &str) {
        self.flush();
        // The new name carries the old kind's version; a version the new
        // name had (a kind that was emptied) no longer describes anything.
        match self.versions.remove(from) {
            Some(v) => self.versions.insert(to.to_owned(), v),
            None => self.versions.remove(to),
        };
        self.renames.push(PlannedRename {
            after_steps: self.steps.len(),
            from: from.to_owned(),
            to: to.to_owned(),
        });
        self.stages.push(Stage::RenameKind {
            from: from.to_owned(),
            to: to.to_owned(),
        });
    }
}

/// Every step of every kind for the migrations of `set` up to and including
/// `through`, replayed from the start: the history a late entity (one written
/// with an old version after its kind moved on) is brought forward with.
///
/// A kind rename hands the old kind's steps to the new name (an entity renamed
/// at version 1 still needs the steps after 1, whatever the kind was called
/// when they were planned).
pub fn history(set: &MigrationSet, through: u32) -> BTreeMap<String, Vec<Step>> {
    let mut kinds = BTreeMap::new();
    let mut by_kind: BTreeMap<String, Vec<Step>> = BTreeMap::new();
    for m in set.iter().take_while(|m| m.id <= through) {
        let p = plan(m, &kinds);
        let mut renames = p.renames.iter().peekable();
        let rename = |by_kind: &mut BTreeMap<String, Vec<Step>>, r: &PlannedRename| {
            match by_kind.remove(&r.from) {
                Some(steps) => by_kind.insert(r.to.clone(), steps),
                None => by_kind.remove(&r.to),
            };
        };
        for (i, step) in p.steps.into_iter().enumerate() {
            while let Some(r) = renames.next_if(|r| r.after_steps == i) {
                rename(&mut by_kind, r);
            }
            by_kind.entry(step.kind.clone()).or_default().push(step);
        }
        for r in renames {
            rename(&mut by_kind, r);
        }
        kinds = p.kinds_after;
    }
    by_kind
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn m(id: u32, text: &str) -> Migration {
        Migration::from_script(id, "t", "t.tern", text).unwrap()
    }

    #[test]
    fn local_steps_group_by_kind_between_transfers() {
        let mig = m(
            1,
            "add blogpost.likes = 0\nadd user.x = 1\nrename blogpost.text to content\n\
             copy user.email to blogpost where user.name = blogpost.author\ndelete user.x",
        );
        let p = plan(&mig, &BTreeMap::new());
        let d: Vec<String> = p.stages.iter().map(Stage::describe).collect();
        assert_eq!(d[0], "blogpost: v0 -> v2 (2 step(s))");
        assert_eq!(d[1], "user: v0 -> v1 (1 step(s))");
        assert!(d[2].starts_with("copy user.email to blogpost"));
        assert_eq!(d[3], "user: v1 -> v2 (1 step(s))");
        assert_eq!(p.targets.get("blogpost"), Some(&3));
        assert_eq!(p.targets.get("user"), Some(&2));
    }

    #[test]
    fn schema_changes_name_the_columns_each_stage_adds_and_empties() {
        let mig = m(
            1,
            "add blogpost.likes = 0\nadd blogpost.meta.a.b = \"x\"\nrename blogpost.text to content\n\
             delete blogpost.meta.a\nmove user.url to blogpost where user.name = blogpost.author",
        );
        let p = plan(&mig, &BTreeMap::new());
        let bp = |s: &str| s.to_owned();
        let mut nested = Map::new();
        nested.insert("b".to_owned(), Value::from("x"));
        let mut meta = Map::new();
        meta.insert("a".to_owned(), Value::Map(nested));
        assert_eq!(
            schema_changes(&p.stages[0]),
            vec![
                SchemaChange::Versioned {
                    kind: bp("blogpost")
                },
                SchemaChange::Add {
                    kind: bp("blogpost"),
                    name: bp("likes"),
                    value: Value::Int(0)
                },
                SchemaChange::Add {
                    kind: bp("blogpost"),
                    name: bp("meta"),
                    value: Value::Map(meta)
                },
                SchemaChange::Rename {
                    kind: bp("blogpost"),
                    from: bp("text"),
                    to: bp("content")
                },
                SchemaChange::Remove {
                    kind: bp("blogpost"),
                    name: bp("text")
                },
            ]
        );
        assert_eq!(
            schema_changes(&p.stages[1]),
            vec![
                SchemaChange::Versioned {
                    kind: bp("blogpost")
                },
                SchemaChange::Transfer {
                    source: bp("user"),
                    target: bp("blogpost"),
                    name: bp("url")
                },
                SchemaChange::Versioned { kind: bp("user") },
                SchemaChange::Remove {
                    kind: bp("user"),
                    name: bp("url")
                },
            ]
        );
    }

    #[test]
    fn a_kind_rename_moves_the_version_and_the_history_to_the_new_name() {
        let mut set = MigrationSet::new();
        set.add(m(1, "add a.x = 1\nadd b.y = 2")).unwrap();
        set.add(m(2, "delete b.y")).unwrap();
        set.add(m(3, "add a.z = 1\nrename kind a to b\nadd b.w = 3"))
            .unwrap();
        let mut kinds = BTreeMap::new();
        kinds.insert("a".to_owned(), 1);
        kinds.insert("b".to_owned(), 2);
        let p = plan(set.get(3).unwrap(), &kinds);
        assert_eq!(
            p.renames,
            vec![PlannedRename {
                after_steps: 1,
                from: "a".into(),
                to: "b".into()
            }]
        );
        // a: v1 -> v2, renamed to b, then b: v2 -> v3; b's own old version is gone.
        assert_eq!(p.kinds_after.get("a"), None);
        assert_eq!(p.kinds_after.get("b"), Some(&3));
        assert_eq!(p.targets.get("b"), Some(&3));
        let d: Vec<String> = p.stages.iter().map(Stage::describe).collect();
        assert_eq!(
            d,
            vec![
                "a: v1 -> v2 (1 step(s))",
                "rename kind a to b",
                "b: v2 -> v3 (1 step(s))"
            ]
        );
        // The history of b is a's steps, then b's step after the rename.
        let h = history(&set, 3);
        let b: Vec<(u32, Version)> = h["b"].iter().map(|s| (s.migration, s.version)).collect();
        assert_eq!(b, vec![(1, 1), (3, 2), (3, 3)]);
        assert!(!h.contains_key("a"));
    }

    #[test]
    fn move_is_a_step_of_both_kinds_target_first() {
        let mig = m(
            2,
            "move user.url to blogpost where user.name = blogpost.author",
        );
        let mut kinds = BTreeMap::new();
        kinds.insert("user".to_owned(), 1);
        kinds.insert("blogpost".to_owned(), 2);
        let p = plan(&mig, &kinds);
        assert_eq!(p.steps[0].kind, "blogpost");
        assert_eq!(p.steps[0].version, 3);
        assert_eq!(p.steps[1].kind, "user");
        assert_eq!(p.steps[1].version, 2);
        match &p.stages[0] {
            Stage::Transfer {
                target_from,
                source_version,
                is_move,
                ..
            } => {
                assert_eq!((*target_from, *source_version, *is_move), (2, 1, true));
            }
            other => panic!("{other:?}"),
        }
    }
}
