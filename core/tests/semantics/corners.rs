//! Every corner case of every operator, one test each.

use serde_json::json;
use tern_core::lang::Statement;
use tern_core::lang::eval::*;
use tern_core::lang::safety::{
    SafetyChecker, StaticWarning, check_transfer, check_transfer_with, static_warnings,
};
use tern_core::model::{Entity, Value};

use crate::build::*;

fn opts() -> EvalOptions {
    EvalOptions::default()
}

fn literal() -> EvalOptions {
    EvalOptions {
        literal_rename: true,
        literal_transfer: true,
        ..EvalOptions::default()
    }
}

/// Applies a per-entity statement to one value with `step_local`.
fn local(
    stmt: &Statement,
    value: serde_json::Value,
    o: &EvalOptions,
) -> (LocalEffect, serde_json::Value) {
    let mut m = map(value);
    let effect = step_local(stmt, &mut m, o).unwrap();
    (effect, tern_core::model::json::map_to_json(&m))
}

/// Checks a per-entity statement with [`local`] on each case
/// `options: value before => effect, value after;` (JSON values, an options
/// function, a [`LocalEffect`] variant).
macro_rules! assert_local {
    ($stmt:expr; $($o:ident: $before:tt => $effect:ident, $after:tt;)+) => {
        $(assert_eq!(
            local($stmt, json!($before), &$o()),
            (LocalEffect::$effect, json!($after)),
            "{} with {}",
            json!($before),
            stringify!($o)
        );)+
    };
}

fn transfer_of(stmt: &Statement) -> &tern_core::lang::Transfer {
    match stmt {
        Statement::Move(t) | Statement::Copy(t) => t,
        _ => unreachable!(),
    }
}

// ---- atoms -------------------------------------------------------------------

#[test]
fn absent_never_matches_not_even_null() {
    assert!(!conditions_hold(
        &[atom("k.a", Value::Null)],
        &map(json!({}))
    ));
    assert!(conditions_hold(
        &[atom("k.a", Value::Null)],
        &map(json!({"a": null}))
    ));
    assert!(!conditions_hold(
        &[atom("k.a", 1)],
        &map(json!({"a": null}))
    ));
    assert!(conditions_hold(&[], &map(json!({}))));
}

#[test]
fn numbers_compare_by_value() {
    assert!(conditions_hold(&[atom("k.n", 1)], &map(json!({"n": 1.0}))));
    assert!(conditions_hold(&[atom("k.n", 1.0)], &map(json!({"n": 1}))));
    assert!(conditions_hold(
        &[atom("k.n", 1.0)],
        &map(json!({"n": [2, 1]}))
    ));
    assert!(!conditions_hold(&[atom("k.n", 1.5)], &map(json!({"n": 1}))));
}

#[test]
fn multi_valued_property_matches_by_membership() {
    let m = map(json!({"tags": ["x", "y"]}));
    assert!(conditions_hold(&[atom("k.tags", "x")], &m));
    assert!(conditions_hold(
        &[atom("k.tags", val(json!(["x", "y"])))],
        &m
    ));
    assert!(!conditions_hold(&[atom("k.tags", "z")], &m));
    assert!(
        !conditions_hold(&[atom("k.tags", "x"), atom("k.tags", "z")], &m),
        "conjunction"
    );
}

#[test]
fn nested_atoms_walk_maps_not_arrays() {
    let m = map(json!({"author": {"name": "Ann"}, "list": [{"name": "Ann"}]}));
    assert!(conditions_hold(&[atom("k.author.name", "Ann")], &m));
    assert!(!conditions_hold(&[atom("k.list.name", "Ann")], &m));
}

#[test]
fn conditions_convert_to_scan_conditions_with_the_same_meaning() {
    let atoms = [atom("k.tags", "x"), atom("k.n", 1)];
    let scan = conditions(&atoms);
    for value in [
        json!({"tags": ["x"], "n": 1.0}),
        json!({"tags": "x"}),
        json!({"n": 1}),
    ] {
        let m = map(value);
        assert_eq!(
            scan.iter().all(|c| c.matches_map(&m)),
            conditions_hold(&atoms, &m)
        );
    }
}

// ---- add ---------------------------------------------------------------------

