//! Exit statuses, one meaning each, the same for every subcommand.

use std::process::ExitCode;

use toolgate_client::ClientError;

/// Success.
pub const OK: u8 = 0;
/// The tool reported an error, or its task ended without a result (`call`,
/// `task`); findings at `--fail-on` (`audit`);
/// definitions differ from the lock (`lock`, `verify`).
pub const FAILED: u8 = 1;
/// Bad command line or local input: arguments, config file, lock file.
pub const USAGE: u8 = 2;
/// A transport or protocol failure: the server could not be reached,
/// failed to start or exited, sent something invalid, refused a request,
/// or has no such tool.
pub const PROTOCOL: u8 = 3;
/// No answer in time.
pub const TIMEOUT: u8 = 4;
/// The result breaks the tool's output schema.
pub const OUTPUT_SCHEMA: u8 = 5;
/// Declined or not sent: the person said no, there was no terminal to ask
/// on, or the call was refused before it was sent.
pub const DECLINED: u8 = 6;

/// The table shown at the end of `--help`.
pub const HELP: &str = "\
Exit status:
  0  success
  1  the tool reported an error, or its task was cancelled (call, task);
     findings at --fail-on (audit); definitions differ from the lock
     (lock, verify)
  2  bad arguments, config file or lock file
  3  transport or protocol failure: server unreachable, failed to start or
     exited, invalid answer, request refused, unknown tool
  4  timeout
  5  the result breaks the tool's outputSchema
  6  declined or not sent (confirmation refused, no terminal to ask on)";

/// An error that carries its own exit status.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Exit {
    /// The status.
    pub code: u8,
    /// What to print after `toolgate: `.
    pub message: String,
}

/// An error with this status.
pub fn fail(code: u8, message: impl Into<String>) -> anyhow::Error {
    Exit {
        code,
        message: message.into(),
    }
    .into()
}

/// An error with this status that says `context` and keeps `cause` in its
/// chain, so the line printed (`{:#}`) ends with what failed underneath.
pub fn fail_with(
    code: u8,
    context: impl Into<String>,
    cause: impl std::error::Error + Send + Sync + 'static,
) -> anyhow::Error {
    anyhow::Error::new(cause).context(Exit {
        code,
        message: context.into(),
    })
}

/// The status for a client failure.
pub fn for_client(error: &ClientError) -> u8 {
    match error {
        ClientError::Tool { .. } | ClientError::TaskEnded { .. } => FAILED,
        ClientError::Timeout(_) => TIMEOUT,
        ClientError::OutputSchema { .. } => OUTPUT_SCHEMA,
        ClientError::Denied(_) => DECLINED,
        _ => PROTOCOL,
    }
}

/// The status for any failure: the first [`Exit`] or [`ClientError`] in
/// its chain decides; anything else is a local problem.
pub fn for_error(error: &anyhow::Error) -> u8 {
    // An `Exit` given as context (`fail_with`) is reachable only through
    // the error itself, not as a link of its chain.
    if let Some(exit) = error.downcast_ref::<Exit>() {
        return exit.code;
    }
    for cause in error.chain() {
        if let Some(exit) = cause.downcast_ref::<Exit>() {
            return exit.code;
        }
        if let Some(client) = cause.downcast_ref::<ClientError>() {
            return for_client(client);
        }
    }
    USAGE
}

/// `code` as a process exit code.
pub fn code(code: u8) -> ExitCode {
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_given_with_its_cause_is_the_one_returned() {
        let cause = std::io::Error::other("connection refused");
        let e = fail_with(PROTOCOL, "cannot open the audit store", cause);
        assert_eq!(for_error(&e), PROTOCOL);
        assert_eq!(
            format!("{e:#}"),
            "cannot open the audit store: connection refused"
        );
    }
}
