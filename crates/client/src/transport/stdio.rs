//! A server run as a child process, spoken to over its stdin and stdout.
//!
//! Requests are written as lines; a reader task routes each response (by id)
//! and each notification (by `progressToken` or subscription id, which the
//! client sets to the request id) to its request. The child's stderr goes to
//! this process's logs, bounded (see [`Limits`]), and its last lines are
//! kept for error reports ([`StdioTransport::stderr_tail`]). When the child
//! exits, every pending request fails at once with the exit status.
//! Dropping the transport kills the child.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::lines::{BoundedLines, Line};
use super::router::Router;
use super::{
    Limits, NotifyFuture, Outgoing, Pending, SendFuture, ServerRequestHandler, Transport,
    TransportKind,
};
use crate::ClientError;

/// How to start the server.
///
/// By default the server gets a minimal environment: the variables in
/// [`MINIMAL_ENV`] that are set here, plus [`StdioCommand::env`]. A server
/// you are still evaluating then cannot read the tokens and keys that sit in
/// a developer's shell; set [`StdioCommand::inherit_env`] to pass everything.
///
/// ```
/// use toolgate_client::transport::stdio::StdioCommand;
///
/// let command = StdioCommand {
///     program: "npx".into(),
///     args: vec!["-y".into(), "@modelcontextprotocol/server-everything".into()],
///     env: vec![("LOG_LEVEL".into(), "debug".into())],
///     ..Default::default()
/// };
/// assert!(!command.inherit_env);
/// ```
#[derive(Clone, Debug, Default)]
pub struct StdioCommand {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// Pass this process's whole environment instead of [`MINIMAL_ENV`].
    pub inherit_env: bool,
    /// Start the server in a process group of its own, and end the whole
    /// group when the transport is dropped: what a launcher such as `npx`
    /// started goes too. For programs that run servers in the background
    /// (a gateway); an interactive program leaves it off, so that Ctrl-C on
    /// the terminal reaches the server as well. Unix only.
    pub process_group: bool,
}

/// The variables a server started with a minimal environment keeps: what
/// programs need to find executables, a home directory, a locale, a
/// temporary directory, and the network as this machine reaches it (proxy
/// settings and extra CA certificates: without them `npx` and `uvx` cannot
/// even download the server). `LC_*` variables are kept too.
pub const MINIMAL_ENV: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "TMPDIR",
    "TZ",
    "LANG",
    "LANGUAGE",
    // Windows needs these to start most programs at all.
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "WINDIR",
    "COMSPEC",
    "PATHEXT",
    "TEMP",
    "TMP",
    "USERPROFILE",
    "APPDATA",
    "LOCALAPPDATA",
    "PROGRAMDATA",
];

fn kept_in_minimal_env(name: &str) -> bool {
    name.starts_with("LC_") || MINIMAL_ENV.iter().any(|k| k.eq_ignore_ascii_case(name))
}

/// How many of the child's last stderr lines are kept for error reports.
const STDERR_TAIL: usize = 20;

/// The last stderr lines of a started server (see
/// [`StdioTransport::stderr_handle`]).
#[derive(Clone, Debug)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    /// The last lines the server wrote to its stderr, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().iter().cloned().collect()
    }
}

/// The exit of a started server, as an event (see
/// [`StdioTransport::exit_handle`]).
#[derive(Clone, Debug)]
pub struct ExitWatch(tokio::sync::watch::Receiver<Option<String>>);

impl ExitWatch {
    /// Resolves with the exit status once the server has exited (its
    /// stdout closed and the process reaped), or once the transport is
    /// gone.
    pub async fn exited(mut self) -> String {
        match self.0.wait_for(Option::is_some).await {
            Ok(status) => status.clone().unwrap_or_default(),
            Err(_) => "the transport was dropped".to_owned(),
        }
    }
}

/// The stdio transport.
pub struct StdioTransport {
    router: Router,
    exited: Arc<Mutex<Option<String>>>,
    exit: tokio::sync::watch::Receiver<Option<String>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    _child: Arc<tokio::sync::Mutex<Child>>,
    _group: Group,
}

/// A child's process group, ended (SIGKILL to every member) on drop.
struct Group(Option<u32>);

impl Drop for Group {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self
            .0
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            // Already gone is fine: nothing is left to end.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

impl StdioTransport {
    /// Start the server, with the default [`Limits`].
    pub fn spawn(command: &StdioCommand) -> Result<Self, ClientError> {
        Self::spawn_with(command, Limits::default())
    }

    /// The last lines the server wrote to its stderr (at most 20, each cut
    /// to [`Limits::max_stderr_line_bytes`]): what to show when it fails.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr_tail.lock().iter().cloned().collect()
    }

