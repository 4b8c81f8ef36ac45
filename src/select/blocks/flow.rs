//! Maximum flow (Dinic) in f64 for the small transport networks of the
//! truncated LP (`docs/schemes/is.md#truncated-lp`) and of `P*` (`docs/schemes/optimal.md`).
//!
//! No crate fits: the maintained max-flow implementations want integer or
//! `Ord` capacities, and these are probabilities. Residual capacities below
//! [`EPSILON`] count as saturated so that rounding cannot loop forever.

use std::collections::VecDeque;

/// Residual capacity treated as zero.
pub const EPSILON: f64 = 1e-18;

#[derive(Clone, Debug)]
struct Edge {
    to: usize,
    capacity: f64,
    flow: f64,
}

/// A directed network; edges are stored in pairs (edge, reverse edge).
#[derive(Clone, Debug, Default)]
pub struct FlowNetwork {
    edges: Vec<Edge>,
    adjacency: Vec<Vec<usize>>,
}

/// Handle to an edge added with [`FlowNetwork::add_edge`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgeId(usize);

impl FlowNetwork {
    pub fn new(nodes: usize) -> Self {
        Self {
            edges: Vec::new(),
            adjacency: vec![Vec::new(); nodes],
        }
    }

    /// An empty network with room reserved for `edges` edges (and their
    /// reverses), so building it does not reallocate: the IS tournament
    /// builds one per stage, and allocation was a visible share of it.
    pub fn with_capacity(nodes: usize, edges: usize) -> Self {
        Self {
            edges: Vec::with_capacity(2 * edges),
            adjacency: vec![Vec::new(); nodes],
        }
    }

    /// Adds a node and returns its index; `degree` edges' room reserved.
    pub fn add_node_with_degree(&mut self, degree: usize) -> usize {
        self.adjacency.push(Vec::with_capacity(degree));
        self.adjacency.len() - 1
    }

    /// Adds a node and returns its index.
    pub fn add_node(&mut self) -> usize {
        self.adjacency.push(Vec::new());
        self.adjacency.len() - 1
    }

    /// Adds `from → to` with a capacity (`f64::INFINITY` for unbounded).
    pub fn add_edge(&mut self, from: usize, to: usize, capacity: f64) -> EdgeId {
        let id = self.edges.len();
        self.edges.push(Edge {
            to,
            capacity,
            flow: 0.0,
        });
        self.edges.push(Edge {
            to: from,
            capacity: 0.0,
            flow: 0.0,
        });
        self.adjacency[from].push(id);
        self.adjacency[to].push(id + 1);
        EdgeId(id)
    }

    /// The flow on an edge after [`FlowNetwork::max_flow`].
    pub fn flow(&self, edge: EdgeId) -> f64 {
        self.edges[edge.0].flow
    }

    fn residual(&self, e: usize) -> f64 {
        self.edges[e].capacity - self.edges[e].flow
    }

    /// Pushes a maximum flow from `source` to `sink`; returns its value.
    pub fn max_flow(&mut self, source: usize, sink: usize) -> f64 {
        let mut total = 0.0;
        let n = self.adjacency.len();
        loop {
            let level = self.levels(source);
            if level[sink] == usize::MAX {
                return total;
            }
            let mut next = vec![0usize; n];
            loop {
                let pushed = self.augment(source, sink, f64::INFINITY, &level, &mut next);
                if pushed <= EPSILON {
                    break;
                }
                total += pushed;
            }
        }
    }

    /// BFS distances from the source over edges with residual capacity.
    fn levels(&self, source: usize) -> Vec<usize> {
        let mut level = vec![usize::MAX; self.adjacency.len()];
        level[source] = 0;
        let mut queue = VecDeque::from([source]);
        while let Some(u) = queue.pop_front() {
            for &e in &self.adjacency[u] {
                let v = self.edges[e].to;
                if level[v] == usize::MAX && self.residual(e) > EPSILON {
                    level[v] = level[u] + 1;
                    queue.push_back(v);
                }
            }
        }
        level
    }

    /// One augmenting path in the level graph (DFS with per-node edge cursors).
    fn augment(
        &mut self,
        u: usize,
        sink: usize,
        limit: f64,
        level: &[usize],
        next: &mut [usize],
    ) -> f64 {
        if u == sink {
            return limit;
        }
        while next[u] < self.adjacency[u].len() {
            let e = self.adjacency[u][next[u]];
            let v = self.edges[e].to;
            let room = self.residual(e);
            if room > EPSILON && level[v] == level[u] + 1 {
                let pushed = self.augment(v, sink, limit.min(room), level, next);
                if pushed > EPSILON {
                    self.edges[e].flow += pushed;
                    self.edges[e ^ 1].flow -= pushed;
                    return pushed;
                }
            }
            next[u] += 1;
        }
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_flow_of_a_textbook_network() {
        // CLRS figure 26.1: value 23.
        let mut g = FlowNetwork::new(6);
        for (u, v, c) in [
            (0, 1, 16.0),
            (0, 2, 13.0),
            (2, 1, 4.0),
            (1, 3, 12.0),
            (3, 2, 9.0),
            (2, 4, 14.0),
            (4, 3, 7.0),
            (3, 5, 20.0),
            (4, 5, 4.0),
        ] {
            g.add_edge(u, v, c);
        }
        assert!((g.max_flow(0, 5) - 23.0).abs() < 1e-12);
    }

    #[test]
    fn unbounded_middle_edges_and_flow_conservation() {
        let mut g = FlowNetwork::new(4);
        let a = g.add_edge(0, 1, 0.3);
        let b = g.add_edge(0, 2, 0.5);
        let m = g.add_edge(1, 2, f64::INFINITY);
        let c = g.add_edge(2, 3, 0.6);
        assert!((g.max_flow(0, 3) - 0.6).abs() < 1e-15);
        assert!((g.flow(a) + g.flow(b) - g.flow(c)).abs() < 1e-15);
        assert!((g.flow(a) - g.flow(m)).abs() < 1e-15);
    }
}
