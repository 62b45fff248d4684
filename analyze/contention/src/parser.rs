//! Parses the `.mc` text into a checked [`Grammar`] (format: docs/contention.md).

use std::collections::{BTreeMap, HashMap};

use crate::error::{Error, Span};
use crate::grammar::{
    Grammar, KeyDecl, Production, Regex, Template, Term, USER_SORT, WriteExpr, WriteOp,
};
use crate::lexer::{Tok, lex};

/// A template before its constructor is resolved.
#[derive(Debug, Clone)]
struct RawTemplate {
    name: String,
    args: Vec<Term>,
    span: Span,
}

#[derive(Debug, Clone)]
enum RawRegex {
    Eps,
    Atom(RawTemplate),
    Seq(Vec<RawRegex>),
    Alt(Vec<RawRegex>),
    Star(Box<RawRegex>),
    Plus(Box<RawRegex>),
    Opt(Box<RawRegex>),
}

struct RawProduction {
    lhs: RawTemplate,
    rhs: RawRegex,
}

struct RawWrite {
    op: WriteOp,
    writer: Term,
    key: RawTemplate,
    span: Span,
}

#[derive(Default)]
struct RawFile {
    keys: Vec<KeyDecl>,
    domains: BTreeMap<String, Vec<String>>,
    root: Option<(RawRegex, Span)>,
    productions: Vec<RawProduction>,
    writes: Vec<RawWrite>,
}

struct Parser {
    toks: Vec<(Tok, Span)>,
    pos: usize,
    /// Open parentheses of the current expression (bounded, so deep nesting is an error, not a stack overflow).
    nesting: usize,
}

