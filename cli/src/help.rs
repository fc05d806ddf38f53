//! What each command's `--help` shows, and the same command tree as shell completions (`strand
//! completion SHELL`, clap_complete) and man pages (`strand man [--dir DIR]`, clap_mangen).
//!
//! The client flags (`--endpoints`, `--token`, the TLS files, `--actor`, `--namespace`, `--json`,
//! `--timeout`, ...) are global: accepted before the subcommand (`bd --json list`) and after it.
//! The commands that do not talk to a cluster as its client use few of them or none. Such a
//! command gets hidden copies of the ones it does not use before clap propagates the global flags
//! (clap leaves out of a subcommand a global flag whose id it already has), so they stay accepted
//! anywhere on its command line but are left out of its help, its man page and its completions.

use std::io::Write;
use std::path::Path;

use crate::{CommandResult, Failure};

/// The commands that use few or none of the client flags, by path (a nested subcommand's names
/// in order), and the ids of the client flags each uses. A command this build lacks (`node`
/// without the `node` feature) is skipped.
const CLIENT_FLAGS_USED: &[(&[&str], &[&str])] = &[
    // A joining node's admin token, when auth is on.
    (&["node"], &["token"]),
    (&["dev"], &[]),
    (&["certs"], &["json"]),
    (&["snapshot", "status"], &["json"]),
    (&["snapshot", "restore"], &["json"]),
    (&["version"], &["json"]),
    (&["completion"], &[]),
    (&["man"], &[]),
];

/// `command` (the whole CLI) with the client flags a command does not use hidden from it (see
/// the module's documentation).
pub fn with_client_flags_hidden(mut command: clap::Command) -> clap::Command {
    let client_flags: Vec<clap::Arg> =
        command.get_arguments().filter(|arg| arg.is_global_set() && !arg.is_hide_set()).cloned().collect();
    for (path, used) in CLIENT_FLAGS_USED {
        let hidden: Vec<clap::Arg> = client_flags
            .iter()
            .filter(|arg| !used.contains(&arg.get_id().as_str()))
            .map(|arg| arg.clone().hide(true))
            .collect();
        add_args(&mut command, path, hidden);
    }
    command
}

/// Adds `args` to the subcommand of `command` at `path`, if there is one.
fn add_args(command: &mut clap::Command, path: &[&str], args: Vec<clap::Arg>) {
    match path.split_first() {
        None => *command = std::mem::take(command).args(args),
        Some((name, rest)) => {
            if let Some(subcommand) = command.find_subcommand_mut(*name) {
                add_args(subcommand, rest, args);
            }
        }
    }
}

/// `strand completion SHELL`: the shell's completion script on stdout.
pub fn run_completion(shell: clap_complete::aot::Shell) -> CommandResult {
    let mut script: Vec<u8> = Vec::new();
    clap_complete::aot::generate(shell, &mut crate::clap_command(), "strand", &mut script);
    write_stdout(&script)?;
    Ok(true)
}

/// `strand man`: strand.1 on stdout; with `dir`, strand.1 and a page for every subcommand
/// (`strand-create.1`, `strand-mail-send.1`) written there.
pub fn run_man(dir: Option<&Path>) -> CommandResult {
    let mut command = crate::clap_command().disable_help_subcommand(true);
    command.build();
    let Some(dir) = dir else {
        write_stdout(&render(&command)?)?;
        return Ok(true);
    };
    std::fs::create_dir_all(dir)
        .map_err(|error| Failure::Refused(format!("cannot create --dir {}: {error}", dir.display())))?;
    let mut written = 0;
    write_pages(&command, dir, &mut written)?;
    println!("wrote {written} man pages to {} (strand.1, strand-<command>.1)", dir.display());
    Ok(true)
}

/// Writes the page of `command` and those of its subcommands, nested ones included, into `dir`.
fn write_pages(command: &clap::Command, dir: &Path, written: &mut usize) -> Result<(), Failure> {
    // Set by clap's build: `strand-mail-send` for `strand mail send`.
    let name = command.get_display_name().unwrap_or_else(|| command.get_name());
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, render(command)?)
        .map_err(|error| Failure::Refused(format!("cannot write {}: {error}", path.display())))?;
    *written += 1;
    for subcommand in command.get_subcommands().filter(|subcommand| !subcommand.is_hide_set()) {
        write_pages(subcommand, dir, written)?;
    }
    Ok(())
}

/// The man page (roff) of `command`.
fn render(command: &clap::Command) -> Result<Vec<u8>, Failure> {
    let mut page: Vec<u8> = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut page)
        .map_err(|error| Failure::Refused(format!("cannot render the man page of {}: {error}", command.get_name())))?;
    Ok(page)
}

/// Writes `bytes` to stdout.
fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(|error| Failure::Refused(format!("cannot write to stdout: {error}")))
}
