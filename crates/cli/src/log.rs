//! `toolgate log`: the gateway's audit store, as a table for people or
//! JSON lines for tools.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use serde_json::Value;
use toolgate_gateway::config::GatewayConfig;
use toolgate_gateway::store::AuditRow;
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::pg::PgStore;
use toolgate_gateway::store::sqlite::Filter;
use toolgate_protocol::error::with_causes;

use crate::term::one_line;
use crate::{errln, exit, outln};

/// What `toolgate log` was asked.
#[derive(clap::Args)]
pub struct LogArgs {
    /// The audit database: a SQLite file, or a `postgres://` URL (default:
    /// `[store] url` or `[audit] path` of the config file, else
    /// toolgate-audit.db).
    #[arg(long, value_name = "FILE|URL")]
    pub db: Option<PathBuf>,
    /// The gateway configuration whose audit store to read (default
    /// toolgate.toml when it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Only calls this recent: 90s, 15m, 2h, 7d.
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    /// Only tools matching this glob (gateway names, e.g. 'basket.*').
    #[arg(long, value_name = "GLOB")]
    pub tool: Option<String>,
    /// Only this caller (its verified subject).
    #[arg(long, value_name = "SUBJECT")]
    pub caller: Option<String>,
    /// Only this policy decision.
    #[arg(long, value_parser = ["allow", "confirm", "deny"])]
    pub decision: Option<String>,
    /// Only calls through this endpoint (`[endpoints.NAME]`; `-` for the
    /// default one at /mcp).
    #[arg(long, value_name = "NAME")]
    pub endpoint: Option<String>,
    /// At most this many (the newest).
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Keep printing new calls as they are recorded.
    #[arg(long, short, conflicts_with = "spend")]
    pub follow: bool,
    /// What calls cost under `[[budget]]`: the sums by UTC day, caller and
    /// tool (of the calls the other options select), then each budget's
    /// ledger: spent, and reserved by calls in flight (or by calls whose
    /// gateway stopped before their outcome was known).
    #[arg(long)]
    pub spend: bool,
    /// Check the call log beside the store (`[audit] durability`): every
    /// record's checksum; says what does not check out, and exits 1 if a
    /// record was altered.
    #[arg(long, conflicts_with_all = ["follow", "spend", "json"])]
    pub verify: bool,
}

use toolgate_gateway::base::duration::parse_duration;

/// `YYYY-MM-DD hh:mm:ss.mmm` UTC, from milliseconds since the epoch.
pub fn format_time(ms: i64) -> String {
    toolgate_gateway::base::duration::utc(ms, true)
}

/// Where the rows are.
pub enum Database {
    /// A SQLite file.
    File(PathBuf),
    /// A `postgres://` URL.
    Postgres(String),
}

fn is_postgres(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// The audit store `--db` names, or the one of `--config` (default
/// toolgate.toml when it exists), or toolgate-audit.db.
pub fn database(db: Option<&Path>, config: Option<&Path>) -> Result<Database, anyhow::Error> {
    if let Some(db) = db {
        let text = db.to_string_lossy();
        if is_postgres(&text) {
            return Ok(Database::Postgres(text.into_owned()));
        }
        return Ok(Database::File(db.to_owned()));
    }
    let config = config.map(Path::to_owned).or_else(|| {
        Path::new("toolgate.toml")
            .exists()
            .then(|| "toolgate.toml".into())
    });
    if let Some(path) = config {
        let config = GatewayConfig::load(&path)
            .map_err(|e| exit::fail(exit::USAGE, toolgate_protocol::error::with_causes(&e)))?;
        if let Some(url) = config.store.url.clone() {
            return Ok(Database::Postgres(url));
        }
        return config.audit_path().map(Database::File).ok_or_else(|| {
            exit::fail(
                exit::USAGE,
                format!("{}: [audit] is disabled there", path.display()),
            )
        });
    }
    Ok(Database::File(PathBuf::from("toolgate-audit.db")))
}

impl Database {
    /// Check the file exists, or connect to PostgreSQL.
    pub async fn open(&self) -> Result<Option<PgStore>, anyhow::Error> {
        match self {
            Database::File(path) if !path.exists() => Err(exit::fail(
                exit::USAGE,
                format!(
                    "no audit store at {} (toolgate serve writes it; give --db FILE or --config FILE)",
                    path.display()
                ),
            )),
            Database::File(_) => Ok(None),
            Database::Postgres(url) => {
                Ok(Some(PgStore::connect(url, false).await.map_err(|e| {
                    exit::fail_with(exit::PROTOCOL, "cannot open the audit store", e)
                })?))
            }
        }
    }
}

fn json_line(row: &AuditRow) -> String {
    let mut value = serde_json::to_value(row).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert("time".into(), Value::from(format_time(row.time_ms)));
    }
    value.to_string()
}

