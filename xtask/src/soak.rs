//! `cargo xtask soak [--minutes N] [--rate R] [--listens L]`: two gateway
//! instances on one PostgreSQL and one Redis under a steady mixed load for
//! N minutes (default 30), with upstreams, PostgreSQL, Redis and one
//! instance broken on a schedule (the `soak` binary of the bench crate
//! says what and checks the outcome). This builds `toolgate`, the basket
//! and the soak in debug, installs Node, server-everything, PostgreSQL and
//! Redis when missing, starts PostgreSQL on a free loopback port, and
//! writes the report to `target/soak/report.md`. `ci` runs three minutes.

use std::process::Command;

use crate::{built, cargo, conformance, interop, root, run, services};

pub fn run_soak(args: &[String]) -> anyhow::Result<()> {
    cargo(&[
        "build",
        "--package",
        "toolgate",
        "--package",
        "basket",
        "--package",
        "toolgate-bench",
        "--bin",
        "toolgate",
        "--bin",
        "basket",
        "--bin",
        "soak",
    ])?;
    let node_bin = conformance::install()?;
    let everything = interop::install_legacy(&node_bin)?.join("mcp-server-everything");
    let redis = services::redis_server()?;
    // PostgreSQL on tmpfs when there is room: this disk stalls commits for
    // up to 0.4 s now and then, the same on every instance at once, which
    // is the disk's latency, not a drift of the gateway's.
    // A container's /dev/shm is often 64 MiB, too small for a cluster.
    let shm = std::path::Path::new("/dev/shm");
    let pg = if crate::free_space_at(shm).is_some_and(|free| free > 1 << 30) {
        services::Postgres::start_in(shm, "")?
    } else {
        // On disk, commits are acknowledged before the disk has them; a
        // clean stop (the soak's restart) still writes every one.
        services::Postgres::start_in(&std::env::temp_dir(), " -c synchronous_commit=off")?
    };
    let report = root().join("target/soak/report.md");
    let outcome = run(Command::new(built("debug", "soak"))
        .args(args)
        .arg("--report")
        .arg(&report)
        .env("TOOLGATE_SOAK_TOOLGATE", built("debug", "toolgate"))
        .env("TOOLGATE_SOAK_BASKET", built("debug", "basket"))
        .env("TOOLGATE_SOAK_EVERYTHING", &everything)
        .env("TOOLGATE_SOAK_NODE_DIR", &node_bin)
        .env("TOOLGATE_SOAK_REDIS_SERVER", &redis)
        .env("TOOLGATE_SOAK_POSTGRES", &pg.url)
        .env("TOOLGATE_SOAK_PG_CTL", pg.control())
        .current_dir(root()));
    drop(pg);
    outcome
}