#[test]
fn add_creates_or_replaces() {
    let stmt = add("k.a", 1, vec![]);
    assert_local! { &stmt;
        opts: {} => Changed, {"a": 1};
        opts: {"a": "old"} => Changed, {"a": 1};
        opts: {"a": 1} => Unchanged, {"a": 1};
    }
    // 1.0 is a different stored value than 1, so replacing it is a change.
    assert_local! { &stmt;
        opts: {"a": 1.0} => Changed, {"a": 1};
    }
    // Over a multi-valued property: replaced as a whole.
    assert_local! { &stmt;
        opts: {"a": [1, 2]} => Changed, {"a": 1};
    }
}

#[test]
fn add_null_is_a_value() {
    let stmt = add("k.a", Value::Null, vec![]);
    assert_local! { &stmt;
        opts: {} => Changed, {"a": null};
    }
}

#[test]
fn add_where_not_matching_changes_nothing() {
    let stmt = add("k.a", 1, vec![atom("k.b", 2)]);
    assert_local! { &stmt;
        opts: {"b": 3} => NotMatched, {"b": 3};
        opts: {} => NotMatched, {};
        opts: {"b": [2]} => Changed, {"a": 1, "b": [2]};
    }
}

#[test]
fn add_nested_creates_intermediate_maps() {
    let stmt = add("k.a.b.c", 1, vec![]);
    assert_local! { &stmt;
        opts: {} => Changed, {"a": {"b": {"c": 1}}};
        opts: {"a": {"x": 0}} => Changed, {"a": {"x": 0, "b": {"c": 1}}};
    }
}

#[test]
fn add_nested_under_a_non_map_changes_nothing() {
    let stmt = add("k.a.b.c", 1, vec![]);
    for blocked in [
        json!({"a": "text"}),
        json!({"a": {"b": 5}}),
        json!({"a": null}),
        json!({"a": [{"b": {}}]}),
    ] {
        assert_eq!(
            local(&stmt, blocked.clone(), &opts()),
            (LocalEffect::Blocked, blocked)
        );
    }
    let mut s = state([
        entity("k", 1, 0, json!({"a": "text"})),
        entity("k", 2, 0, json!({})),
    ]);
    let report = apply_statement(&stmt, &mut s, &opts()).unwrap();
    let step = report.step("k").unwrap();
    assert_eq!(
        (step.entities, step.matched, step.changed, step.blocked),
        (2, 2, 1, 1)
    );
    assert!(s.values().all(|e| e.version == 1));
}

// ---- delete ------------------------------------------------------------------

#[test]
fn delete_absent_changes_nothing_but_the_version() {
    let stmt = delete("k.a", vec![]);
    assert_local! { &stmt;
        opts: {"b": 1} => Unchanged, {"b": 1};
    }
    let mut s = state([entity("k", 1, 3, json!({"b": 1}))]);
    let report = apply_statement(&stmt, &mut s, &opts()).unwrap();
    assert_eq!(s, state([entity("k", 1, 4, json!({"b": 1}))]));
    assert_eq!(report.step("k").unwrap().changed, 0);
}

#[test]
fn delete_removes_null_and_multi_valued_properties() {
    let stmt = delete("k.a", vec![]);
    assert_local! { &stmt;
        opts: {"a": null} => Changed, {};
        opts: {"a": [1, 2]} => Changed, {};
    }
}

#[test]
fn delete_nested() {
    let stmt = delete("k.a.b", vec![]);
    assert_local! { &stmt;
        opts: {"a": {"b": 1}} => Changed, {"a": {}};
        opts: {"a": "b"} => Unchanged, {"a": "b"};
        opts: {} => Unchanged, {};
    }
}

#[test]
fn delete_where_on_the_deleted_property() {
    let stmt = delete("k.a", vec![atom("k.a", "x")]);
    assert_local! { &stmt;
        opts: {"a": ["x", "y"]} => Changed, {};
        opts: {"a": "y"} => NotMatched, {"a": "y"};
    }
}

// ---- rename ------------------------------------------------------------------

#[test]
fn rename_absent_changes_nothing() {
    let stmt = rename("k.a", "b", vec![]);
    assert_local! { &stmt;
        opts: {"b": 1} => Unchanged, {"b": 1};
    }
}

#[test]
fn rename_absent_literal_removes_the_target() {
    let stmt = rename("k.a", "b", vec![]);
    assert_local! { &stmt;
        literal: {"b": 1, "c": 2} => Changed, {"c": 2};
        literal: {"c": 2} => Unchanged, {"c": 2};
    }
}