/// The deepest nesting of parentheses accepted in an expression.
const MAX_NESTING: usize = 100;

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos.min(self.toks.len() - 1)].0
    }
    fn peek_at(&self, n: usize) -> &Tok {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)].0
    }
    fn span(&self) -> Span {
        self.toks[self.pos.min(self.toks.len() - 1)].1
    }
    fn next(&mut self) -> (Tok, Span) {
        let t = self.toks[self.pos.min(self.toks.len() - 1)].clone();
        self.pos += 1;
        t
    }
    fn expect(&mut self, want: &Tok, what: &str) -> Result<Span, Error> {
        if self.peek() == want {
            Ok(self.next().1)
        } else {
            Err(Error::new(
                self.span(),
                format!("expected {what}, found {}", self.peek().describe()),
            ))
        }
    }
    fn ident(&mut self, what: &str) -> Result<(String, Span), Error> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                let span = self.next().1;
                Ok((s, span))
            }
            other => Err(Error::new(
                self.span(),
                format!("expected {what}, found {}", other.describe()),
            )),
        }
    }
    fn skip_newlines(&mut self) {
        while self.peek() == &Tok::Newline {
            self.pos += 1;
        }
    }
    fn end_statement(&mut self) -> Result<(), Error> {
        match self.peek() {
            Tok::Newline | Tok::Eof => {
                self.skip_newlines();
                Ok(())
            }
            other => Err(Error::new(
                self.span(),
                format!(
                    "expected the end of the statement, found {} (one statement per line)",
                    other.describe()
                ),
            )),
        }
    }

    fn file(&mut self) -> Result<RawFile, Error> {
        let mut f = RawFile::default();
        self.skip_newlines();
        while self.peek() != &Tok::Eof {
            let span = self.span();
            match self.peek().clone() {
                Tok::Ident(w) if w == "key" && matches!(self.peek_at(1), Tok::Ident(_)) => {
                    self.next();
                    f.keys.push(self.key_decl(span)?);
                }
                Tok::Ident(w) if w == "domain" && matches!(self.peek_at(1), Tok::Ident(_)) => {
                    self.next();
                    self.domain(&mut f, span)?;
                }
                Tok::Ident(w) if w == "root" && self.peek_at(1) == &Tok::Define => {
                    self.next();
                    self.next();
                    self.root(&mut f, span)?;
                }
                Tok::Ident(w)
                    if (w.starts_with("put_") || w.starts_with("del_"))
                        && matches!(self.peek_at(1), Tok::LParen | Tok::Str(_)) =>
                {
                    self.next();
                    f.writes.push(self.write(&w, span)?);
                }
                Tok::Ident(_) => {
                    let lhs = self.template()?;
                    self.expect(&Tok::Define, "`::=` after the key of a production")?;
                    self.skip_newlines();
                    let rhs = self.regex()?;
                    f.productions.push(RawProduction { lhs, rhs });
                }
                other => {
                    return Err(Error::new(
                        span,
                        format!(
                            "expected a statement (`key`, `domain`, `root ::=`, a production or `put_u(...)`), found {}",
                            other.describe()
                        ),
                    ));
                }
            }
            self.end_statement()?;
        }
        Ok(f)
    }

    /// `domain SORT = v1, v2, ...` after `domain`.
    fn domain(&mut self, f: &mut RawFile, span: Span) -> Result<(), Error> {
        let (sort, _) = self.ident("a sort name")?;
        self.expect(&Tok::Equals, "`=`")?;
        let mut vals: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        loop {
            match self.next() {
                (Tok::Ident(v) | Tok::Str(v), s) => {
                    // A repeated name would make two "different" users one.
                    if !seen.insert(v.clone()) {
                        return Err(Error::new(
                            s,
                            format!(
                                "domain `{sort}` names `{v}` twice; give each value once (values are distinct by name)"
                            ),
                        ));
                    }
                    vals.push(v);
                }
                (t, s) => {
                    return Err(Error::new(
                        s,
                        format!("expected a value name, found {}", t.describe()),
                    ));
                }
            }
            if self.peek() != &Tok::Comma {
                break;
            }
            self.next();
        }
        if f.domains.insert(sort.clone(), vals).is_some() {
            return Err(Error::new(
                span,
                format!("domain `{sort}` is given twice; keep one"),
            ));
        }
        Ok(())
    }

    /// `root ::= REGEX` after `root ::=`.
    fn root(&mut self, f: &mut RawFile, span: Span) -> Result<(), Error> {
        self.skip_newlines();
        let r = self.regex()?;
        if f.root.is_some() {
            return Err(Error::new(
                span,
                "a second `root` production; merge them with `|`",
            ));
        }
        f.root = Some((r, span));
        Ok(())
    }

    /// `put_u(key, v)` / `del_u(key)` (or with a quoted writer) after the word `w`.
    fn write(&mut self, w: &str, span: Span) -> Result<RawWrite, Error> {
        let op = if w.starts_with("put_") {
            WriteOp::Put
        } else {
            WriteOp::Del
        };
        let writer = if w.len() > 4 {
            Term::Var(w[4..].to_owned())
        } else {
            match self.next() {
                (Tok::Str(s), _) => Term::Const(s),
                (_, s) => {
                    return Err(Error::new(
                        s,
                        "expected the writer after `put_`/`del_`, e.g. `put_u(...)`",
                    ));
                }
            }
        };
        self.expect(&Tok::LParen, "`(`")?;
        let key = self.template()?;
        if self.peek() == &Tok::Comma {
            if op == WriteOp::Del {
                return Err(Error::new(self.span(), "`del_u(k)` takes only the key"));
            }
            self.next();
            // The value: ignored by the analysis (only keys matter).
            self.ident("a value variable, e.g. `v`")?;
        }
        self.expect(&Tok::RParen, "`)`")?;
        Ok(RawWrite {
            op,
            writer,
            key,
            span,
        })
    }

    fn key_decl(&mut self, span: Span) -> Result<KeyDecl, Error> {
        let (name, _) = self.ident("a key constructor name")?;
        let mut sorts = Vec::new();
        if self.peek() == &Tok::LParen {
            self.next();
            sorts = self.comma_list(|p| Ok(p.ident("a sort name, e.g. `user`")?.0))?;
            self.expect(&Tok::RParen, "`)`")?;
        }
        Ok(KeyDecl { name, sorts, span })
    }

    /// Items separated by commas up to (not including) a `)`; none when it follows at once.
    fn comma_list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<T, Error>,
    ) -> Result<Vec<T>, Error> {
        let mut items = Vec::new();
        if self.peek() == &Tok::RParen {
            return Ok(items);
        }
        loop {
            items.push(item(self)?);
            if self.peek() != &Tok::Comma {
                return Ok(items);
            }
            self.next();
        }
    }

    fn template(&mut self) -> Result<RawTemplate, Error> {
        let (name, span) = self.ident("a key, e.g. `comments(u, a)`")?;
        let mut args = Vec::new();
        // Arguments follow the name directly: `k(x)`; `k (x)` is `k` then a group.
        let adjacent = self.span().line == span.line
            && self.span().col as usize == span.col as usize + name.chars().count();
        if self.peek() == &Tok::LParen && adjacent {
            self.next();
            args = self.comma_list(|p| match p.next() {
                (Tok::Ident(v), _) => Ok(Term::Var(v)),
                (Tok::Str(c), _) => Ok(Term::Const(c)),
                (t, s) => Err(Error::new(
                    s,
                    format!(
                        "expected a variable or a \"constant\", found {}",
                        t.describe()
                    ),
                )),
            })?;
            self.expect(&Tok::RParen, "`)` closing the key")?;
        }
        Ok(RawTemplate { name, args, span })
    }

    fn regex(&mut self) -> Result<RawRegex, Error> {
        let mut alts = vec![self.seq()?];
        while self.peek() == &Tok::Bar {
            self.next();
            self.skip_newlines();
            alts.push(self.seq()?);
        }
        Ok(if alts.len() == 1 {
            alts.remove(0)
        } else {
            RawRegex::Alt(alts)
        })
    }

    fn seq(&mut self) -> Result<RawRegex, Error> {
        let mut items = Vec::new();
        loop {
            match self.peek() {
                Tok::Ident(_) | Tok::LParen | Tok::Eps => items.push(self.postfix()?),
                Tok::Comma if !items.is_empty() => {
                    self.next();
                }
                _ => break,
            }
        }
        match items.len() {
            0 => Err(Error::new(
                self.span(),
                format!(
                    "expected a key, `(`, or `eps`, found {}",
                    self.peek().describe()
                ),
            )),
            1 => Ok(items.remove(0)),
            _ => Ok(RawRegex::Seq(items)),
        }
    }

    fn postfix(&mut self) -> Result<RawRegex, Error> {
        let mut r = match self.peek() {
            Tok::Eps => {
                self.next();
                RawRegex::Eps
            }
            Tok::LParen => {
                let span = self.next().1;
                self.nesting += 1;
                if self.nesting > MAX_NESTING {
                    return Err(Error::new(
                        span,
                        format!(
                            "parentheses nested more than {MAX_NESTING} deep; simplify the expression"
                        ),
                    ));
                }
                let r = self.regex()?;
                self.nesting -= 1;
                self.expect(&Tok::RParen, "`)`")?;
                r
            }
            _ => RawRegex::Atom(self.template()?),
        };
        loop {
            r = match self.peek() {
                Tok::Star => RawRegex::Star(Box::new(r)),
                Tok::Plus => RawRegex::Plus(Box::new(r)),
                Tok::Question => RawRegex::Opt(Box::new(r)),
                _ => return Ok(r),
            };
            self.next();
        }
    }
}