/// The tool column: the gateway tool, and for a call through an endpoint
/// where it came from (`coding: find_issue → t.search`).
/// A call through a searching endpoint's `call_tool` says so
/// (`work: t.send_email (via search)`).
fn tool_shown(r: &AuditRow) -> String {
    let tool = match (&r.endpoint, &r.shown) {
        (Some(e), Some(shown)) => format!("{e}: {shown} → {}", r.tool),
        (Some(e), None) => format!("{e}: {}", r.tool),
        _ => r.tool.clone(),
    };
    match &r.via {
        Some(via) => format!("{tool} (via {via})"),
        None => tool,
    }
}

/// `toolgate log --verify`.
fn verify(db: &Database) -> anyhow::Result<u8> {
    use toolgate_gateway::store::calllog::segment::End;
    let Database::File(path) = db else {
        return Err(exit::fail(
            exit::USAGE,
            "--verify checks the call log beside a SQLite store; PostgreSQL stores have none",
        ));
    };
    let dir = toolgate_gateway::store::calllog::logged::log_dir(path);
    if !dir.is_dir() {
        outln!(
            "no call log beside {} ([audit] durability is not set, or nothing was recorded yet)",
            path.display()
        );
        return Ok(exit::OK);
    }
    let report = toolgate_gateway::store::calllog::verify::verify(&dir)
        .map_err(|e| exit::fail(exit::USAGE, format!("reading {}: {e}", dir.display())))?;
    for s in &report.segments {
        let how = match s.end {
            End::Clean => "checks out".to_owned(),
            End::Torn { bytes, .. } => format!(
                "checks out; {bytes} bytes of a record cut short at the end (a write that did not finish; dropped at the next start)"
            ),
            End::Corrupt { at } => format!(
                "a record at byte {at} does not check out (the file was altered?); the records after it are not indexed"
            ),
        };
        outln!("{}: {} records, {how}", s.path.display(), s.records);
    }
    for aside in &report.set_aside {
        outln!(
            "{}: set aside when the gateway found a record in it that does not check out",
            aside.display()
        );
    }
    if report.segments.is_empty() && report.set_aside.is_empty() {
        outln!("{}: empty (everything is indexed)", dir.display());
    }
    Ok(if report.sound() {
        exit::OK
    } else {
        exit::FAILED
    })
}

/// The caller column: the verified caller, and the identity the call
/// carried upstream when it was not the gateway's (`alice → alice
/// (exchange)`).
fn caller_shown(r: &AuditRow) -> String {
    let caller = r.caller.as_deref().unwrap_or_default();
    match &r.identity {
        Some(identity) => format!("{caller} → {identity}"),
        None => caller.to_owned(),
    }
}

fn table(rows: &[AuditRow]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header([
            "time (UTC)",
            "caller",
            "tool",
            "decision",
            "confirmation",
            "status",
            "ms",
        ]);
    let text = |s: &Option<String>| s.as_deref().map(one_line).unwrap_or_default();
    for r in rows {
        let confirmation = one_line(&r.confirmation_shown());
        table.add_row([
            format_time(r.time_ms),
            one_line(&caller_shown(r)),
            one_line(&tool_shown(r)),
            text(&r.decision),
            confirmation,
            one_line(&r.status),
            format!("{:.1}", r.latency_ms),
        ]);
    }
    table
}

/// Run `toolgate log`.
pub async fn log(args: LogArgs) -> anyhow::Result<u8> {
    let db = database(args.db.as_deref(), args.config.as_deref())?;
    if args.verify {
        return verify(&db);
    }
    let pg = db.open().await?;
    let since_ms = match &args.since {
        Some(s) => {
            let back = parse_duration(s).map_err(|e| exit::fail(exit::USAGE, e.to_string()))?;
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            Some(now.saturating_sub(back).as_millis() as i64)
        }
        None => None,
    };
    let mut filter = Filter {
        since_ms,
        tool: args.tool.clone(),
        caller: args.caller.clone(),
        decision: args.decision.clone(),
        endpoint: args.endpoint.clone(),
        limit: Some(args.limit),
        ..Filter::default()
    };
    let read = async |filter: &Filter| match (&db, &pg) {
        (_, Some(pg)) => pg
            .query(filter)
            .await
            .map_err(|e| exit::fail(exit::PROTOCOL, with_causes(&e))),
        (Database::File(path), None) => {
            query(path, filter).map_err(|e| exit::fail(exit::USAGE, with_causes(&e)))
        }
        (Database::Postgres(_), None) => Ok(Vec::new()),
    };
    if args.spend {
        filter.limit = None;
        let rows = read(&filter).await?;
        print_spend(&rows, args.json);
        let balances = match (&db, &pg) {
            (_, Some(pg)) => {
                use toolgate_gateway::store::ledger::Ledger as _;
                pg.balances()
                    .await
                    .map_err(|e| exit::fail(exit::PROTOCOL, with_causes(&e)))?
            }
            (Database::File(path), None) => toolgate_gateway::store::sqlite::ledger::balances(path)
                .map_err(|e| exit::fail(exit::USAGE, with_causes(&e)))?,
            (Database::Postgres(_), None) => Vec::new(),
        };
        let balances: Vec<_> = balances
            .into_iter()
            .filter(|b| {
                args.caller
                    .as_ref()
                    .is_none_or(|c| b.key.scope == *c || b.key.scope == "*")
            })
            .collect();
        print_balances(&balances, args.json);
        return Ok(exit::OK);
    }
    let rows = read(&filter).await?;
    print(&rows, args.json, true);
    if !args.follow {
        return Ok(exit::OK);
    }
    let mut last = rows.last().map(|r| r.id).unwrap_or(0);
    filter.limit = None;
    loop {
        // A reader of a file another process writes: polling is the
        // portable way to notice new rows.
        tokio::time::sleep(Duration::from_millis(500)).await;
        filter.after_id = Some(last);
        let rows = read(&filter).await?;
        if let Some(r) = rows.last() {
            last = r.id;
            print(&rows, args.json, false);
        }
    }
}

