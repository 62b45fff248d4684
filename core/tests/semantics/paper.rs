//! The examples of [SE] with their exact expected entities (EXTRACT.md 1.2.4, 1.2.6, 1.2.8).
//!
//! The paper keeps the version in a property named `version`; tern keeps it in
//! [`Entity::version`] (the `_v` property in the store). The paper's "version 1 →
//! version 2" is checked on `Entity::version`. An atom on `version` (Example 3)
//! is an ordinary property atom.

use serde_json::json;
use tern_core::lang::Statement;
use tern_core::lang::eval::{
    EvalError, EvalOptions, StatementReport, apply_script, apply_statement,
};
use tern_core::lang::safety::{StaticWarning, check_transfer};

use crate::build::*;

fn opts() -> EvalOptions {
    EvalOptions::default()
}

/// Applies `stmt` to the paper's blogpost 331175 at version 1 holding
/// `before`, checks that it is then at version 2 holding `after`, and returns
/// the report.
fn on_the_blogpost(
    stmt: &Statement,
    before: serde_json::Value,
    after: serde_json::Value,
) -> StatementReport {
    let mut s = state([entity("blogpost", 331175, 1, before)]);
    let report = apply_statement(stmt, &mut s, &opts()).unwrap();
    assert_eq!(s, state([entity("blogpost", 331175, 2, after)]));
    report
}

#[test]
fn example_2_add_likes() {
    let report = on_the_blogpost(
        &add("blogpost.likes", 0, vec![]),
        json!({"title": "NoSQL Data..", "content": "NoSQL databases.."}),
        json!({"title": "NoSQL Data..", "content": "NoSQL databases..", "likes": 0}),
    );
    let step = report.step("blogpost").unwrap();
    assert_eq!((step.entities, step.matched, step.changed), (1, 1, 1));
}

#[test]
fn example_3_delete_url() {
    on_the_blogpost(
        &delete("blogpost.url", vec![]),
        json!({"title": "NoSQL Data..", "content": "NoSQL databases..", "url": "www.mypage.com"}),
        json!({"title": "NoSQL Data..", "content": "NoSQL databases.."}),
    );
}

/// `delete blogpost.url where blogpost.version = 1`: in tern `version` is an
/// ordinary property (data imported from a store that kept the paper's version
/// property has it); tern's own version is not visible to atoms.
#[test]
fn example_3_delete_url_where_version_property() {
    let mut s = state([
        // Paper-style data: the `version` property is part of the value.
        entity(
            "blogpost",
            1,
            1,
            json!({"title": "a", "url": "www.mypage.com", "version": 1}),
        ),
        entity(
            "blogpost",
            2,
            1,
            json!({"title": "b", "url": "www.other.com", "version": 2}),
        ),
        // tern version 1, but no `version` property: the atom does not see it.
        entity(
            "blogpost",
            3,
            1,
            json!({"title": "c", "url": "www.third.com"}),
        ),
    ]);
    let stmt = delete("blogpost.url", vec![atom("blogpost.version", 1)]);
    let report = apply_statement(&stmt, &mut s, &opts()).unwrap();
    assert_eq!(
        s,
        state([
            entity("blogpost", 1, 2, json!({"title": "a", "version": 1})),
            entity(
                "blogpost",
                2,
                2,
                json!({"title": "b", "url": "www.other.com", "version": 2})
            ),
            entity(
                "blogpost",
                3,
                2,
                json!({"title": "c", "url": "www.third.com"})
            ),
        ])
    );
    let step = report.step("blogpost").unwrap();
    assert_eq!((step.entities, step.matched, step.changed), (3, 1, 1));
}

#[test]
fn example_4_rename_text_to_content() {
    on_the_blogpost(
        &rename("blogpost.text", "content", vec![]),
        json!({"title": "NoSQL Data..", "text": "NoSQL databases.."}),
        json!({"title": "NoSQL Data..", "content": "NoSQL databases.."}),
    );
}

