//! Tests of the parser and lexer: accepted scripts, their trees, and the errors
//! of bad ones.
#![allow(clippy::unwrap_used)]

use super::parser::suggest;
use super::*;
use crate::lang::ast::{Atom, Join, PropRef, Span, Statement, Transfer};
use crate::model::Map;
use crate::model::Value;

fn prop(kind: &str, path: &[&str]) -> PropRef {
    PropRef {
        kind: kind.into(),
        path: path.iter().map(|p| (*p).to_owned()).collect(),
        span: Span::default(),
    }
}

fn atom(kind: &str, path: &[&str], value: impl Into<Value>) -> Atom {
    Atom {
        prop: prop(kind, path),
        value: value.into(),
    }
}

fn one(source: &str) -> Statement {
    let script = parse(source).unwrap_or_else(|e| panic!("{source:?} should parse:\n{e}"));
    assert_eq!(script.statements.len(), 1, "{source:?}");
    script.statements.into_iter().next().unwrap().statement
}

fn error(source: &str) -> ParseError {
    match parse(source) {
        Ok(script) => panic!("{source:?} should not parse, got {script:?}"),
        Err(e) => e,
    }
}

/// Asserts the position and message of the error for `source`.
#[track_caller]
fn fails(source: &str, line: usize, col: usize, message: &str) {
    let e = error(source);
    assert_eq!(
        (e.line(), e.col(), e.message().as_str()),
        (line, col, message),
        "{source:?}"
    );
}

// -- the paper's statements ([SE] Examples 2 to 6) --

#[test]
fn paper_add() {
    assert_eq!(
        one("add blogpost.likes = 0"),
        Statement::Add {
            prop: prop("blogpost", &["likes"]),
            value: Value::Int(0),
            conditions: vec![]
        }
    );
}

#[test]
fn paper_delete_with_selection() {
    assert_eq!(
        one("delete blogpost.url where blogpost.version = 1"),
        Statement::Delete {
            prop: prop("blogpost", &["url"]),
            conditions: vec![atom("blogpost", &["version"], 1i64)]
        }
    );
}

#[test]
fn paper_rename() {
    assert_eq!(
        one("rename blogpost.text to content"),
        Statement::Rename {
            prop: prop("blogpost", &["text"]),
            to: "content".into(),
            conditions: vec![]
        }
    );
}

fn author_join() -> Transfer {
    Transfer {
        prop: prop("user", &["url"]),
        to_kind: "blogpost".into(),
        join: Some(Join {
            source: prop("user", &["name"]),
            target: prop("blogpost", &["author"]),
        }),
        source_conditions: vec![],
        target_conditions: vec![],
    }
}

#[test]
fn paper_move() {
    assert_eq!(
        one("move user.url to blogpost where user.name = blogpost.author"),
        Statement::Move(author_join())
    );
}

#[test]
fn paper_copy() {
    let mut expected = author_join();
    expected.prop = prop("user", &["email"]);
    assert_eq!(
        one("copy user.email to blogpost where user.name = blogpost.author"),
        Statement::Copy(expected)
    );
}

// -- move/copy conditions --

#[test]
fn join_is_normalized_in_either_orientation_and_position() {
    let mut expected = author_join();
    expected.source_conditions = vec![atom("user", &["active"], true)];
    expected.target_conditions = vec![atom("blogpost", &["version"], 1i64)];
    for source in [
        "move user.url to blogpost where user.name = blogpost.author and user.active = true and blogpost.version = 1",
        "move user.url to blogpost where blogpost.author = user.name and blogpost.version = 1 and user.active = true",
        "move user.url to blogpost where blogpost.version = 1 and user.active = true and blogpost.author = user.name",
    ] {
        assert_eq!(one(source), Statement::Move(expected.clone()), "{source}");
    }
}

#[test]
fn transfer_without_join() {
    let Statement::Copy(t) = one("copy user.email to blogpost where user.id = 7") else {
        panic!()
    };
    assert_eq!(t.join, None);
    assert_eq!(t.source_conditions, vec![atom("user", &["id"], 7i64)]);
    let Statement::Copy(t) = one("copy user.email to blogpost") else {
        panic!()
    };
    assert_eq!(
        (t.join, t.source_conditions.len(), t.target_conditions.len()),
        (None, 0, 0)
    );
}

