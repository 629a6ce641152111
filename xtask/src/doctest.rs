//! `cargo xtask docs`: the shell blocks of README.md and docs/cli.md
//! marked runnable, run as a reader would run them, so the documents
//! cannot drift from the commands.
//!
//! A block is runnable when its info string says so:
//!
//! - ```` ```sh runnable ````: each line (a `\` joins the next) runs with
//!   `sh -c` from the repository root and must exit 0, or with the code its
//!   trailing comment names (`… exits N`). A line ending in `&` runs in the
//!   background until the document's end; when it says `--http ADDR`,
//!   the next line waits until ADDR answers.
//! - ```` ```sh runnable serve=ADDR ````: the block's one command runs in
//!   the background until the document's end, and the blocks after it run
//!   once ADDR answers (a server the reader starts in one terminal and
//!   talks to from another).
//!
//! Unmarked blocks (a download from a release, a host's configuration
//! changed, a server on example.com) are counted and named, not run. The
//! commands find `toolgate` and `basket` on PATH (the debug builds), and
//! Node.js for `npx`. Files the commands write at the root (a lock file, a
//! SARIF report, the example's audit store) are removed afterwards unless
//! they were there before.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::{built, cargo, root};

/// The documents whose blocks are run.
const DOCUMENTS: [&str; 2] = ["README.md", "docs/cli.md"];

/// What the commands may leave at the root, removed afterwards.
const WRITTEN: [&str; 6] = [
    "toolgate.lock",
    "audit.sarif",
    "examples/toolgate-audit.db",
    "examples/toolgate-audit.db-wal",
    "examples/toolgate-audit.db-shm",
    "examples/toolgate-audit.db.log",
];

/// One fenced block.
#[derive(Debug)]
pub(crate) struct Block {
    /// The document and the line its fence opens on.
    pub(crate) at: String,
    /// `None`: not runnable; `Some(None)`: run its lines; `Some(Some(addr))`:
    /// serve on `addr`.
    pub(crate) run: Option<Option<String>>,
    /// Its commands, each whole (continuations joined).
    pub(crate) commands: Vec<String>,
}

/// The `sh` blocks of `text` (named `name`).
pub(crate) fn blocks(name: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let words: Vec<&str> = info.split_whitespace().collect();
        let mut body = Vec::new();
        for (_, inner) in lines.by_ref() {
            if inner.starts_with("```") {
                break;
            }
            body.push(inner);
        }
        if words.first() != Some(&"sh") {
            continue;
        }
        let run = words.contains(&"runnable").then(|| {
            words
                .iter()
                .find_map(|w| w.strip_prefix("serve="))
                .map(str::to_owned)
        });
        let mut commands = Vec::new();
        let mut pending = String::new();
        for raw in body {
            let trimmed = raw.trim_end();
            if let Some(head) = trimmed.strip_suffix('\\') {
                pending.push_str(head);
                pending.push(' ');
                continue;
            }
            pending.push_str(trimmed);
            let command = std::mem::take(&mut pending);
            let bare = command.trim();
            if !bare.is_empty() && !bare.starts_with('#') {
                commands.push(bare.to_owned());
            }
        }
        out.push(Block {
            at: format!("{name}:{}", n + 1),
            run,
            commands,
        });
    }
    out
}

