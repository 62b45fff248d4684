//! The declarative evolution language of [SE] (Scherzinger, Klettke, Störl):
//! `add`, `delete`, `rename`, `move`, `copy`, with where-conditions and joins.
//!
//! - [`ast`]: the syntax tree;
//! - `parse` / `print`: text to tree and back (`parse(print(ast)) == ast`);
//! - `eval`: the reference semantics ([SE] Figures 6 and 7 with tern's safe defaults);
//! - `safety`: the move/copy dry-run check of [SE] Proposition 2.

pub mod ast;
pub mod eval;
pub mod safety;

pub use ast::{Atom, Join, PropRef, Script, Span, Spanned, Statement, Transfer};
pub mod parse;
pub use parse::{parse_file, print};