#[test]
fn joins_may_use_nested_paths() {
    let Statement::Move(t) =
        one("move user.url to blogpost where blogpost.meta.author = user.profile.name")
    else {
        panic!()
    };
    assert_eq!(
        t.join,
        Some(Join {
            source: prop("user", &["profile", "name"]),
            target: prop("blogpost", &["meta", "author"])
        })
    );
}

// -- lexical rules --

#[test]
fn separators_comments_and_continuations() {
    let source = "-- the blog migration\n\
                  \n\
                  add blogpost.likes = 0; delete blogpost.url -- no longer used\n\
                  rename blogpost.text to content\n\
                  \x20 where blogpost.version = 1\n\
                  \n\
                  \x20 -- only old posts\n\
                  \x20 AND blogpost.draft = false;;\n\
                  move user.url to blogpost where\n\
                  \x20 user.name = blogpost.author and\n\
                  \n\
                  \x20 blogpost.version = 2\n";
    let script = parse(source).unwrap();
    let ops: Vec<_> = script.statements().map(Statement::operator).collect();
    assert_eq!(ops, ["add", "delete", "rename", "move"]);
    let Statement::Rename { conditions, .. } = &script.statements[2].statement else {
        panic!()
    };
    assert_eq!(conditions.len(), 2);
    let Statement::Move(t) = &script.statements[3].statement else {
        panic!()
    };
    assert_eq!(
        t.target_conditions,
        vec![atom("blogpost", &["version"], 2i64)]
    );
    let spans: Vec<_> = script
        .statements
        .iter()
        .map(|s| (s.span.line, s.span.col))
        .collect();
    assert_eq!(spans, [(3, 1), (3, 25), (4, 1), (9, 1)]);
    assert_eq!(
        script.statements[1].span.end - script.statements[1].span.start,
        "delete blogpost.url".len()
    );
}

#[test]
fn crlf_and_bom_are_fine() {
    let script = parse("\u{feff}add a.b = 1\r\ndelete a.b\r\n  where a.c = 'x'\r\n").unwrap();
    assert_eq!(script.statements.len(), 2);
    assert_eq!(
        script.statements[1].statement,
        Statement::Delete {
            prop: prop("a", &["b"]),
            conditions: vec![atom("a", &["c"], "x")]
        }
    );
}

#[test]
fn keywords_are_case_insensitive_and_usable_as_names() {
    assert_eq!(
        one("RENAME To.Where TO and WHERE To.kind = Null"),
        Statement::Rename {
            prop: prop("To", &["Where"]),
            to: "and".into(),
            conditions: vec![atom("To", &["kind"], Value::Null)]
        }
    );
    assert_eq!(
        one("delete where.and"),
        Statement::Delete {
            prop: prop("where", &["and"]),
            conditions: vec![]
        }
    );
    // `kind` followed by `.` is a property of the kind named `kind`.
    assert_eq!(
        one("rename kind.a to b"),
        Statement::Rename {
            prop: prop("kind", &["a"]),
            to: "b".into(),
            conditions: vec![]
        }
    );
    // `true.x` on the right of a condition is a property, not a literal.
    let Statement::Copy(t) = one("copy a.x to true where a.y = true.z") else {
        panic!()
    };
    assert_eq!(
        t.join,
        Some(Join {
            source: prop("a", &["y"]),
            target: prop("true", &["z"])
        })
    );
}

#[test]
fn backtick_names() {
    assert_eq!(
        one("delete blogpost.`comment-likes`.`a``b`.`` where blogpost.`$oid` = 1"),
        Statement::Delete {
            prop: prop("blogpost", &["comment-likes", "a`b", ""]),
            conditions: vec![atom("blogpost", &["$oid"], 1i64)]
        }
    );
    assert_eq!(one("delete `kind`.````").to_string(), "delete `kind`.````");
    // A quoted name may hold a line break.
    assert_eq!(
        one("delete a.`x\ny`"),
        Statement::Delete {
            prop: prop("a", &["x\ny"]),
            conditions: vec![]
        }
    );
}

