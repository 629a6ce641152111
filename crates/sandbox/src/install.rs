//! Where a server's own program lives: what the `strict` profile lets it
//! read (and execute) beyond the system's paths. A command is followed to
//! its real file, through `#!` interpreters (`npx` is a Node script, a
//! venv's entry point a Python one), to the install it belongs to: a Node
//! prefix, a Python prefix (a pyenv one under `~` included — not a system
//! path), a virtual environment and the Python it was made from, a version
//! manager's root (its shims are scripts that need all of it).
//!
//! Layer: below the profiles ([`crate::Request`]), which add these to a policy.

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
    /// npm's cache (`npm_config_cache`; default `~/.npm`).
    pub npm_cache: Option<PathBuf>,
}

impl ServerCommand {
    /// npm's cache as this command would find it.
    pub fn npm_cache(&self) -> Option<PathBuf> {
        self.npm_cache
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".npm")))
    }
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
            if let Some(cache) = command.npm_cache() {
                out.push(cache);
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

/// `npx [-y] PACKAGE ARGS…` whose package is already in npx's cache
/// (`~/.npm/_npx/*/`): its entry point there, and `ARGS`. npx itself asks
/// the registry before it runs even a cached package, and compacts the
/// cache's index as it reads it, so a sandbox without network or a
/// writable shared cache runs the cached package directly. `npm_cache` is
/// npm's cache directory (`~/.npm`, or `npm_config_cache`). `None`: not npx,
/// flags this does not read, or not cached (then npx runs as written).
pub fn npx_cached(
    program: &str,
    args: &[String],
    npm_cache: Option<&Path>,
) -> Option<(PathBuf, Vec<String>)> {
    if Path::new(program).file_name()? != "npx" {
        return None;
    }
    let mut rest = args.iter();
    let spec = loop {
        let arg = rest.next()?;
        match arg.as_str() {
            "-y" | "--yes" | "-q" | "--quiet" | "--no-install" | "--prefer-offline"
            | "--offline" => {}
            flag if flag.starts_with('-') => return None,
            spec => break spec.to_owned(),
        }
    };
    let name = package_name(&spec);
    let cache = npm_cache?.join("_npx");
    let mut found: Option<(std::time::SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(&cache).ok()?.flatten() {
        let dir = entry.path();
        let Ok(text) = std::fs::read_to_string(dir.join("package.json")) else {
            continue;
        };
        let Ok(manifest) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let packages: Vec<&str> = manifest["_npx"]["packages"]
            .as_array()
            .map(|a| a.iter().filter_map(|p| p.as_str()).collect())
            .unwrap_or_default();
        let exact = packages == [spec.as_str()];
        let same_name = packages.len() == 1 && package_name(packages[0]) == name && spec == name;
        if !(exact || same_name) {
            continue;
        }
        let package = dir.join("node_modules").join(name);
        let Some(bin) = bin_of(&package, name) else {
            continue;
        };
        let when = entry
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(std::time::UNIX_EPOCH);
        // An exact match wins; among same-name ones, the newest.
        if exact {
            return Some((bin, rest.cloned().collect()));
        }
        if found.as_ref().is_none_or(|(t, _)| when > *t) {
            found = Some((when, bin));
        }
    }
    found.map(|(_, bin)| (bin, rest.cloned().collect()))
}

/// `@scope/name` or `name` of a spec (`@scope/name@1.2`, `name@latest`).
fn package_name(spec: &str) -> &str {
    let at = if let Some(scoped) = spec.strip_prefix('@') {
        scoped.find('@').map(|i| i + 1)
    } else {
        spec.find('@')
    };
    at.map_or(spec, |i| &spec[..i])
}

/// The entry point a package's `bin` names (the one named like the
/// package, or its only one).
fn bin_of(package: &Path, name: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string(package.join("package.json")).ok()?;
    let manifest: serde_json::Value = serde_json::from_str(&text).ok()?;
    let short = name.rsplit('/').next().unwrap_or(name);
    let relative = match &manifest["bin"] {
        serde_json::Value::String(path) => path.clone(),
        serde_json::Value::Object(bins) => {
            let pick = bins
                .get(short)
                .or_else(|| bins.get(name))
                .or_else(|| (bins.len() == 1).then(|| bins.values().next()).flatten())?;
            pick.as_str()?.to_owned()
        }
        _ => return None,
    };
    let path = package.join(relative);
    path.is_file().then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn npx_runs_what_its_cache_holds_and_nothing_else() {
        let home = tempfile::tempdir().unwrap();
        let entry = home.path().join(".npm/_npx/abc");
        write(
            &entry.join("package.json"),
            r#"{"_npx": {"packages": ["@mcp/server-memory@1.2.0"]}}"#,
        );
        write(
            &entry.join("node_modules/@mcp/server-memory/package.json"),
            r#"{"bin": {"mcp-server-memory": "dist/index.js"}}"#,
        );
        write(
            &entry.join("node_modules/@mcp/server-memory/dist/index.js"),
            "#!/usr/bin/env node\n",
        );
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let bin = entry.join("node_modules/@mcp/server-memory/dist/index.js");
        let cache = home.path().join(".npm");
        let h = Some(cache.as_path());
        assert_eq!(
            npx_cached("npx", &args(&["-y", "@mcp/server-memory@1.2.0", "--x"]), h),
            Some((bin.clone(), args(&["--x"])))
        );
        // No version asked: the cached one of that name.
        assert_eq!(
            npx_cached("/usr/bin/npx", &args(&["@mcp/server-memory"]), h),
            Some((bin, Vec::new()))
        );
        // Another version, another package, flags not read, not npx.
        assert_eq!(
            npx_cached("npx", &args(&["-y", "@mcp/server-memory@2.0.0"]), h),
            None
        );
        assert_eq!(npx_cached("npx", &args(&["-y", "@mcp/other"]), h), None);
        assert_eq!(npx_cached("npx", &args(&["-p", "x", "y"]), h), None);
        assert_eq!(npx_cached("node", &args(&["@mcp/server-memory"]), h), None);
    }

    #[test]
    fn an_install_is_found_through_shims_venvs_and_node_modules_but_never_home() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        // A pyenv shim: the manager's whole root.
        let shim = home.join(".pyenv/shims/python3");
        write(&shim, "#!/bin/sh\n");
        // A venv made from a Python under the home.
        let base = home.join(".pyenv/versions/3.11/bin/python3");
        write(&base, "");
        std::fs::create_dir_all(home.join(".pyenv/versions/3.11/lib")).unwrap();
        let venv = root.path().join("venv");
        write(
            &venv.join("pyvenv.cfg"),
            &format!("home = {}\n", base.parent().unwrap().display()),
        );
        let entry = venv.join("bin/mcp-server-time");
        write(
            &entry,
            &format!("#!{}\n", venv.join("bin/python").display()),
        );
        std::os::unix::fs::symlink(&base, venv.join("bin/python")).unwrap();
        // A package in node_modules, its dependencies hoisted.
        let script = root.path().join("app/node_modules/srv/dist/index.js");
        write(&script, "#!/usr/bin/env node\n");
        let command = |program: &Path| ServerCommand {
            program: program.display().to_string(),
            path: Some("/usr/bin:/bin".to_owned()),
            home: Some(home.clone()),
            ..ServerCommand::default()
        };
        let paths = install_paths(&command(&shim));
        assert!(paths.contains(&home.join(".pyenv")), "{paths:?}");
        let paths = install_paths(&command(&entry));
        assert!(paths.contains(&venv), "{paths:?}");
        assert!(
            paths.contains(&home.join(".pyenv/versions/3.11")),
            "{paths:?}"
        );
        let paths = install_paths(&command(&script));
        assert!(
            paths.contains(&root.path().join("app/node_modules")),
            "{paths:?}"
        );
        // A program right in the home's bin never opens the whole home.
        std::fs::create_dir_all(home.join("lib")).unwrap();
        let own = home.join("bin/server");
        write(&own, "");
        let paths = install_paths(&command(&own));
        assert!(!paths.contains(&home), "{paths:?}");
        assert!(paths.contains(&own), "{paths:?}");
    }
}
