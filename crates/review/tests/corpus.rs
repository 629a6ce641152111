//! The rules scored on a corpus of real and adversarial tool definitions.
//!
//! `tests/corpus/*.json` holds tool lists as servers sent them (the npm and
//! PyPI reference servers and other public servers, captured with their
//! versions), the specification's examples, and published attack patterns
//! written here. Each file's `expect` says, for every tool, what a careful
//! reviewer finds: the effects it has beyond reading, and the judgement
//! rules that should fire. The test prints precision and recall per rule
//! and per effect and fails below [`THRESHOLDS`] (documented in
//! `docs/audit-rules.md`).
//!
//! Rules that check a fact exactly (a name's characters, a missing field, a
//! schema that does not compile) are not scored here: they cannot be more or
//! less right, and `rules.rs` tests them. To label a new file, run
//! `cargo test -p toolgate-review --test corpus -- --ignored --nocapture`:
//! it prints what the rules say for tools without expectations, to be
//! corrected by hand, never pasted unread.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;
use toolgate_protocol::types::Tool;
use toolgate_review::{Effects, ServerTools, audit};

/// The rules a reviewer's judgement can disagree with.
const SCORED: &[&str] = &[
    "TG-N003", "TG-D003", "TG-D005", "TG-E001", "TG-E003", "TG-E004", "TG-S004", "TG-S008",
    "TG-S009", "TG-S010", "TG-O001", "TG-O002", "TG-O003", "TG-O004",
];

/// Minimum precision and recall, per rule or effect with at least
/// `MIN_SUPPORT` expected or found cases, and over all of them together.
const THRESHOLDS: Thresholds = Thresholds {
    per_label_precision: 0.80,
    per_label_recall: 0.80,
    overall_precision: 0.90,
    overall_recall: 0.90,
};
const MIN_SUPPORT: usize = 3;

struct Thresholds {
    per_label_precision: f64,
    per_label_recall: f64,
    overall_precision: f64,
    overall_recall: f64,
}

#[derive(Deserialize)]
struct CorpusFile {
    #[allow(dead_code)]
    source: String,
    tools: Vec<Tool>,
    #[serde(default)]
    expect: BTreeMap<String, Expected>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
struct Expected {
    #[serde(default)]
    effects: BTreeSet<String>,
    #[serde(default)]
    findings: BTreeSet<String>,
}

/// What the rules say about one tool, in the corpus's terms.
fn predicted(server: &str, tools: &[Tool]) -> BTreeMap<String, Expected> {
    let mut out: BTreeMap<String, Expected> = tools
        .iter()
        .map(|t| {
            let effects = Effects::of(t)
                .risky()
                .into_iter()
                .map(|e| e.label().to_owned())
                .collect();
            (
                t.name.clone(),
                Expected {
                    effects,
                    findings: BTreeSet::new(),
                },
            )
        })
        .collect();
    for f in audit(&[ServerTools {
        server: server.into(),
        tools: tools.to_vec(),
    }]) {
        if SCORED.contains(&f.rule)
            && let Some(e) = out.get_mut(&f.tool)
        {
            e.findings.insert(f.rule.to_owned());
        }
    }
    out
}

fn corpus() -> Vec<(String, CorpusFile)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).unwrap();
            let file: CorpusFile =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (name, file)
        })
        .collect()
}

#[derive(Default)]
struct Score {
    tp: usize,
    fp: usize,
    fn_: usize,
}

impl Score {
    fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }
    fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_)
    }
    fn support(&self) -> usize {
        self.tp + self.fp + self.fn_
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 1.0 } else { a as f64 / b as f64 }
}

