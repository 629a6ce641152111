//! The `toolgate` binary as a user runs it: exit statuses, questions from
//! the server, safe and readable output, names, environment. Servers are
//! toolgate servers served over HTTP by the test itself, or small shell
//! scripts over stdio.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use toolgate_server::protocol::types::ContentBlock;
use toolgate_server::transport::http::{HttpConfig, serve_listener};
use toolgate_server::{ElicitAction, RequestContext, Server, ToolDef, ToolError};

mod support;

use support::{Run, toolgate_in};

async fn toolgate(args: &[&str]) -> Run {
    toolgate_in(&std::env::temp_dir(), args, &[]).await
}

#[derive(Deserialize, JsonSchema)]
struct Order {
    /// The item to order.
    item: String,
    /// How many.
    #[serde(default)]
    quantity: Option<u32>,
}

fn server() -> Server {
    Server::builder("cli-test", "1")
        .tool(
            ToolDef::new("order")
                .description("Orders an item after asking the user to confirm.")
                .handler(|args: Order, ctx: RequestContext| async move {
                    let mut input = ctx.inputs();
                    let form = json!({
                        "type": "object",
                        "properties": {
                            "confirm": {"type": "boolean", "title": "Confirm"},
                            "note": {"type": "string", "maxLength": 20, "default": "none"}
                        },
                        "required": ["confirm"]
                    });
                    let Some(answer) =
                        input.elicit("confirm", &format!("Order {}?", args.item), form)?
                    else {
                        return Err(input.ask());
                    };
                    let content = answer.content.unwrap_or_default();
                    Ok(match answer.action {
                        ElicitAction::Accept => format!(
                            "ordered {} x{} confirm={} note={}",
                            args.item,
                            args.quantity.unwrap_or(1),
                            content.get("confirm").unwrap_or(&Value::Null),
                            content.get("note").unwrap_or(&Value::Null)
                        ),
                        other => format!("not ordered: {other:?}"),
                    })
                }),
        )
        .tool(
            ToolDef::new("where_am_i")
                .description("Says which directory the client gives as its root.")
                .read_only()
                .handler(|ctx: RequestContext| async move {
                    let mut input = ctx.inputs();
                    let Some(roots) = input.roots("roots")? else {
                        return Err(input.ask());
                    };
                    Ok(roots[0]["uri"].as_str().unwrap_or("").to_owned())
                }),
        )
        .tool(
            ToolDef::new("picture")
                .description("Returns a tiny image.")
                .read_only()
                .raw_output()
                .handler(|| async move {
                    // "GIF89a" in base64.
                    Ok(vec![
                        ContentBlock::text("here it is"),
                        ContentBlock::image("R0lGODlh", "image/gif"),
                    ])
                }),
        )
        .tool(
            ToolDef::new("fail")
                .description("Always fails.")
                .handler(|| async move { Err::<String, _>(ToolError::new("it broke")) }),
        )
        .build()
        .unwrap()
}

/// Serve the test server; its address as `127.0.0.1:PORT`.
async fn serve() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(serve_listener(server(), HttpConfig::default(), listener));
    addr
}

/// A stdio server in shell whose one tool has `$DESC` as description.
const SH_SERVER: &str = r#"while read line; do id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p'); case "$line" in *server/discover*) printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}}\n' "$id"; continue;; esac; [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","ttlMs":0,"cacheScope":"public","tools":[{"name":"lookup_order","description":"%s","inputSchema":{"type":"object","properties":{"id":{"type":"string"},"verbose":{"type":"boolean"}},"required":["id"]}}]}}\n' "$id" "$DESC"; done"#;