#[test]
fn rename_onto_existing_target_replaces_it() {
    let stmt = rename("k.a", "b", vec![]);
    assert_local! { &stmt;
        opts: {"a": 1, "b": 2} => Changed, {"b": 1};
        opts: {"a": [1], "b": [1]} => Changed, {"b": [1]};
        opts: {"a": null} => Changed, {"b": null};
    }
}

#[test]
fn rename_to_itself() {
    let stmt = rename("k.a", "a", vec![]);
    assert_local! { &stmt;
        opts: {"a": 1} => Unchanged, {"a": 1};
        literal: {"a": 1} => Changed, {};
    }
}

#[test]
fn rename_nested_stays_in_its_parent() {
    let stmt = rename("k.author.name", "fullname", vec![]);
    assert_local! { &stmt;
        opts: {"author": {"name": "Ann"}, "name": 1} => Changed, {"author": {"fullname": "Ann"}, "name": 1};
        opts: {"author": "Ann"} => Unchanged, {"author": "Ann"};
    }
}

#[test]
fn apply_local_is_only_for_per_entity_statements() {
    let mut m = map(json!({"a": 1}));
    assert_eq!(apply_local(&add("k.b", 2, vec![]), &mut m), Some(true));
    assert_eq!(
        apply_local(&add("k.c", 2, vec![atom("k.z", 1)]), &mut m),
        Some(false)
    );
    assert_eq!(apply_local(&copy("k.a", "j", None, vec![]), &mut m), None);
    assert_eq!(
        apply_local(
            &Statement::RenameKind {
                from: "k".into(),
                to: "j".into()
            },
            &mut m
        ),
        None
    );
    assert_eq!(m, map(json!({"a": 1, "b": 2})));
}

// ---- move and copy -----------------------------------------------------------

fn by_name() -> Option<(&'static str, &'static str)> {
    Some(("user.name", "post.author"))
}

#[test]
fn move_without_target_keeps_the_source() {
    let mut s = state([
        entity("user", 1, 0, json!({"name": "ann", "url": "a"})),
        entity("user", 2, 0, json!({"name": "bob", "url": "b"})),
        entity("post", 1, 0, json!({"author": "ann"})),
    ]);
    let report =
        apply_statement(&mv("user.url", "post", by_name(), vec![]), &mut s, &opts()).unwrap();
    assert_eq!(
        s,
        state([
            entity("user", 1, 1, json!({"name": "ann"})),
            entity("user", 2, 1, json!({"name": "bob", "url": "b"})),
            entity("post", 1, 1, json!({"author": "ann", "url": "a"})),
        ])
    );
    let t = report.transfer.unwrap();
    assert_eq!(
        (
            t.sources_matched,
            t.sources_delivered,
            t.sources_kept,
            t.sources_lacking
        ),
        (2, 1, 1, 0)
    );
}

#[test]
fn move_without_target_literal_loses_the_value() {
    let mut s = state([entity("user", 2, 0, json!({"name": "bob", "url": "b"}))]);
    apply_statement(
        &mv("user.url", "post", by_name(), vec![]),
        &mut s,
        &literal(),
    )
    .unwrap();
    assert_eq!(s, state([entity("user", 2, 1, json!({"name": "bob"}))]));
}

#[test]
fn source_lacking_the_property_keeps_the_target() {
    for stmt in [
        copy("user.url", "post", by_name(), vec![]),
        mv("user.url", "post", by_name(), vec![]),
    ] {
        let mut s = state([
            entity("user", 1, 0, json!({"name": "ann"})),
            entity("post", 1, 0, json!({"author": "ann", "url": "kept"})),
        ]);
        let report = apply_statement(&stmt, &mut s, &opts()).unwrap();
        assert_value(&s, "post", 1, json!({"author": "ann", "url": "kept"}));
        assert_value(&s, "user", 1, json!({"name": "ann"}));
        let t = report.transfer.unwrap();
        assert_eq!(
            (t.targets_matched, t.targets_lacking, t.sources_lacking),
            (1, 1, 1)
        );

        // The paper: setProperty(f, url, ⊥) removes it.
        let mut s = state([
            entity("user", 1, 0, json!({"name": "ann"})),
            entity("post", 1, 0, json!({"author": "ann", "url": "kept"})),
        ]);
        apply_statement(&stmt, &mut s, &literal()).unwrap();
        assert_value(&s, "post", 1, json!({"author": "ann"}));
    }
}

