//! `toolgate audit --flows`: the flow classes of every tool of a
//! configuration and the combinations across its servers that can leak
//! private data or destroy on an injected instruction, each with the
//! `[flows]` rule that holds it at run time.

use toolgate_gateway::config::GatewayConfig;
use toolgate_review::{ServerTools, Severity};

use crate::review::Format;
use crate::term::one_line;
use crate::{exit, outln};

/// Report on `servers` (listed from the configuration at `config`, when
/// there is one) as `format`; the exit status `fail_on` calls for.
pub fn report(
    servers: &[ServerTools],
    config: Option<&std::path::Path>,
    format: Format,
    fail_on: Option<Severity>,
) -> anyhow::Result<u8> {
    let config = match config.filter(|p| p.exists()) {
        Some(path) => GatewayConfig::load(path)
            .map_err(|e| exit::fail(exit::USAGE, toolgate_protocol::error::with_causes(&e)))?,
        None => GatewayConfig::default(),
    };
    let (classed, findings) = toolgate_gateway::decide::flows::report(&config, servers)
        .map_err(|e| exit::fail(exit::USAGE, toolgate_protocol::error::with_causes(&e)))?;
    match format {
        Format::Json | Format::Sarif => crate::review::print_data(&findings, format)?,
        Format::Text => {
            let with: Vec<_> = classed.iter().filter(|t| !t.classes.is_empty()).collect();
            outln!(
                "Flow classes of {} tool(s) on {} server(s) ({} with a class):",
                classed.len(),
                servers.len(),
                with.len()
            );
            for t in with {
                outln!(
                    "  {}/{}: {}",
                    one_line(&t.server),
                    one_line(&t.tool),
                    one_line(&t.classes.explain())
                );
            }
            outln!();
            if findings.is_empty() {
                outln!(
                    "No combination of these tools can leak private data or destroy on an injected instruction."
                );
            } else {
                outln!(
                    "{} combination(s) that can leak or destroy:",
                    findings.len()
                );
                for f in &findings {
                    crate::review::print_finding(f, "held:    ");
                }
            }
        }
    }
    let failing = fail_on.is_some_and(|level| findings.iter().any(|f| f.severity >= level));
    Ok(if failing { exit::FAILED } else { exit::OK })
}