    /// A handle on the same stderr tail that outlives moving the transport
    /// into a [`Client`](crate::Client): keep it to show the server's last
    /// words when a request fails.
    pub fn stderr_handle(&self) -> StderrTail {
        StderrTail(self.stderr_tail.clone())
    }

    /// A handle that resolves when the server exits: whoever keeps it
    /// learns of the exit as it happens, not at its next request.
    pub fn exit_handle(&self) -> ExitWatch {
        ExitWatch(self.exit.clone())
    }

    /// Start the server with these bounds on what it may send.
    pub fn spawn_with(command: &StdioCommand, limits: Limits) -> Result<Self, ClientError> {
        let mut cmd = Command::new(&command.program);
        if !command.inherit_env {
            // Names only, never values: what a server that fails for want
            // of a variable did not get.
            let mut withheld: Vec<String> = std::env::vars_os()
                .filter_map(|(k, _)| k.into_string().ok())
                .filter(|k| !kept_in_minimal_env(k) && !command.env.iter().any(|(e, _)| e == k))
                .collect();
            if !withheld.is_empty() {
                withheld.sort();
                tracing::info!(server = %command.program, "not passed to the server (set them in its env, or inherit the environment): {}", withheld.join(", "));
            }
        }
        if !command.inherit_env {
            cmd.env_clear().envs(
                std::env::vars_os().filter(|(k, _)| k.to_str().is_some_and(kept_in_minimal_env)),
            );
        }
        cmd.args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = &command.cwd {
            cmd.current_dir(dir);
        }
        #[cfg(unix)]
        if command.process_group {
            cmd.process_group(0);
        }
        let mut child = cmd.spawn().map_err(|e| {
            ClientError::transport_because(format!("cannot start {:?}", command.program), e)
        })?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ClientError::transport(
                "the child's standard streams are unavailable",
            ));
        };
        let group = Group(command.process_group.then(|| child.id()).flatten());
        let stderr_tail: Arc<Mutex<VecDeque<String>>> = Arc::default();
        let stderr_read = tokio::spawn(read_stderr(
            stderr,
            command.program.clone(),
            limits.clone(),
            stderr_tail.clone(),
        ));
        let (writer, mut queue) = mpsc::channel::<Vec<u8>>(256);
        tokio::spawn(async move {
            while let Some(mut line) = queue.recv().await {
                line.push(b'\n');
                if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        });
        let router = Router::new(writer, &limits);
        let exited = Arc::new(Mutex::new(None));
        let (exit_tx, exit) = tokio::sync::watch::channel(None);
        let child = Arc::new(tokio::sync::Mutex::new(child));
        tokio::spawn(read_loop(
            Reader {
                stdout,
                router: router.clone(),
                exited: exited.clone(),
                exit: exit_tx,
                child: child.clone(),
                program: command.program.clone(),
                stderr_read,
            },
            limits,
        ));
        Ok(Self {
            router,
            exited,
            exit,
            stderr_tail,
            _child: child,
            _group: group,
        })
    }
}

/// Drain the child's stderr so it never blocks on a full pipe: log up to
/// [`Limits::max_stderr_lines`] lines, each cut to
/// [`Limits::max_stderr_line_bytes`], and keep the last few for errors.
async fn read_stderr(
    stderr: impl tokio::io::AsyncRead + Unpin,
    program: String,
    limits: Limits,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    let mut lines = BoundedLines::new(stderr, limits.max_stderr_line_bytes);
    let mut logged = 0usize;
    while let Some(next) = lines.next().await {
        let line = match next {
            Line::Line(bytes) => String::from_utf8_lossy(&bytes).trim_end().to_owned(),
            Line::TooLong => format!(
                "[a line longer than {} bytes, not shown]",
                limits.max_stderr_line_bytes
            ),
        };
        // Kept before it is logged: a failure reported meanwhile shows it.
        {
            let mut tail = tail.lock();
            if tail.len() == STDERR_TAIL {
                tail.pop_front();
            }
            tail.push_back(line.clone());
        }
        if logged < limits.max_stderr_lines {
            tracing::info!(target: "toolgate_client::server_stderr", server = %program, "{line}");
        } else if logged == limits.max_stderr_lines {
            tracing::warn!(
                server = %program,
                "the server wrote more than {} stderr lines; the rest are not logged",
                limits.max_stderr_lines
            );
        }
        logged = logged.saturating_add(1);
    }
}

/// What the stdout reader works with.
struct Reader {
    stdout: tokio::process::ChildStdout,
    router: Router,
    exited: Arc<Mutex<Option<String>>>,
    /// Told the exit status as soon as the process is reaped.
    exit: tokio::sync::watch::Sender<Option<String>>,
    child: Arc<tokio::sync::Mutex<Child>>,
    program: String,
    /// The stderr reader: its last lines are in the tail once it ends.
    stderr_read: tokio::task::JoinHandle<()>,
}