#[test]
fn a_lacking_source_next_to_a_writing_one_is_no_conflict() {
    let stmt = copy("user.url", "post", by_name(), vec![]);
    let s0 = state([
        entity("user", 1, 0, json!({"name": "ann"})),
        entity("user", 2, 0, json!({"name": "ann", "url": "a"})),
        entity("post", 1, 0, json!({"author": "ann"})),
    ]);
    let mut s = s0.clone();
    apply_statement(&stmt, &mut s, &opts()).unwrap();
    assert_value(&s, "post", 1, json!({"author": "ann", "url": "a"}));
    // Literally, the absent value and "a" conflict.
    let check = check_transfer_with(transfer_of(&stmt), &s0, &literal());
    assert_eq!(
        check.conflicts[0].writes,
        vec![(key("user", 1), None), (key("user", 2), Some("a".into()))]
    );
    assert!(matches!(
        apply_statement(&stmt, &mut s0.clone(), &literal()),
        Err(EvalError::Unsafe { .. })
    ));
}

#[test]
fn transfer_overwrites_an_existing_target_property() {
    let mut s = state([
        entity("user", 1, 0, json!({"name": "ann", "url": "new"})),
        entity("post", 1, 0, json!({"author": "ann", "url": "old"})),
    ]);
    apply_statement(
        &copy("user.url", "post", by_name(), vec![]),
        &mut s,
        &opts(),
    )
    .unwrap();
    assert_value(&s, "post", 1, json!({"author": "ann", "url": "new"}));
}

#[test]
fn unmatched_join_writes_nothing() {
    let mut s = state([
        entity("user", 1, 0, json!({"url": "a"})), // no join property
        entity("user", 2, 0, json!({"name": "bob", "url": "b"})), // no post by bob
        entity("post", 1, 0, json!({"title": "no author"})),
        entity("post", 2, 0, json!({"author": "ann"})),
    ]);
    let report = apply_statement(
        &copy("user.url", "post", by_name(), vec![]),
        &mut s,
        &opts(),
    )
    .unwrap();
    assert_value(&s, "post", 1, json!({"title": "no author"}));
    assert_value(&s, "post", 2, json!({"author": "ann"}));
    assert_eq!(report.step("post").unwrap().matched, 0);
    assert_eq!(report.step("post").unwrap().entities, 2);
}

#[test]
fn join_on_a_multi_valued_target_property() {
    // A post with two authors joins both users: with different urls that is unsafe.
    let s = state([
        entity("user", 1, 0, json!({"name": "ann", "url": "a"})),
        entity("user", 2, 0, json!({"name": "bob", "url": "b"})),
        entity("post", 1, 0, json!({"author": ["ann", "bob"]})),
        entity("post", 2, 0, json!({"author": ["bob"]})),
    ]);
    let stmt = copy("user.url", "post", by_name(), vec![]);
    let check = check_transfer(transfer_of(&stmt), &s);
    assert_eq!(check.conflict_count, 1);
    assert_eq!(check.conflicts[0].target, key("post", 1));
    let mut forced = s.clone();
    apply_statement(&stmt, &mut forced, &with_force()).unwrap();
    assert_eq!(forced[&key("post", 1)].value.get("url"), Some(&"b".into()));
    assert_eq!(forced[&key("post", 2)].value.get("url"), Some(&"b".into()));
}

#[test]
fn join_on_a_multi_valued_source_property_needs_the_whole_array() {
    let t = transfer(
        "user.url",
        "post",
        Some(("user.names", "post.author")),
        vec![],
    );
    let user = entity("user", 1, 0, json!({"names": ["ann", "a."], "url": "a"}));
    assert!(!joins(
        &t,
        &user,
        &entity("post", 1, 0, json!({"author": "ann"}))
    ));
    assert!(joins(
        &t,
        &user,
        &entity("post", 2, 0, json!({"author": ["ann", "a."]}))
    ));
    assert!(joins(
        &t,
        &user,
        &entity("post", 3, 0, json!({"author": [["ann", "a."], "x"]}))
    ));
}