#[test]
fn the_rules_meet_their_thresholds_on_the_corpus() {
    let mut scores: BTreeMap<String, Score> = BTreeMap::new();
    let mut misses = Vec::new();
    let mut unlabeled = Vec::new();
    let mut definitions = 0;
    for (server, file) in corpus() {
        let got = predicted(&server, &file.tools);
        for name in file.expect.keys() {
            assert!(
                got.contains_key(name),
                "{server}: expectation for {name:?}, which is not in the file"
            );
        }
        for (tool, said) in &got {
            definitions += 1;
            let Some(want) = file.expect.get(tool) else {
                unlabeled.push(format!("{server}/{tool}"));
                continue;
            };
            let pairs = [
                (&want.effects, &said.effects, "effect "),
                (&want.findings, &said.findings, ""),
            ];
            for (want, said, kind) in pairs {
                for label in want.union(said) {
                    let score = scores.entry(format!("{kind}{label}")).or_default();
                    match (want.contains(label), said.contains(label)) {
                        (true, true) => score.tp += 1,
                        (false, true) => {
                            score.fp += 1;
                            misses.push(format!("  false positive {kind}{label}: {server}/{tool}"));
                        }
                        (true, false) => {
                            score.fn_ += 1;
                            misses.push(format!("  missed {kind}{label}: {server}/{tool}"));
                        }
                        (false, false) => {}
                    }
                }
            }
        }
    }
    assert!(
        unlabeled.is_empty(),
        "tools without expectations: {unlabeled:?}"
    );
    assert!(
        definitions >= 60,
        "the corpus has {definitions} definitions"
    );
    for id in SCORED {
        scores.entry((*id).to_owned()).or_default();
    }

    let mut all = Score::default();
    let mut failures = Vec::new();
    println!("corpus: {definitions} definitions");
    println!(
        "{:<16} {:>4} {:>4} {:>4} {:>9} {:>7}",
        "label", "tp", "fp", "fn", "precision", "recall"
    );
    for (label, s) in &scores {
        println!(
            "{label:<16} {:>4} {:>4} {:>4} {:>9.2} {:>7.2}",
            s.tp,
            s.fp,
            s.fn_,
            s.precision(),
            s.recall()
        );
        all.tp += s.tp;
        all.fp += s.fp;
        all.fn_ += s.fn_;
        if s.support() >= MIN_SUPPORT
            && (s.precision() < THRESHOLDS.per_label_precision
                || s.recall() < THRESHOLDS.per_label_recall)
        {
            failures.push(label.clone());
        }
        if !label.starts_with("effect ") && s.tp == 0 {
            failures.push(format!(
                "{label} (the corpus has no case this rule should find)"
            ));
        }
    }
    println!(
        "{:<16} {:>4} {:>4} {:>4} {:>9.2} {:>7.2}",
        "overall",
        all.tp,
        all.fp,
        all.fn_,
        all.precision(),
        all.recall()
    );
    println!("disagreements:\n{}", misses.join("\n"));
    assert!(
        failures.is_empty(),
        "below the per-rule thresholds: {failures:?}"
    );
    assert!(
        all.precision() >= THRESHOLDS.overall_precision
            && all.recall() >= THRESHOLDS.overall_recall,
        "overall precision {:.2} / recall {:.2} below the thresholds",
        all.precision(),
        all.recall()
    );
}

#[test]
fn the_thresholds_are_the_documented_ones() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/audit-rules.md");
    let page = std::fs::read_to_string(path).unwrap();
    for row in [
        format!(
            "| per rule or effect (support ≥ {MIN_SUPPORT}) | {:.2} | {:.2} |",
            THRESHOLDS.per_label_precision, THRESHOLDS.per_label_recall
        ),
        format!(
            "| overall | {:.2} | {:.2} |",
            THRESHOLDS.overall_precision, THRESHOLDS.overall_recall
        ),
    ] {
        assert!(page.contains(&row), "docs/audit-rules.md lacks {row:?}");
    }
}

/// Prints what the rules say for tools that have no expectations yet.
#[test]
#[ignore = "a labelling aid, run by hand"]
fn draft_expectations() {
    for (server, file) in corpus() {
        let got = predicted(&server, &file.tools);
        let draft: BTreeMap<&String, serde_json::Value> = got
            .iter()
            .filter(|(name, _)| !file.expect.contains_key(*name))
            .map(|(name, e)| {
                (
                    name,
                    serde_json::json!({"effects": e.effects, "findings": e.findings}),
                )
            })
            .collect();
        if !draft.is_empty() {
            println!("== {server}\n{}", serde_json::to_string(&draft).unwrap());
        }
    }
}
