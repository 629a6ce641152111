//! `toolgate tools` and `toolgate call`.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Map, Value};
use toolgate_client::{CallOptions, Client, ClientError, Risk, classify};
use toolgate_protocol::types::Tool;

use crate::target;

/// Exit status of `toolgate call`.
mod exit {
    pub const TOOL_ERROR: u8 = 1;
    pub const REFUSED: u8 = 2;
    pub const PROTOCOL: u8 = 3;
    pub const TIMEOUT: u8 = 4;
    pub const OUTPUT_SCHEMA: u8 = 5;
}

fn risk_label(risk: Risk, open_world: bool) -> String {
    let base = match risk {
        Risk::ReadOnly => "read-only",
        Risk::Additive => "writes",
        Risk::Destructive => "destructive",
    };
    if open_world {
        format!("{base}, open-world")
    } else {
        base.to_owned()
    }
}

fn hints(tool: &Tool) -> String {
    let Some(a) = &tool.annotations else {
        return "(none: defaults are destructive, open-world)".into();
    };
    let mut parts = Vec::new();
    for (name, value) in [
        ("readOnly", a.read_only_hint),
        ("destructive", a.destructive_hint),
        ("idempotent", a.idempotent_hint),
        ("openWorld", a.open_world_hint),
    ] {
        if let Some(v) = value {
            parts.push(format!("{name}={v}"));
        }
    }
    if parts.is_empty() {
        "(none)".into()
    } else {
        parts.join(" ")
    }
}

async fn connect(
    target: Option<&str>,
    config: Option<&Path>,
    command: &[String],
    timeout: Duration,
    trust: bool,
) -> anyhow::Result<(Client, bool)> {
    let target = target::resolve(target, config, command)?;
    let trusted = trust || target.trusted();
    let client = target.client(
        Client::builder("toolgate", env!("CARGO_PKG_VERSION")).trusted(trusted),
        timeout,
    )?;
    Ok((client, trusted))
}

/// `toolgate tools`.
pub async fn tools(
    target: Option<&str>,
    config: Option<&Path>,
    command: &[String],
    json: bool,
    trust: bool,
) -> anyhow::Result<ExitCode> {
    let (client, trusted) =
        connect(target, config, command, Duration::from_secs(60), trust).await?;
    let tools = client.list_tools().await.context("listing tools")?;
    if json {
        println!("{}", serde_json::to_string_pretty(&tools)?);
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 5]> = tools
        .iter()
        .map(|t| {
            let (risk, open_world) = classify(t, trusted);
            [
                t.name.clone(),
                t.title.clone().unwrap_or_default(),
                risk_label(risk, open_world),
                hints(t),
                if t.output_schema.is_some() {
                    "yes".into()
                } else {
                    "no".into()
                },
            ]
        })
        .collect();
    let header = ["NAME", "TITLE", "RISK", "ANNOTATIONS", "OUTPUT SCHEMA"];
    let widths: Vec<usize> = (0..5)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: [&str; 5]| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    println!("{}", line(header));
    for r in &rows {
        println!("{}", line([&r[0], &r[1], &r[2], &r[3], &r[4]]));
    }
    if !trusted {
        eprintln!(
            "\n(risk ignores annotations: this server is not trusted; pass --trust or set \"trusted\": true in the config)"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Options of `toolgate call`.
pub struct CallArgs {
    /// Arguments JSON.
    pub args: String,
    /// Skip confirmation.
    pub yes: bool,
    /// Print JSON.
    pub json: bool,
    /// Seconds.
    pub timeout: u64,
    /// Trust annotations.
    pub trust: bool,
}

/// `toolgate call`.
pub async fn call(
    target: Option<&str>,
    tool: &str,
    config: Option<&Path>,
    command: &[String],
    o: CallArgs,
) -> anyhow::Result<ExitCode> {
    let arguments: Map<String, Value> = match serde_json::from_str(&o.args) {
        Ok(Value::Object(m)) => m,
        Ok(_) => anyhow::bail!("--args must be a JSON object"),
        Err(e) => anyhow::bail!("--args is not valid JSON: {e}"),
    };
    let timeout = Duration::from_secs(o.timeout);
    let (client, trusted) = connect(target, config, command, timeout, o.trust).await?;
    let tools = client.list_tools().await.context("listing tools")?;
    let Some(definition) = tools.iter().find(|t| t.name == tool) else {
        eprintln!("toolgate: the server has no tool {tool:?}");
        return Ok(ExitCode::from(exit::REFUSED));
    };
    let (risk, open_world) = classify(definition, trusted);
    eprintln!(
        "tool:      {}{}",
        definition.name,
        definition
            .title
            .as_ref()
            .map(|t| format!(" ({t})"))
            .unwrap_or_default()
    );
    if let Some(d) = &definition.description {
        eprintln!("about:     {d}");
    }
    eprintln!("risk:      {}", risk_label(risk, open_world));
    eprintln!(
        "arguments: {}",
        serde_json::to_string_pretty(&Value::Object(arguments.clone()))?
    );
    // Only a read-only tool of a trusted server may skip the question.
    let pre_approved = o.yes || (trusted && risk == Risk::ReadOnly);
    let needs_confirmation = !pre_approved;
    if needs_confirmation {
        if !std::io::stdin().is_terminal() {
            eprintln!(
                "toolgate: refusing to call without confirmation: no terminal to ask on (pass --yes to allow)"
            );
            return Ok(ExitCode::from(exit::REFUSED));
        }
        eprint!("Send this call? [y/N] ");
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            eprintln!("toolgate: not sent");
            return Ok(ExitCode::from(exit::REFUSED));
        }
    }
    match client
        .call_tool(tool, arguments, &CallOptions::default())
        .await
    {
        Ok(result) => {
            if o.json {
                println!("{}", serde_json::to_string_pretty(&result)?);
            } else {
                for item in &result.content {
                    match item.as_text() {
                        Some(text)
                            if result
                                .structured_content
                                .as_ref()
                                .and_then(|s| serde_json::to_string(s).ok())
                                .as_deref()
                                != Some(text) =>
                        {
                            println!("{text}")
                        }
                        Some(_) => {}
                        None => println!(
                            "[{} content]",
                            serde_json::to_value(item)
                                .ok()
                                .and_then(|v| v.get("type").cloned())
                                .unwrap_or_default()
                        ),
                    }
                }
                if let Some(s) = &result.structured_content {
                    println!("{}", serde_json::to_string_pretty(s)?);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(ClientError::Tool { text, result }) => {
            if o.json {
                println!("{}", serde_json::to_string_pretty(&result)?);
            }
            eprintln!("tool error: {text}");
            Ok(ExitCode::from(exit::TOOL_ERROR))
        }
        Err(e @ ClientError::Timeout(_)) => {
            eprintln!("toolgate: {e}");
            Ok(ExitCode::from(exit::TIMEOUT))
        }
        Err(e @ ClientError::OutputSchema { .. }) => {
            eprintln!("toolgate: {e}");
            Ok(ExitCode::from(exit::OUTPUT_SCHEMA))
        }
        Err(e) => {
            eprintln!("toolgate: {e}");
            Ok(ExitCode::from(exit::PROTOCOL))
        }
    }
}
