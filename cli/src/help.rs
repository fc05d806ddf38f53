//! What each command's `--help` shows, and the same command tree as shell completions (`strand
//! completion SHELL`, clap_complete) and man pages (`strand man [--dir DIR]`, clap_mangen).
//!
//! The client flags are global: accepted before the subcommand (`bd --json list`) and after it.
//! A command's help lists them apart from its own flags, under two headings: the connection
//! flags (`--endpoints`, `--token`, the TLS files, `--timeout`) under [`CONNECTION_HEADING`], the
//! others (`--namespace`, `--actor`, `--json`, `--consistency`, `--lease-id`) under
//! [`GLOBAL_HEADING`]. A command that uses few of them or none (the cluster's administration,
//! `node`, `certs`, ...) gets hidden copies of the ones it does not use before clap propagates the
//! global flags (clap leaves out of a subcommand a global flag whose id it already has), so they
//! stay accepted anywhere on its command line but are left out of its help, its man page and its
//! completions. bd's global flags that mean nothing to a cluster (`--sandbox`, `--db`, ...) are
//! hidden everywhere. clap_complete offers hidden flags too, so completions are made from a copy
//! of the tree without them ([`visible_only`]).

use std::io::Write;
use std::path::Path;

use crate::{CommandResult, Failure};

/// The heading of the flags that say how to reach the cluster.
pub const CONNECTION_HEADING: &str = "Connection options";
/// The heading of the other client flags every command that talks to the cluster takes.
pub const GLOBAL_HEADING: &str = "Global options";

/// The ids of the connection flags: how to reach the cluster and who is asking.
const CONNECTION: &[&str] = &["endpoints", "cacert", "cert", "key", "token", "timeout"];
/// [`CONNECTION`] and `--json`: what the cluster's administration uses.
const CONNECTION_AND_JSON: &[&str] = &["endpoints", "cacert", "cert", "key", "token", "timeout", "json"];

/// The commands that use only some of the client flags, by path (a nested subcommand's names in
/// order), and the ids of the client flags each uses; a nested entry overrides its parent's. A
/// command this build lacks (`node` without the `node` feature) is skipped. The others (the bead
/// and work commands) use them all.
const CLIENT_FLAGS_USED: &[(&[&str], &[&str])] = &[
    // A joining node's admin token, when auth is on.
    (&["node"], &["token"]),
    (&["dev"], &[]),
    (&["certs"], &["json"]),
    (&["snapshot"], CONNECTION_AND_JSON),
    (&["snapshot", "status"], &["json"]),
    (&["snapshot", "restore"], &["json"]),
    (&["cluster"], CONNECTION_AND_JSON),
    (&["member"], CONNECTION_AND_JSON),
    (&["auth"], CONNECTION_AND_JSON),
    // `--namespace` limits the token, `--actor` names an agent token's actor.
    (
        &["auth", "token", "create"],
        &["endpoints", "cacert", "cert", "key", "token", "timeout", "json", "namespace", "actor"],
    ),
    // The benchmarks make their own namespaces and agents; `--consistency` sets their reads'.
    (&["bench"], &["endpoints", "cacert", "cert", "key", "token", "timeout", "consistency"]),
    (&["version"], &["json"]),
    (&["completion"], &[]),
    (&["man"], &[]),
];

/// `command` (the whole CLI) with the client flags under their headings, and hidden from a
/// command that does not use them (see the module's documentation).
pub fn with_client_flags_hidden(command: clap::Command) -> clap::Command {
    let mut command = command.mut_args(|arg| {
        if !arg.is_global_set() || arg.is_hide_set() {
            return arg;
        }
        let heading = if CONNECTION.contains(&arg.get_id().as_str()) { CONNECTION_HEADING } else { GLOBAL_HEADING };
        arg.help_heading(heading)
    });
    let client_flags: Vec<clap::Arg> =
        command.get_arguments().filter(|arg| arg.is_global_set() && !arg.is_hide_set()).cloned().collect();
    for (path, used) in CLIENT_FLAGS_USED {
        let copies: Vec<clap::Arg> =
            client_flags.iter().map(|arg| arg.clone().hide(!used.contains(&arg.get_id().as_str()))).collect();
        add_args(&mut command, path, copies);
    }
    command
}

/// A copy of the built command tree `command` without its hidden flags and subcommands, for
/// clap_complete, which offers hidden flags too. Only what completions read is copied: names,
/// descriptions, visible aliases, the visible flags (no longer global: the tree is already
/// propagated) and the subcommands.
fn visible_only(command: &clap::Command) -> clap::Command {
    let mut copy = clap::Command::new(command.get_name().to_string())
        .disable_help_flag(true)
        .disable_version_flag(true)
        .disable_help_subcommand(true)
        .visible_aliases(command.get_visible_aliases().map(str::to_string).collect::<Vec<_>>())
        .args(command.get_arguments().filter(|arg| !arg.is_hide_set()).map(|arg| arg.clone().global(false)))
        .subcommands(command.get_subcommands().filter(|subcommand| !subcommand.is_hide_set()).map(visible_only));
    if let Some(about) = command.get_about() {
        copy = copy.about(about.clone());
    }
    if let Some(version) = command.get_version() {
        copy = copy.version(version.to_string());
    }
    copy
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
    write_stdout(&completion_script(shell))?;
    Ok(true)
}