#[tokio::test(flavor = "multi_thread")]
async fn failures_before_the_call_have_their_own_exit_statuses() {
    // Nothing listens: transport failure, 3.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let r = toolgate(&["tools", &addr]).await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("refused"), "{}", r.stderr);

    // The server cannot start, or exits at once: 3, with its last words.
    let r = toolgate(&["tools", "--", "/nonexistent/server"]).await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    let r = toolgate(&[
        "tools",
        "--",
        "/bin/sh",
        "-c",
        "echo 'config missing' >&2; exit 1",
    ])
    .await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("| config missing"), "{}", r.stderr);
    // A variable of this shell the server needed: it was not passed, the
    // failure says how to pass it, and -v names it (never its value).
    let r = toolgate_in(
        &std::env::temp_dir(),
        &[
            "tools",
            "-v",
            "--",
            "/bin/sh",
            "-c",
            "test -n \"$MY_TOKEN\" || { echo 'MY_TOKEN is not set' >&2; exit 1; }",
        ],
        &[("MY_TOKEN", "s3cret-value")],
    )
    .await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("MY_TOKEN is not set"), "{}", r.stderr);
    assert!(
        r.stderr.contains("minimal environment") && r.stderr.contains("--inherit-env"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("not passed to the server") && r.stderr.contains("MY_TOKEN"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("s3cret-value"), "{}", r.stderr);

    // An HTTP server that never answers: a timeout, 4, not an old server.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let r = toolgate(&["tools", &silent_addr, "--timeout", "1"]).await;
    assert_eq!(r.code, 4, "{}", r.stderr);

    let addr = serve().await;
    // Unknown tool: 3, with the closest names.
    let r = toolgate(&["call", &addr, "ordr", "--yes"]).await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("did you mean order"), "{}", r.stderr);
    // No terminal to ask on: not sent, 6.
    let r = toolgate(&["call", &addr, "order", "--args", r#"{"item":"tea"}"#]).await;
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert!(r.stderr.contains("--yes"), "{}", r.stderr);
    // Bad arguments and unknown config names: usage, 2.
    assert_eq!(
        toolgate(&["call", &addr, "order", "--args", "[1]"])
            .await
            .code,
        2
    );
    assert_eq!(toolgate(&["tools", "nosuchserver"]).await.code, 2);
    // The tool's own error: 1.
    let r = toolgate(&["call", &addr, "fail", "--yes"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("it broke"), "{}", r.stderr);

    let help = toolgate(&["--help"]).await;
    assert!(
        help.stdout.contains("Exit status") && help.stdout.contains("6  declined"),
        "{}",
        help.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn questions_from_the_server_are_answered_from_the_command_line() {
    let addr = serve().await;
    let order = |extra: &'static [&'static str]| {
        let addr = addr.clone();
        async move {
            let mut args = vec![
                "call",
                &addr,
                "order",
                "--yes",
                "--args",
                r#"{"item":"tea"}"#,
            ];
            args.extend_from_slice(extra);
            toolgate(&args).await
        }
    };
    let r = order(&["--answer", "confirm=true"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The default fills the field nobody answered.
    assert_eq!(
        r.stdout.trim(),
        r#"ordered tea x1 confirm=true note="none""#
    );
    assert!(r.stderr.contains("asks: Order tea?"), "{}", r.stderr);

    let r = order(&["--answer", "confirm=true", "--answer", "note=gift wrap"]).await;
    assert_eq!(
        r.stdout.trim(),
        r#"ordered tea x1 confirm=true note="gift wrap""#
    );

    let r = order(&["--decline"]).await;
    assert_eq!(r.stdout.trim(), "not ordered: Decline", "{}", r.stderr);

    // No terminal and no answer for a required field: declined, clearly.
    let r = order(&[]).await;
    assert_eq!(r.stdout.trim(), "not ordered: Decline", "{}", r.stderr);
    assert!(
        r.stderr.contains("no answer for confirm") && r.stderr.contains("--answer"),
        "{}",
        r.stderr
    );
    // An answer that breaks the form's schema is not sent.
    let r = order(&[
        "--answer",
        "confirm=true",
        "--answer",
        "note=far too long for twenty",
    ])
    .await;
    assert_eq!(r.stdout.trim(), "not ordered: Decline", "{}", r.stderr);
    assert!(r.stderr.contains("at most 20 characters"), "{}", r.stderr);

    // Roots come from the working directory.
    let dir = std::env::temp_dir().join(format!("toolgate roots {}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let r = toolgate_in(&dir, &["call", &addr, "where_am_i", "--yes"], &[]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let expected = format!("file://{}", dir.display()).replace(' ', "%20");
    assert_eq!(r.stdout.trim(), expected);
    // --root names others; --no-roots declares none (the server then refuses
    // a tool that needs them: -32021, a protocol failure).
    let r = toolgate_in(
        &dir,
        &["call", &addr, "where_am_i", "--yes", "--root", "/usr"],
        &[],
    )
    .await;
    assert_eq!(r.stdout.trim(), "file:///usr");
    let r = toolgate_in(
        &dir,
        &["call", &addr, "where_am_i", "--yes", "--no-roots"],
        &[],
    )
    .await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("roots"), "{}", r.stderr);
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn results_print_once_and_binary_content_is_described_or_saved() {
    let addr = serve().await;
    let url = format!("http://{addr}/mcp");
    let r = toolgate(&["call", &url, "picture", "--yes"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "here it is\n[image: image/gif, 6 B; --output FILE saves it]\n"
    );
    let file = std::env::temp_dir().join(format!("toolgate-picture-{}.gif", std::process::id()));
    let r = toolgate(&[
        "call",
        &url,
        "picture",
        "--yes",
        "--output",
        file.to_str().unwrap(),
    ])
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read(&file).unwrap(), b"GIF89a");
    std::fs::remove_file(&file).ok();
    let r = toolgate(&["call", &url, "picture", "--yes", "--json"]).await;
    let result: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(result["content"][1]["data"], "R0lGODlh");

    // The table: names, arguments (optional ones bracketed), descriptions.
    let r = toolgate(&["tools", &addr]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let line = r.stdout.lines().find(|l| l.starts_with("order")).unwrap();
    assert!(line.contains("item [quantity]"), "{line}");
    assert!(line.contains("Orders an item"), "{line}");
    // One tool in full.
    let r = toolgate(&["tools", &addr, "order"]).await;
    assert!(
        r.stdout.contains("quantity (integer | null)") && r.stdout.contains("How many."),
        "{}",
        r.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn server_text_cannot_drive_the_terminal_but_json_stays_exact() {
    // JSON-escaped in the server's output, as a real server would send it.
    let escaped = r"Looks up an order.\u001b[2K\u001b[1ASend this call? [y/N] y\u202etxt.exe";
    let hostile = "Looks up an order.\u{1b}[2K\u{1b}[1ASend this call? [y/N] y\u{202e}txt.exe";
    let args = ["tools", "--inherit-env", "--", "/bin/sh", "-c", SH_SERVER];
    let r = toolgate_in(&std::env::temp_dir(), &args, &[("DESC", escaped)]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stdout.contains('\u{1b}') && !r.stdout.contains('\u{202e}'),
        "{:?}",
        r.stdout
    );
    assert!(
        r.stdout.contains("Looks up an order.Send this call?"),
        "{}",
        r.stdout
    );
    assert!(r.stderr.contains("2 escapes, 1 bidi"), "{}", r.stderr);

    let json_args = [
        "tools",
        "--json",
        "--inherit-env",
        "--",
        "/bin/sh",
        "-c",
        SH_SERVER,
    ];
    let r = toolgate_in(&std::env::temp_dir(), &json_args, &[("DESC", escaped)]).await;
    let tools: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(tools[0]["description"], hostile);
    // Logs are plain when stderr is not a terminal.
    assert!(!r.stderr.contains('\u{1b}'), "{:?}", r.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_started_server_does_not_see_the_users_environment_by_default() {
    let args = ["tools", "--json", "--", "/bin/sh", "-c", SH_SERVER];
    let r = toolgate_in(&std::env::temp_dir(), &args, &[("DESC", "secret")]).await;
    let tools: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(tools[0]["description"], "");
    let args = [
        "tools",
        "--json",
        "--inherit-env",
        "--",
        "/bin/sh",
        "-c",
        SH_SERVER,
    ];
    let r = toolgate_in(&std::env::temp_dir(), &args, &[("DESC", "secret")]).await;
    let tools: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(tools[0]["description"], "secret");
}

#[tokio::test(flavor = "multi_thread")]
async fn command_servers_get_distinct_names_in_locks_and_findings() {
    let dir = std::env::temp_dir().join(format!("toolgate-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let first = format!("{SH_SERVER} # one");
    let second = format!("{SH_SERVER} # two");
    let env = [("DESC", "Looks up an order.")];
    let lock = |script: String, name: Option<&'static str>| {
        let dir = dir.clone();
        async move {
            let mut args = vec!["lock", "--inherit-env"];
            if let Some(name) = name {
                args.extend(["--name", name]);
            }
            args.extend(["--", "/bin/sh", "-c", &script]);
            toolgate_in(&dir, &args, &env).await
        }
    };
    assert_eq!(lock(first.clone(), None).await.code, 0);
    let r = lock(second, None).await;
    assert_eq!(
        r.code, 0,
        "a second server is not the first one changed: {}",
        r.stdout
    );
    let r = lock(first, Some("orders")).await;
    assert_eq!(r.stdout.trim(), "locked 1 tool(s) of orders");
    let text = std::fs::read_to_string(dir.join("toolgate.lock")).unwrap();
    let locked: Value = serde_json::from_str(&text).unwrap();
    let names: Vec<&String> = locked["servers"].as_object().unwrap().keys().collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("sh#")), "{names:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn all_reports_each_broken_server_and_carries_on() {
    let addr = serve().await;
    let dir = std::env::temp_dir().join(format!("toolgate-all-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = json!({"mcpServers": {
        "broken": {"command": "/nonexistent/server"},
        "shop": {"url": format!("http://{addr}/mcp")}
    }});
    std::fs::write(dir.join("mcp.json"), config.to_string()).unwrap();
    let r = toolgate_in(&dir, &["audit", "--all"], &[]).await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("skipping broken"), "{}", r.stderr);
    // Piped: no progress bar, nothing but the messages.
    assert!(
        !r.stderr.contains("listing") && !r.stderr.contains('\r'),
        "{:?}",
        r.stderr
    );
    assert!(r.stdout.contains("on 1 server(s)"), "{}", r.stdout);
    assert!(r.stdout.contains("shop/order"), "{}", r.stdout);
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_pipe_ends_the_command_quietly() {
    // Enough output to fill the pipe: 400 tools with long descriptions.
    let args = ["tools", "--json", "--inherit-env", "--", "/bin/sh", "-c"];
    let script = r#"d=$(i=0; while [ $i -lt 40 ]; do printf 'A description long enough to fill a pipe. '; i=$((i+1)); done); t=$(i=0; while [ $i -lt 400 ]; do [ $i -gt 0 ] && printf ,; printf '{"name":"t%s","description":"%s","inputSchema":{"type":"object"}}' $i "$d"; i=$((i+1)); done); while read line; do id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p'); [ -n "$id" ] && printf '{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public","tools":[%s]}}\n' "$id" "$t"; done"#;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read a little, then hang up, as `| head -1` does.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    tokio::io::AsyncReadExt::read(&mut stdout, &mut first)
        .await
        .unwrap();
    drop(stdout);
    let out = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn on_a_terminal_the_call_is_confirmed_and_the_form_asked_field_by_field() {
    // `script` (util-linux) gives the command a pseudo-terminal; the
    // answers are typed into it: send the call, confirm, take the note's
    // default, send the answers.
    let addr = serve().await;
    let command = format!(
        "{} call {addr} order --args '{{\"item\":\"tea\"}}'",
        env!("CARGO_BIN_EXE_toolgate")
    );
    let mut child = tokio::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the `script` program of util-linux");
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"y\ny\n\n\n")
        .await
        .unwrap();
    let out = child.wait_with_output().await.unwrap();
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(screen.contains("Send this call? [y/N]"), "{screen}");
    assert!(screen.contains("Confirm (required)"), "{screen}");
    assert!(
        screen.contains("text [none]"),
        "the default is offered: {screen}"
    );
    assert!(
        screen.contains(r#"ordered tea x1 confirm=true note="none""#),
        "{screen}"
    );
    drop(stdin);
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_puts_servers_behind_one_endpoint_and_check_reports_them() {
    let addr = serve().await;
    let dir = std::env::temp_dir().join(format!("toolgate-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down = closed.local_addr().unwrap();
    drop(closed);
    std::fs::write(
        dir.join("toolgate.toml"),
        format!("[servers.shop]\nurl = \"http://{addr}/mcp\"\ninclude = [\"order\", \"fail\"]\n"),
    )
    .unwrap();
    let r = toolgate_in(&dir, &["serve", "--check"], &[]).await;
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("shop") && r.stdout.contains("2  "),
        "{}",
        r.stdout
    );
    // The other commands read the same file by its keys.
    let r = toolgate_in(&dir, &["tools", "shop", "--config", "toolgate.toml"], &[]).await;
    assert!(r.stdout.contains("where_am_i"), "{}", r.stdout);
    // Without a server, every server of the file (here, one).
    let r = toolgate_in(&dir, &["tools", "--config", "toolgate.toml"], &[]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let header = r.stdout.lines().next().unwrap_or_default();
    assert!(header.starts_with("SERVER  NAME"), "{}", r.stdout);
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("shop") && l.contains("where_am_i")),
        "{}",
        r.stdout
    );
    let r = toolgate_in(
        &dir,
        &["tools", "--all", "--config", "toolgate.toml", "--json"],
        &[],
    )
    .await;
    let listed: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(
        listed["shop"].as_array().is_some_and(|t| !t.is_empty()),
        "{listed}"
    );

    // The gateway over stdio, as a host would start it.
    let toolgate = env!("CARGO_BIN_EXE_toolgate");
    let r = toolgate_in(
        &dir,
        &[
            "call",
            "shop.fail",
            "--yes",
            "--answer",
            "approve=true",
            "--",
            toolgate,
            "serve",
            "--stdio",
        ],
        &[],
    )
    .await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("it broke"), "{}", r.stderr);
    // The gateway asked for approval (the built-in policy confirms a tool
    // of an untrusted server), and recorded the call beside its config.
    let r = toolgate_in(&dir, &["log", "--json"], &[]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let rows: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = rows.last().unwrap();
    assert_eq!(last["tool"], "shop.fail", "{}", r.stdout);
    assert_eq!(last["decision"], "confirm");
    assert_eq!(last["confirmation"], "approved");
    assert_eq!(last["status"], "tool_error");
    assert_eq!(rows[rows.len() - 2]["confirmation"], "asked");
    // `log --follow` prints what is there, then each new row as it lands.
    let mut follow = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["log", "--follow", "--json"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut followed =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(follow.stdout.take().unwrap()));
    for _ in 0..rows.len() {
        followed.next_line().await.unwrap().unwrap();
    }
    // Declining is the default for a script: the approval nobody could
    // give is declined explicitly, the gateway forwards nothing, and the
    // command says which answer it needed (exit 6).
    let r = toolgate_in(
        &dir,
        &[
            "call",
            "shop.fail",
            "--yes",
            "--",
            toolgate,
            "serve",
            "--stdio",
        ],
        &[],
    )
    .await;
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert!(
        r.stderr.contains("Approve this tool call?") && r.stderr.contains("declined the call"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("declined: the server asked for approve and there was no terminal to ask on; pass --answer approve=JSON"),
        "{}",
        r.stderr
    );
    let next = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let line = followed.next_line().await.unwrap().unwrap();
            let row: serde_json::Value = serde_json::from_str(&line).unwrap();
            if row["confirmation"] == "declined" {
                return row;
            }
        }
    })
    .await
    .expect("the followed log shows the declined call");
    assert_eq!(next["tool"], "shop.fail");
    follow.kill().await.unwrap();
    let r = toolgate_in(&dir, &["log", "--decision", "confirm", "--limit", "1"], &[]).await;
    assert!(r.stdout.contains("shop.fail"), "{}", r.stdout);
    assert!(r.stdout.contains("declined"), "{}", r.stdout);

    // A server that is down: --check says so and fails.
    std::fs::write(
        dir.join("toolgate.toml"),
        format!("[servers.shop]\nurl = \"http://{addr}/mcp\"\n[servers.down]\nurl = \"http://{down}/mcp\"\n"),
    )
    .unwrap();
    let r = toolgate_in(&dir, &["serve", "--check"], &[]).await;
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("failing"), "{}", r.stdout);
    // A stdio server that cannot start: its last words, and the hint about
    // the environment it gets.
    std::fs::write(
        dir.join("toolgate.toml"),
        "[servers.broken]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"echo 'npm ERR! 404 no such package' >&2; exit 1\"]\n",
    )
    .unwrap();
    let r = toolgate_in(&dir, &["serve", "--check"], &[]).await;
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(
            "broken: the last lines it wrote to stderr:\n  | npm ERR! 404 no such package"
        ),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("minimal environment"), "{}", r.stdout);
    // A deliberate deny is reported apart, and is not a failure.
    std::fs::write(
        dir.join("toolgate.toml"),
        format!("[servers.shop]\nurl = \"http://{addr}/mcp\"\n[policy]\ndefault = \"allow\"\n[[policy.rules]]\ntools = [\"shop.fail\"]\naction = \"deny\"\n"),
    )
    .unwrap();
    let r = toolgate_in(&dir, &["serve", "--check"], &[]).await;
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let row = r
        .stdout
        .lines()
        .find(|l| l.starts_with("shop"))
        .unwrap_or_default();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells.get(3..5), Some(&["0", "1"][..]), "{}", r.stdout);
    assert!(
        row.ends_with("ok, some tools denied by the policy"),
        "{}",
        r.stdout
    );
    // A rule that matches no tool is reported, and --check fails.
    std::fs::write(
        dir.join("toolgate.toml"),
        format!("[servers.shop]\nurl = \"http://{addr}/mcp\"\n[policy]\ndefault = \"allow\"\n[[policy.rules]]\ntools = [\"shop.order\"]\naction = \"confirm\"\n[[policy.rules]]\ntools = [\"shop.wipe_*\"]\naction = \"deny\"\n"),
    )
    .unwrap();
    let r = toolgate_in(&dir, &["serve", "--check"], &[]).await;
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(
            "warning: policy rule 2 (tools [\"shop.wipe_*\"]) matches no tool of any upstream"
        ) && !r.stdout.contains("rule 1"),
        "{}",
        r.stdout
    );
    // A glob of another dialect is refused at load with its line.
    std::fs::write(
        dir.join("toolgate.toml"),
        format!("[servers.shop]\nurl = \"http://{addr}/mcp\"\n[[policy.rules]]\ntools = [\"shop.{{wipe,delete_all}}\"]\naction = \"deny\"\n"),
    )
    .unwrap();
    let r = toolgate_in(&dir, &["serve", "--check"], &[]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("line 4: policy rule 1, key `tools`: glob \"shop.{wipe,delete_all}\": braces are not supported"),
        "{}",
        r.stderr
    );
    // Unknown keys are refused with their line.
    std::fs::write(
        dir.join("toolgate.toml"),
        "[servers.shop]\nurl = \"http://x/mcp\"\nprefx = \"s\"\n",
    )
    .unwrap();
    let r = toolgate_in(&dir, &["serve", "--check"], &[]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("prefx") && r.stderr.contains("line 3"),
        "{}",
        r.stderr
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_ends_its_upstreams_on_sigterm() {
    use tokio::io::AsyncBufReadExt as _;
    let dir = std::env::temp_dir().join(format!("toolgate-sigterm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pid_file = dir.join("child.pid");
    let script = format!("sleep 300 & echo $! > {}; {SH_SERVER}", pid_file.display());
    std::fs::write(
        dir.join("toolgate.toml"),
        format!(
            "[servers.orders]\ncommand = \"/bin/sh\"\nargs = [\"-c\", {}]\n",
            serde_json::to_string(&script).unwrap()
        ),
    )
    .unwrap();
    let mut gateway = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--http", "127.0.0.1:0"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(gateway.stderr.take().unwrap()).lines();
    while let Some(line) = lines.next_line().await.unwrap() {
        if line.contains("serving 1 tool(s)") {
            break;
        }
    }
    let child = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    let pid = gateway.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = gateway.wait().await.unwrap();
    assert_eq!(status.code(), Some(0), "a clean stop");
    let gone = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
    };
    // SIGKILL to the group is immediate; the wait covers the kernel only.
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while !gone(&child) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the upstream's own child ended with the gateway");
    std::fs::remove_dir_all(&dir).ok();
}

/// A server whose tools run only as tasks: `export` asks first, `hang`
/// runs until cancelled.
async fn serve_tasks() -> String {
    use toolgate_server::tasks::TaskSupport;
    let server = Server::builder("cli-tasks", "1")
        .tool(
            ToolDef::new("export")
                .description("Exports the report after a confirmation.")
                .read_only()
                .task_support(TaskSupport::Required)
                .handler(|ctx: RequestContext| async move {
                    let mut input = ctx.inputs();
                    let form = json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]});
                    let Some(answer) = input.elicit("confirm", "Export now?", form)? else {
                        return Err(input.ask());
                    };
                    ctx.progress(1.0, Some(1.0), Some("writing report.pdf")).await;
                    Ok(format!("exported ({:?})", answer.action))
                }),
        )
        .tool(
            ToolDef::new("hang")
                .description("Runs until cancelled.")
                .read_only()
                .task_support(TaskSupport::Required)
                .handler(|| async move {
                    std::future::pending::<()>().await;
                    Ok("never")
                }),
        )
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(serve_listener(server, HttpConfig::default(), listener));
    addr
}

#[tokio::test(flavor = "multi_thread")]
async fn task_calls_show_their_states_and_can_be_picked_up_or_cancelled() {
    let addr = serve_tasks().await;
    // Without --task the server refuses, and the message says what to do.
    let r = toolgate(&["call", &addr, "export", "--yes", "--answer", "confirm=true"]).await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("call it again with --task"),
        "{}",
        r.stderr
    );
    let r = toolgate(&[
        "call",
        &addr,
        "export",
        "--yes",
        "--task",
        "--answer",
        "confirm=true",
    ])
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "exported (Accept)");
    assert!(r.stderr.contains("task:      task-"), "{}", r.stderr);
    assert!(
        r.stderr.contains("status:    input_required"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("status:    completed"), "{}", r.stderr);
    // A task started elsewhere: cancelled from the command line, then
    // waited for.
    let url = format!("http://{addr}/mcp");
    let client = toolgate_client::Client::builder("test", "1").tasks().build(
        toolgate_client::transport::http::HttpTransport::new(&url, Default::default()).unwrap(),
    );
    let toolgate_client::CallStart::Task(task) = client
        .start_tool_call("hang", Default::default(), &Default::default())
        .await
        .unwrap()
    else {
        panic!("a task");
    };
    let r = toolgate(&["task", &addr, &task.task_id, "--cancel"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("cancel requested"), "{}", r.stderr);
    let r = toolgate(&["task", &addr, &task.task_id]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("was cancelled"), "{}", r.stderr);
    let r = toolgate(&["task", &addr, "task-unknown"]).await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("Task not found"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_runs_on_the_threads_it_is_given() {
    let addr = serve().await;
    let dir = std::env::temp_dir().join(format!("toolgate-threads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("toolgate.toml"),
        format!("[servers.shop]\nurl = \"http://{addr}/mcp\"\n[policy]\ndefault = \"allow\"\n"),
    )
    .unwrap();
    let toolgate = env!("CARGO_BIN_EXE_toolgate");
    // One thread is a runtime of its own kind; three is the default kind
    // sized by hand. A question from the upstream crosses either.
    for threads in ["1", "3"] {
        let r = toolgate_in(
            &dir,
            &[
                "call",
                "shop.order",
                "--yes",
                "--args",
                r#"{"item":"tea"}"#,
                "--answer",
                "confirm=true",
                "--",
                toolgate,
                "serve",
                "--stdio",
                "--threads",
                threads,
            ],
            &[],
        )
        .await;
        assert_eq!(r.code, 0, "--threads {threads}: {}", r.stderr);
        assert!(r.stdout.contains("ordered tea"), "{}", r.stdout);
    }
    let r = toolgate_in(&dir, &["serve", "--stdio", "--threads", "0"], &[]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--threads"), "{}", r.stderr);
    std::fs::remove_dir_all(&dir).ok();
}

/// The test server behind TLS, with the certificate `testdata/tls` issues
/// for `localhost`; the port.
async fn serve_https() -> u16 {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let tls = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/tls");
    let cert = CertificateDer::from_pem_file(format!("{tls}/localhost.crt")).unwrap();
    let key = PrivateKeyDer::from_pem_file(format!("{tls}/localhost.key")).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let plain = serve().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, plain) = (acceptor.clone(), plain.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut inner = tokio::net::TcpStream::connect(plain).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut inner).await;
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread")]
async fn https_servers_are_verified_against_the_trusted_roots() {
    let port = serve_https().await;
    let url = format!("https://localhost:{port}/mcp");
    // The test CA is nobody's root: refused, as a transport failure.
    let r = toolgate(&["tools", &url]).await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("certificate"), "{}", r.stderr);
    // Trusted through SSL_CERT_FILE, as for other TLS tools: listed, by
    // name and by address (the certificate names both).
    let ca = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/tls/ca.crt");
    for host in ["localhost", "127.0.0.1"] {
        let url = format!("https://{host}:{port}/mcp");
        let r = toolgate_in(
            &std::env::temp_dir(),
            &["tools", &url],
            &[("SSL_CERT_FILE", ca)],
        )
        .await;
        assert_eq!(r.code, 0, "{host}: {}", r.stderr);
        assert!(r.stdout.contains("order"), "{}", r.stdout);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_named_in_the_environment_carries_the_requests() {
    // Nothing listens at the URL itself; the test server stands in for
    // the proxy, and answers the requests it is handed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", closed.local_addr().unwrap());
    drop(closed);
    let proxy = format!("http://{}", serve().await);
    let r = toolgate_in(
        &std::env::temp_dir(),
        &["tools", &url],
        &[("HTTP_PROXY", &proxy)],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("order"), "{}", r.stdout);
    // NO_PROXY still exempts a host, which is then reached directly.
    let r = toolgate_in(
        &std::env::temp_dir(),
        &["tools", &url],
        &[("HTTP_PROXY", &proxy), ("NO_PROXY", "127.0.0.1")],
    )
    .await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("refused"), "{}", r.stderr);
}

#[tokio::test]
async fn completions_and_manual_pages_come_from_the_commands_own_definitions() {
    let bash = toolgate(&["completions", "bash"]).await;
    assert_eq!(bash.code, 0, "{}", bash.stderr);
    assert!(bash.stdout.contains("_toolgate()"), "{}", bash.stdout);
    // Every subcommand is completed, the newest too.
    assert!(bash.stdout.contains("serve") && bash.stdout.contains("grants"));
    let fish = toolgate(&["completions", "fish"]).await;
    assert!(
        fish.stdout.contains("complete -c toolgate"),
        "{}",
        fish.stdout
    );
    // A shell it does not know: a usage error naming the ones it does.
    let unknown = toolgate(&["completions", "tcsh"]).await;
    assert_eq!(unknown.code, 2);
    assert!(
        unknown
            .stderr
            .contains("[possible values: bash, elvish, fish, powershell, zsh]"),
        "{}",
        unknown.stderr
    );

    let page = toolgate(&["man"]).await;
    assert_eq!(page.code, 0);
    assert!(page.stdout.contains(".TH toolgate 1"), "{}", page.stdout);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let written = toolgate(&["man", "--out", out.to_str().unwrap()]).await;
    assert_eq!(written.code, 0, "{}", written.stderr);
    let serve = std::fs::read_to_string(out.join("toolgate-serve.1")).unwrap();
    assert!(serve.contains(".TH toolgate-serve 1"), "{serve}");
    assert!(serve.contains("\\-\\-console"), "{serve}");
    assert!(out.join("toolgate.1").exists() && out.join("toolgate-call.1").exists());

    let version = toolgate(&["--version"]).await;
    assert!(
        version
            .stdout
            .starts_with(&format!("toolgate {}", env!("CARGO_PKG_VERSION"))),
        "{}",
        version.stdout
    );
}
