//! `toolgate tools`: a server's tools as a table, or one tool in full.

use comfy_table::{ContentArrangement, Row, Table, presets};
use serde_json::Value;
use toolgate_client::Risk;
use toolgate_protocol::types::Tool;

use crate::exit;
use crate::input::Answers;
use crate::target::{self, Reach};
use crate::term::{clean, one_line, short};
use crate::{errln, outln};

/// The risk class in words.
pub fn risk_label(risk: Risk, open_world: bool) -> String {
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

/// The annotations as `name=value` pairs.
pub fn hints(tool: &Tool) -> String {
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

fn properties(tool: &Tool) -> (Vec<(String, Value)>, Vec<String>) {
    let schema = serde_json::to_value(&tool.input_schema).unwrap_or(Value::Null);
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    (props, required)
}

/// Argument names, optional ones in brackets: `path [limit]`.
fn arguments(tool: &Tool) -> String {
    let (props, required) = properties(tool);
    props
        .iter()
        .map(|(name, _)| {
            if required.contains(name) {
                one_line(name)
            } else {
                format!("[{}]", one_line(name))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The closest tool names to `wanted`, best first (at most three).
pub fn suggestions<'a>(wanted: &str, tools: &'a [Tool]) -> Vec<&'a str> {
    let wanted_lower = wanted.to_lowercase();
    let mut scored: Vec<(f64, &str)> = tools
        .iter()
        .map(|t| {
            let name = t.name.to_lowercase();
            let mut score = strsim::jaro_winkler(&wanted_lower, &name);
            if name.contains(&wanted_lower) || wanted_lower.contains(&name) {
                score = score.max(0.9);
            }
            (score, t.name.as_str())
        })
        .filter(|(score, _)| *score >= 0.8)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored.into_iter().take(3).map(|(_, n)| n).collect()
}

/// The error for a tool the server does not have.
pub fn unknown_tool(name: &str, server: &str, tools: &[Tool]) -> anyhow::Error {
    let close = suggestions(name, tools);
    let hint = if close.is_empty() {
        format!("`toolgate tools {server}` lists them")
    } else {
        let names: Vec<String> = close.iter().map(|n| one_line(n)).collect();
        format!("did you mean {}?", names.join(", "))
    };
    exit::fail(
        exit::PROTOCOL,
        format!("{server} has no tool {:?}; {hint}", one_line(name)),
    )
}

/// `toolgate tools [TARGET] [TOOL]`.
pub async fn tools(
    target: Option<&str>,
    tool: Option<&str>,
    command: &[String],
    reach: &Reach,
    json: bool,
) -> anyhow::Result<u8> {
    let target = target::resolve(target, command, reach)?;
    let conn = target.connect(reach, Answers::none())?;
    let tools = conn
        .client
        .list_tools()
        .await
        .map_err(|e| conn.fail(e, "listing tools"))?;
    if let Some(name) = tool {
        let Some(found) = tools.iter().find(|t| t.name == name) else {
            return Err(unknown_tool(name, &conn.name, &tools));
        };
        if json {
            outln!("{}", serde_json::to_string_pretty(found)?);
        } else {
            show(found, conn.trusted);
        }
        return Ok(exit::OK);
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&tools)?);
        return Ok(exit::OK);
    }
    print_table(&[(None, &tools, conn.trusted)]);
    if !conn.trusted {
        errln!(
            "\nrisk: what {} declares is a claim, beside what each definition shows (pass --trust, or set \"trusted\": true in the config, to take its declarations as facts)",
            conn.name
        );
    }
    Ok(exit::OK)
}

/// `toolgate tools --all`: every server of the config file, one table.
/// A server that fails is named on stderr and the rest are still listed.
pub async fn tools_of_all(reach: &Reach, json: bool) -> anyhow::Result<u8> {
    let mut listed = Vec::new();
    let mut failure = exit::OK;
    for target in target::resolve_all(reach)? {
        let tools = match target.connect(reach, Answers::none()) {
            Ok(conn) => conn
                .client
                .list_tools()
                .await
                .map(|tools| (tools, conn.trusted))
                .map_err(|e| conn.fail(e, "listing tools")),
            Err(e) => Err(e),
        };
        match tools {
            Ok((tools, trusted)) => listed.push((target.name, tools, trusted)),
            Err(e) => {
                errln!(
                    "toolgate: skipping {}: {}",
                    one_line(&target.name),
                    one_line(&format!("{e:#}"))
                );
                failure = failure.max(exit::for_error(&e));
            }
        }
    }
    if json {
        let by_server: serde_json::Map<String, Value> = listed
            .iter()
            .map(|(server, tools, _)| Ok((server.clone(), serde_json::to_value(tools)?)))
            .collect::<Result<_, serde_json::Error>>()?;
        outln!("{}", serde_json::to_string_pretty(&by_server)?);
        return Ok(failure);
    }
    let groups: Vec<(Option<&str>, &[Tool], bool)> = listed
        .iter()
        .map(|(server, tools, trusted)| (Some(server.as_str()), tools.as_slice(), *trusted))
        .collect();
    print_table(&groups);
    Ok(failure)
}

/// Tools as a table, one row each: groups of `(server, tools, trusted)`,
/// with a SERVER column when the groups are named.
fn print_table(groups: &[(Option<&str>, &[Tool], bool)]) {
    let named = groups.iter().any(|(server, _, _)| server.is_some());
    let mut header = vec!["NAME", "ARGUMENTS", "RISK", "FLOWS", "DESCRIPTION"];
    if named {
        header.insert(0, "SERVER");
    }
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    for column in table.column_iter_mut() {
        // No margin on the left; two spaces between columns.
        column.set_padding((0, 2));
    }
    for (server, tools, trusted) in groups {
        for t in *tools {
            let mut cells = vec![
                one_line(&t.name),
                arguments(t),
                crate::risk::told(t, *trusted),
                flow_classes(t, *trusted),
                short(
                    t.description.as_deref().unwrap_or(""),
                    if named { 80 } else { 100 },
                ),
            ];
            if let Some(server) = server {
                cells.insert(0, one_line(server));
            }
            let mut row = Row::from(cells);
            row.max_height(1);
            table.add_row(row);
        }
    }
    for line in table.lines() {
        outln!("{}", line.trim_end());
    }
}

/// Its flow classes (`untrusted, private`), or `-`.
fn flow_classes(tool: &Tool, trusted: bool) -> String {
    let classes = toolgate_review::flows::FlowClasses::of(tool, trusted).list();
    if classes.is_empty() {
        return "-".to_owned();
    }
    classes
        .iter()
        .map(|c| c.label())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One tool in full.
fn show(tool: &Tool, trusted: bool) {
    outln!("name:        {}", one_line(&tool.name));
    if let Some(title) = &tool.title {
        outln!("title:       {}", one_line(title));
    }
    outln!("risk:        {}", crate::risk::told(tool, trusted));
    let flows = toolgate_review::flows::FlowClasses::of(tool, trusted);
    if !flows.is_empty() {
        outln!("flows:       {}", one_line(&flows.explain()));
    }
    outln!("annotations: {}", hints(tool));
    if let Some(d) = &tool.description {
        outln!("description:");
        for line in clean(d).lines() {
            outln!("  {line}");
        }
    }
    let (props, required) = properties(tool);
    if props.is_empty() {
        outln!("arguments:   (none)");
    } else {
        outln!("arguments:");
    }
    for (name, schema) in &props {
        let kind = schema
            .get("type")
            .map(|t| match t {
                Value::String(s) => s.clone(),
                Value::Array(kinds) => kinds
                    .iter()
                    .map(|k| k.as_str().map_or_else(|| k.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(" | "),
                other => other.to_string(),
            })
            .unwrap_or_else(|| "any".into());
        let mark = if required.contains(name) {
            ", required"
        } else {
            ""
        };
        outln!("  {} ({}{mark})", one_line(name), one_line(&kind));
        if let Some(d) = schema.get("description").and_then(Value::as_str) {
            outln!("      {}", one_line(d));
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            let list: Vec<String> = values.iter().map(|v| one_line(&v.to_string())).collect();
            outln!("      one of: {}", list.join(", "));
        }
        if let Some(default) = schema.get("default") {
            outln!("      default: {}", one_line(&default.to_string()));
        }
    }
    match &tool.output_schema {
        Some(schema) => {
            outln!("output schema:");
            let text = serde_json::to_string_pretty(schema).unwrap_or_default();
            for line in clean(&text).lines() {
                outln!("  {line}");
            }
        }
        None => outln!("output schema: (none)"),
    }
}

/// The options of `toolgate tools`.
#[derive(clap::Args)]
pub struct ToolsCommand {
    /// `[TARGET] [TOOL]`: the server (unless given after `--`), then a
    /// tool to show in full.
    #[arg(num_args = 0..=2, value_name = "TARGET/TOOL")]
    pub names: Vec<String>,
    /// Every server of the config file, one table (also what `--config
    /// FILE` alone does). A server that fails is reported and the rest
    /// still listed.
    #[arg(long)]
    pub all: bool,
    /// Print the definitions as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub reach: crate::args::ReachArgs,
    /// The server as a command over stdio.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `toolgate tools`, as the command line gave it.
pub async fn tools_command(command: ToolsCommand) -> anyhow::Result<u8> {
    let ToolsCommand {
        names,
        all,
        json,
        reach,
        command,
    } = command;
    let config_alone = names.is_empty() && command.is_empty() && reach.config.exists();
    if all || config_alone {
        if !names.is_empty() || !command.is_empty() {
            return Err(crate::exit::fail(
                crate::exit::USAGE,
                "--all lists every server of the config file; give no TARGET or COMMAND with it",
            ));
        }
        return tools_of_all(&reach.reach(), json).await;
    }
    let (target, tool) = crate::args::split_names(&names, &command);
    tools(
        target.as_deref(),
        tool.as_deref(),
        &command,
        &reach.reach(),
        json,
    )
    .await
}
