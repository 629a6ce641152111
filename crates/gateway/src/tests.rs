//! The crate's architecture, checked by `cargo test`: the layers the crate
//! doc names, read from the sources' own `crate::` paths.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom to top (the crate doc says what each holds).
const LAYERS: [&str; 7] = [
    "base", "config", "decide", "store", "call", "gateway", "surface",
];

/// No source file grows past this many lines: split it first.
const MOST_LINES: usize = 600;

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The layer a file is in (`None`: the crate root, above every layer).
fn layer_of(relative: &Path) -> Option<usize> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let first = first.strip_suffix(".rs").unwrap_or(first);
    LAYERS.iter().position(|l| *l == first)
}

/// Every `crate::a::b::…` path in `text`, outside comments, as segments.
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let before = rest[..i].chars().next_back();
            rest = &rest[i + "crate::".len()..];
            // `toolgate_crate::…` or `$crate::…` are not this crate's paths.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let path: Vec<String> = rest[..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            if !path.is_empty() {
                out.push(path);
            }
        }
    }
    out
}

/// The folder (relative to `src`) a path's module lives in: the longest
/// prefix of its segments that is a directory.
fn folder_of(src: &Path, path: &[String]) -> PathBuf {
    let mut folder = PathBuf::new();
    for segment in path {
        let next = folder.join(segment);
        if src.join(&next).is_dir() {
            folder = next;
        } else {
            break;
        }
    }
    folder
}

#[test]
fn layering() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 20, "the sources were not found in {src:?}");
    let mut wrong = Vec::new();
    let mut edges: BTreeMap<PathBuf, BTreeSet<(PathBuf, String)>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap_or(file).to_path_buf();
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let lines = text.lines().count();
        if lines > MOST_LINES {
            wrong.push(format!(
                "{}: {lines} lines (at most {MOST_LINES}: split it)",
                relative.display()
            ));
        }
        let own = layer_of(&relative);
        // Each module's doc says which layer it is in.
        if let Some(own) = own {
            let doc: String = text
                .lines()
                .take_while(|l| l.starts_with("//!") || l.trim().is_empty())
                .collect();
            let named = [
                format!("Layer: `{}`", LAYERS[own]),
                format!("layer `{}`", LAYERS[own]),
                format!(", `{}`:", LAYERS[own]),
            ];
            if !named.iter().any(|n| doc.contains(n.as_str())) {
                wrong.push(format!(
                    "{}: its module doc does not name its layer (`{}`)",
                    relative.display(),
                    LAYERS[own]
                ));
            }
        }
        let here = relative.parent().map(Path::to_path_buf).unwrap_or_default();
        for path in crate_paths(&text) {
            let Some(target) = LAYERS.iter().position(|l| *l == path[0]) else {
                if own.is_some() {
                    wrong.push(format!(
                        "{}: crate::{} goes through the crate root; name its layer",
                        relative.display(),
                        path.join("::")
                    ));
                }
                continue;
            };
            if let Some(own) = own
                && target > own
            {
                wrong.push(format!(
                    "{} (layer {}) imports crate::{} from the higher layer {}",
                    relative.display(),
                    LAYERS[own],
                    path.join("::"),
                    LAYERS[target]
                ));
            }
            let there = folder_of(&src, &path);
            if there != here && !here.starts_with(&there) && !there.starts_with(&here) {
                edges
                    .entry(here.clone())
                    .or_default()
                    .insert((there, relative.display().to_string()));
            }
        }
    }
    for (from, targets) in &edges {
        for (to, file) in targets {
            let back = edges
                .get(to)
                .and_then(|t| t.iter().find(|(f, _)| f == from));
            if let Some((_, other)) = back
                && from < to
            {
                wrong.push(format!(
                    "the folders {} and {} import each other ({file}, {other})",
                    from.display(),
                    to.display()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}

#[test]
fn the_check_sees_an_import_from_above() {
    let paths = crate_paths(
        "use crate::gateway::Gateway; // crate::surface in a comment\nlet x = toolgate_crate::y;",
    );
    assert_eq!(
        paths,
        vec![vec!["gateway".to_owned(), "Gateway".to_owned()]]
    );
    assert_eq!(layer_of(Path::new("decide/policy.rs")), Some(2));
    assert_eq!(layer_of(Path::new("gateway/mod.rs")), Some(5));
    assert_eq!(layer_of(Path::new("lib.rs")), None);
}
