//! A schema the user gives (`tern advise --compare SCHEMA`): column families in the triple notation
//! the advisor prints, or CQL `CREATE TABLE` statements as it emits them.
//!
//! Triple notation, one column family a line (`#` and `--` start comments):
//! ```text
//! cf1 [Guest.GuestID][][Guest.GuestName, Guest.GuestEmail]
//! byCity [Hotel.HotelCity][Hotel.HotelID, Room.RoomID][Room.RoomRate] via Room.Hotel
//! ```
//! The name is optional (`cfN` by position). `via HOLDER.FK, ...` names the relationships the
//! column family joins along (each by the entity holding the foreign key and its name, as in the
//! model's `fk` line); without it the advisor joins the entities of the attributes along the
//! shortest paths of the model, which is the only way when the model's relationships form no
//! cycle. In CQL, columns are named `entity_field` (lower case), the partition key is the first
//! part of `PRIMARY KEY`, and a `-- ... via ...` comment right before the statement gives the
//! relationships.

use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::column_family::ColumnFamily;
use crate::error::{AdvisorError, Result, Span};
use crate::graph::QueryGraph;
use crate::model::{Attr, Model};

/// A named column family of a given schema.
#[derive(Debug, Clone)]
pub struct GivenCf {
    /// Its name.
    pub name: String,
    /// The column family.
    pub cf: ColumnFamily,
}

/// Parses a schema file: CQL when it holds `CREATE TABLE`, triples otherwise.
///
/// # Errors
/// [`AdvisorError::Input`] naming `file:line:col` and the fix.
pub fn parse(model: &Model, file: &str, text: &str) -> Result<Vec<GivenCf>> {
    let out = if text.to_ascii_uppercase().contains("CREATE TABLE") {
        parse_cql(model, file, text)?
    } else {
        parse_triples(model, file, text)?
    };
    if out.is_empty() {
        return Err(AdvisorError::input(
            &Span {
                file: file.to_string(),
                line: 1,
                col: 1,
            },
            "the schema has no column family: write one `[K][C][V]` a line, or CQL CREATE TABLE statements",
        ));
    }
    let mut names = BTreeSet::new();
    for g in &out {
        if !names.insert(g.name.clone()) {
            return Err(AdvisorError::input(
                &Span {
                    file: file.to_string(),
                    line: 1,
                    col: 1,
                },
                format!("the column family name `{}` is used twice", g.name),
            ));
        }
    }
    Ok(out)
}

fn span(file: &str, line: usize, col: usize) -> Span {
    Span {
        file: file.to_string(),
        line,
        col,
    }
}

