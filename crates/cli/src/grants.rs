//! `toolgate grants`: the approvals people gave for a tool, for a while
//! (a policy rule's `remember`), listed and revoked.

use std::path::PathBuf;
use std::time::SystemTime;

use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use toolgate_gateway::base::time::now_ms;
use toolgate_gateway::decide::grants::{Grant, Revoked};
use toolgate_gateway::store::sqlite::grants;
use toolgate_protocol::error::with_causes;

use crate::log::{Database, database, format_time};
use crate::term::one_line;
use crate::{errln, exit, outln};

/// What `toolgate grants` was asked.
#[derive(clap::Args)]
pub struct GrantsArgs {
    /// The audit database: a SQLite file, or a `postgres://` URL (default:
    /// `[store] url` or `[audit] path` of the config file, else
    /// toolgate-audit.db).
    #[arg(long, value_name = "FILE|URL")]
    pub db: Option<PathBuf>,
    /// The gateway configuration whose audit store to read (default
    /// toolgate.toml when it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// End these grants now (the next call of the tool asks again).
    #[arg(long, value_name = "ID")]
    pub revoke: Vec<String>,
    /// List expired and revoked grants too.
    #[arg(long)]
    pub all: bool,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// Run `toolgate grants`.
pub async fn grants(args: GrantsArgs) -> anyhow::Result<u8> {
    let db = database(args.db.as_deref(), args.config.as_deref())?;
    let pg = db.open().await?;
    if !args.revoke.is_empty() {
        let mut status = exit::OK;
        for id in &args.revoke {
            let outcome = match (&db, &pg) {
                // The revocation is recorded as the command line's.
                (_, Some(pg)) => pg.revoke(id, "cli").await,
                // Beside a running gateway too, a call log's included: the
                // row takes an id above those the log has reserved.
                (Database::File(path), None) => grants::revoke(path, id, "cli"),
                (Database::Postgres(_), None) => Ok(Revoked::Unknown),
            }
            .map_err(|e| exit::fail(exit::PROTOCOL, with_causes(&e)))?;
            match outcome {
                Revoked::Now(g) => outln!(
                    "revoked {}: {} for {} (it was good until {} UTC)",
                    g.id,
                    one_line(&g.tool),
                    whom(&g),
                    format_time(g.expires_ms)
                ),
                Revoked::Already(g) => {
                    let now = now_ms(SystemTime::now());
                    errln!("{} had already ended ({})", g.id, g.state(now));
                }
                Revoked::Unknown => {
                    errln!(
                        "toolgate: no grant {id:?} in this audit store (toolgate grants --all lists them)"
                    );
                    status = exit::USAGE;
                }
            }
        }
        return Ok(status);
    }
    let list = match (&db, &pg) {
        (_, Some(pg)) => pg
            .grants(args.all)
            .await
            .map_err(|e| exit::fail(exit::PROTOCOL, with_causes(&e)))?,
        (Database::File(path), None) => {
            grants::list(path, args.all).map_err(|e| exit::fail(exit::USAGE, with_causes(&e)))?
        }
        (Database::Postgres(_), None) => Vec::new(),
    };
    let now = now_ms(SystemTime::now());
    if args.json {
        for g in &list {
            let mut value = serde_json::to_value(g).unwrap_or_default();
            if let Some(map) = value.as_object_mut() {
                map.insert("state".into(), g.state(now).into());
            }
            outln!("{value}");
        }
    } else if list.is_empty() {
        errln!(
            "{}",
            if args.all {
                "no grants recorded"
            } else {
                "no grants hold now (--all lists ended ones)"
            }
        );
    } else {
        outln!("{}", table(&list, now));
    }
    Ok(exit::OK)
}

fn whom(g: &Grant) -> String {
    g.caller
        .as_deref()
        .map_or_else(|| "every caller without credentials".to_owned(), one_line)
}

fn table(list: &[Grant], now: i64) -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header([
            "id",
            "caller",
            "tool",
            "state",
            "granted (UTC)",
            "until (UTC)",
        ]);
    for g in list {
        table.add_row([
            g.id.clone(),
            whom(g),
            one_line(&g.tool),
            g.state(now).to_owned(),
            format_time(g.created_ms),
            format_time(g.revoked_ms.unwrap_or(g.expires_ms)),
        ]);
    }
    table
}