/// How long an exit's report waits for the server's last stderr lines (a
/// grandchild may keep the pipe open: then they are not waited for).
const LAST_WORDS: Duration = Duration::from_millis(500);

async fn read_loop(reader: Reader, limits: Limits) {
    let Reader {
        stdout,
        router,
        exited,
        exit,
        child,
        program,
        stderr_read,
    } = reader;
    let mut lines = BoundedLines::new(stdout, limits.max_message_bytes);
    while let Some(line) = lines.next().await {
        let line = match line {
            Line::Line(line) => line,
            Line::TooLong => {
                // Which request the oversized message answered cannot be
                // told, so every pending one fails; the codec skips to the
                // next line and the server stays usable for new requests.
                tracing::warn!(server = %program, "a message over max_message_bytes was dropped");
                router
                    .fail_all(|| ClientError::LimitExceeded {
                        server: program.clone(),
                        limit: "max_message_bytes",
                        detail: format!("a message larger than {} bytes", limits.max_message_bytes),
                    })
                    .await;
                continue;
            }
        };
        if line.trim_ascii().is_empty() {
            continue;
        }
        match serde_json::from_slice::<Value>(&line) {
            Ok(value) => router.dispatch(value).await,
            Err(e) => {
                tracing::warn!(error = %e, "the server wrote a line that is not JSON; ignored")
            }
        }
    }
    // The server closed stdout: it has exited or is about to.
    let status = match child.lock().await.wait().await {
        Ok(s) => s.to_string(),
        Err(e) => format!("unknown status: {e}"),
    };
    // Whoever watches learns of it now; requests fail below, once the
    // last stderr lines are in.
    exit.send_replace(Some(status.clone()));
    // The exit is reported with the server's last words: its stderr ends
    // with it, and the reader may not have taken the last lines yet.
    let _ = tokio::time::timeout(LAST_WORDS, stderr_read).await;
    *exited.lock() = Some(status.clone());
    router
        .fail_all(|| ClientError::ServerExited(status.clone()))
        .await;
}

impl Transport for StdioTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Stdio
    }

    fn session_notifications(&self) -> Option<tokio::sync::broadcast::Receiver<Value>> {
        Some(self.router.session_notifications())
    }

    fn notify(&self, body: Vec<u8>, _legacy: Option<String>) -> NotifyFuture<'_> {
        Box::pin(async move {
            if self.router.write(body).await {
                Ok(())
            } else {
                Err(ClientError::ServerExited("stdin closed".into()))
            }
        })
    }

    fn on_server_request(&self, handler: ServerRequestHandler) {
        self.router.on_server_request(handler);
    }

    fn server_requests_answered(&self) -> NotifyFuture<'_> {
        Box::pin(self.router.server_requests_answered())
    }

    fn send(&self, request: Outgoing) -> SendFuture<'_> {
        Box::pin(async move {
            if let Some(status) = self.exited.lock().clone() {
                return Err(ClientError::ServerExited(status));
            }
            let rx = self.router.expect(request.id.clone());
            if !self.router.write(request.body).await {
                self.router.forget(&request.id);
                let status = self
                    .exited
                    .lock()
                    .clone()
                    .unwrap_or_else(|| "stdin closed".into());
                return Err(ClientError::ServerExited(status));
            }
            let on_drop = self.router.cancel_on_drop(request.id);
            Ok(Pending::stream(rx, Some(on_drop)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stderr_is_drained_with_long_lines_cut_and_the_tail_kept() {
        let mut input = format!("{}\n", "e".repeat(10_000));
        for i in 0..25 {
            input.push_str(&format!("line {i}\n"));
        }
        let tail: Arc<Mutex<VecDeque<String>>> = Arc::default();
        let limits = Limits {
            max_stderr_lines: 3,
            ..Limits::default()
        };
        read_stderr(input.as_bytes(), "srv".into(), limits, tail.clone()).await;
        let tail: Vec<String> = tail.lock().iter().cloned().collect();
        assert_eq!(tail.len(), STDERR_TAIL);
        assert_eq!(tail.first().map(String::as_str), Some("line 5"));
        assert_eq!(tail.last().map(String::as_str), Some("line 24"));
        let mut short = "x\n".to_owned();
        short.push_str(&"y".repeat(10_000));
        let tail: Arc<Mutex<VecDeque<String>>> = Arc::default();
        read_stderr(
            short.as_bytes(),
            "srv".into(),
            Limits::default(),
            tail.clone(),
        )
        .await;
        let tail: Vec<String> = tail.lock().iter().cloned().collect();
        assert_eq!(tail, ["x", "[a line longer than 8192 bytes, not shown]"]);
    }
}