#[test]
fn join_compares_numbers_by_value_and_null_with_null() {
    let t = transfer("user.url", "post", Some(("user.id", "post.owner")), vec![]);
    let one = entity("user", 1, 0, json!({"id": 1, "url": "a"}));
    assert!(joins(
        &t,
        &one,
        &entity("post", 1, 0, json!({"owner": 1.0}))
    ));
    assert!(joins(
        &t,
        &one,
        &entity("post", 2, 0, json!({"owner": [3, 1.0]}))
    ));
    assert!(!joins(
        &t,
        &one,
        &entity("post", 3, 0, json!({"owner": "1"}))
    ));
    let null = entity("user", 2, 0, json!({"id": null, "url": "b"}));
    assert!(joins(
        &t,
        &null,
        &entity("post", 4, 0, json!({"owner": null}))
    ));
    assert!(!joins(&t, &null, &entity("post", 5, 0, json!({}))));
    assert!(!joins(
        &t,
        &entity("user", 3, 0, json!({})),
        &entity("post", 5, 0, json!({}))
    ));
}

#[test]
fn conditions_on_both_sides() {
    let stmt = copy(
        "user.url",
        "post",
        by_name(),
        vec![atom("user.status", "active"), atom("post.tags", "nosql")],
    );
    let mut s = state([
        entity(
            "user",
            1,
            0,
            json!({"name": "ann", "url": "a", "status": "active"}),
        ),
        entity(
            "user",
            2,
            0,
            json!({"name": "bob", "url": "b", "status": "gone"}),
        ),
        entity(
            "post",
            1,
            0,
            json!({"author": "ann", "tags": ["nosql", "db"]}),
        ),
        entity("post", 2, 0, json!({"author": "ann", "tags": ["sql"]})),
        entity("post", 3, 0, json!({"author": "bob", "tags": ["nosql"]})),
    ]);
    apply_statement(&stmt, &mut s, &opts()).unwrap();
    assert_eq!(s[&key("post", 1)].value.get("url"), Some(&"a".into()));
    assert_eq!(s[&key("post", 2)].value.get("url"), None);
    assert_eq!(s[&key("post", 3)].value.get("url"), None);
}

#[test]
fn move_with_agreeing_sources_delivers_both() {
    let mut s = state([
        entity("user", 1, 0, json!({"name": "ann", "url": "a"})),
        entity("user", 2, 0, json!({"name": "ann", "url": "a"})),
        entity("post", 1, 0, json!({"author": "ann"})),
    ]);
    let report =
        apply_statement(&mv("user.url", "post", by_name(), vec![]), &mut s, &opts()).unwrap();
    assert_eq!(report.transfer.unwrap().sources_delivered, 2);
    assert!(
        s.values()
            .filter(|e| e.key.kind == "user")
            .all(|e| !e.value.contains_key("url"))
    );
}

#[test]
fn forced_move_keeps_the_property_of_sources_that_won_no_target() {
    let mut s = state([
        entity("user", 1, 0, json!({"url": "a"})),
        entity("user", 2, 0, json!({"url": "b"})),
        entity("post", 1, 0, json!({})),
    ]);
    let stmt = mv("user.url", "post", None, vec![]);
    assert!(matches!(
        apply_statement(&stmt, &mut s.clone(), &opts()),
        Err(EvalError::Unsafe {
            operator: "move",
            ..
        })
    ));
    let report = apply_statement(&stmt, &mut s, &with_force()).unwrap();
    assert_eq!(
        s,
        state([
            entity("user", 1, 1, json!({"url": "a"})),
            entity("user", 2, 1, json!({})),
            entity("post", 1, 1, json!({"url": "b"})),
        ])
    );
    let t = report.transfer.unwrap();
    assert_eq!(
        (t.sources_delivered, t.sources_kept, t.conflicts.len()),
        (1, 1, 1)
    );
}

#[test]
fn move_into_a_blocked_nested_path_keeps_the_source() {
    let mut s = state([
        entity(
            "user",
            1,
            0,
            json!({"name": "ann", "profile": {"url": "a"}}),
        ),
        entity("post", 1, 0, json!({"author": "ann", "profile": "flat"})),
    ]);
    let report = apply_statement(
        &mv("user.profile.url", "post", by_name(), vec![]),
        &mut s,
        &opts(),
    )
    .unwrap();
    assert_value(
        &s,
        "user",
        1,
        json!({"name": "ann", "profile": {"url": "a"}}),
    );
    assert_value(&s, "post", 1, json!({"author": "ann", "profile": "flat"}));
    assert_eq!(report.step("post").unwrap().blocked, 1);
    assert_eq!(report.transfer.unwrap().sources_kept, 1);
}