/// Parses and checks a grammar file.
///
/// # Errors
/// The first syntax or consistency error, with its line and column.
pub fn parse(src: &str) -> Result<Grammar, Error> {
    let toks = lex(src)?;
    let raw = Parser {
        toks,
        pos: 0,
        nesting: 0,
    }
    .file()?;
    resolve(raw)
}

struct Resolver<'a> {
    keys: &'a [KeyDecl],
    /// The constructor of each name.
    index: HashMap<&'a str, usize>,
    next_occ: usize,
}

impl Resolver<'_> {
    fn ctor(&self, t: &RawTemplate) -> Result<usize, Error> {
        let i = self.index.get(t.name.as_str()).copied().ok_or_else(|| {
            Error::new(
                t.span,
                format!(
                    "unknown key constructor `{}`: declare it with `key {}(SORT, ...)`",
                    t.name, t.name
                ),
            )
        })?;
        let want = self.keys[i].sorts.len();
        if t.args.len() != want {
            return Err(Error::new(
                t.span,
                format!(
                    "`{}` takes {want} argument(s) ({}), found {}",
                    t.name,
                    self.keys[i].sorts.join(", "),
                    t.args.len()
                ),
            ));
        }
        Ok(i)
    }

    /// Resolves a template and records the sort of each variable in `sorts`.
    fn template(
        &self,
        t: &RawTemplate,
        sorts: &mut BTreeMap<String, String>,
    ) -> Result<Template, Error> {
        let ctor = self.ctor(t)?;
        for (i, a) in t.args.iter().enumerate() {
            if let Term::Var(v) = a {
                bind_sort(sorts, v, &self.keys[ctor].sorts[i], t.span)?;
            }
        }
        Ok(Template {
            ctor,
            args: t.args.clone(),
            span: t.span,
        })
    }

    fn regex(
        &mut self,
        r: &RawRegex,
        sorts: &mut BTreeMap<String, String>,
    ) -> Result<Regex, Error> {
        Ok(match r {
            RawRegex::Eps => Regex::Eps,
            RawRegex::Atom(t) => {
                let t = self.template(t, sorts)?;
                self.next_occ += 1;
                Regex::Atom(self.next_occ - 1, t)
            }
            RawRegex::Seq(v) => Regex::Seq(
                v.iter()
                    .map(|r| self.regex(r, sorts))
                    .collect::<Result<_, _>>()?,
            ),
            RawRegex::Alt(v) => Regex::Alt(
                v.iter()
                    .map(|r| self.regex(r, sorts))
                    .collect::<Result<_, _>>()?,
            ),
            RawRegex::Star(r) => Regex::Star(Box::new(self.regex(r, sorts)?)),
            RawRegex::Plus(r) => Regex::Plus(Box::new(self.regex(r, sorts)?)),
            RawRegex::Opt(r) => Regex::Opt(Box::new(self.regex(r, sorts)?)),
        })
    }
}