/// The line without its comment (`#`, `--`).
fn strip_comment(line: &str) -> &str {
    let cut = [line.find('#'), line.find("--")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(line.len());
    &line[..cut]
}

/// `Entity.Field` to its attribute.
fn attr(model: &Model, name: &str, at: &Span) -> Result<Attr> {
    let name = name.trim();
    let Some((e, f)) = name.split_once('.') else {
        return Err(AdvisorError::input(
            at,
            format!("`{name}` is not an attribute: write `Entity.Field`"),
        ));
    };
    let entity = model.entity(e.trim()).ok_or_else(|| {
        AdvisorError::input(
            at,
            format!(
                "unknown entity `{e}`; the model has: {}",
                crate::workload::name_list(
                    model.entities.iter().map(|x| x.name.as_str()),
                    model.entities.len()
                )
            ),
        )
    })?;
    model.field(entity, f.trim()).ok_or_else(|| {
        let ent = &model.entities[entity];
        AdvisorError::input(
            at,
            format!(
                "`{e}` has no field `{f}`; its fields are: {}",
                crate::workload::name_list(
                    ent.fields.iter().map(|x| x.name.as_str()),
                    ent.fields.len()
                )
            ),
        )
    })
}

/// `HOLDER.FK, ...` to relationship indices.
fn via(model: &Model, text: &str, at: &Span) -> Result<BTreeSet<usize>> {
    let mut out = BTreeSet::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let found = part.split_once('.').and_then(|(e, n)| {
            let e = model.entity(e.trim())?;
            model
                .relationships
                .iter()
                .position(|r| r.from == e && r.name == n.trim())
        });
        match found {
            Some(r) => {
                out.insert(r);
            }
            None => {
                return Err(AdvisorError::input(
                    at,
                    format!(
                        "`{part}` is not a relationship: write the entity holding the foreign key and its name, as in the model's `fk` line (e.g. `Room.Hotel`)"
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// The graph joining `entities`: along `edges` when given (checked), else along the shortest
/// paths of the model from the first entity.
fn graph(
    model: &Model,
    entities: &BTreeSet<usize>,
    edges: Option<BTreeSet<usize>>,
    at: &Span,
) -> Result<QueryGraph> {
    let g = match edges {
        Some(edges) => {
            let mut all = entities.clone();
            for &r in &edges {
                all.insert(model.relationships[r].from);
                all.insert(model.relationships[r].to);
            }
            QueryGraph {
                entities: all,
                edges,
            }
        }
        None => {
            let Some(&root) = entities.iter().next() else {
                return Err(AdvisorError::input(at, "a column family needs attributes"));
            };
            // Breadth first over the model from `root`, then each entity's path back.
            let mut parent: HashMap<usize, (usize, usize)> = HashMap::new();
            let mut queue = VecDeque::from([root]);
            let mut seen = BTreeSet::from([root]);
            while let Some(e) = queue.pop_front() {
                for (r, rel) in model.relationships.iter().enumerate() {
                    let next = if rel.from == e {
                        rel.to
                    } else if rel.to == e {
                        rel.from
                    } else {
                        continue;
                    };
                    if seen.insert(next) {
                        parent.insert(next, (r, e));
                        queue.push_back(next);
                    }
                }
            }
            let mut g = QueryGraph::single(root);
            for &e in entities {
                let mut at_e = e;
                while at_e != root {
                    let Some(&(r, p)) = parent.get(&at_e) else {
                        return Err(AdvisorError::input(
                            at,
                            format!(
                                "`{}` and `{}` are not connected by relationships of the model",
                                model.entities[root].name, model.entities[e].name
                            ),
                        ));
                    };
                    g.entities.insert(at_e);
                    g.edges.insert(r);
                    at_e = p;
                }
            }
            g
        }
    };
    if !g.is_tree(model) {
        return Err(AdvisorError::input(
            at,
            "the relationships given with `via` do not join the column family's entities into one tree",
        ));
    }
    Ok(g)
}

/// Builds and checks one column family.
fn column_family(
    model: &Model,
    key: Vec<Attr>,
    clustering: Vec<Attr>,
    values: Vec<Attr>,
    edges: Option<BTreeSet<usize>>,
    at: &Span,
) -> Result<ColumnFamily> {
    if key.is_empty() {
        return Err(AdvisorError::input(
            at,
            "a column family needs a partition key: the first `[...]` is empty",
        ));
    }
    let entities: BTreeSet<usize> = key
        .iter()
        .chain(&clustering)
        .chain(&values)
        .map(|a| a.entity)
        .collect();
    let g = graph(model, &entities, edges, at)?;
    Ok(ColumnFamily::new(
        key.into_iter().collect(),
        clustering,
        values.into_iter().collect(),
        g,
    ))
}

/// `[NAME] [K][C][V] [via R, ...]` lines.
fn parse_triples(model: &Model, file: &str, text: &str) -> Result<Vec<GivenCf>> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = strip_comment(raw);
        if line.trim().is_empty() {
            continue;
        }
        let col = |s: &str| raw.len() - raw.trim_start().len() + 1 + (line.len() - s.len());
        let at = span(file, i + 1, col(line.trim_start()));
        let Some(open) = line.find('[') else {
            return Err(AdvisorError::input(
                &at,
                "expected a column family `[K][C][V]` (optionally named: `NAME [K][C][V]`)",
            ));
        };
        let name = line[..open].trim();
        let name = if name.is_empty() {
            format!("cf{}", out.len() + 1)
        } else if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            name.to_string()
        } else {
            return Err(AdvisorError::input(
                &at,
                format!("`{name}` is not a column family name: use letters, digits and `_`"),
            ));
        };
        let mut rest = &line[open..];
        let mut parts: Vec<Vec<Attr>> = Vec::new();
        for _ in 0..3 {
            let here = span(file, i + 1, col(rest));
            let Some(body) = rest.trim_start().strip_prefix('[') else {
                return Err(AdvisorError::input(
                    &here,
                    "expected `[`: a column family is three bracketed lists `[K][C][V]`",
                ));
            };
            let Some(close) = body.find(']') else {
                return Err(AdvisorError::input(&here, "missing `]`"));
            };
            let attrs = body[..close]
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(|a| attr(model, a, &here))
                .collect::<Result<Vec<_>>>()?;
            parts.push(attrs);
            rest = &body[close + 1..];
        }
        let tail = rest.trim();
        let edges = if tail.is_empty() {
            None
        } else if let Some(list) = tail.strip_prefix("via ") {
            Some(via(model, list, &span(file, i + 1, col(rest)))?)
        } else {
            return Err(AdvisorError::input(
                &span(file, i + 1, col(rest)),
                format!(
                    "unexpected `{tail}` after `[K][C][V]`: only `via HOLDER.FK, ...` may follow"
                ),
            ));
        };
        let values = parts.pop().unwrap_or_default();
        let clustering = parts.pop().unwrap_or_default();
        let key = parts.pop().unwrap_or_default();
        let cf = column_family(model, key, clustering, values, edges, &at)?;
        out.push(GivenCf { name, cf });
    }
    Ok(out)
}

/// CQL `CREATE TABLE name (col type, ..., PRIMARY KEY ((k, ...), c, ...)) ...;` statements.
fn parse_cql(model: &Model, file: &str, text: &str) -> Result<Vec<GivenCf>> {
    let mut columns: HashMap<String, Attr> = HashMap::new();
    for (e, ent) in model.entities.iter().enumerate() {
        for f in 0..ent.fields.len() {
            let a = Attr {
                entity: e,
                field: f,
            };
            columns.insert(ColumnFamily::column(model, a), a);
        }
    }
    // Statements end with `;`; remember where each starts and the last comment's `via`.
    let mut out = Vec::new();
    let mut stmt = String::new();
    let mut start = (0, 0);
    let mut via_comment: Option<(String, Span)> = None;
    for (i, raw) in text.lines().enumerate() {
        if let Some(c) = raw.find("--")
            && let Some(v) = raw[c..].find(" via ")
        {
            let list = raw[c + v + 5..].trim().to_string();
            via_comment = Some((list, span(file, i + 1, c + v + 6)));
        }
        let line = strip_comment(raw);
        for (j, ch) in line.char_indices() {
            if stmt.trim().is_empty() && !ch.is_whitespace() {
                start = (i + 1, j + 1);
                stmt.clear();
            }
            if ch == ';' {
                let at = span(file, start.0, start.1);
                let edges = match via_comment.take() {
                    Some((list, vspan)) => Some(via(model, &list, &vspan)?),
                    None => None,
                };
                out.push(create_table(model, &columns, &stmt, edges, &at)?);
                stmt.clear();
            } else {
                stmt.push(ch);
            }
        }
        stmt.push(' ');
    }
    if !stmt.trim().is_empty() {
        return Err(AdvisorError::input(
            &span(file, start.0, start.1),
            "a statement does not end with `;`",
        ));
    }
    Ok(out)
}

/// One `CREATE TABLE` statement (without its `;`).
fn create_table(
    model: &Model,
    columns: &HashMap<String, Attr>,
    stmt: &str,
    edges: Option<BTreeSet<usize>>,
    at: &Span,
) -> Result<GivenCf> {
    let bad = |m: &str| AdvisorError::input(at, m.to_string());
    let upper = stmt.to_ascii_uppercase();
    let head = upper
        .trim_start()
        .strip_prefix("CREATE TABLE")
        .ok_or_else(|| bad("expected `CREATE TABLE name (...)`"))?;
    let offset = stmt.len() - head.len();
    let open = stmt[offset..]
        .find('(')
        .map(|o| o + offset)
        .ok_or_else(|| bad("expected `(` after the table's name"))?;
    let mut name = stmt[offset..open].trim();
    if upper[offset..open].trim().starts_with("IF NOT EXISTS") {
        name = name[13..].trim();
    }
    let name = name.rsplit('.').next().unwrap_or(name).trim().to_string();
    // The body: up to the matching `)`.
    let mut depth = 0;
    let mut close = None;
    for (k, ch) in stmt[open..].char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + k);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close.ok_or_else(|| bad("missing `)` closing the column list"))?;
    let body = &stmt[open + 1..close];
    // Split at top-level commas.
    let mut items = Vec::new();
    let (mut depth, mut from) = (0, 0);
    for (k, ch) in body.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(body[from..k].trim());
                from = k + 1;
            }
            _ => {}
        }
    }
    items.push(body[from..].trim());
    let column = |c: &str| -> Result<Attr> {
        let c = c.trim().trim_matches('"').to_ascii_lowercase();
        columns.get(&c).copied().ok_or_else(|| {
            bad(&format!(
                "column `{c}` of `{name}` is no attribute of the model: columns are named `entity_field` in lower case, as `tern advise` prints them"
            ))
        })
    };
    let mut all = Vec::new();
    let mut key = Vec::new();
    let mut clustering = Vec::new();
    for item in items.into_iter().filter(|i| !i.is_empty()) {
        let up = item.to_ascii_uppercase();
        if let Some(pk) = up.strip_prefix("PRIMARY KEY") {
            let pk = item[item.len() - pk.len()..].trim();
            let inner = pk
                .strip_prefix('(')
                .and_then(|p| p.strip_suffix(')'))
                .ok_or_else(|| bad("expected `PRIMARY KEY ((k, ...), c, ...)`"))?
                .trim();
            let (k, rest) = if let Some(r) = inner.strip_prefix('(') {
                let end = r
                    .find(')')
                    .ok_or_else(|| bad("missing `)` after the partition key"))?;
                (&r[..end], &r[end + 1..])
            } else {
                inner.split_once(',').unwrap_or((inner, ""))
            };
            key = k
                .split(',')
                .filter(|c| !c.trim().is_empty())
                .map(column)
                .collect::<Result<_>>()?;
            clustering = rest
                .split(',')
                .filter(|c| !c.trim().is_empty())
                .map(column)
                .collect::<Result<_>>()?;
        } else {
            let col = item.split_whitespace().next().unwrap_or_default();
            all.push(column(col)?);
        }
    }
    if key.is_empty() {
        return Err(bad(&format!("`{name}` has no PRIMARY KEY")));
    }
    let values: Vec<Attr> = all
        .into_iter()
        .filter(|a| !key.contains(a) && !clustering.contains(a))
        .collect();
    let cf = column_family(model, key, clustering, values, edges, at)?;
    Ok(GivenCf { name, cf })
}