#[test]
fn versions_advance_per_written_kind() {
    let base = || {
        state([
            entity("user", 1, 5, json!({"name": "ann", "url": "a"})),
            entity("user", 2, 5, json!({"name": "zed"})),
            entity("post", 1, 2, json!({"author": "ann"})),
            entity("post", 2, 2, json!({"author": "bob"})),
            entity("other", 1, 7, json!({})),
        ])
    };
    let versions = |s: &State| s.values().map(|e| e.version).collect::<Vec<_>>();
    // Keys sort by kind, then id: other, post, post, user, user.
    let mut s = base();
    apply_statement(&mv("user.url", "post", by_name(), vec![]), &mut s, &opts()).unwrap();
    assert_eq!(versions(&s), [7, 3, 3, 6, 6]);
    let mut s = base();
    apply_statement(
        &copy("user.url", "post", by_name(), vec![]),
        &mut s,
        &opts(),
    )
    .unwrap();
    assert_eq!(versions(&s), [7, 3, 3, 5, 5]);
    let mut s = base();
    apply_statement(
        &delete("user.nothing", vec![atom("user.name", "nobody")]),
        &mut s,
        &opts(),
    )
    .unwrap();
    assert_eq!(versions(&s), [7, 2, 2, 6, 6]);
    let mut s = base();
    apply_statement(
        &Statement::RenameKind {
            from: "user".into(),
            to: "member".into(),
        },
        &mut s,
        &opts(),
    )
    .unwrap();
    assert_eq!(
        s.keys().map(|k| k.kind.as_str()).collect::<Vec<_>>(),
        ["member", "member", "other", "post", "post"]
    );
    assert_eq!(versions(&s), [5, 5, 7, 2, 2]);
}

// ---- validation and kind renames ---------------------------------------------

#[test]
fn invalid_statements_are_rejected_without_change() {
    let mut s = state([entity("user", 1, 0, json!({"url": "a"}))]);
    let before = s.clone();
    let cases = [
        copy("user.url", "user", None, vec![]),
        add("user.a", 1, vec![atom("post.b", 1)]),
        copy(
            "user.url",
            "post",
            Some(("post.author", "user.name")),
            vec![],
        ),
        rename("user.a", "", vec![]),
        Statement::Move(tern_core::lang::Transfer {
            source_conditions: vec![atom("post.x", 1)],
            ..transfer("user.url", "post", None, vec![])
        }),
        add("user", 1, vec![]),
    ];
    for stmt in &cases {
        let err = apply_statement(stmt, &mut s, &opts()).unwrap_err();
        assert!(validate(stmt).is_err(), "{err}");
        assert_eq!(s, before);
    }
    assert!(matches!(
        apply_statement(&cases[0], &mut s, &opts()),
        Err(EvalError::SameKind {
            operator: "copy",
            ..
        })
    ));
    assert!(matches!(
        apply_statement(&cases[1], &mut s, &opts()),
        Err(EvalError::WrongKind { .. })
    ));
}

#[test]
fn kind_rename_refuses_an_existing_kind() {
    let mut s = state([
        entity("user", 1, 0, json!({})),
        entity("member", 1, 0, json!({})),
    ]);
    let err = apply_statement(
        &Statement::RenameKind {
            from: "user".into(),
            to: "member".into(),
        },
        &mut s,
        &opts(),
    )
    .unwrap_err();
    assert!(matches!(err, EvalError::KindExists { count: 1, .. }));
}

#[test]
fn script_errors_name_the_statement() {
    let mut s = state([
        entity("user", 1, 0, json!({"url": "a"})),
        entity("user", 2, 0, json!({"url": "b"})),
        entity("post", 1, 0, json!({})),
    ]);
    let script = [
        add("user.x", 1, vec![]),
        copy("user.url", "post", None, vec![]),
        add("user.y", 1, vec![]),
    ];
    let err = apply_script(&script, &mut s, &opts()).unwrap_err();
    assert_eq!(err.index, 1);
    assert_eq!(err.completed.len(), 1);
    assert!(matches!(err.error, EvalError::Unsafe { .. }));
    assert_eq!(err.to_string(), "statement 2 of the script was not applied");
    assert!(
        s.values()
            .filter(|e| e.key.kind == "user")
            .all(|e| e.value.contains_key("x") && e.version == 1)
    );
    assert!(s.values().all(|e| !e.value.contains_key("y")));
}