#[test]
fn rename_kind() {
    assert_eq!(
        one("rename kind user to member"),
        Statement::RenameKind {
            from: "user".into(),
            to: "member".into()
        }
    );
    assert_eq!(
        one("Rename KIND `user-v1` to kind"),
        Statement::RenameKind {
            from: "user-v1".into(),
            to: "kind".into()
        }
    );
}

#[test]
fn nested_paths() {
    assert_eq!(
        one("add blogpost.author.name = 'x' where blogpost.meta.v = 1"),
        Statement::Add {
            prop: prop("blogpost", &["author", "name"]),
            value: "x".into(),
            conditions: vec![atom("blogpost", &["meta", "v"], 1i64)]
        }
    );
    assert_eq!(
        one("rename blogpost.author.name to fullname"),
        Statement::Rename {
            prop: prop("blogpost", &["author", "name"]),
            to: "fullname".into(),
            conditions: vec![]
        }
    );
}

// -- literals --

fn literal(text: &str) -> Value {
    match one(&format!("add k.p = {text}")) {
        Statement::Add { value, .. } => value,
        other => panic!("{other:?}"),
    }
}

#[test]
fn scalar_literals() {
    assert_eq!(literal("0"), Value::Int(0));
    assert_eq!(literal("-42"), Value::Int(-42));
    assert_eq!(literal("9223372036854775807"), Value::Int(i64::MAX));
    assert_eq!(literal("-9223372036854775808"), Value::Int(i64::MIN));
    assert_eq!(literal("1.5"), Value::Float(1.5));
    assert_eq!(literal("-2.0"), Value::Float(-2.0));
    assert_eq!(literal("1e3"), Value::Float(1000.0));
    assert_eq!(literal("2.5E-1"), Value::Float(0.25));
    assert_eq!(literal("1e+2"), Value::Float(100.0));
    assert_eq!(literal("-0.0"), Value::Float(-0.0));
    assert_eq!(literal("TRUE"), Value::Bool(true));
    assert_eq!(literal("false"), Value::Bool(false));
    assert_eq!(literal("null"), Value::Null);
}

