//! proptest strategies for the syntax tree (compiled for tests and with the `arbitrary` feature).
//!
//! Every statement generated is one the parser accepts: conditions are on the
//! kinds the statement allows, a move/copy has a top-level property and a
//! target kind other than its source, renames change the name, and kinds are
//! non-empty without control characters. Names include keywords, names that
//! need backticks (spaces, dots, backticks, line breaks, non-ASCII) and, for
//! properties, the empty name.

use proptest::prelude::*;

use super::ast::{
    Atom, Build, BuildJoin, Join, PropRef, Script, Span, Spanned, Statement, Transfer,
};
use super::parse::KEYWORDS;
use crate::model::arb::arb_value;

fn keyword() -> impl Strategy<Value = String> {
    (prop::sample::select(&KEYWORDS[..]), any::<bool>()).prop_map(|(k, upper)| {
        if upper {
            k.to_ascii_uppercase()
        } else {
            k.to_owned()
        }
    })
}

/// A kind name: usually an identifier, sometimes a keyword or a name that needs backticks.
pub fn arb_kind() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z][a-z0-9_]{0,5}",
        1 => keyword(),
        1 => "[a-z`. \\-]{1,4}",
        1 => "[^\\p{Cc}]{1,4}",
    ]
}

/// A property name: like [`arb_kind`], plus the empty name and names with line breaks.
pub fn arb_prop_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z_][a-z0-9_]{0,5}",
        1 => keyword(),
        1 => "[a-z`. \\-\n\r\t]{0,4}",
        1 => "\\PC{1,4}",
        1 => Just(String::new()),
    ]
}

/// A property of `kind`, with a path of one to `max_depth` names.
pub fn arb_prop(kind: String, max_depth: usize) -> impl Strategy<Value = PropRef> {
    prop::collection::vec(arb_prop_name(), 1..=max_depth.max(1)).prop_map(move |path| PropRef {
        kind: kind.clone(),
        path,
        span: Span::default(),
    })
}

/// An atom `kind.path = value`.
pub fn arb_atom(kind: String) -> impl Strategy<Value = Atom> {
    (arb_prop(kind, 3), arb_value()).prop_map(|(prop, value)| Atom { prop, value })
}

fn arb_atoms(kind: String) -> impl Strategy<Value = Vec<Atom>> {
    prop::collection::vec(arb_atom(kind), 0..3)
}

fn arb_add() -> impl Strategy<Value = Statement> {
    arb_kind().prop_flat_map(|kind| {
        (arb_prop(kind.clone(), 3), arb_value(), arb_atoms(kind)).prop_map(
            |(prop, value, conditions)| Statement::Add {
                prop,
                value,
                conditions,
            },
        )
    })
}

fn arb_delete() -> impl Strategy<Value = Statement> {
    arb_kind().prop_flat_map(|kind| {
        (arb_prop(kind.clone(), 3), arb_atoms(kind))
            .prop_map(|(prop, conditions)| Statement::Delete { prop, conditions })
    })
}

fn arb_rename() -> impl Strategy<Value = Statement> {
    arb_kind().prop_flat_map(|kind| {
        (arb_prop(kind.clone(), 3), arb_prop_name(), arb_atoms(kind)).prop_map(
            |(prop, mut to, conditions)| {
                if prop.path.last() == Some(&to) {
                    to.push('2');
                }
                Statement::Rename {
                    prop,
                    to,
                    conditions,
                }
            },
        )
    })
}

fn distinct_kinds() -> impl Strategy<Value = (String, String)> {
    (arb_kind(), arb_kind()).prop_map(|(a, mut b)| {
        if a == b {
            b.push('2');
        }
        (a, b)
    })
}

/// A move/copy body: a top-level property, another target kind, an optional join and atoms on both kinds.
pub fn arb_transfer() -> impl Strategy<Value = Transfer> {
    distinct_kinds().prop_flat_map(|(source, target)| {
        let join = prop::option::of(
            (arb_prop(source.clone(), 2), arb_prop(target.clone(), 2))
                .prop_map(|(source, target)| Join { source, target }),
        );
        (
            arb_prop(source.clone(), 1),
            Just(target.clone()),
            join,
            arb_atoms(source),
            arb_atoms(target),
        )
            .prop_map(
                |(prop, to_kind, join, source_conditions, target_conditions)| Transfer {
                    prop,
                    to_kind,
                    join,
                    source_conditions,
                    target_conditions,
                },
            )
    })
}

fn arb_rename_kind() -> impl Strategy<Value = Statement> {
    distinct_kinds().prop_map(|(from, to)| Statement::RenameKind { from, to })
}

/// A `build` the parser accepts: one to four distinct kinds read, each joined to one named
/// before it, a new kind of its own, top-level columns with distinct column names.
pub fn arb_build() -> impl Strategy<Value = Build> {
    (
        prop::collection::vec(arb_kind(), 1..5),
        arb_kind(),
        prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                arb_prop_name(),
                arb_prop_name(),
            ),
            3,
        ),
        prop::collection::vec(
            (0..3u8, any::<prop::sample::Index>(), arb_prop_name()),
            1..7,
        ),
    )
        .prop_map(|(mut kinds, mut kind, joins, columns)| {
            for i in 0..kinds.len() {
                while kinds[..i].contains(&kinds[i]) {
                    kinds[i].push('2');
                }
            }
            while kinds.contains(&kind) {
                kind.push('n');
            }
            let prop = |kind: &str, name: String| PropRef {
                kind: kind.to_owned(),
                path: vec![name],
                span: Span::default(),
            };
            let joins = kinds[1..]
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    let (at, a, b) = joins[i % joins.len()].clone();
                    BuildJoin {
                        kind: k.clone(),
                        known: prop(&kinds[at.index(i + 1)], a),
                        new: prop(k, b),
                    }
                })
                .collect();
            let mut b = Build {
                kind,
                from: kinds[0].clone(),
                joins,
                key: Vec::new(),
                cluster: Vec::new(),
                select: Vec::new(),
            };
            let mut names = std::collections::BTreeSet::new();
            for (i, (list, at, name)) in columns.into_iter().enumerate() {
                let p = prop(&kinds[at.index(kinds.len())], name);
                if !names.insert(Build::column_name(&p)) {
                    continue;
                }
                match if i == 0 { 0 } else { list } {
                    0 => b.key.push(p),
                    1 => b.cluster.push(p),
                    _ => b.select.push(p),
                }
            }
            b
        })
}

/// Any statement the parser accepts.
pub fn arb_statement() -> impl Strategy<Value = Statement> {
    prop_oneof![
        arb_add(),
        arb_delete(),
        arb_rename(),
        arb_transfer().prop_map(Statement::Move),
        arb_transfer().prop_map(Statement::Copy),
        arb_rename_kind(),
        arb_build().prop_map(Statement::Build),
    ]
}

/// A script of one to five statements.
pub fn arb_script() -> impl Strategy<Value = Script> {
    prop::collection::vec(arb_statement(), 1..6).prop_map(|statements| Script {
        statements: statements
            .into_iter()
            .map(|statement| Spanned {
                statement,
                span: Span::default(),
            })
            .collect(),
    })
}
