//! Where a server's own program lives: what the `strict` profile lets it
//! read (and execute) beyond the system's paths. A command is followed to
//! its real file, through `#!` interpreters (`npx` is a Node script, a
//! venv's entry point a Python one), to the install it belongs to: a Node
//! prefix, a Python prefix (a pyenv one under `~` included — not a system
//! path), a virtual environment and the Python it was made from, a version
//! manager's root (its shims are scripts that need all of it).
//!
//! Layer: below [`crate::profile`], which adds these to a policy.

use std::path::{Path, PathBuf};

/// What to resolve a command with.
#[derive(Clone, Debug, Default)]
pub struct ServerCommand {
    /// The program as configured (a name on `PATH`, or a path).
    pub program: String,
    /// Its arguments: those that are files (a script) bring their project.
    pub args: Vec<String>,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
    /// The `PATH` it runs with.
    pub path: Option<String>,
    /// Its home directory (`~`).
    pub home: Option<PathBuf>,
}

/// Paths already readable in every profile: nothing to add for them.
fn is_system(path: &Path) -> bool {
    ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"]
        .iter()
        .any(|root| path.starts_with(root))
}

/// The program's file, found on `PATH` as `exec` would.
pub fn which(program: &str, path: Option<&str>, cwd: Option<&Path>) -> Option<PathBuf> {
    if program.contains('/') {
        let p = Path::new(program);
        let p = match (p.is_absolute(), cwd) {
            (false, Some(dir)) => dir.join(p),
            _ => p.to_path_buf(),
        };
        return p.is_file().then_some(p);
    }
    path?
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// The read paths the server's own install needs.
pub fn install_paths(command: &ServerCommand) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(found) = which(
        &command.program,
        command.path.as_deref(),
        command.cwd.as_deref(),
    ) {
        follow(&found, command, &mut out, 0);
        if is_node_package_runner(&command.program, &found) {
            // npx and npm run packages from the npm cache (read-only here:
            // a first fetch needs the `network` profile and a writable cache).
            if let Some(home) = &command.home {
                out.push(home.join(".npm"));
            }
        }
    }
    for arg in &command.args {
        let p = Path::new(arg);
        let p = match (p.is_absolute(), &command.cwd) {
            (false, Some(dir)) => dir.join(p),
            _ => p.to_path_buf(),
        };
        if p.is_file() && !arg.starts_with('-') {
            // A script: the project it belongs to (its dependencies beside it).
            if let Ok(real) = p.canonicalize() {
                out.push(project_of(&real));
            }
        }
    }
    if let Some(cwd) = &command.cwd {
        out.push(cwd.clone());
    }
    // Never the home directory (its keys and tokens) or anything above it.
    out.retain(|p| {
        !is_system(p)
            && p.as_os_str() != "/"
            && !command
                .home
                .as_ref()
                .is_some_and(|home| home.starts_with(p))
    });
    out.sort();
    out.dedup();
    out
}

fn is_node_package_runner(program: &str, found: &Path) -> bool {
    let name = Path::new(program).file_name().and_then(|n| n.to_str());
    matches!(name, Some("npx" | "npm" | "pnpm" | "yarn"))
        || found
            .canonicalize()
            .is_ok_and(|r| r.components().any(|c| c.as_os_str() == "node_modules"))
}

/// Follow `file` (as found and as it really is) to its install, and its
/// `#!` interpreter's.
fn follow(file: &Path, command: &ServerCommand, out: &mut Vec<PathBuf>, depth: u8) {
    out.push(file.to_path_buf());
    // A version manager's shim: the manager's whole root.
    if let Some(root) = manager_root(file) {
        out.push(root);
    }
    let Ok(real) = file.canonicalize() else {
        return;
    };
    out.push(real.clone());
    // A package's file: its dependencies are hoisted to the outermost
    // node_modules of the install (npx's cache entries too).
    if let Some(modules) = outermost_node_modules(&real) {
        out.push(modules);
    }
    if let Some(prefix) = prefix_of(&real) {
        out.push(prefix.clone());
        // A virtual environment: the Python it was made from too.
        if let Ok(cfg) = std::fs::read_to_string(prefix.join("pyvenv.cfg")) {
            for line in cfg.lines() {
                if let Some(home) = line
                    .strip_prefix("home")
                    .map(|l| l.trim_start_matches([' ', '=']))
                {
                    let bin = PathBuf::from(home.trim());
                    if let Some(base) = bin
                        .canonicalize()
                        .ok()
                        .and_then(|b| prefix_of(&b.join("python3")))
                    {
                        out.push(base);
                    } else if let Some(parent) = bin.parent() {
                        out.push(parent.to_path_buf());
                    }
                }
            }
        }
    }
    if depth >= 3 {
        return;
    }
    if let Some(interpreter) = shebang(&real) {
        let (program, next) = match interpreter.split_first() {
            // `#!/usr/bin/env node`: the program env finds.
            Some((env, rest)) if env.ends_with("/env") => {
                match rest.iter().find(|a| !a.starts_with('-')) {
                    Some(p) => (p.clone(), None),
                    None => return,
                }
            }
            Some((p, _)) => (p.clone(), Some(PathBuf::from(p))),
            None => return,
        };
        let found = next.or_else(|| which(&program, command.path.as_deref(), None));
        if let Some(found) = found {
            follow(&found, command, out, depth + 1);
        }
    }
}

/// `…/node_modules` of the outermost one `real` is in.
fn outermost_node_modules(real: &Path) -> Option<PathBuf> {
    let mut path = PathBuf::new();
    for component in real.components() {
        path.push(component);
        if component.as_os_str() == "node_modules" {
            return Some(path);
        }
    }
    None
}

/// The root of a version manager whose shim this is (`~/.pyenv`,
/// `~/.nodenv`, `~/.rbenv`, `~/.asdf`, `~/.volta`).
fn manager_root(file: &Path) -> Option<PathBuf> {
    let dir = file.parent()?;
    let root = dir.parent()?;
    let name = root.file_name()?.to_str()?;
    let is_manager = matches!(name, ".pyenv" | ".nodenv" | ".rbenv" | ".asdf" | ".volta");
    let entry = dir.file_name()?;
    (is_manager && (entry == "shims" || entry == "bin")).then(|| root.to_path_buf())
}

/// The install prefix of a program in `<prefix>/bin/`: a directory with a
/// `lib/` (Node, Python) or a `pyvenv.cfg` (a virtual environment).
fn prefix_of(real: &Path) -> Option<PathBuf> {
    let bin = real.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    let prefix = bin.parent()?;
    (prefix.join("pyvenv.cfg").is_file() || prefix.join("lib").is_dir())
        .then(|| prefix.to_path_buf())
}

/// The directory of the nearest `package.json`, `pyproject.toml` or
/// `Cargo.toml` above a script (else its own directory).
fn project_of(script: &Path) -> PathBuf {
    let dir = script.parent().unwrap_or(Path::new("/"));
    for ancestor in dir.ancestors() {
        if ancestor == Path::new("/") {
            break;
        }
        if ["package.json", "pyproject.toml", "setup.py"]
            .iter()
            .any(|f| ancestor.join(f).is_file())
        {
            return ancestor.to_path_buf();
        }
    }
    dir.to_path_buf()
}

/// The words of a script's `#!` line.
fn shebang(file: &Path) -> Option<Vec<String>> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let text = head.get(..n)?.strip_prefix(b"#!")?;
    let line = text.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
    (!words.is_empty()).then_some(words)
}