/// "Renaming the property text in blogposts to content effectively overwrites
/// any existing property named content."
#[test]
fn example_4_rename_overwrites_existing_content() {
    on_the_blogpost(
        &rename("blogpost.text", "content", vec![]),
        json!({"text": "new", "content": "old"}),
        json!({"content": "new"}),
    );
}

fn gerhard() -> serde_json::Value {
    json!({"name": "Gerhard", "email": "gerhard@acm.org", "status": "professional", "url": "http://bigdata.org"})
}

fn nosql_post() -> serde_json::Value {
    json!({"title": "NoSQL Data", "content": "NoSQL databases", "author": "Gerhard"})
}

/// The join of Figures 3 and 4: a user's name is the author of a post.
fn by_author() -> Option<(&'static str, &'static str)> {
    Some(("user.name", "blogpost.author"))
}

/// Gerhard (user 1234 holding `user`) and his post 331175, both at version 1,
/// after `stmt`: the state and the report.
fn on_gerhard_and_his_post(
    user: serde_json::Value,
    stmt: &Statement,
) -> (tern_core::lang::eval::State, StatementReport) {
    let mut s = state([
        entity("user", 1234, 1, user),
        entity("blogpost", 331175, 1, nosql_post()),
    ]);
    let report = apply_statement(stmt, &mut s, &opts()).unwrap();
    (s, report)
}

/// Example 5, Figure 3.
#[test]
fn figure_3_move_url() {
    let stmt = mv("user.url", "blogpost", by_author(), vec![]);
    let (s, report) = on_gerhard_and_his_post(gerhard(), &stmt);
    assert_eq!(
        s,
        state([
            entity(
                "user",
                1234,
                2,
                json!({"name": "Gerhard", "email": "gerhard@acm.org", "status": "professional"})
            ),
            entity(
                "blogpost",
                331175,
                2,
                json!({"title": "NoSQL Data", "content": "NoSQL databases", "author": "Gerhard", "url": "http://bigdata.org"})
            ),
        ])
    );
    assert_eq!(
        report
            .steps
            .iter()
            .map(|s| s.kind.as_str())
            .collect::<Vec<_>>(),
        ["blogpost", "user"]
    );
    let transfer = report.transfer.unwrap();
    assert_eq!(
        (
            transfer.sources_matched,
            transfer.sources_delivered,
            transfer.sources_kept
        ),
        (1, 1, 0)
    );
    assert_eq!(transfer.targets_matched, 1);
}

/// Example 6, Figure 4: copy does not change the user entities (not even their version).
#[test]
fn figure_4_copy_email() {
    let user = json!({"name": "Gerhard", "email": "gerhard@acm.org", "status": "professional"});
    let stmt = copy("user.email", "blogpost", by_author(), vec![]);
    let (s, report) = on_gerhard_and_his_post(user.clone(), &stmt);
    assert_eq!(
        s,
        state([
            entity("user", 1234, 1, user),
            entity(
                "blogpost",
                331175,
                2,
                json!({"title": "NoSQL Data", "content": "NoSQL databases", "author": "Gerhard", "email": "gerhard@acm.org"})
            ),
        ])
    );
    assert_eq!(report.steps.len(), 1);
}

fn blog_with_users(url_b: &str) -> tern_core::lang::eval::State {
    state([
        entity(
            "user",
            1,
            0,
            json!({"login": "hhiker", "url": "http://a.org"}),
        ),
        entity("user", 2, 0, json!({"login": "gerhard", "url": url_b})),
        entity("blogpost", 10, 0, json!({"author": "hhiker"})),
        entity("blogpost", 11, 0, json!({"author": "hhiker"})),
        entity("blogpost", 12, 0, json!({"author": "hhiker"})),
        entity("blogpost", 20, 0, json!({"author": "gerhard"})),
        entity("blogpost", 21, 0, json!({"author": "gerhard"})),
        entity("blogpost", 30, 0, json!({"author": "nobody"})),
    ])
}

