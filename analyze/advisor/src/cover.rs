//! Which support queries one update runs: the cheapest set of queries whose answers cover every
//! support query the chosen column families need ([`Query::covers`]: the same rows with at least
//! the attributes needed). The program ([`crate::bip`]) lets any support query of the update cover
//! the ones it answers; this computes the same choice for a given schema, so the reported update
//! cost is the program's.

use crate::query::Query;

/// Above this many needed queries with the same rows, the exact search over their subsets gives
/// way to running each one no other needed query covers (always a cover; the program may then
/// find a cheaper one, which the solver's cost check logs).
const EXACT_LIMIT: usize = 16;

/// The queries to run: for each, its index in `runners` and the indices in `needed` it answers
/// (every needed query is answered by exactly one). `runners` are the queries that may run with
/// the cost of their cheapest plan over the schema (`None`: no plan). `None` when some needed
/// query is covered by no runner with a plan.
pub fn cheapest(needed: &[&Query], runners: &[(&Query, Option<f64>)]) -> Option<Vec<Run>> {
    let mut runs: Vec<Run> = Vec::new();
    // Needed queries with the same rows (graph, predicates, order, limit) form one class: only
    // within a class can one query cover another.
    let mut classes: Vec<Vec<usize>> = Vec::new();
    for (i, q) in needed.iter().enumerate() {
        match classes.iter_mut().find(|c| same_rows(needed[c[0]], q)) {
            Some(c) => c.push(i),
            None => classes.push(vec![i]),
        }
    }
    for class in classes {
        // Each runner of the class with a plan, and the needed queries of the class it covers
        // (as a bit mask over the class).
        let options: Vec<(usize, f64, u64)> = runners
            .iter()
            .enumerate()
            .filter_map(|(r, (q, cost))| {
                let cost = (*cost)?;
                let mask = class
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| q.covers(needed[**n]))
                    .fold(0u64, |m, (bit, _)| m | (1 << bit));
                (mask != 0).then_some((r, cost, mask))
            })
            .collect();
        let chosen = if class.len() <= EXACT_LIMIT {
            exact(class.len(), &options)?
        } else {
            maximal(&class, needed, runners, &options)?
        };
        for (r, mask) in chosen {
            let served = class
                .iter()
                .enumerate()
                .filter(|(bit, _)| mask & (1 << bit) != 0)
                .map(|(_, n)| *n)
                .collect();
            runs.push(Run { runner: r, served });
        }
    }
    runs.sort_by_key(|r| r.served.iter().min().copied());
    Some(runs)
}

/// One query that runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Its index among the runners.
    pub runner: usize,
    /// The needed queries it answers.
    pub served: Vec<usize>,
}

/// Whether two queries return the same rows (they differ at most in the attributes selected).
fn same_rows(a: &Query, b: &Query) -> bool {
    a.graph == b.graph
        && a.eq == b.eq
        && a.range == b.range
        && a.order == b.order
        && a.limit == b.limit
}

/// The cheapest cover of `n` needed queries by the options (runner, cost, mask), by dynamic
/// programming over the subsets covered; each needed query assigned to one chosen runner.
fn exact(n: usize, options: &[(usize, f64, u64)]) -> Option<Vec<(usize, u64)>> {
    let full = (1u64 << n) - 1;
    let size = 1usize << n;
    let mut best = vec![f64::INFINITY; size];
    let mut how: Vec<Option<(usize, usize)>> = vec![None; size];
    best[0] = 0.0;
    for mask in 0..size {
        if !best[mask].is_finite() {
            continue;
        }
        for (o, (_, cost, cover)) in options.iter().enumerate() {
            let next = (mask as u64 | cover) as usize;
            if next != mask && best[mask] + cost < best[next] - 1e-12 {
                best[next] = best[mask] + cost;
                how[next] = Some((mask, o));
            }
        }
    }
    if !best[full as usize].is_finite() {
        return None;
    }
    let mut out = Vec::new();
    let mut at = full as usize;
    while at != 0 {
        let (prev, o) = how[at]?;
        // This runner answers the needed queries it added.
        out.push((options[o].0, (at ^ prev) as u64));
        at = prev;
    }
    out.reverse();
    Some(out)
}

/// Each needed query no other needed query covers runs, with its cheapest plan; it answers the
/// needed queries it covers that no earlier one took.
fn maximal(
    class: &[usize],
    needed: &[&Query],
    runners: &[(&Query, Option<f64>)],
    options: &[(usize, f64, u64)],
) -> Option<Vec<(usize, u64)>> {
    let mut taken = 0u64;
    let mut out = Vec::new();
    for (bit, &n) in class.iter().enumerate() {
        let q = needed[n];
        let top = !class
            .iter()
            .any(|m| needed[*m] != q && needed[*m].covers(q));
        if !top {
            continue;
        }
        let &(r, _, mask) = options
            .iter()
            .find(|(r, _, m)| m & (1 << bit) != 0 && runners[*r].0 == q)?;
        out.push((r, mask & !taken));
        taken |= mask;
    }
    (taken == (1u64 << class.len()) - 1).then_some(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::graph::QueryGraph;
    use crate::model::Attr;

    fn q(select: &[usize]) -> Query {
        Query {
            graph: QueryGraph::single(0),
            select: select
                .iter()
                .map(|f| Attr {
                    entity: 0,
                    field: *f,
                })
                .collect(),
            eq: BTreeSet::from([Attr {
                entity: 0,
                field: 0,
            }]),
            range: BTreeSet::new(),
            order: Vec::new(),
            limit: None,
        }
    }

    #[test]
    fn a_covered_query_does_not_run_when_its_cover_runs() {
        let (a, b) = (q(&[1]), q(&[1, 2]));
        let runs = cheapest(&[&a, &b], &[(&a, Some(1.0)), (&b, Some(1.5))]).unwrap();
        assert_eq!(
            runs,
            vec![Run {
                runner: 1,
                served: vec![0, 1]
            }]
        );
    }

    #[test]
    fn a_query_covering_two_runs_in_their_place_when_cheaper() {
        let (a, b, c) = (q(&[1]), q(&[2]), q(&[1, 2]));
        let runners = [(&a, Some(1.0)), (&b, Some(1.0)), (&c, Some(1.5))];
        let runs = cheapest(&[&a, &b], &runners).unwrap();
        assert_eq!(
            runs,
            vec![Run {
                runner: 2,
                served: vec![0, 1]
            }]
        );
        // Dearer than both: each runs.
        let runners = [(&a, Some(1.0)), (&b, Some(1.0)), (&c, Some(2.5))];
        let runs = cheapest(&[&a, &b], &runners).unwrap();
        assert_eq!(runs.len(), 2);
    }

    #[test]
    fn different_rows_are_never_shared_and_a_query_without_plan_is_reported() {
        let a = q(&[1]);
        let mut b = q(&[1, 2]);
        b.limit = Some(3);
        let runs = cheapest(&[&a, &b], &[(&a, Some(1.0)), (&b, Some(1.0))]).unwrap();
        assert_eq!(runs.len(), 2);
        assert!(cheapest(&[&a, &b], &[(&a, Some(1.0)), (&b, None)]).is_none());
    }
}
