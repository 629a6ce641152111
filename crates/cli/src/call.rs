//! `toolgate call`: show the tool, ask, call, print the result once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Map, Value};
use toolgate_client::{CallOptions, ClientError, Risk, classify};
use toolgate_protocol::types::{CallToolResult, ContentBlock, ResourceContents};

use crate::exit;
use crate::input::Answers;
use crate::target::{self, Reach};
use crate::term::{self, ask, clean, one_line};
use crate::tools::unknown_tool;
use crate::{errln, outln};

/// Options of `toolgate call`.
pub struct CallArgs {
    /// Arguments JSON.
    pub args: String,
    /// Skip confirmation.
    pub yes: bool,
    /// Print the whole result as JSON.
    pub json: bool,
    /// Where binary content goes.
    pub output: Option<PathBuf>,
    /// `--answer FIELD=JSON`.
    pub answers: BTreeMap<String, Value>,
    /// `--decline`.
    pub decline: bool,
    /// Roots offered to the server (`None`: no roots capability).
    pub roots: Option<Vec<PathBuf>>,
}

/// `toolgate call`.
pub async fn call(
    target: Option<&str>,
    tool: &str,
    command: &[String],
    reach: &Reach,
    o: CallArgs,
) -> anyhow::Result<u8> {
    let arguments: Map<String, Value> = match serde_json::from_str(&o.args) {
        Ok(Value::Object(m)) => m,
        Ok(_) => {
            return Err(exit::fail(
                exit::USAGE,
                "--args must be a JSON object, like '{\"path\": \"/tmp\"}'",
            ));
        }
        Err(e) => {
            return Err(exit::fail(
                exit::USAGE,
                format!("--args is not valid JSON: {e}"),
            ));
        }
    };
    let target = target::resolve(target, command, reach)?;
    let answers = Answers::new(&target.name, o.answers, o.decline, o.roots);
    let conn = target.connect(reach, answers.clone())?;
    let tools = conn
        .client
        .list_tools()
        .await
        .map_err(|e| conn.fail(e, "listing tools"))?;
    let Some(definition) = tools.iter().find(|t| t.name == tool) else {
        return Err(unknown_tool(tool, &conn.name, &tools));
    };
    let (risk, _) = classify(definition, conn.trusted);
    errln!(
        "server:    {}\ntool:      {}{}",
        one_line(&conn.name),
        one_line(&definition.name),
        definition
            .title
            .as_ref()
            .map(|t| format!(" ({})", one_line(t)))
            .unwrap_or_default()
    );
    if let Some(d) = &definition.description {
        errln!("about:     {}", term::short(d, 300));
    }
    errln!("risk:      {}", crate::risk::told(definition, conn.trusted));
    errln!(
        "arguments: {}",
        clean(&serde_json::to_string_pretty(&Value::Object(
            arguments.clone()
        ))?)
    );
    // Only a read-only tool of a trusted server may skip the question.
    let pre_approved = o.yes || (conn.trusted && risk == Risk::ReadOnly);
    if !pre_approved {
        if !term::interactive() {
            return Err(exit::fail(
                exit::DECLINED,
                "not sent: no terminal to ask for confirmation on (pass --yes to send without asking)",
            ));
        }
        let answer = ask("Send this call? [y/N] ".into()).await;
        if !matches!(answer.as_deref().map(str::trim), Some("y" | "Y" | "yes")) {
            return Err(exit::fail(exit::DECLINED, "not sent"));
        }
    }
    let (on_task, task_seen) = crate::task::watcher(&conn.name);
    let options = CallOptions {
        on_task: reach.tasks.then_some(on_task),
        ..CallOptions::default()
    };
    let outcome = conn.client.call_tool(tool, arguments, &options).await;
    let task_id = task_seen.lock().clone();
    match outcome {
        Ok(result) => {
            print_result(&result, o.json, o.output.as_deref())?;
            Ok(exit::OK)
        }
        Err(ClientError::Tool { text, result }) => {
            if o.json {
                outln!("{}", serde_json::to_string_pretty(&result)?);
            }
            errln!("tool error: {}", clean(&text));
            // The server refused because a form it asked went unanswered:
            // that is a decline, not the tool failing.
            let unanswered = answers.unanswered();
            if !unanswered.is_empty() {
                let fields: Vec<String> = unanswered
                    .iter()
                    .map(|f| format!("--answer {f}=JSON"))
                    .collect();
                return Err(exit::fail(
                    exit::DECLINED,
                    format!(
                        "declined: the server asked for {} and there was no terminal to ask on; pass {}",
                        unanswered.join(", "),
                        fields.join(" ")
                    ),
                ));
            }
            Ok(exit::FAILED)
        }
        // A task interrupted by a lost connection runs on: say how to
        // pick it up.
        Err(
            e @ (ClientError::Transport { .. }
            | ClientError::Unreachable { .. }
            | ClientError::Timeout(_)),
        ) if task_id.is_some() => {
            let id = task_id.unwrap_or_default();
            Err(conn
                .fail(e, &format!("calling {}", one_line(tool)))
                .context(format!(
                    "the task may still be running on the server; `{}` waits for it again",
                    crate::task::resume_hint(&conn.name, &id)
                )))
        }
        Err(ClientError::Protocol(e)) if !reach.tasks && needs_tasks(&e) => {
            let hint = format!(
                "{} runs only as a task: call it again with --task",
                one_line(tool)
            );
            Err(conn
                .fail(
                    ClientError::Protocol(e),
                    &format!("calling {}", one_line(tool)),
                )
                .context(hint))
        }
        Err(e) => Err(conn.fail(e, &format!("calling {}", one_line(tool)))),
    }
}

