//! The printer: a [`Script`] or [`Statement`] to canonical text.
//!
//! The canonical form is one statement per line; keywords in lower case;
//! names backtick-quoted when they are not plain identifiers or are keywords
//! ([`quote_name`]); literals in the lossless JSON form of
//! [`model::json`](crate::model::json) (so `2.0` stays a float and NaN is
//! `{"$float":"NaN"}`); in a move or copy, the join first, then the source
//! atoms, then the target atoms. `parse(print(script)) == script` for every
//! script the parser can produce.

use std::borrow::Cow;
use std::fmt;

use super::ast::{Atom, PropRef, Script, Statement};
use super::parse::{is_identifier, is_keyword};
use crate::model::json::to_json_string;

/// Prints a script in canonical form: one statement per line, each ending with a newline.
///
/// # Examples
///
/// ```
/// use tern_core::lang::{parse, print};
///
/// let script = parse("MOVE user.url TO blogpost WHERE blogpost.author = user.name; delete user.`a b`").unwrap();
/// assert_eq!(
///     print(&script),
///     "move user.url to blogpost where user.name = blogpost.author\ndelete user.`a b`\n"
/// );
/// ```
pub fn print(script: &Script) -> String {
    let mut out = String::new();
    for statement in script.statements() {
        out.push_str(&statement.to_string());
        out.push('\n');
    }
    out
}

/// A name as the printer writes it: as is when it is a plain identifier and
/// no keyword, else in backticks with each backtick doubled.
pub fn quote_name(name: &str) -> Cow<'_, str> {
    if is_identifier(name) && !is_keyword(name) {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(format!("`{}`", name.replace('`', "``")))
    }
}

struct Name<'a>(&'a str);

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&quote_name(self.0))
    }
}

struct Prop<'a>(&'a PropRef);

impl fmt::Display for Prop<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Name(&self.0.kind))?;
        for name in &self.0.path {
            write!(f, ".{}", Name(name))?;
        }
        Ok(())
    }
}

/// Writes ` where a and b ...` for a non-empty list of conditions.
fn conditions<'a>(
    f: &mut fmt::Formatter<'_>,
    items: impl Iterator<Item = Cond<'a>>,
) -> fmt::Result {
    for (i, item) in items.enumerate() {
        f.write_str(if i == 0 { " where " } else { " and " })?;
        match item {
            Cond::Atom(atom) => {
                write!(f, "{} = {}", Prop(&atom.prop), to_json_string(&atom.value))?
            }
            Cond::Join(left, right) => write!(f, "{} = {}", Prop(left), Prop(right))?,
        }
    }
    Ok(())
}

enum Cond<'a> {
    Atom(&'a Atom),
    Join(&'a PropRef, &'a PropRef),
}