#[test]
fn string_literals() {
    assert_eq!(literal(r#""Gerhard""#), Value::from("Gerhard"));
    assert_eq!(literal(r#"'say "hi"\''"#), Value::from("say \"hi\"'"));
    assert_eq!(
        literal(r#""a\"b\\c\/d\b\f\n\r\t""#),
        Value::from("a\"b\\c/d\u{8}\u{c}\n\r\t")
    );
    assert_eq!(literal(r#""\u00e9\uD83D\uDE00""#), Value::from("é😀"));
    assert_eq!(
        literal(r#""-- not a comment""#),
        Value::from("-- not a comment")
    );
    assert_eq!(literal("''"), Value::from(""));
}

#[test]
fn json_literals() {
    let mut map = Map::new();
    map.insert(
        "a".into(),
        Value::Array(vec![Value::Int(1), Value::Float(2.0), Value::Null]),
    );
    map.insert("b".into(), Value::from("x]}"));
    assert_eq!(
        literal(r#"{"a": [1, 2.0, null], "b": "x]}"}"#),
        Value::Map(map)
    );
    assert_eq!(literal("[]"), Value::Array(vec![]));
    assert_eq!(literal(r#"{"$bytes": "AAE="}"#), Value::Bytes(vec![0, 1]));
    assert_eq!(
        literal(r#"{"$date": 1700000000000}"#),
        Value::Timestamp(1_700_000_000_000)
    );
    assert_eq!(literal(r#"{"$float": "NaN"}"#), Value::Float(f64::NAN));
    // A JSON literal spans lines and may hold comments.
    let script = parse("add k.p = [\n  1, -- one\n  2\n]\ndelete k.q").unwrap();
    assert_eq!(script.statements.len(), 2);
    let Statement::Add { value, .. } = &script.statements[0].statement else {
        panic!()
    };
    assert_eq!(value, &Value::Array(vec![Value::Int(1), Value::Int(2)]));
}

// -- errors --

#[test]
fn empty_scripts() {
    for source in ["", "\n\n", "  -- only a comment\n", ";;\n;", "\u{feff}"] {
        let e = error(source);
        assert!(e.is_empty_script(), "{source:?}: {e}");
        assert_eq!((e.line(), e.col()), (1, 1));
    }
    assert_eq!(error("").message(), "the migration has no statements");
}

#[test]
fn unknown_operators() {
    fails(
        "add a.b = 1\nupdate blogpost.x = 1",
        2,
        1,
        "unknown operator `update`, expected `add`, `delete`, `rename`, `move`, `copy` or `build`",
    );
    fails(
        "renam blogpost.text to content",
        1,
        1,
        "unknown operator `renam`, expected `add`, `delete`, `rename`, `move`, `copy` or `build` (did you mean `rename`?)",
    );
    fails(
        "remove blogpost.url",
        1,
        1,
        "unknown operator `remove`, expected `add`, `delete`, `rename`, `move`, `copy` or `build` (did you mean `delete`?)",
    );
    fails(
        "= 1",
        1,
        1,
        "expected a statement (`add`, `delete`, `rename`, `move`, `copy` or `build`), found `=`",
    );
    fails(
        "delete a.b;\nwhere a.c = 1",
        2,
        1,
        "expected a statement (`add`, `delete`, `rename`, `move`, `copy` or `build`), found `where` (a line starting with `where` continues the statement above only when no `;` ends it)",
    );
}

#[test]
fn missing_dot() {
    fails(
        "delete blogpost",
        1,
        16,
        "expected `.` after the kind `blogpost` (a property is written `kind.name`), found end of input",
    );
    fails(
        "delete blogpost where blogpost.v = 1",
        1,
        17,
        "expected `.` after the kind `blogpost` (a property is written `kind.name`), found `where`",
    );
    fails(
        "delete a.b where c = 1",
        1,
        20,
        "expected `.` after the kind `c` (a property is written `kind.name`), found `=`",
    );
    fails(
        "delete a.",
        1,
        10,
        "expected a property name after `.`, found end of input",
    );
    fails(
        "delete a.1",
        1,
        10,
        "expected a property name after `.`, found the number `1` (names other than identifiers are quoted in backticks)",
    );
}

#[test]
fn add_requires_a_value() {
    fails(
        "add blogpost.likes\n",
        1,
        19,
        "expected `=` and a value after the property, found end of line: `add` requires a value (`add kind.name = value`)",
    );
    fails(
        "add blogpost.likes =",
        1,
        21,
        "expected a value after `=` (a string, number, `true`, `false`, `null`, or a JSON array or object), found end of input",
    );
    fails(
        "delete a.b where a.c = gerhard",
        1,
        24,
        "expected a value after `=` (a string, number, `true`, `false`, `null`, or a JSON array or object), found `gerhard` (a string is written in quotes: \"gerhard\")",
    );
}

#[test]
fn expected_to() {
    fails(
        "add a.b = 1\n\nrename blogpost.text = content",
        3,
        22,
        "expected `to` after the property, found `=`",
    );
    fails(
        "move user.url blogpost",
        1,
        15,
        "expected `to` after the property, found `blogpost`",
    );
    fails(
        "rename kind user member",
        1,
        18,
        "expected `to` after the kind, found `member`",
    );
}

#[test]
fn conditions_of_add_delete_rename_are_on_the_changed_kind() {
    fails(
        "delete blogpost.url where user.name = 'x'",
        1,
        27,
        "a condition of `delete` must be on the kind it changes, `blogpost`, found `user.name`",
    );
    fails(
        "add blogpost.likes = 0 where blogpost.v = 1 and user.v = 1",
        1,
        49,
        "a condition of `add` must be on the kind it changes, `blogpost`, found `user.v`",
    );
    fails(
        "rename blogpost.text to content where blogpost.a = blogpost.b",
        1,
        52,
        "a condition of `rename` compares a property with a value, found the property `blogpost.b`; a join of two properties is only allowed in `move` and `copy`",
    );
}

#[test]
fn transfer_conditions() {
    fails(
        "move user.url to blogpost where post.author = user.name",
        1,
        33,
        "a condition of `move` must be on the source kind `user` or the target kind `blogpost`, found `post.author`",
    );
    fails(
        "copy user.url to blogpost where user.name = blogpost.author and comment.x = 1",
        1,
        65,
        "a condition of `copy` must be on the source kind `user` or the target kind `blogpost`, found `comment.x`",
    );
    fails(
        "move user.url to blogpost where user.name = user.alias",
        1,
        33,
        "a join compares a property of the source kind with one of the target kind, but both sides are on `user`",
    );
    fails(
        "move user.url to blogpost where user.name = blogpost.author\n  and blogpost.id = user.post",
        2,
        7,
        "a `move` has at most one join condition (`source.a = target.b`), found a second one: `blogpost.id = user.post`",
    );
}

#[test]
fn transfer_shape() {
    fails(
        "move user.url to user",
        1,
        18,
        "cannot move a property to its own kind `user`: the target must be another kind (`rename` renames a property within its kind)",
    );
    fails(
        "copy user.address.city to blogpost",
        1,
        6,
        "`copy` transfers a top-level property, found the nested property `user.address.city`",
    );
    let e = error("copy user.address.city to blogpost");
    assert_eq!(e.width(), "user.address.city".len());
    fails(
        "move user.url to blogpost.url",
        1,
        18,
        "the target of `move` is a kind, found the property `blogpost.url` (the property keeps its name in the target kind)",
    );
}

#[test]
fn rename_shape() {
    fails(
        "rename blogpost.text to text",
        1,
        25,
        "renaming `text` to the same name changes nothing",
    );
    fails(
        "rename blogpost.a.text to text",
        1,
        27,
        "renaming `text` to the same name changes nothing",
    );
    fails(
        "rename kind user to user",
        1,
        21,
        "renaming `user` to the same name changes nothing",
    );
    fails(
        "rename blogpost.text to blogpost.content",
        1,
        25,
        "the new name of a renamed property is a plain name in the same kind (`rename kind.old to new`), found `blogpost.content`",
    );
    fails(
        "rename kind user to member\n where user.x = 1",
        2,
        2,
        "a kind rename takes no `where` condition: it renames the whole kind",
    );
    fails(
        "rename kind `` to member",
        1,
        13,
        "invalid kind name \"\": a kind is a non-empty name without control characters",
    );
    fails(
        "delete `a\nb`.c",
        1,
        8,
        "invalid kind name \"a\\nb\": a kind is a non-empty name without control characters",
    );
}

#[test]
fn strings() {
    fails(
        "add a.b = \"abc\nadd a.c = 1",
        1,
        11,
        "unterminated string: expected a closing `\"` before the end of the line",
    );
    fails(
        "add a.b = 'abc",
        1,
        11,
        "unterminated string: expected a closing `'` before the end of the line",
    );
    fails(
        "add a.b = \"abc\\",
        1,
        11,
        "unterminated string: expected a closing `\"` before the end of the line",
    );
    fails(
        r#"add a.b = "a\qb""#,
        1,
        13,
        r#"unknown escape `\q` in a string; the escapes are \" \' \\ \/ \b \f \n \r \t and \uXXXX"#,
    );
    fails(
        r#"add a.b = "\u12""#,
        1,
        12,
        r"invalid unicode escape `\u12`: expected four hex digits after \u",
    );
    fails(
        r#"add a.b = "\uD83Dx""#,
        1,
        12,
        r"invalid unicode escape `\uD83D`: a high surrogate must be followed by a low surrogate (\uDC00 to \uDFFF)",
    );
    fails(
        r#"add a.b = "\uDE00""#,
        1,
        12,
        r"invalid unicode escape `\uDE00`: a low surrogate without a high surrogate before it",
    );
    fails(
        "delete a.`b",
        1,
        10,
        "unterminated quoted name: expected a closing backtick",
    );
}

#[test]
fn numbers() {
    fails(
        "add a.b = 9223372036854775808",
        1,
        11,
        "integer `9223372036854775808` is outside the 64-bit signed range (-9223372036854775808 to 9223372036854775807); write it as a float (with a `.0`) or a string",
    );
    fails(
        "add a.b = -1e999",
        1,
        11,
        "float `-1e999` is outside the 64-bit float range; write infinity as {\"$float\": \"inf\"}",
    );
    fails("add a.b = 12abc", 1, 11, "malformed number `12abc`");
    fails("add a.b = 1e", 1, 11, "malformed number `1e`");
    let e = error("add a.b = 12abc");
    assert_eq!(e.width(), 5);
}

#[test]
fn json_errors() {
    fails(
        "add a.b = [1, 2,]",
        1,
        17,
        "malformed JSON literal: trailing comma",
    );
    fails(
        "add a.b = {\n  \"x\": 1\n  \"y\": 2\n}",
        3,
        3,
        "malformed JSON literal: expected `,` or `}`",
    );
    fails(
        "add a.b = {'x': 1}",
        1,
        12,
        "malformed JSON literal: key must be a string",
    );
    fails(
        "add a.b = [1, 2\ndelete a.c",
        1,
        11,
        "unterminated JSON literal: this `[` is never closed by a `]`",
    );
    fails(
        "add a.b = [\"x\n\"]",
        1,
        12,
        "unterminated string: expected a closing `\"` before the end of the line",
    );
    fails(
        "add a.b = {\"$bytes\": 5}",
        1,
        11,
        "malformed value: \"$bytes\" must hold a base64 string",
    );
    fails(
        "add a.b = [18446744073709551615]",
        1,
        11,
        "malformed value: integer 18446744073709551615 is outside the 64-bit signed range; write it as a float (18446744073709551615.0) or a string",
    );
    let e = error("add a.b = {\"$date\": \"x\"}");
    assert_eq!(e.width(), "{\"$date\": \"x\"}".len());
}

#[test]
fn trailing_garbage() {
    fails(
        "add a.b = 1 2",
        1,
        13,
        "expected `where`, `;` or the end of the line after the value, found the number `2`",
    );
    fails(
        "delete a.b where a.c = 1 or a.c = 2",
        1,
        26,
        "expected `and`, `;` or the end of the line after the condition, found `or` (conditions are combined only with `and`)",
    );
    fails(
        "rename kind a to b c",
        1,
        20,
        "expected `;` or the end of the line after the kind rename, found `c`",
    );
    fails(
        "move user.url to blogpost blogpost.x = 1",
        1,
        27,
        "expected `where`, `;` or the end of the line after the target kind, found `blogpost`",
    );
    fails(
        "delete a.b where a.c == 1",
        1,
        23,
        "expected a value after `=` (a string, number, `true`, `false`, `null`, or a JSON array or object), found `=`",
    );
    fails(
        "delete a.b where a.c < 1",
        1,
        22,
        "unexpected character `<` (a condition is an equality: `kind.name = value`)",
    );
    fails(
        "delete a.b # note",
        1,
        12,
        "unexpected character `#` (comments start with `--`)",
    );
    fails("delete a.b\u{0}", 1, 11, "unexpected character `\\0`");
}

#[test]
fn errors_name_the_file() {
    let e = parse_file(
        "migrations/0002_blog.tern",
        "rename blogpost.text = content",
    )
    .unwrap_err();
    assert_eq!(e.file(), Some("migrations/0002_blog.tern"));
    assert!(
        e.to_string()
            .starts_with("migrations/0002_blog.tern:1:22: expected `to`"),
        "{e}"
    );
}

#[test]
fn suggestions() {
    assert_eq!(suggest("ad"), Some("add"));
    assert_eq!(suggest("Mvoe"), None);
    assert_eq!(suggest("cpy"), Some("copy"));
    assert_eq!(suggest("delte"), Some("delete"));
    assert_eq!(suggest("x"), None);
    assert_eq!(suggest("select"), None);
}