/// The completion script of `shell`: the command tree's visible flags and subcommands.
fn completion_script(shell: clap_complete::aot::Shell) -> Vec<u8> {
    let mut command = crate::clap_command();
    command.build();
    let mut script: Vec<u8> = Vec::new();
    clap_complete::aot::generate(shell, &mut visible_only(&command), "strand", &mut script);
    script
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The long flags a help text lists (its rows that start with a flag).
    fn listed_flags(help: &str) -> Vec<String> {
        // A row starts with its flag, indented by 2 (`  -h, --help`) or 6 (`      --json`).
        help.lines()
            .filter(|line| {
                let indent = line.len() - line.trim_start().len();
                indent <= 6 && line.trim_start().starts_with('-')
            })
            .flat_map(|line| line.split_whitespace().take(2))
            .filter_map(|word| word.trim_end_matches(',').strip_prefix("--").map(str::to_string))
            .collect()
    }

    /// The long flags the bash completion offers at `function` (`strand__subcmd__member__subcmd__add` for `strand member add`).
    fn completed_flags(script: &str, function: &str) -> Vec<String> {
        let case = format!("{function})");
        let at =
            script.lines().position(|line| line.trim() == case).unwrap_or_else(|| panic!("no {case} in the script"));
        let opts = script.lines().skip(at).find_map(|line| line.trim().strip_prefix("opts=\"")).expect("its opts");
        opts.trim_end_matches('"')
            .split_whitespace()
            .filter_map(|word| word.strip_prefix("--").map(str::to_string))
            .collect()
    }

    /// The client flags by heading in a help text: the long flags listed under `heading`.
    fn flags_under(help: &str, heading: &str) -> Vec<String> {
        let section: String = help
            .split(&format!("\n{heading}:\n"))
            .nth(1)
            .map(|rest| rest.split("\n\n").next().unwrap_or_default().to_string())
            .unwrap_or_default();
        listed_flags(&section)
    }

    /// Walks the built tree below `command` (named `path`), calling `check` on every command.
    fn walk(command: &clap::Command, path: &mut Vec<String>, check: &mut dyn FnMut(&[String], &clap::Command)) {
        check(path, command);
        for subcommand in command.get_subcommands().filter(|subcommand| subcommand.get_name() != "help") {
            path.push(subcommand.get_name().to_string());
            walk(subcommand, path, check);
            path.pop();
        }
    }

    /// Issue 36: every command's help and completion show its own flags; the client flags under
    /// their two headings, apart from the command's own; bd's ignored flags nowhere; the
    /// cluster's administration without the bead store's flags.
    #[test]
    fn every_command_shows_its_own_flags_in_help_and_completion() {
        let mut root = crate::clap_command();
        root.build();
        let bash = String::from_utf8(completion_script(clap_complete::aot::Shell::Bash)).expect("UTF-8");
        let ignored = ["sandbox", "no-daemon", "quiet", "verbose", "db", "directory", "dolt-auto-commit", "profile"];
        let store_flags = ["namespace", "actor", "lease-id", "consistency"];
        let administration = ["cluster", "member", "snapshot", "certs", "node", "dev", "version", "completion", "man"];
        let mut walked = 0;
        walk(&root, &mut vec!["strand".to_string()], &mut |path, command| {
            walked += 1;
            let shown = path.join(" ");
            let help = command.clone().render_help().to_string();
            let listed = listed_flags(&help);
            let visible: Vec<String> = command
                .get_arguments()
                .filter(|arg| !arg.is_hide_set())
                .filter_map(|arg| arg.get_long().map(str::to_string))
                .collect();
            let mut sorted = listed.clone();
            sorted.sort();
            let mut expected = visible.clone();
            expected.sort();
            assert_eq!(sorted, expected, "{shown} --help lists its visible flags, each once:\n{help}");
            // clap_complete names a command's function by its path, each `-` also written `__subcmd__`.
            let function: Vec<String> = path.iter().map(|name| name.replace('-', "__subcmd__")).collect();
            let completed = completed_flags(&bash, &function.join("__subcmd__"));
            let mut completed_sorted = completed.clone();
            completed_sorted.sort();
            completed_sorted.dedup();
            let mut with_aliases = expected.clone();
            for arg in command.get_arguments().filter(|arg| !arg.is_hide_set()) {
                with_aliases.extend(arg.get_visible_aliases().into_iter().flatten().map(str::to_string));
            }
            with_aliases.sort();
            with_aliases.dedup();
            assert_eq!(completed_sorted, with_aliases, "`strand completion bash` offers {shown}'s visible flags");
            for flag in ignored {
                assert!(!listed.iter().any(|listed| listed == flag), "{shown} --help lists bd's --{flag}");
                assert!(!completed.iter().any(|listed| listed == flag), "{shown} completes bd's --{flag}");
            }
            if path.len() > 1 && administration.contains(&path[1].as_str()) {
                for flag in store_flags {
                    assert!(!listed.iter().any(|listed| listed == flag), "{shown} --help lists --{flag}:\n{help}");
                }
            }
            // The client flags a command lists are under their headings, none among its own.
            let connection = flags_under(&help, CONNECTION_HEADING);
            let global = flags_under(&help, GLOBAL_HEADING);
            for flag in &listed {
                let client = ["endpoints", "cacert", "cert", "key", "token", "timeout"].contains(&flag.as_str());
                let store = ["namespace", "actor", "json", "lease-id", "consistency"].contains(&flag.as_str());
                assert!(
                    !client || connection.contains(flag),
                    "{shown}: --{flag} is not under {CONNECTION_HEADING}:\n{help}"
                );
                assert!(!store || global.contains(flag), "{shown}: --{flag} is not under {GLOBAL_HEADING}:\n{help}");
            }
        });
        assert!(walked > 80, "the walk reached every command ({walked})");
    }
}