impl fmt::Display for Statement {
    /// The canonical text of the statement, on one line, without a terminator.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Statement::Add {
                prop,
                value,
                conditions: atoms,
            } => {
                write!(f, "add {} = {}", Prop(prop), to_json_string(value))?;
                conditions(f, atoms.iter().map(Cond::Atom))
            }
            Statement::Delete {
                prop,
                conditions: atoms,
            } => {
                write!(f, "delete {}", Prop(prop))?;
                conditions(f, atoms.iter().map(Cond::Atom))
            }
            Statement::Rename {
                prop,
                to,
                conditions: atoms,
            } => {
                write!(f, "rename {} to {}", Prop(prop), Name(to))?;
                conditions(f, atoms.iter().map(Cond::Atom))
            }
            Statement::Move(t) | Statement::Copy(t) => {
                write!(
                    f,
                    "{} {} to {}",
                    self.operator(),
                    Prop(&t.prop),
                    Name(&t.to_kind)
                )?;
                let join = t.join.iter().map(|j| Cond::Join(&j.source, &j.target));
                let atoms = t
                    .source_conditions
                    .iter()
                    .chain(&t.target_conditions)
                    .map(Cond::Atom);
                conditions(f, join.chain(atoms))
            }
            Statement::RenameKind { from, to } => {
                write!(f, "rename kind {} to {}", Name(from), Name(to))
            }
            Statement::Build(b) => {
                write!(f, "build {} from {}", Name(&b.kind), Name(&b.from))?;
                for j in &b.joins {
                    write!(
                        f,
                        " join {} on {} = {}",
                        Name(&j.kind),
                        Prop(&j.known),
                        Prop(&j.new)
                    )?;
                }
                for (word, list) in [
                    ("key", &b.key),
                    ("cluster", &b.cluster),
                    ("select", &b.select),
                ] {
                    if !list.is_empty() {
                        write!(f, " {word}")?;
                        for p in list {
                            write!(f, " {}", Prop(p))?;
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::lang::arb::arb_script;
    use crate::lang::parse::parse;
    use crate::model::Value;

    fn canonical(source: &str) -> String {
        print(&parse(source).unwrap_or_else(|e| panic!("{source:?}:\n{e}")))
    }

    #[test]
    fn canonical_form_of_the_paper_statements() {
        let source = "ADD blogpost.likes = 0\n\
                      delete blogpost.url WHERE blogpost.version = 1;rename blogpost.text to content\n\
                      move user.url to blogpost where blogpost.author = user.name\n\
                      copy user.email to blogpost\n  where blogpost.v = 2 and user.name = blogpost.author and user.v = 1\n";
        assert_eq!(
            canonical(source),
            "add blogpost.likes = 0\n\
             delete blogpost.url where blogpost.version = 1\n\
             rename blogpost.text to content\n\
             move user.url to blogpost where user.name = blogpost.author\n\
             copy user.email to blogpost where user.name = blogpost.author and user.v = 1 and blogpost.v = 2\n"
        );
    }

    /// Checks the canonical form of each `(source, printed)`.
    fn assert_canonical(cases: &[(&str, &str)]) {
        for (source, printed) in cases {
            assert_eq!(canonical(source), *printed, "{source:?}");
        }
    }

    #[test]
    fn names_are_quoted_when_needed() {
        for (name, quoted) in [
            ("likes", "likes"),
            ("_a1", "_a1"),
            ("to", "`to`"),
            ("WHERE", "`WHERE`"),
            ("comment-likes", "`comment-likes`"),
            ("1a", "`1a`"),
            ("a`b", "`a``b`"),
            ("", "``"),
            ("straße", "`straße`"),
        ] {
            assert_eq!(quote_name(name), quoted, "{name:?}");
        }
        assert_canonical(&[
            ("rename kind kind to `x`", "rename kind `kind` to x\n"),
            // The example of docs/language.md.
            (
                "MOVE user.url TO blogpost WHERE blogpost.v = 2 AND blogpost.author = user.name",
                "move user.url to blogpost where user.name = blogpost.author and blogpost.v = 2\n",
            ),
        ]);
    }

    #[test]
    fn literals_use_the_lossless_json_form() {
        assert_canonical(&[
            ("add a.b = 2.0", "add a.b = 2.0\n"),
            ("add a.b = 1e3", "add a.b = 1000.0\n"),
            ("add a.b = 'it\\'s'", "add a.b = \"it's\"\n"),
            (
                "add a.b = {\"$float\": \"NaN\"}",
                "add a.b = {\"$float\":\"NaN\"}\n",
            ),
            (
                "add a.b = { \"y\" : [1, true] ,\"x\":null}",
                "add a.b = {\"x\":null,\"y\":[1,true]}\n",
            ),
        ]);
        let statement = Statement::Add {
            prop: PropRef {
                kind: "a".into(),
                path: vec!["b".into()],
                span: Default::default(),
            },
            value: Value::Bytes(vec![1, 2]),
            conditions: vec![],
        };
        assert_eq!(statement.to_string(), "add a.b = {\"$bytes\":\"AQI=\"}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn parse_inverts_print(script in arb_script()) {
            let text = print(&script);
            let back = parse(&text).map_err(|e| TestCaseError::fail(format!("{text:?}\n{e}")))?;
            prop_assert_eq!(&back, &script, "{}", text);
            // Printing is idempotent.
            prop_assert_eq!(print(&back), text);
        }
    }
}