fn bind_sort(
    sorts: &mut BTreeMap<String, String>,
    var: &str,
    sort: &str,
    span: Span,
) -> Result<(), Error> {
    match sorts.get(var) {
        Some(s) if s != sort => Err(Error::new(
            span,
            format!("variable `{var}` is used both as a `{s}` and as a `{sort}`; rename one"),
        )),
        Some(_) => Ok(()),
        None => {
            sorts.insert(var.to_owned(), sort.to_owned());
            Ok(())
        }
    }
}

fn resolve(raw: RawFile) -> Result<Grammar, Error> {
    check_keys(&raw.keys)?;
    let Some((root, root_span)) = raw.root else {
        return Err(Error::new(
            Span { line: 1, col: 1 },
            "empty grammar: there is no `root ::= ...` production saying which keys start an entity group",
        ));
    };
    let mut r = Resolver {
        keys: &raw.keys,
        index: raw
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.name.as_str(), i))
            .collect(),
        next_occ: 0,
    };
    let root = r.regex(&root, &mut BTreeMap::new())?;
    let mut productions: Vec<Option<Production>> = vec![None; raw.keys.len()];
    for p in &raw.productions {
        production(&mut r, &raw.keys, p, &mut productions)?;
    }
    check_productions(&raw.keys, &productions)?;
    let writes = raw
        .writes
        .iter()
        .map(|w| write_expr(&mut r, w))
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(Grammar {
        keys: raw.keys,
        domains: raw.domains,
        root,
        root_span,
        productions,
        writes,
    })
}

/// Each key is declared once, and none is named like an update expression.
fn check_keys(keys: &[KeyDecl]) -> Result<(), Error> {
    let mut seen = std::collections::HashSet::new();
    for k in keys {
        if !seen.insert(k.name.as_str()) {
            return Err(Error::new(
                k.span,
                format!("key `{}` is declared twice; keep one", k.name),
            ));
        }
        if k.name.starts_with("put_") || k.name.starts_with("del_") {
            return Err(Error::new(
                k.span,
                format!(
                    "key `{}`: names starting with `put_` or `del_` are update expressions; rename it",
                    k.name
                ),
            ));
        }
    }
    Ok(())
}

/// Resolves production `p` into `productions` (by its key's constructor).
fn production(
    r: &mut Resolver<'_>,
    keys: &[KeyDecl],
    p: &RawProduction,
    productions: &mut [Option<Production>],
) -> Result<(), Error> {
    let Some(&ctor) = r.index.get(p.lhs.name.as_str()) else {
        return Err(Error::new(
            p.lhs.span,
            format!(
                "production for undeclared key `{}`: declare it with `key {}(SORT, ...)`",
                p.lhs.name, p.lhs.name
            ),
        ));
    };
    r.ctor(&p.lhs)?;
    let mut sorts = BTreeMap::new();
    let mut params = Vec::new();
    for (i, a) in p.lhs.args.iter().enumerate() {
        match a {
            Term::Var(v) if !params.contains(v) => {
                bind_sort(&mut sorts, v, &keys[ctor].sorts[i], p.lhs.span)?;
                params.push(v.clone());
            }
            _ => {
                return Err(Error::new(
                    p.lhs.span,
                    format!(
                        "the left side of a production takes distinct variables, found `{a}`; use a fresh variable"
                    ),
                ));
            }
        }
    }
    let rhs = r.regex(&p.rhs, &mut sorts)?;
    if productions[ctor].is_some() {
        return Err(Error::new(
            p.lhs.span,
            format!(
                "a second production for `{}`; merge them with `|`",
                p.lhs.name
            ),
        ));
    }
    productions[ctor] = Some(Production {
        ctor,
        params,
        rhs,
        span: p.lhs.span,
    });
    Ok(())
}

/// Every declared key has a production.
fn check_productions(keys: &[KeyDecl], productions: &[Option<Production>]) -> Result<(), Error> {
    for (i, k) in keys.iter().enumerate() {
        if productions[i].is_none() {
            let vars: Vec<String> = (0..k.sorts.len()).map(|j| format!("x{j}")).collect();
            let lhs = if vars.is_empty() {
                k.name.clone()
            } else {
                format!("{}({})", k.name, vars.join(", "))
            };
            return Err(Error::new(
                k.span,
                format!(
                    "key `{}` has no production; add `{lhs} ::= eps` for a leaf",
                    k.name
                ),
            ));
        }
    }
    Ok(())
}

/// Resolves an update expression.
fn write_expr(r: &mut Resolver<'_>, w: &RawWrite) -> Result<WriteExpr, Error> {
    let mut sorts = BTreeMap::new();
    let key = r.template(&w.key, &mut sorts)?;
    if let Term::Var(v) = &w.writer {
        bind_sort(&mut sorts, v, USER_SORT, w.span)?;
    }
    Ok(WriteExpr {
        op: w.op,
        writer: w.writer.clone(),
        key,
        span: w.span,
    })
}
