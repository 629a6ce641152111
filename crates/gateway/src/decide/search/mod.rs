//! Progressive disclosure's search: which of an endpoint's tools answer a
//! question put in plain words.
//!
//! [`ToolSearch`] is what the endpoint's meta-tools ask, so the Groups
//! extension or a `tools/catalog` method can later be served from the
//! same index. [`Catalogue`] is the one kept today: BM25 (the `bm25`
//! crate's embedder and scorer) over each tool's name, title,
//! description, parameters and effects, with [`words`]' splitting,
//! stemming and concept tokens. Ranking is deterministic: equal scores
//! go by name.
//!
//! Layer: `decide`.

mod concepts;
pub mod quality;
pub mod words;

use bm25::{EmbedderBuilder, Embedding, Scorer, TokenEmbedder, TokenEmbedding};
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
    scorer: Scorer<usize, u32>,
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
        let mut scorer = Scorer::new();
        for (i, document) in documents.iter().enumerate() {
            scorer.upsert(&i, embedder.embed(document));
        }
        Self { entries, scorer }
    }
}

impl Catalogue {
    /// The question as the scorer takes it: one entry per token (the
    /// scorer reads only a question's indices, and sums over repeats).
    fn question(&self, text: &str) -> Embedding<u32> {
        let tokens = Words::default().weighed(text, LITERAL);
        Embedding(
            tokens
                .iter()
                .map(|t| TokenEmbedding {
                    index: <u32 as TokenEmbedder>::embed(t),
                    value: 1.0,
                })
                .collect(),
        )
    }
}

/// How many times a question's own word counts against one word of the
/// same concept. Measured: counting it twice lost 5 points of recall@5;
/// the concepts carry the meaning.
const LITERAL: usize = 1;

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
        let mut matches = self.scorer.matches(&query);
        // The scorer's order of equal scores is a hash set's: name them.
        matches.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| self.entries[a.id].name.cmp(&self.entries[b.id].name))
        });
        matches
            .into_iter()
            .filter(|m| {
                let entry = &self.entries[m.id];
                let allowed = question.effects.is_none_or(|only| {
                    !entry.effects.is_empty() && entry.effects.iter().all(|e| only.contains(e))
                });
                allowed && (question.visible)(&entry.name)
            })
            .take(question.limit)
            .map(|m| Found {
                name: self.entries[m.id].name.clone(),
                score: m.score,
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
