//! Running the `toolgate` binary in tests.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, dead_code)]

use std::path::Path;
use std::process::Stdio;

/// What a run of `toolgate` did.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Run `toolgate ARGS` in `dir` with `envs` added, no stdin.
pub async fn toolgate_in(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> Run {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .envs(envs.iter().copied())
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
