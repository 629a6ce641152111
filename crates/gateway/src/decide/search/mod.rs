//! Progressive disclosure's search: which of an endpoint's tools answer a
//! question put in plain words.
//!
//! [`ToolSearch`] is what the endpoint's meta-tools ask, so the Groups
//! extension or a `tools/catalog` method can later be served from the
//! same index. [`Catalogue`] is the one kept today: BM25 (the `bm25`
//! crate's embedder; postings of our own) over each tool's name, title,
//! description, parameters and effects, with [`words`]' splitting,
//! stemming and concept tokens. Ranking is deterministic: equal scores
//! go by name.
//!
//! Layer: `decide`.

mod concepts;
pub mod quality;
pub mod words;

use std::collections::HashMap;

use bm25::{EmbedderBuilder, TokenEmbedder};
use serde_json::Value;
use toolgate_protocol::types::Tool;
use toolgate_review::Effect;

use words::Words;

/// One question put to a [`ToolSearch`].
pub struct Question<'a> {
    /// What the model looks for, in plain words.
    pub text: &'a str,
    /// Only tools every effect of which is among these (tools whose
    /// effects cannot be read from their definition are then left out).
    pub effects: Option<&'a [Effect]>,
    /// At most this many.
    pub limit: usize,
    /// Whether the caller may see the tool of this name.
    pub visible: &'a dyn Fn(&str) -> bool,
}

/// A tool that answers, best first.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    /// Its name on the endpoint.
    pub name: String,
    /// How well it answers (BM25; only the order means anything).
    pub score: f32,
}

/// Finds an endpoint's tools by what they do.
pub trait ToolSearch: Send + Sync {
    /// The tools that answer `question`, best first.
    fn find(&self, question: &Question<'_>) -> Vec<Found>;
    /// Whether `text` has any word the search can use.
    fn searchable(&self, text: &str) -> bool;
    /// How many tools it holds.
    fn len(&self) -> usize;
    /// Whether it holds none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One tool as the index holds it.
#[derive(Clone, Debug)]
struct Entry {
    name: String,
    effects: Vec<Effect>,
}

/// A BM25 index of tools.
pub struct Catalogue {
    entries: Vec<Entry>,
    postings: Postings,
}

impl std::fmt::Debug for Catalogue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalogue")
            .field("tools", &self.entries.len())
            .finish()
    }
}

/// What the index reads of a tool: the name and the title twice each (the words a tool is best known by weigh most), the description,
/// each parameter's name and description, and its effects' names.
pub fn document(tool: &Tool, effects: &[Effect]) -> String {
    let mut text = String::new();
    for _ in 0..NAME_WEIGHT {
        text.push_str(&tool.name);
        text.push(' ');
    }
    if let Some(title) = &tool.title {
        for _ in 0..NAME_WEIGHT {
            text.push_str(title);
            text.push(' ');
        }
    }
    if let Some(description) = &tool.description {
        text.push_str(description);
        text.push(' ');
    }
    if let Some(Value::Object(properties)) = tool.input_schema.get("properties") {
        for (name, schema) in properties {
            text.push_str(name);
            text.push(' ');
            if let Some(d) = schema.get("description").and_then(Value::as_str) {
                text.push_str(d);
                text.push(' ');
            }
        }
    }
    for effect in effects {
        text.push_str(effect.label());
        text.push(' ');
    }
    text
}

impl Catalogue {
    /// An index of `tools`: each its name on the endpoint and the
    /// definition the model would read.
    pub fn new<'a>(tools: impl IntoIterator<Item = (&'a str, &'a Tool)>) -> Self {
        let mut entries = Vec::new();
        let mut documents = Vec::new();
        for (name, tool) in tools {
            let effects = toolgate_review::classify_effects(tool);
            documents.push(document(tool, &effects));
            entries.push(Entry {
                name: name.to_owned(),
                effects,
            });
        }
        let corpus: Vec<&str> = documents.iter().map(String::as_str).collect();
        let embedder = EmbedderBuilder::<u32, Words>::with_tokenizer_and_fit_to_corpus(
            Words::default(),
            &corpus,
        )
        .k1(K1)
        .b(B)
        .build();
        let mut postings = Postings::default();
        for (i, document) in documents.iter().enumerate() {
            postings.add(
                i,
                embedder.embed(document).iter().map(|t| (t.index, t.value)),
            );
        }
        postings.weigh(entries.len());
        Self { entries, postings }
    }
}