// ---- building blocks for target-driven batches ------------------------------

#[test]
fn lookup_values_and_queries() {
    let t = transfer(
        "user.url",
        "post",
        by_name(),
        vec![atom("user.status", "a"), atom("post.lang", "en")],
    );
    let post = entity(
        "post",
        1,
        0,
        json!({"author": ["bob", "ann", "bob"], "lang": "en"}),
    );
    assert_eq!(
        lookup_values(&t, &post),
        Some(vec![
            "ann".into(),
            "bob".into(),
            val(json!(["bob", "ann", "bob"]))
        ])
    );
    assert_eq!(
        lookup_values(&t, &entity("post", 2, 0, json!({}))),
        Some(vec![])
    );
    assert_eq!(source_query(&t, &entity("post", 2, 0, json!({}))), None);
    let query = source_query(&t, &post).unwrap();
    assert_eq!(query.len(), 2);
    let ann = entity(
        "user",
        1,
        0,
        json!({"name": "ann", "status": "a", "url": "x"}),
    );
    assert!(query.iter().all(|c| c.matches_map(&ann.value)));
    assert_eq!(target_query(&t).len(), 1);
    let delivery = delivery_query(&t, &ann).unwrap();
    assert!(delivery.iter().all(|c| c.matches_map(&post.value)));
    assert_eq!(delivery_query(&t, &entity("user", 2, 0, json!({}))), None);

    let no_join = transfer("user.url", "post", None, vec![]);
    assert_eq!(lookup_values(&no_join, &post), None);
    assert_eq!(source_query(&no_join, &post), Some(vec![]));
}

#[test]
fn resolve_target_cases() {
    let t = transfer("user.url", "post", by_name(), vec![atom("post.lang", "en")]);
    let post = entity("post", 1, 0, json!({"author": "ann", "lang": "en"}));
    let a1 = entity("user", 1, 0, json!({"name": "ann", "url": "a"}));
    let a2 = entity("user", 2, 0, json!({"name": "ann", "url": "a"}));
    let b3 = entity("user", 3, 0, json!({"name": "ann", "url": 1}));
    let c4 = entity("user", 4, 0, json!({"name": "ann", "url": 1.0}));
    let lack = entity("user", 5, 0, json!({"name": "ann"}));
    let other = entity("user", 6, 0, json!({"name": "bob", "url": "z"}));

    assert_eq!(resolve_target(&t, &post, &[]), TargetResolution::Unmatched);
    assert_eq!(
        resolve_target(&t, &post, &[&other]),
        TargetResolution::Unmatched
    );
    let not_en = entity("post", 2, 0, json!({"author": "ann"}));
    assert_eq!(
        resolve_target(&t, &not_en, &[&a1]),
        TargetResolution::Unmatched
    );
    assert_eq!(
        resolve_target(&t, &post, &[&lack]),
        TargetResolution::Lacking {
            sources: vec![key("user", 5)]
        }
    );
    assert_eq!(
        resolve_target(&t, &post, &[&a2, &lack, &a1, &a1, &other]),
        TargetResolution::Set {
            value: "a".into(),
            sources: vec![key("user", 1), key("user", 2)]
        }
    );
    // 1 and 1.0 are different writes: the stored type would depend on the order.
    let conflict = resolve_target(&t, &post, &[&c4, &b3]);
    assert_eq!(
        conflict,
        TargetResolution::Conflict {
            writes: vec![
                (key("user", 3), Some(Value::Int(1))),
                (key("user", 4), Some(Value::Float(1.0)))
            ]
        }
    );
    assert_eq!(
        conflict.clone().forced(),
        TargetResolution::Set {
            value: Value::Float(1.0),
            sources: vec![key("user", 4)]
        }
    );
    let mut target = post.value.clone();
    assert_eq!(conflict.apply(&t, &mut target), None);
    assert_eq!(target, post.value);

    let lit = EvalOptions {
        literal_transfer: true,
        ..EvalOptions::default()
    };
    assert_eq!(
        resolve_target_with(&t, &post, &[&lack], &lit),
        TargetResolution::Remove {
            sources: vec![key("user", 5)]
        }
    );
}