/// Whether `error` says the call needs the tasks extension.
fn needs_tasks(error: &toolgate_protocol::RpcError) -> bool {
    error.code == toolgate_protocol::codes::MISSING_REQUIRED_CLIENT_CAPABILITY
        && error
            .data
            .as_ref()
            .and_then(|d| d.pointer("/requiredCapabilities/extensions"))
            .and_then(Value::as_object)
            .is_some_and(|e| e.contains_key(toolgate_protocol::types::TASKS_EXTENSION))
}

fn size(bytes: usize) -> String {
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    }
}

/// Where the `n`th binary item goes: FILE, then FILE.2, FILE.3, …
fn numbered(path: &Path, n: usize) -> PathBuf {
    if n == 1 {
        return path.to_path_buf();
    }
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Text content as text; structured content as JSON only with `--json` or
/// when there is no text; binary content described, or written to
/// `--output`.
pub fn print_result(
    result: &CallToolResult,
    json: bool,
    output: Option<&Path>,
) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(result)?);
    }
    let mut binaries = 0usize;
    let mut save =
        |kind: &str, mime: &str, data: &str, uri: Option<&str>| -> anyhow::Result<String> {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map_err(|_| {
                    exit::fail(
                        exit::PROTOCOL,
                        format!("the {kind} content is not valid base64"),
                    )
                })?;
            let mut text = format!("[{kind}: {}, {}", one_line(mime), size(bytes.len()));
            if let Some(uri) = uri {
                text.push_str(&format!(", {}", one_line(uri)));
            }
            match output {
                Some(path) => {
                    binaries += 1;
                    let path = numbered(path, binaries);
                    std::fs::write(&path, &bytes).map_err(|e| {
                        exit::fail(exit::USAGE, format!("cannot write {}: {e}", path.display()))
                    })?;
                    text.push_str(&format!(", written to {}]", path.display()));
                }
                None => text.push_str("; --output FILE saves it]"),
            }
            Ok(text)
        };
    let mut has_text = false;
    let mut lines = Vec::new();
    for item in &result.content {
        match item {
            ContentBlock::Text(t) => {
                has_text = true;
                // The spec's text copy of structured content reads better
                // indented.
                let same_as_structured = result.structured_content.is_some()
                    && serde_json::from_str::<Value>(&t.text).ok().as_ref()
                        == result.structured_content.as_ref();
                match (&result.structured_content, same_as_structured) {
                    (Some(s), true) => lines.push(clean(&serde_json::to_string_pretty(s)?)),
                    _ => lines.push(clean(&t.text)),
                }
            }
            ContentBlock::Image(i) => lines.push(save("image", &i.mime_type, &i.data, None)?),
            ContentBlock::Audio(a) => lines.push(save("audio", &a.mime_type, &a.data, None)?),
            ContentBlock::ResourceLink(link) => {
                let mut text = format!("[resource link: {}", one_line(&link.uri));
                if let Some(mime) = &link.mime_type {
                    text.push_str(&format!(", {}", one_line(mime)));
                }
                if let Some(size_) = link.size {
                    text.push_str(&format!(
                        ", {}",
                        size(usize::try_from(size_).unwrap_or(usize::MAX))
                    ));
                }
                text.push_str(&format!(
                    " — {}]",
                    one_line(link.title.as_deref().unwrap_or(&link.name))
                ));
                lines.push(text);
            }
            ContentBlock::EmbeddedResource(r) => match &r.resource {
                ResourceContents::Text(t) => {
                    has_text = true;
                    lines.push(format!(
                        "[resource {}{}]\n{}",
                        one_line(&t.uri),
                        t.mime_type
                            .as_deref()
                            .map(|m| format!(", {}", one_line(m)))
                            .unwrap_or_default(),
                        clean(&t.text)
                    ));
                }
                ResourceContents::Blob(b) => lines.push(save(
                    "resource",
                    b.mime_type.as_deref().unwrap_or("application/octet-stream"),
                    &b.blob,
                    Some(&b.uri),
                )?),
            },
        }
    }
    if json {
        // The JSON above is the output; binary items were still saved.
        return Ok(());
    }
    for line in lines {
        outln!("{line}");
    }
    if let (false, Some(s)) = (has_text, &result.structured_content) {
        outln!("{}", clean(&serde_json::to_string_pretty(s)?));
    }
    Ok(())
}

