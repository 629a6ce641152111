//! How well a [`ToolSearch`] answers a set of questions whose answers are
//! known: recall at k and mean reciprocal rank, with the questions it
//! missed, for the bench and the tests that hold the ranking to its goal.
//!
//! Layer: `decide`.

use super::{Question, ToolSearch};

/// A question and the tools that answer it (any one is a hit).
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Known {
    /// As a model would ask it.
    pub query: String,
    /// Names of the tools that answer it.
    pub answers: Vec<String>,
}

/// What [`judge`] found.
#[derive(Clone, Debug, Default)]
pub struct Quality {
    /// Share of questions with an answer among the first `k` found.
    pub recall: f64,
    /// Mean of 1/rank of the first answer found (0 when none is).
    pub mrr: f64,
    /// Questions without an answer in the first `k`, with what was found.
    pub misses: Vec<(String, Vec<String>)>,
}

/// Ask `search` every question in `known`, `k` results each.
pub fn judge(search: &dyn ToolSearch, known: &[Known], k: usize) -> Quality {
    let all = |_: &str| true;
    let mut hits = 0usize;
    let mut reciprocal = 0f64;
    let mut misses = Vec::new();
    for question in known {
        let found = search.find(&Question {
            text: &question.query,
            effects: None,
            limit: 50,
            visible: &all,
        });
        let rank = found
            .iter()
            .position(|f| question.answers.contains(&f.name));
        if let Some(rank) = rank {
            reciprocal += 1.0 / (rank + 1) as f64;
        }
        if rank.is_some_and(|r| r < k) {
            hits += 1;
        } else {
            let top = found.iter().take(k).map(|f| f.name.clone()).collect();
            misses.push((question.query.clone(), top));
        }
    }
    let n = known.len().max(1) as f64;
    Quality {
        recall: hits as f64 / n,
        mrr: reciprocal / n,
        misses,
    }
}
