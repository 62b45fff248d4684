//! The declarative evolution language of \[SE\] (Scherzinger, Klettke, Störl):
//! `add`, `delete`, `rename`, `move`, `copy`, with where-conditions and joins.
//!
//! - [`ast`]: the syntax tree;
//! - [`parse`](mod@parse) / [`print`](mod@print): text to tree and back
//!   (`parse(print(ast)) == ast`), with [`ParseError`] pointing at the line and
//!   column of the first error;
//! - [`eval`]: the reference semantics (\[SE\] Figures 6 and 7 with tern's safe defaults);
//! - [`conflict`]: a move's or copy's conflicting target, as all three report it;
//! - [`safety`]: the move/copy dry-run check of \[SE\] Proposition 2;
//! - [`join`]: the same join and check by index, in one scan of each kind;
//! - [`build`](mod@build): the rows of a `build` statement and its safety check.
//!
//! The language is described in `docs/language.md`.

pub mod ast;
pub mod build;
pub mod conflict;
pub mod error;
pub mod eval;
pub mod join;
pub mod limits;
pub mod parse;
pub mod print;
pub mod safety;

#[cfg(any(test, feature = "arbitrary"))]
pub mod arb;

#[cfg(test)]
mod corpus;

pub use ast::{Atom, Build, BuildJoin, Join, PropRef, Script, Span, Spanned, Statement, Transfer};
pub use error::{ParseError, ParseErrorKind};
pub use parse::{parse, parse_file};
pub use print::print;