/// Each token's documents with its BM25 weight there, and its IDF.
///
/// The `bm25` crate's embedder gives the weights; its scorer, which reads
/// every token of every candidate document for each token of a question,
/// took 2 ms a question over 1,000 tools (debug build). Postings read only
/// what a question's tokens name; the scores are the same.
#[derive(Default)]
struct Postings {
    lists: HashMap<u32, Vec<(usize, f32)>>,
    idf: HashMap<u32, f32>,
}

impl Postings {
    /// Document `doc`'s tokens: the first weight of each (a token's
    /// weight is the same at each of its places).
    fn add(&mut self, doc: usize, tokens: impl Iterator<Item = (u32, f32)>) {
        let mut seen = std::collections::HashSet::new();
        for (token, weight) in tokens {
            if seen.insert(token) {
                self.lists.entry(token).or_default().push((doc, weight));
            }
        }
    }

    /// Each token's IDF over `n` documents (BM25's, kept positive).
    fn weigh(&mut self, n: usize) {
        let n = n as f32;
        self.idf = self
            .lists
            .iter()
            .map(|(token, docs)| {
                let df = docs.len() as f32;
                (*token, (1.0 + (n - df + 0.5) / (df + 0.5)).ln())
            })
            .collect();
    }

    /// Every document with a positive score for `question` (one entry per
    /// token, repeats counted), with its score.
    fn scores(&self, question: &[u32], n: usize) -> Vec<(usize, f32)> {
        let mut scores = vec![0f32; n];
        let mut touched = Vec::new();
        for token in question {
            let (Some(docs), Some(idf)) = (self.lists.get(token), self.idf.get(token)) else {
                continue;
            };
            for &(doc, weight) in docs {
                if scores[doc] == 0.0 {
                    touched.push(doc);
                }
                scores[doc] += idf * weight;
            }
        }
        touched
            .into_iter()
            .filter(|&d| scores[d] > 0.0)
            .map(|d| (d, scores[d]))
            .collect()
    }
}

impl Catalogue {
    /// A question's tokens as the index keys them.
    fn question(&self, text: &str) -> Vec<u32> {
        Words::default()
            .tokens(text)
            .iter()
            .map(|t| <u32 as TokenEmbedder>::embed(t))
            .collect()
    }
}

/// How many times a tool's name counts against its description: the
/// words a tool is best known by weigh more, not so much that one shared
/// word of a name outranks a description that answers.
const NAME_WEIGHT: usize = 2;

/// BM25's term saturation: high, because a definition's words repeat
/// rarely and a repeat (in name and description both) means something.
const K1: f32 = 2.0;

/// BM25's length normalisation (the usual 0.75).
const B: f32 = 0.75;

impl ToolSearch for Catalogue {
    fn find(&self, question: &Question<'_>) -> Vec<Found> {
        let query = self.question(question.text);
        let mut matches = self.postings.scores(&query, self.entries.len());
        // Equal scores go by name: the same question, the same order.
        matches.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| self.entries[a.0].name.cmp(&self.entries[b.0].name))
        });
        matches
            .into_iter()
            .filter(|&(doc, _)| {
                let entry = &self.entries[doc];
                let allowed = question.effects.is_none_or(|only| {
                    !entry.effects.is_empty() && entry.effects.iter().all(|e| only.contains(e))
                });
                allowed && (question.visible)(&entry.name)
            })
            .take(question.limit)
            .map(|(doc, score)| Found {
                name: self.entries[doc].name.clone(),
                score,
            })
            .collect()
    }

    fn searchable(&self, text: &str) -> bool {
        !Words::default().stems(text).is_empty()
    }

    fn len(&self) -> usize {
        self.entries.len()
    }
}
