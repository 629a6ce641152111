//! The `toolgate` command.
//!
//! Today it offers the header codec of the Streamable HTTP transport, for
//! people writing proxies and WAF rules against `Mcp-Name` and
//! `Mcp-Param-*` headers. Listing, calling and auditing tools arrive with
//! the client crate.

use clap::{Parser, Subcommand};
use toolgate_protocol::header::{decode_header_value, encode_header_value};

#[derive(Parser)]
#[command(
    name = "toolgate",
    version,
    about = "Inspect, call and audit MCP tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Encode or decode an Mcp-Name / Mcp-Param-* header value.
    Header {
        #[command(subcommand)]
        action: HeaderAction,
    },
}

#[derive(Subcommand)]
enum HeaderAction {
    /// Print the header form of VALUE (plain, or =?base64?...?= when needed).
    Encode {
        /// The parameter value.
        value: String,
    },
    /// Print the value a received header carries.
    Decode {
        /// The header value as received.
        value: String,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Header {
            action: HeaderAction::Encode { value },
        } => println!("{}", encode_header_value(&value)),
        Command::Header {
            action: HeaderAction::Decode { value },
        } => {
            let decoded = decode_header_value(value.as_bytes())
                .map_err(|e| anyhow::anyhow!("invalid header value: {e}"))?;
            println!("{decoded}");
        }
    }
    Ok(())
}