/// The options of `toolgate call`.
#[derive(clap::Args)]
pub struct CallCommand {
    /// `[TARGET] TOOL`.
    #[arg(num_args = 1..=2, required = true, value_name = "TARGET/TOOL")]
    pub names: Vec<String>,
    /// Arguments as a JSON object.
    #[arg(long, default_value = "{}")]
    pub args: String,
    /// Send without asking for confirmation.
    #[arg(long)]
    pub yes: bool,
    /// Answer a field of any form the server asks for (JSON, or text).
    #[arg(long, value_name = "FIELD=JSON", value_parser = crate::input::parse_answer)]
    pub answer: Vec<(String, serde_json::Value)>,
    /// Decline every question the server asks.
    #[arg(long, conflicts_with = "answer")]
    pub decline: bool,
    /// A directory offered to the server as a root (repeatable; default:
    /// the working directory). Some servers, like server-filesystem, then
    /// use the roots instead of the directories on their command line.
    #[arg(long, value_name = "DIR")]
    pub root: Vec<PathBuf>,
    /// Offer no roots (the server keeps its own directories).
    #[arg(long, conflicts_with = "root")]
    pub no_roots: bool,
    /// Print the whole result as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write binary content (images, audio, blobs) to FILE (then FILE.2, …).
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Let the server run the call as a task (the tasks extension): its
    /// status is shown while it runs, and `toolgate task` picks it up
    /// again if this command is interrupted.
    #[arg(long)]
    pub task: bool,
    #[command(flatten)]
    pub reach: crate::args::ReachArgs,
    /// The server as a command over stdio.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `toolgate call`, as the command line gave it.
pub async fn call_command(command: CallCommand) -> anyhow::Result<u8> {
    let CallCommand {
        names,
        args,
        yes,
        answer,
        decline,
        root,
        no_roots,
        json,
        output,
        task,
        reach,
        command,
    } = command;
    let roots = match (no_roots, root.is_empty()) {
        (true, _) => None,
        (false, true) => Some(vec![std::env::current_dir().map_err(|e| {
            crate::exit::fail(
                crate::exit::USAGE,
                format!("no working directory to offer as a root: {e}"),
            )
        })?]),
        (false, false) => Some(root),
    };
    // One word is the tool, whether or not a COMMAND follows.
    let (target, tool) = match names.as_slice() {
        [tool] => (None, tool.clone()),
        [target, tool, ..] => (Some(target.clone()), tool.clone()),
        [] => {
            return Err(crate::exit::fail(
                crate::exit::USAGE,
                "name the tool to call",
            ));
        }
    };
    let options = CallArgs {
        args,
        yes,
        json,
        output,
        answers: answer
            .into_iter()
            .collect::<std::collections::BTreeMap<_, _>>(),
        decline,
        roots,
    };
    let mut reach = reach.reach();
    reach.tasks = task;
    call(target.as_deref(), &tool, &command, &reach, options).await
}