/// Sums of what charged calls cost, by UTC day, caller and tool.
fn print_spend(rows: &[AuditRow], json: bool) {
    let mut sums: std::collections::BTreeMap<(String, String, String), (u64, f64)> =
        std::collections::BTreeMap::new();
    for r in rows {
        let Some(cost) = r.cost else { continue };
        let day = format_time(r.time_ms)[..10].to_owned();
        let caller = r.caller.clone().unwrap_or_else(|| "-".into());
        let sum = sums.entry((day, caller, r.tool.clone())).or_default();
        sum.0 += 1;
        sum.1 += cost;
    }
    if sums.is_empty() {
        errln!("no charged calls recorded that match");
        return;
    }
    if json {
        for ((day, caller, tool), (calls, spent)) in &sums {
            outln!(
                "{}",
                serde_json::json!({"day": day, "caller": caller, "tool": tool, "calls": calls, "spent": spent})
            );
        }
        return;
    }
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(["day (UTC)", "caller", "tool", "charged calls", "spent"]);
    for ((day, caller, tool), (calls, spent)) in &sums {
        table.add_row([
            day.clone(),
            one_line(caller),
            one_line(tool),
            calls.to_string(),
            format!("{spent}"),
        ]);
    }
    outln!("{table}");
}

/// Each budget's ledger: what is charged and what is held, per scope and
/// period. A reservation left by a gateway that stopped mid-call stays
/// held (budgets fail closed), and shows here.
fn print_balances(balances: &[toolgate_gateway::decide::budget::Balance], json: bool) {
    if json {
        for b in balances {
            outln!("{}", serde_json::json!(b));
        }
        return;
    }
    if balances.is_empty() {
        return;
    }
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(["budget", "whose", "period (UTC)", "spent", "reserved"]);
    for b in balances {
        let whose = match b.key.scope.as_str() {
            "*" => "everyone".to_owned(),
            "-" => "callers without credentials".to_owned(),
            caller => one_line(caller),
        };
        table.add_row([
            one_line(&b.key.budget),
            whose,
            b.key.period.clone(),
            format!("{}", b.spent),
            format!("{}", b.reserved),
        ]);
    }
    outln!("{table}");
}

fn print(rows: &[AuditRow], json: bool, first: bool) {
    if json {
        for r in rows {
            outln!("{}", json_line(r));
        }
    } else if !rows.is_empty() {
        outln!("{}", table(rows));
    } else if first {
        errln!("no calls recorded that match");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_column_says_whose_identity_went_upstream() {
        let mut row = AuditRow {
            caller: Some("alice".into()),
            ..AuditRow::default()
        };
        assert_eq!(caller_shown(&row), "alice");
        row.identity = Some("alice (exchange)".into());
        assert_eq!(caller_shown(&row), "alice → alice (exchange)");
    }

    #[test]
    fn the_tool_column_says_where_a_call_came_from_and_how() {
        let mut row = AuditRow {
            tool: "t.send_email".into(),
            endpoint: Some("work".into()),
            ..AuditRow::default()
        };
        assert_eq!(tool_shown(&row), "work: t.send_email");
        row.via = Some("search".into());
        assert_eq!(tool_shown(&row), "work: t.send_email (via search)");
    }

    #[test]
    fn times_are_utc_calendar_dates() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00.000");
        assert_eq!(format_time(951_782_400_123), "2000-02-29 00:00:00.123");
        assert_eq!(format_time(1_796_110_450_000), "2026-12-01 07:34:10.000");
    }
}