#[test]
fn source_delivered_on_targets_after_the_target_step() {
    let t = transfer("user.url", "post", by_name(), vec![]);
    let ann = entity("user", 1, 0, json!({"name": "ann", "url": "a"}));
    let received = entity("post", 1, 1, json!({"author": "ann", "url": "a"}));
    let other_value = entity("post", 2, 1, json!({"author": "ann", "url": "b"}));
    let not_joined = entity("post", 3, 1, json!({"author": "bob", "url": "a"}));
    assert!(source_delivered(&t, &ann, &[&received]));
    assert!(!source_delivered(&t, &ann, &[&other_value, &not_joined]));
    assert!(!source_delivered(&t, &ann, &[]));
    assert_eq!(
        move_source_outcome(
            &t,
            &entity("user", 2, 0, json!({"name": "ann"})),
            &[&received],
            &opts()
        ),
        SourceOutcome::Lacking
    );
    assert_eq!(
        move_source_outcome(&t, &ann, &[], &literal()),
        SourceOutcome::Delivered
    );
    let mut value = ann.value.clone();
    assert!(SourceOutcome::Delivered.apply(&t, &mut value));
    assert_eq!(value, map(json!({"name": "ann"})));
    assert!(!SourceOutcome::Kept.apply(&t, &mut value));
}

// ---- safety ------------------------------------------------------------------

#[test]
fn static_warnings_of_transfers() {
    assert!(static_warnings(&transfer("user.url", "post", by_name(), vec![])).is_empty());
    assert_eq!(
        static_warnings(&transfer("user.url", "post", None, vec![])),
        vec![StaticWarning::CrossProduct]
    );
    let reads = transfer(
        "user.url",
        "post",
        Some(("user.name", "post.url")),
        vec![atom("post.url.host", "x")],
    );
    assert_eq!(
        static_warnings(&reads),
        vec![
            StaticWarning::ReadsTransferredProperty {
                prop: "post.url".into()
            },
            StaticWarning::ReadsTransferredProperty {
                prop: "post.url.host".into()
            },
        ]
    );
    assert!(
        static_warnings(&transfer("user.url", "user", by_name(), vec![]))
            .contains(&StaticWarning::SameKind)
    );
}

#[test]
fn checker_limits_detail_but_counts_everything() {
    let t = transfer("user.url", "post", None, vec![]);
    let users = [
        entity("user", 1, 0, json!({"url": "a"})),
        entity("user", 2, 0, json!({"url": "b"})),
    ];
    let sources: Vec<&Entity> = users.iter().collect();
    let mut checker = SafetyChecker::new(&t, &opts()).with_conflict_limit(1);
    for id in 0..3 {
        let resolution = checker.feed(&entity("post", id, 0, json!({})), &sources);
        assert!(matches!(resolution, TargetResolution::Conflict { .. }));
    }
    let report = checker.finish();
    assert_eq!(
        (
            report.conflict_count,
            report.conflicts.len(),
            report.targets_written,
            report.writes
        ),
        (3, 1, 3, 6)
    );
    assert!(!report.is_safe());
    assert_eq!(report.warnings, vec![StaticWarning::CrossProduct]);
}

/// Forced, literal copy of a nested property: the winner (greatest key) lacks it, an
/// earlier source had it. The paper's loop sets `a.c` (creating `a`) and then removes
/// `a.c`: the target keeps the empty map `a`. Found by the transfer property test.
#[test]
fn forced_literal_removal_after_an_earlier_set_keeps_the_created_maps() {
    let t = transfer("p.a.c", "u", None, vec![]);
    let with = entity("p", 0, 0, json!({"a": {"c": 1}}));
    let without = entity("p", 1, 0, json!({}));
    let target = entity("u", 0, 0, json!({}));
    let resolution = resolve_target_with(&t, &target, &[&with, &without], &literal());
    assert!(matches!(resolution, TargetResolution::Conflict { .. }));
    let forced = resolution.forced();
    assert_eq!(
        forced,
        TargetResolution::RemoveAfterSet {
            earlier: Value::Int(1),
            sources: vec![key("p", 1)]
        }
    );
    let mut value = target.value.clone();
    assert_eq!(forced.apply(&t, &mut value), Some(LocalEffect::Changed));
    assert_eq!(Value::Map(value), val(json!({"a": {}})));
}