/// The exit code a command's trailing comment expects by saying `exits N`
/// (0 without one).
pub(crate) fn expected_exit(command: &str) -> i32 {
    let Some((_, comment)) = command.split_once(" #") else {
        return 0;
    };
    comment
        .split_once("exits ")
        .and_then(|(_, n)| {
            let digits: String = n.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .unwrap_or(0)
}

/// The address after `--http` in `command`, as a socket address
/// (`localhost` read as 127.0.0.1).
pub(crate) fn http_of(command: &str) -> Option<String> {
    let mut words = command.split_whitespace();
    words.find(|w| *w == "--http")?;
    words.next().map(|a| a.replace("localhost", "127.0.0.1"))
}

/// Wait until `addr` answers, or `child` (if any) ends.
fn wait_for(addr: &str, child: &mut Child, what: &str) -> anyhow::Result<()> {
    let addr: SocketAddr = addr.parse().with_context(|| format!("{what}: {addr:?}"))?;
    // The first build of a clone takes minutes.
    let deadline = Instant::now() + Duration::from_secs(900);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            bail!("{what} ended ({status}) before {addr} answered");
        }
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("{what}: nothing answered on {addr}")
}

/// Ends the background processes of a document (their process groups).
struct Background(Vec<Child>);

impl Drop for Background {
    fn drop(&mut self) {
        for child in &mut self.0 {
            // The shell and what it started share the group it leads.
            let _ = Command::new("kill")
                .args(["-TERM", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
        }
    }
}

/// A shell running `command` from the root with `path`, in a process
/// group of its own.
fn shell(command: &str, path: &str) -> Command {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = Command::new("sh");
    cmd.args(["-c", command])
        .current_dir(root())
        .env("PATH", path)
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("CARGO_MANIFEST_PATH")
        .stdin(Stdio::null())
        .process_group(0);
    cmd
}

/// Run every runnable block of the documents.
pub fn run() -> anyhow::Result<()> {
    cargo(&["build", "--quiet", "-p", "toolgate", "-p", "basket"])?;
    let node_bin = crate::conformance::install()?;
    let bin = crate::support::ScratchDir::new("toolgate-docs-bin")?;
    for name in ["toolgate", "basket"] {
        std::os::unix::fs::symlink(built("debug", name), bin.path().join(name))?;
    }
    let path = format!(
        "{}:{}:{}",
        bin.path().display(),
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let before: Vec<PathBuf> = WRITTEN
        .iter()
        .map(|w| root().join(w))
        .filter(|p| p.exists())
        .collect();
    let result = run_documents(&path);
    for written in WRITTEN.iter().map(|w| root().join(w)) {
        if written.exists() && !before.contains(&written) {
            let _ = std::fs::remove_dir_all(&written).or_else(|_| std::fs::remove_file(&written));
        }
    }
    result
}

fn run_documents(path: &str) -> anyhow::Result<()> {
    let (mut ran, mut skipped) = (0usize, Vec::new());
    for document in DOCUMENTS {
        let text = std::fs::read_to_string(root().join(document))?;
        let mut background = Background(Vec::new());
        for block in blocks(document, &text) {
            let Some(serve) = block.run else {
                skipped.push(block.at);
                continue;
            };
            if let Some(addr) = serve {
                let [command] = &block.commands[..] else {
                    bail!("{}: a serve block holds one command", block.at);
                };
                eprintln!("+ {command} &   ({})", block.at);
                let mut child = shell(command, path).spawn()?;
                let waited = wait_for(&addr, &mut child, &block.at);
                background.0.push(child);
                waited?;
                ran += 1;
                continue;
            }
            for command in &block.commands {
                ran += 1;
                if let Some(head) = command.strip_suffix('&') {
                    eprintln!("+ {command}   ({})", block.at);
                    let mut child = shell(head, path).stdout(Stdio::null()).spawn()?;
                    let waited = http_of(head).map(|addr| wait_for(&addr, &mut child, command));
                    background.0.push(child);
                    if let Some(waited) = waited {
                        waited?;
                    }
                    continue;
                }
                eprintln!("+ {command}   ({})", block.at);
                let out = shell(command, path)
                    .output()
                    .with_context(|| format!("{}: {command}", block.at))?;
                let code = out.status.code().unwrap_or(-1);
                let expected = expected_exit(command);
                if code != expected {
                    bail!(
                        "{}: `{command}` exited {code}, not {expected}\n{}{}",
                        block.at,
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            }
        }
    }
    eprintln!(
        "docs: {ran} commands ran as written; blocks not runnable here: {}",
        if skipped.is_empty() {
            "none".to_owned()
        } else {
            skipped.join(", ")
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runnable_blocks_are_read_with_their_commands() {
        let text = "x\n```sh runnable\n# a comment\ntoolgate tools -- \\\n  basket   # stdio\ntoolgate verify -- basket   # exits 1\n```\n```sh\ncurl example.com\n```\n```toml\na = 1\n```\n```sh runnable serve=127.0.0.1:8787\ncargo xtask demo\n```\n";
        let found = blocks("R.md", text);
        assert_eq!(found.len(), 3);
        assert_eq!(found[0].run, Some(None));
        assert_eq!(
            found[0].commands,
            [
                "toolgate tools --    basket   # stdio",
                "toolgate verify -- basket   # exits 1"
            ]
        );
        assert_eq!(found[0].at, "R.md:2");
        assert_eq!(found[1].run, None);
        assert_eq!(found[2].run, Some(Some("127.0.0.1:8787".into())));
        assert_eq!(expected_exit(&found[0].commands[1]), 1);
        assert_eq!(expected_exit(&found[0].commands[0]), 0);
        assert_eq!(
            expected_exit("toolgate call x # asks (no terminal: exits 6)"),
            6
        );
        assert_eq!(
            http_of("cargo run -p basket -- --http localhost:8080 &").as_deref(),
            Some("127.0.0.1:8080")
        );
    }
}
