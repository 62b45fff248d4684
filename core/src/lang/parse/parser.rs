//! The parser: tokens to a [`Script`], by recursive descent.

use std::collections::VecDeque;

use super::lexer::{Lexer, Tok, Token};
use crate::lang::ast::{
    Atom, Build, BuildJoin, Join, PropRef, Script, Span, Spanned, Statement, Transfer,
};
use crate::lang::error::{ParseError, ParseErrorKind};
use crate::model::Value;

const OPERATORS: [&str; 6] = ["add", "delete", "rename", "move", "copy", "build"];

const A_STATEMENT: &str = "a statement (`add`, `delete`, `rename`, `move`, `copy` or `build`)";

/// A condition as written: an atom, or a join of two properties.
enum Cond {
    Atom(Atom),
    Join(PropRef, PropRef),
}

/// The parser: the tokens of a source, with lookahead.
pub(super) struct Parser<'a> {
    src: &'a str,
    lexer: Lexer<'a>,
    ahead: VecDeque<Token>,
    /// End of the last token consumed.
    last_end: usize,
    /// Byte offsets of line starts.
    lines: Vec<usize>,
    /// What may follow the statement parsed so far, for the trailing-garbage error.
    follow: &'static str,
}

impl<'a> Parser<'a> {
    pub(super) fn new(src: &'a str) -> Self {
        let lines = std::iter::once(0)
            .chain(src.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Parser {
            src,
            lexer: Lexer::new(src),
            ahead: VecDeque::new(),
            last_end: 0,
            lines,
            follow: "",
        }
    }

    // -- tokens --

    fn peek_at(&mut self, n: usize) -> Result<&Token, ParseError> {
        while self.ahead.len() <= n {
            let token = self.lexer.next_token()?;
            self.ahead.push_back(token);
        }
        let eof = self.ahead.len() - 1;
        Ok(&self.ahead[n.min(eof)])
    }

    fn peek(&mut self) -> Result<&Token, ParseError> {
        self.peek_at(0)
    }

    fn bump(&mut self) -> Result<Token, ParseError> {
        self.peek_at(0)?;
        let token = match self.ahead.pop_front() {
            Some(token) => token,
            None => Token {
                tok: Tok::Eof,
                start: self.src.len(),
                end: self.src.len(),
            },
        };
        self.last_end = token.end;
        Ok(token)
    }

    /// If the statement continues with the keyword `word`, possibly on a later
    /// line, skips the line breaks before it and says yes.
    fn continues_with(&mut self, word: &str) -> Result<bool, ParseError> {
        let mut n = 0;
        loop {
            let token = self.peek_at(n)?;
            if matches!(token.tok, Tok::Newline) {
                n += 1;
                continue;
            }
            let yes = token.is_word(word);
            if yes {
                for _ in 0..n {
                    self.bump()?;
                }
            }
            return Ok(yes);
        }
    }

    /// Skips line breaks, unless only the end of the input follows them (so
    /// that an error points at the end of the last line, not past it).
    fn skip_newlines(&mut self) -> Result<(), ParseError> {
        let mut n = 0;
        while matches!(self.peek_at(n)?.tok, Tok::Newline) {
            n += 1;
        }
        if !matches!(self.peek_at(n)?.tok, Tok::Eof) {
            for _ in 0..n {
                self.bump()?;
            }
        }
        Ok(())
    }

    // -- errors and positions --

    fn err(&self, kind: ParseErrorKind, start: usize, end: usize) -> ParseError {
        ParseError::new(kind, self.src, start, end)
    }

    fn err_at(&self, kind: ParseErrorKind, token: &Token) -> ParseError {
        self.err(kind, token.start, token.end)
    }

    fn expected(&self, token: &Token, expected: impl Into<String>) -> ParseError {
        let kind = ParseErrorKind::Expected {
            expected: expected.into(),
            found: self.describe(token),
        };
        self.err_at(kind, token)
    }

    /// The source text of `start..end`, on one line, shortened when long.
    fn excerpt(&self, start: usize, end: usize) -> String {
        let text = self.src.get(start..end).unwrap_or("");
        let line = text.split('\n').next().unwrap_or("");
        if line.chars().count() > 40 {
            let mut short: String = line.chars().take(37).collect();
            short.push('…');
            short
        } else {
            line.to_owned()
        }
    }

    /// How an error names what it found.
    fn describe(&self, token: &Token) -> String {
        let text = self.excerpt(token.start, token.end);
        match &token.tok {
            Tok::Newline => "end of line".to_owned(),
            Tok::Eof => "end of input".to_owned(),
            Tok::Str(_) => format!("the string {text}"),
            Tok::Int(_) | Tok::Float(_) => format!("the number `{text}`"),
            Tok::Json(Value::Array(_)) => "a JSON array".to_owned(),
            Tok::Json(_) => "a JSON object".to_owned(),
            Tok::Quoted(_) => format!("the name {text}"),
            Tok::Word(w) if w.eq_ignore_ascii_case("or") => {
                format!("`{text}` (conditions are combined only with `and`)")
            }
            _ => format!("`{text}`"),
        }
    }

    fn span(&self, start: usize, end: usize) -> Span {
        let line = self.lines.partition_point(|&s| s <= start).max(1);
        let line_start = self.lines.get(line - 1).copied().unwrap_or(0);
        let col = self
            .src
            .get(line_start..start)
            .map_or(0, |s| s.chars().count())
            + 1;
        Span {
            start,
            end,
            line,
            col,
        }
    }

    // -- grammar --

    pub(super) fn script(mut self) -> Result<Script, ParseError> {
        let mut statements = Vec::new();
        loop {
            match self.peek()?.tok {
                Tok::Newline | Tok::Semi => {
                    self.bump()?;
                }
                Tok::Eof => break,
                _ => {
                    statements.push(self.statement()?);
                    let next = self.peek()?.clone();
                    if !matches!(next.tok, Tok::Newline | Tok::Semi | Tok::Eof) {
                        return Err(self.expected(&next, self.follow));
                    }
                }
            }
        }
        if statements.is_empty() {
            return Err(self.err(ParseErrorKind::EmptyScript, 0, 0));
        }
        Ok(Script { statements })
    }

    fn statement(&mut self) -> Result<Spanned, ParseError> {
        let op = self.bump()?;
        let Tok::Word(word) = &op.tok else {
            return Err(self.expected(&op, A_STATEMENT));
        };
        let statement = match word.to_ascii_lowercase().as_str() {
            "add" => self.add()?,
            "delete" => self.delete()?,
            "rename" => self.rename()?,
            "move" => Statement::Move(self.transfer("move")?),
            "copy" => Statement::Copy(self.transfer("copy")?),
            "build" => Statement::Build(self.build()?),
            "where" | "and" => {
                let found = format!(
                    "`{word}` (a line starting with `{word}` continues the statement above only when no `;` ends it)"
                );
                let kind = ParseErrorKind::Expected {
                    expected: A_STATEMENT.to_owned(),
                    found,
                };
                return Err(self.err_at(kind, &op));
            }
            _ => {
                let kind = ParseErrorKind::UnknownOperator {
                    found: word.clone(),
                    suggestion: suggest(word),
                };
                return Err(self.err_at(kind, &op));
            }
        };
        Ok(Spanned {
            statement,
            span: self.span(op.start, self.last_end),
        })
    }

    /// `add kind.path = value [where conds]`
    fn add(&mut self) -> Result<Statement, ParseError> {
        let prop = self.prop("after `add`")?;
        let eq = self.bump()?;
        if !matches!(eq.tok, Tok::Eq) {
            return Err(self.err_at(
                ParseErrorKind::MissingValue {
                    found: self.describe(&eq),
                },
                &eq,
            ));
        }
        let value = self.value("a value after `=`")?;
        self.follow = "`where`, `;` or the end of the line after the value";
        let conditions = self.selection("add", &prop.kind)?;
        Ok(Statement::Add {
            prop,
            value,
            conditions,
        })
    }

    /// `delete kind.path [where conds]`
    fn delete(&mut self) -> Result<Statement, ParseError> {
        let prop = self.prop("after `delete`")?;
        self.follow = "`where`, `;` or the end of the line after the property";
        let conditions = self.selection("delete", &prop.kind)?;
        Ok(Statement::Delete { prop, conditions })
    }

    /// `rename kind.path to name [where conds]` or `rename kind a to b`
    fn rename(&mut self) -> Result<Statement, ParseError> {
        if self.peek()?.is_word("kind") && !matches!(self.peek_at(1)?.tok, Tok::Dot) {
            self.bump()?;
            let (from, from_token) = self.name("the kind to rename after `rename kind`")?;
            self.check_kind(&from, &from_token)?;
            self.keyword("to", "`to` after the kind")?;
            let (to, to_token) = self.name("the new kind name after `to`")?;
            self.check_kind(&to, &to_token)?;
            if from == to {
                return Err(self.err_at(ParseErrorKind::RenameToSameName { name: to }, &to_token));
            }
            if self.continues_with("where")? {
                let token = self.bump()?;
                return Err(self.err_at(ParseErrorKind::KindRenameWithCondition, &token));
            }
            self.follow = "`;` or the end of the line after the kind rename";
            return Ok(Statement::RenameKind { from, to });
        }
        let prop = self.prop("after `rename`")?;
        self.keyword("to", "`to` after the property")?;
        let (to, to_token) = self.name("the new property name after `to`")?;
        if matches!(self.peek()?.tok, Tok::Dot) {
            self.rest_of_path()?;
            let found = self.excerpt(to_token.start, self.last_end);
            return Err(self.err(
                ParseErrorKind::RenameTargetNotPlain { found },
                to_token.start,
                self.last_end,
            ));
        }
        if prop.path.last() == Some(&to) {
            return Err(self.err_at(ParseErrorKind::RenameToSameName { name: to }, &to_token));
        }
        self.follow = "`where`, `;` or the end of the line after the new name";
        let conditions = self.selection("rename", &prop.kind)?;
        Ok(Statement::Rename {
            prop,
            to,
            conditions,
        })
    }

    /// `move|copy kind.name to kind2 [where cond {and cond}]`
    fn transfer(&mut self, operator: &'static str) -> Result<Transfer, ParseError> {
        let prop = self.prop(if operator == "move" {
            "after `move`"
        } else {
            "after `copy`"
        })?;
        if !prop.is_top_level() {
            let found = self.excerpt(prop.span.start, prop.span.end);
            return Err(self.err(
                ParseErrorKind::NestedTransfer { operator, found },
                prop.span.start,
                prop.span.end,
            ));
        }
        self.keyword("to", "`to` after the property")?;
        let (to_kind, to_token) = self.name("the target kind after `to`")?;
        self.check_kind(&to_kind, &to_token)?;
        if matches!(self.peek()?.tok, Tok::Dot) {
            self.rest_of_path()?;
            let found = self.excerpt(to_token.start, self.last_end);
            let kind = ParseErrorKind::TargetIsProperty { operator, found };
            return Err(self.err(kind, to_token.start, self.last_end));
        }
        if to_kind == prop.kind {
            return Err(self.err_at(
                ParseErrorKind::TransferToSameKind {
                    operator,
                    kind: to_kind,
                },
                &to_token,
            ));
        }
        self.follow = "`where`, `;` or the end of the line after the target kind";
        let mut transfer = Transfer {
            prop,
            to_kind,
            join: None,
            source_conditions: Vec::new(),
            target_conditions: Vec::new(),
        };
        if !self.continues_with("where")? {
            return Ok(transfer);
        }
        let mut keyword = self.bump()?;
        loop {
            match self.condition(&keyword)? {
                Cond::Atom(atom) => {
                    if atom.prop.kind == transfer.prop.kind {
                        transfer.source_conditions.push(atom);
                    } else if atom.prop.kind == transfer.to_kind {
                        transfer.target_conditions.push(atom);
                    } else {
                        return Err(self.not_in_transfer(operator, &transfer, &atom.prop));
                    }
                }
                Cond::Join(left, right) => {
                    for side in [&left, &right] {
                        if side.kind != transfer.prop.kind && side.kind != transfer.to_kind {
                            return Err(self.not_in_transfer(operator, &transfer, side));
                        }
                    }
                    let (start, end) = (left.span.start, right.span.end);
                    if left.kind == right.kind {
                        return Err(self.err(
                            ParseErrorKind::JoinSameKind { kind: left.kind },
                            start,
                            end,
                        ));
                    }
                    if transfer.join.is_some() {
                        let found = self.excerpt(start, end);
                        return Err(self.err(
                            ParseErrorKind::SecondJoin { operator, found },
                            start,
                            end,
                        ));
                    }
                    transfer.join = Some(if left.kind == transfer.prop.kind {
                        Join {
                            source: left,
                            target: right,
                        }
                    } else {
                        Join {
                            source: right,
                            target: left,
                        }
                    });
                }
            }
            self.follow = "`and`, `;` or the end of the line after the condition";
            if !self.continues_with("and")? {
                return Ok(transfer);
            }
            keyword = self.bump()?;
        }
    }

    /// `build KIND from c1 {join c2 on p = q} key p {p} [cluster p {p}] [select p {p}]`: the
    /// lists are properties (`kind.name`) separated by spaces; a list ends at a word that is no
    /// property (the next keyword) or at the end of the statement.
    fn build(&mut self) -> Result<Build, ParseError> {
        let (kind, kind_token) = self.name("the new kind after `build`")?;
        self.check_kind(&kind, &kind_token)?;
        self.keyword("from", "`from` after the new kind")?;
        let (from, from_token) = self.name("the first kind read after `from`")?;
        self.check_kind(&from, &from_token)?;
        let mut named = vec![from.clone()];
        let mut joins = Vec::new();
        self.follow = "`join` or `key` after the kinds";
        while self.continues_with("join")? {
            self.bump()?;
            let (joined, token) = self.name("the kind joined after `join`")?;
            self.check_kind(&joined, &token)?;
            if named.contains(&joined) {
                return Err(self.invalid_build(
                    format!("the kind `{joined}` is joined twice; each kind is read once"),
                    &token,
                ));
            }
            self.keyword("on", "`on` after the joined kind")?;
            let keyword = self.peek()?.clone();
            let Cond::Join(left, right) = self.condition(&keyword)? else {
                return Err(self.invalid_build(
                    format!("`join {joined} on` compares two properties (`a.p = {joined}.q`)"),
                    &keyword,
                ));
            };
            let (known, new) = if right.kind == joined {
                (left, right)
            } else {
                (right, left)
            };
            if new.kind != joined || !named.contains(&known.kind) {
                let found = self.excerpt(left_start(&known, &new), self.last_end);
                let kind = ParseErrorKind::InvalidBuild {
                    message: format!(
                        "`join {joined} on {found}` must compare a property of `{joined}` with one of a kind named before it ({})",
                        named.join(", ")
                    ),
                };
                return Err(self.err(kind, left_start(&known, &new), self.last_end));
            }
            named.push(joined.clone());
            joins.push(BuildJoin {
                kind: joined,
                known,
                new,
            });
        }
        if named.contains(&kind) {
            return Err(self.invalid_build(
                format!("the new kind `{kind}` is also read; build into a kind of its own"),
                &kind_token,
            ));
        }
        if !self.continues_with("key")? {
            let token = self.peek()?.clone();
            return Err(self.expected(&token, "`join` or `key` after the kinds"));
        }
        self.bump()?;
        let key = self.build_list("key", &named)?;
        let mut cluster = Vec::new();
        let mut select = Vec::new();
        if self.continues_with("cluster")? {
            self.bump()?;
            cluster = self.build_list("cluster", &named)?;
        }
        if self.continues_with("select")? {
            self.bump()?;
            select = self.build_list("select", &named)?;
        }
        let mut seen = std::collections::BTreeSet::new();
        for p in key.iter().chain(&cluster).chain(&select) {
            if !seen.insert(Build::column_name(p)) {
                let kind = ParseErrorKind::InvalidBuild {
                    message: format!(
                        "the column `{}` (of `{p}`) is named twice; name each property once",
                        Build::column_name(p)
                    ),
                };
                return Err(self.err(kind, p.span.start, p.span.end));
            }
        }
        self.follow = "`cluster`, `select`, `;` or the end of the line after the properties";
        Ok(Build {
            kind,
            from,
            joins,
            key,
            cluster,
            select,
        })
    }

    /// The properties after `key`, `cluster` or `select`: at least one, each of a kind read.
    fn build_list(
        &mut self,
        keyword: &'static str,
        named: &[String],
    ) -> Result<Vec<PropRef>, ParseError> {
        let mut out = Vec::new();
        loop {
            let is_property =
                self.peek()?.name().is_some() && matches!(self.peek_at(1)?.tok, Tok::Dot);
            if !is_property {
                if out.is_empty() {
                    let token = self.peek()?.clone();
                    return Err(self.expected(
                        &token,
                        format!("a property (`kind.name`) after `{keyword}`"),
                    ));
                }
                return Ok(out);
            }
            let p = self.prop(&format!("after `{keyword}`"))?;
            if !named.contains(&p.kind) {
                let kind = ParseErrorKind::InvalidBuild {
                    message: format!(
                        "`{p}` is not of a kind read (read: {}); add `join {} on ...`",
                        named.join(", "),
                        p.kind
                    ),
                };
                return Err(self.err(kind, p.span.start, p.span.end));
            }
            if !p.is_top_level() {
                let kind = ParseErrorKind::InvalidBuild {
                    message: format!("`{p}` is nested; a build reads top-level properties"),
                };
                return Err(self.err(kind, p.span.start, p.span.end));
            }
            out.push(p);
        }
    }

    fn invalid_build(&self, message: String, token: &Token) -> ParseError {
        self.err_at(ParseErrorKind::InvalidBuild { message }, token)
    }

    fn not_in_transfer(
        &self,
        operator: &'static str,
        transfer: &Transfer,
        prop: &PropRef,
    ) -> ParseError {
        let kind = ParseErrorKind::ConditionKindNotInTransfer {
            operator,
            source_kind: transfer.prop.kind.clone(),
            target_kind: transfer.to_kind.clone(),
            found: self.excerpt(prop.span.start, prop.span.end),
        };
        self.err(kind, prop.span.start, prop.span.end)
    }

    /// `[where cond {and cond}]` of add, delete and rename: literal atoms on `kind`.
    fn selection(&mut self, operator: &'static str, kind: &str) -> Result<Vec<Atom>, ParseError> {
        let mut atoms = Vec::new();
        if !self.continues_with("where")? {
            return Ok(atoms);
        }
        let mut keyword = self.bump()?;
        loop {
            match self.condition(&keyword)? {
                Cond::Join(_, right) => {
                    let found = self.excerpt(right.span.start, right.span.end);
                    let kind = ParseErrorKind::JoinOutsideTransfer { operator, found };
                    return Err(self.err(kind, right.span.start, right.span.end));
                }
                Cond::Atom(atom) => {
                    if atom.prop.kind != kind {
                        let (start, end) = (atom.prop.span.start, atom.prop.span.end);
                        let found = self.excerpt(start, end);
                        let kind = ParseErrorKind::ConditionOnOtherKind {
                            operator,
                            allowed: kind.to_owned(),
                            found,
                        };
                        return Err(self.err(kind, start, end));
                    }
                    atoms.push(atom);
                }
            }
            self.follow = "`and`, `;` or the end of the line after the condition";
            if !self.continues_with("and")? {
                return Ok(atoms);
            }
            keyword = self.bump()?;
        }
    }

    /// `kind.path = value` or `kind.path = kind2.path2`, after `keyword` (`where`/`and`).
    fn condition(&mut self, keyword: &Token) -> Result<Cond, ParseError> {
        self.skip_newlines()?;
        let context = format!("after `{}`", self.excerpt(keyword.start, keyword.end));
        let prop = self.prop(&context)?;
        let eq = self.bump()?;
        if !matches!(eq.tok, Tok::Eq) {
            return Err(self.expected(
                &eq,
                "`=` after the property (a condition is `kind.name = value`)",
            ));
        }
        let is_property = self.peek()?.name().is_some() && matches!(self.peek_at(1)?.tok, Tok::Dot);
        if is_property {
            let other = self.prop("after `=`")?;
            return Ok(Cond::Join(prop, other));
        }
        let value = self.value("a value after `=`")?;
        Ok(Cond::Atom(Atom { prop, value }))
    }

    /// `kind.name{.name}`.
    fn prop(&mut self, context: &str) -> Result<PropRef, ParseError> {
        let first = self.bump()?;
        let Some(kind) = first.name().map(str::to_owned) else {
            return Err(self.expected(&first, format!("a property (`kind.name`) {context}")));
        };
        self.check_kind(&kind, &first)?;
        let dot = self.bump()?;
        if !matches!(dot.tok, Tok::Dot) {
            return Err(self.err_at(
                ParseErrorKind::MissingDot {
                    kind,
                    found: self.describe(&dot),
                },
                &dot,
            ));
        }
        let (name, _) = self.name("a property name after `.`")?;
        let mut path = vec![name];
        path.extend(self.rest_of_path()?);
        Ok(PropRef {
            kind,
            path,
            span: self.span(first.start, self.last_end),
        })
    }

    /// `{.name}`.
    fn rest_of_path(&mut self) -> Result<Vec<String>, ParseError> {
        let mut path = Vec::new();
        while matches!(self.peek()?.tok, Tok::Dot) {
            self.bump()?;
            path.push(self.name("a property name after `.`")?.0);
        }
        Ok(path)
    }

    /// A name: an identifier (keywords included) or a backtick-quoted name.
    fn name(&mut self, expected: &str) -> Result<(String, Token), ParseError> {
        let token = self.bump()?;
        if let Some(name) = token.name() {
            return Ok((name.to_owned(), token));
        }
        let mut found = self.describe(&token);
        if matches!(token.tok, Tok::Str(_) | Tok::Int(_) | Tok::Float(_)) {
            found.push_str(" (names other than identifiers are quoted in backticks)");
        }
        let kind = ParseErrorKind::Expected {
            expected: expected.to_owned(),
            found,
        };
        Err(self.err_at(kind, &token))
    }

    fn check_kind(&self, kind: &str, token: &Token) -> Result<(), ParseError> {
        if kind.is_empty() || kind.chars().any(char::is_control) {
            return Err(self.err_at(
                ParseErrorKind::InvalidKind {
                    name: kind.to_owned(),
                },
                token,
            ));
        }
        Ok(())
    }

    fn keyword(&mut self, word: &str, expected: &str) -> Result<(), ParseError> {
        let token = self.bump()?;
        if token.is_word(word) {
            Ok(())
        } else {
            Err(self.expected(&token, expected))
        }
    }

    /// A literal.
    fn value(&mut self, expected: &str) -> Result<Value, ParseError> {
        let token = self.bump()?;
        let literals = "(a string, number, `true`, `false`, `null`, or a JSON array or object)";
        Ok(match &token.tok {
            Tok::Str(s) => Value::String(s.clone()),
            Tok::Int(i) => Value::Int(*i),
            Tok::Float(f) => Value::Float(*f),
            Tok::Json(v) => v.clone(),
            Tok::Word(w) if w.eq_ignore_ascii_case("true") => Value::Bool(true),
            Tok::Word(w) if w.eq_ignore_ascii_case("false") => Value::Bool(false),
            Tok::Word(w) if w.eq_ignore_ascii_case("null") => Value::Null,
            Tok::Word(w) => {
                let found = format!("`{w}` (a string is written in quotes: \"{w}\")");
                let kind = ParseErrorKind::Expected {
                    expected: format!("{expected} {literals}"),
                    found,
                };
                return Err(self.err_at(kind, &token));
            }
            _ => return Err(self.expected(&token, format!("{expected} {literals}"))),
        })
    }
}

/// Where the first of two properties was written.
fn left_start(a: &PropRef, b: &PropRef) -> usize {
    a.span.start.min(b.span.start)
}

/// The operator probably meant by an unknown word.
pub(super) fn suggest(word: &str) -> Option<&'static str> {
    const SYNONYMS: [(&str, &str); 10] = [
        ("remove", "delete"),
        ("drop", "delete"),
        ("del", "delete"),
        ("unset", "delete"),
        ("set", "add"),
        ("insert", "add"),
        ("mv", "move"),
        ("cp", "copy"),
        ("ren", "rename"),
        ("alter", "rename"),
    ];
    let word = word.to_ascii_lowercase();
    if let Some((_, op)) = SYNONYMS.iter().find(|(w, _)| *w == word) {
        return Some(op);
    }
    let limit = if word.len() <= 4 { 1 } else { 2 };
    OPERATORS
        .iter()
        .map(|op| (levenshtein(&word, op), *op))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, op)| op)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}
