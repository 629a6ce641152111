//! What the shell and `man` need: completions for bash, zsh, fish, elvish
//! and PowerShell, and manual pages, generated from the same clap
//! definitions the command parses with (so they never drift from it).

use std::io::Write as _;
use std::path::Path;

use clap::Command;
use clap_complete::Shell;

use crate::exit;

/// `toolgate completions SHELL`: the completion script on stdout.
pub fn completions(shell: Shell, mut command: Command) -> anyhow::Result<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "toolgate", &mut out);
    write_out(&out)
}

/// `toolgate man [--out DIR]`: `toolgate.1` on stdout, or it and one page
/// per subcommand (`toolgate-serve.1`, as git names its pages) in `DIR`.
pub fn man(command: Command, out: Option<&Path>) -> anyhow::Result<u8> {
    let Some(dir) = out else {
        let mut page = Vec::new();
        clap_mangen::Man::new(command).render(&mut page)?;
        return write_out(&page);
    };
    std::fs::create_dir_all(dir)?;
    let mut pages = vec![("toolgate".to_owned(), command.clone())];
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("toolgate-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name)));
    }
    for (name, page) in pages {
        let mut roff = Vec::new();
        clap_mangen::Man::new(page).render(&mut roff)?;
        std::fs::write(dir.join(format!("{name}.1")), roff)?;
    }
    Ok(exit::OK)
}

fn write_out(bytes: &[u8]) -> anyhow::Result<u8> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(exit::OK),
        // A closed pipe (`| head`) is not a failure of ours.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(exit::OK),
        Err(e) => Err(e.into()),
    }
}