/// Section 5: `copy user.url to blogpost where user.login = blogpost.author` is
/// safe for a 1:N relationship.
#[test]
fn one_to_n_copy_is_safe() {
    let mut s = blog_with_users("http://b.org");
    let stmt = copy(
        "user.url",
        "blogpost",
        Some(("user.login", "blogpost.author")),
        vec![],
    );
    let tern_core::lang::Statement::Copy(t) = &stmt else {
        unreachable!()
    };
    let check = check_transfer(t, &s);
    assert!(check.is_safe());
    assert!(check.warnings.is_empty());
    assert_eq!((check.targets_written, check.writes), (5, 5));

    apply_statement(&stmt, &mut s, &opts()).unwrap();
    let url = |id: i64| s[&key("blogpost", id)].value.get("url").cloned();
    assert_eq!(url(10), Some("http://a.org".into()));
    assert_eq!(url(12), Some("http://a.org".into()));
    assert_eq!(url(21), Some("http://b.org".into()));
    assert_eq!(url(30), None);
    assert!(
        s.values()
            .filter(|e| e.key.kind == "blogpost")
            .all(|e| e.version == 1)
    );
    assert!(
        s.values()
            .filter(|e| e.key.kind == "user")
            .all(|e| e.version == 0)
    );
}

/// Section 5: the cross product `copy user.url to blogpost` depends on the order.
#[test]
fn cross_product_copy_is_unsafe() {
    let mut s = state([
        entity("user", 1, 0, json!({"url": "http://a.org"})),
        entity("user", 2, 0, json!({"url": "http://b.org"})),
        entity("blogpost", 10, 0, json!({"title": "x"})),
        entity("blogpost", 11, 0, json!({"title": "y"})),
    ]);
    let before = s.clone();
    let stmt = copy("user.url", "blogpost", None, vec![]);
    let tern_core::lang::Statement::Copy(t) = &stmt else {
        unreachable!()
    };
    let check = check_transfer(t, &s);
    assert_eq!(check.warnings, vec![StaticWarning::CrossProduct]);
    assert_eq!(check.conflict_count, 2);
    assert_eq!(check.conflicts[0].target, key("blogpost", 10));
    assert_eq!(
        check.conflicts[0].writes,
        vec![
            (key("user", 1), Some("http://a.org".into())),
            (key("user", 2), Some("http://b.org".into()))
        ]
    );

    let err = apply_statement(&stmt, &mut s, &opts()).unwrap_err();
    let EvalError::Unsafe {
        operator,
        conflicts,
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(*operator, "copy");
    assert_eq!(conflicts, &check.conflicts);
    assert_eq!(s, before, "an unsafe statement changes nothing");
    assert!(
        err.to_string()
            .contains("blogpost:10 from user:1 = \"http://a.org\""),
        "{err}"
    );

    // Forced: the greatest source key wins, the conflicts are reported.
    let report = apply_statement(&stmt, &mut s, &with_force()).unwrap();
    assert_eq!(report.transfer.unwrap().conflicts.len(), 2);
    assert_value(
        &s,
        "blogpost",
        10,
        json!({"title": "x", "url": "http://b.org"}),
    );
    assert_value(
        &s,
        "blogpost",
        11,
        json!({"title": "y", "url": "http://b.org"}),
    );
}

/// The cross product is safe when every source writes the same value.
#[test]
fn cross_product_with_one_value_is_safe() {
    let mut s = state([
        entity("user", 1, 0, json!({"url": "http://a.org"})),
        entity("user", 2, 0, json!({"url": "http://a.org"})),
        entity("blogpost", 10, 0, json!({})),
    ]);
    let stmt = copy("user.url", "blogpost", None, vec![]);
    let tern_core::lang::Statement::Copy(t) = &stmt else {
        unreachable!()
    };
    let check = check_transfer(t, &s);
    assert!(check.is_safe());
    assert_eq!((check.targets_written, check.writes), (1, 2));
    apply_statement(&stmt, &mut s, &opts()).unwrap();
    assert_value(&s, "blogpost", 10, json!({"url": "http://a.org"}));
}

/// The running example of [SE] Section 1 (EXTRACT.md 1.2.8), as far as the
/// language reaches: the comment-level changes of release 3 are inside arrays
/// of nested entities, which no property path addresses.
#[test]
fn running_example() {
    let post_007 = json!({
        "title": "NoSQL Data Modeling Techniques",
        "content": "NoSQL databases are often ...",
        "author": "Michael",
        "date": "2013-01-22",
        "comments": [
            {"comment-content": "Thanks for the great article!", "comment-date": "2013-01-24"},
            {"comment-content": "I would like to mention ...", "comment-date": "2013-01-26"}
        ],
        "version": 1
    });
    let comments_234708 = json!([{
        "comment-content": "Nice", "comment-date": "2013-03-01", "comment-likes": 1,
        "user": "ann", "email": "ann@example.org", "url": "http://ann.example.org", "interests": ["nosql", "xml"]
    }]);
    let post_234708 = json!({
        "title": "Schema evolution", "content": "Releases ...", "author": "hhiker", "date": "2013-03-01",
        "likes": 3, "comments": comments_234708, "version": 2
    });
    let comments_331175 = json!([{
        "comment-content": "+1", "comment-date": "2013-05-02", "comment-likes": 0, "user": "bob", "login": "bob"
    }]);
    let post_331175 = json!({
        "title": "NoSQL Data", "content": "NoSQL databases", "author": "hhiker", "date": "2013-05-01",
        "likes": 5, "comments": comments_331175, "version": 3
    });
    let user_42 = json!({"login": "hhiker", "passwd": "galaxy", "interests": ["databases", "hiking"], "picture": "hhiker.png"});
    let mut s = state([
        entity("blogpost", "007", 0, post_007.clone()),
        entity("blogpost", "234708", 0, post_234708.clone()),
        entity("blogpost", "331175", 0, post_331175.clone()),
        entity("user", 42, 0, user_42.clone()),
    ]);
    let by_author = Some(("user.login", "blogpost.author"));
    let script = [
        // Release 2 for first-generation posts only (scoped by the paper-style `version` property).
        add("blogpost.likes", 0, vec![atom("blogpost.version", 1)]),
        // Denormalize the author's picture and interests (multi-valued) into the posts.
        copy("user.picture", "blogpost", by_author, vec![]),
        copy("user.interests", "blogpost", by_author, vec![]),
        // Example 11's denormalizing copy: user 42 has no url, so nothing is written.
        copy("user.url", "blogpost", by_author, vec![]),
    ];
    let reports = apply_script(&script, &mut s, &opts()).unwrap();

    let mut expected_007 = map(post_007);
    expected_007.insert("likes".into(), 0.into());
    let with_user = |post: serde_json::Value| {
        let mut m = map(post);
        m.insert("picture".into(), "hhiker.png".into());
        m.insert("interests".into(), val(json!(["databases", "hiking"])));
        m
    };
    let expected = state([
        tern_core::model::Entity {
            key: key("blogpost", "007"),
            version: 4,
            value: expected_007,
        },
        tern_core::model::Entity {
            key: key("blogpost", "234708"),
            version: 4,
            value: with_user(post_234708),
        },
        tern_core::model::Entity {
            key: key("blogpost", "331175"),
            version: 4,
            value: with_user(post_331175),
        },
        entity("user", 42, 0, user_42),
    ]);
    assert_eq!(s, expected);
    let url_report = reports[3].transfer.as_ref().unwrap();
    assert_eq!(
        (
            url_report.sources_lacking,
            url_report.targets_lacking,
            url_report.targets_matched
        ),
        (1, 2, 2)
    );
    assert_eq!(reports[3].step("blogpost").unwrap().changed, 0);
}
