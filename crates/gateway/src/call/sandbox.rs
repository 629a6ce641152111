//! A stdio upstream with a `sandbox`: its command becomes the launcher's
//! (`toolgate sandbox exec --policy … -- COMMAND`), with the policy resolved
//! against the command as it will run (its `PATH`, its home, its working
//! directory). The environment stays what it was: the minimal one plus
//! what `env` names — the launcher passes it on and adds only `TMPDIR`.
//!
//! Layer: `call` (how an upstream is started).

use std::path::Path;

use toolgate_client::ClientError;
use toolgate_client::transport::stdio::StdioCommand;
use toolgate_sandbox::{Policy, ServerCommand};

use crate::config::UpstreamConfig;

/// The server's command as the sandbox runs it: as configured, except
/// that `npx PACKAGE` whose package npx's cache holds runs the cached entry
/// point (npx would ask the registry and write its shared cache first).
pub fn server_command(config: &UpstreamConfig) -> ServerCommand {
    let env = |name: &str| {
        config
            .env
            .get(name)
            .map(|v| v.expose().to_owned())
            .or_else(|| std::env::var(name).ok())
    };
    let mut server = ServerCommand {
        program: config
            .command
            .as_ref()
            .map(|c| c.expose().to_owned())
            .unwrap_or_default(),
        args: config.args.iter().map(|a| a.expose().to_owned()).collect(),
        cwd: config.cwd.clone(),
        path: env("PATH"),
        home: env("HOME").map(Into::into),
        npm_cache: env("npm_config_cache").map(Into::into),
    };
    if let Some((bin, args)) = toolgate_sandbox::install::npx_cached(
        &server.program,
        &server.args,
        server.npm_cache().as_deref(),
    ) {
        server.program = bin.to_string_lossy().into_owned();
        server.args = args;
    }
    server
}

/// The policy `config`'s sandbox resolves to (`None`: it has none).
pub fn policy_of(
    config: &UpstreamConfig,
) -> Option<Result<Policy, toolgate_sandbox::SandboxError>> {
    let sandbox = config.sandbox.as_ref()?;
    Some(
        sandbox
            .request(config.sandbox_mode)
            .resolve(&server_command(config)),
    )
}

/// `command` started through `launcher` in the sandbox `config` asks for.
pub fn wrap(
    command: StdioCommand,
    config: &UpstreamConfig,
    launcher: Option<&Path>,
) -> Result<StdioCommand, ClientError> {
    let Some(sandbox) = &config.sandbox else {
        return Ok(command);
    };
    let Some(launcher) = launcher else {
        return Err(ClientError::transport(
            "this server has a sandbox, and this gateway has no launcher to start it through (run it with `toolgate serve`)",
        ));
    };
    if command.inherit_env {
        return Err(ClientError::transport(
            "a sandboxed server does not get the whole environment: name what it needs in env",
        ));
    }
    // One resolution of the command (npx's cache is read once), for the
    // policy and for what the launcher runs.
    let server = server_command(config);
    let policy = sandbox
        .request(config.sandbox_mode)
        .resolve(&server)
        .map_err(|e| ClientError::transport(format!("sandbox: {e}")))?;
    let mut command = command;
    #[cfg(target_os = "linux")]
    if let Ok(ceiling) = std::env::var(toolgate_sandbox::CEILING_VAR) {
        // The gateway's ceiling holds for its launchers (which get the
        // server's environment, not the gateway's).
        command
            .env
            .push((toolgate_sandbox::CEILING_VAR.to_owned(), ceiling));
    }
    let mut args = vec![
        "sandbox".to_owned(),
        "exec".to_owned(),
        "--policy".to_owned(),
        policy.to_arg(),
        "--".to_owned(),
        server.program,
    ];
    args.extend(server.args);
    Ok(StdioCommand {
        program: launcher.to_string_lossy().into_owned(),
        args,
        ..command
    })
}
