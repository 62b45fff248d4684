//! Thompson automata for the horizontal languages (the regular expressions
//! over a node's children).

use super::grammar::Regex;

/// An ε-NFA whose letters are atom occurrences of one production.
#[derive(Debug, Clone, Default)]
pub(crate) struct Nfa {
    eps: Vec<Vec<usize>>,
    /// `(occurrence, target)` per state.
    pub(crate) atom: Vec<Vec<(usize, usize)>>,
    pub(crate) start: usize,
    pub(crate) accept: usize,
}

impl Nfa {
    pub(crate) fn new(r: &Regex) -> Nfa {
        let mut n = Nfa::default();
        let (s, a) = n.build(r);
        n.start = s;
        n.accept = a;
        n
    }

    fn state(&mut self) -> usize {
        self.eps.push(Vec::new());
        self.atom.push(Vec::new());
        self.eps.len() - 1
    }

    fn build(&mut self, reg: &Regex) -> (usize, usize) {
        match reg {
            Regex::Eps => {
                let s = self.state();
                (s, s)
            }
            Regex::Atom(occ, _) => {
                let s = self.state();
                let a = self.state();
                self.atom[s].push((*occ, a));
                (s, a)
            }
            Regex::Seq(v) => {
                let s = self.state();
                let mut cur = s;
                for r in v {
                    let (rs, ra) = self.build(r);
                    self.eps[cur].push(rs);
                    cur = ra;
                }
                (s, cur)
            }
            Regex::Alt(v) => {
                let s = self.state();
                let a = self.state();
                for r in v {
                    let (rs, ra) = self.build(r);
                    self.eps[s].push(rs);
                    self.eps[ra].push(a);
                }
                (s, a)
            }
            Regex::Star(r) | Regex::Plus(r) | Regex::Opt(r) => {
                let s = self.state();
                let a = self.state();
                let (rs, ra) = self.build(r);
                self.eps[s].push(rs);
                self.eps[ra].push(a);
                if !matches!(reg, Regex::Plus(_)) {
                    self.eps[s].push(a);
                }
                if !matches!(reg, Regex::Opt(_)) {
                    self.eps[ra].push(rs);
                }
                (s, a)
            }
        }
    }

    /// The states reachable from `states` by ε moves.
    pub(crate) fn closure(&self, states: &[usize]) -> Vec<usize> {
        let mut seen = vec![false; self.eps.len()];
        let mut stack: Vec<usize> = states.to_vec();
        let mut out = Vec::new();
        while let Some(s) = stack.pop() {
            if seen[s] {
                continue;
            }
            seen[s] = true;
            out.push(s);
            stack.extend(self.eps[s].iter().copied());
        }
        out.sort_unstable();
        out
    }
}
