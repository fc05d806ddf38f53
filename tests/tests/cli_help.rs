//! The CLI's help, shell completions and man pages, and the port checks of `strand dev`; no
//! cluster. Each command's `--help` shows the client flags (endpoints, token, TLS files, actor,
//! --json, ...) only where it uses them, and they stay accepted everywhere.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use tests::strand_binary;

/// Runs `strand ARGS` with no client config or token from the environment.
fn strand(args: &[&str]) -> Output {
    Command::new(strand_binary())
        .args(args)
        .env_remove("STRAND_CONFIG")
        .env_remove("STRAND_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("run strand")
}

/// Runs `strand ARGS` as [`strand`] does, killing it and failing the test if it still runs after
/// `limit` (a `strand dev` that was not refused would run until Ctrl-C).
fn strand_within(args: &[&str], limit: Duration) -> Output {
    let child = Command::new(strand_binary())
        .args(args)
        .env_remove("STRAND_CONFIG")
        .env_remove("STRAND_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run strand");
    let pid = child.id().to_string();
    match tests::output_within(child, limit) {
        Some(output) => output,
        None => {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            panic!("strand {args:?} still ran after {limit:?}");
        }
    }
}

/// The stdout of `strand ARGS`, which must succeed.
fn stdout_of(args: &[&str]) -> String {
    let output = strand(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "strand {args:?}: {:?} {stderr}", output.status);
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

#[test]
fn node_help_shows_its_own_flags_and_no_client_flags() {
    let help = stdout_of(&["node", "--help"]);
    assert!(!help.contains("--endpoints"), "node --help: {help}");
    assert!(!help.contains("--cacert"), "node --help: {help}");
    assert!(!help.contains("--cert <"), "node --help: {help}");
    assert!(!help.contains("--namespace"), "node --help: {help}");
    assert!(!help.contains("--json"), "node --help: {help}");
    assert_eq!(help.matches("--tls-ca <PEM>").count(), 1, "node --help: {help}");
    assert_eq!(help.matches("--tls-cert <PEM>").count(), 1, "node --help: {help}");
    // A joining node's admin token.
    assert!(help.contains("--token <TOKEN>"), "node --help: {help}");
}

#[test]
fn hidden_client_flags_stay_accepted_before_and_after_the_subcommand() {
    stdout_of(&["node", "--cacert", "ca.pem", "--endpoints", "127.0.0.1:1", "--help"]);
    stdout_of(&["--endpoints", "127.0.0.1:1", "--json", "node", "--help"]);
    stdout_of(&["dev", "--json", "--timeout", "5s", "--help"]);
    stdout_of(&["certs", "init", "--actor", "alice", "--namespace", "n", "--help"]);
    stdout_of(&["snapshot", "status", "--endpoints", "127.0.0.1:1", "--help"]);
}

#[test]
fn dev_certs_and_snapshot_help_show_only_what_they_use() {
    let dev = stdout_of(&["dev", "--help"]);
    assert!(dev.contains("--peer-base-port <PORT>"), "dev --help: {dev}");
    assert!(dev.contains("--base-port <PORT>"), "dev --help: {dev}");
    for flag in ["--endpoints", "--cacert", "--tls-ca", "--token", "--json", "--actor"] {
        assert!(!dev.contains(flag), "dev --help shows {flag}: {dev}");
    }
    let commands: [&[&str]; 3] =
        [&["certs", "init", "--help"], &["certs", "--help"], &["snapshot", "status", "--help"]];
    for args in commands {
        let help = stdout_of(args);
        assert!(help.contains("--json"), "{args:?}: {help}");
        for flag in ["--endpoints", "--cacert", "--token", "--actor", "--timeout"] {
            assert!(!help.contains(flag), "{args:?} shows {flag}: {help}");
        }
    }
    // `snapshot save` talks to the cluster: it keeps them.
    let save = stdout_of(&["snapshot", "save", "--help"]);
    assert!(save.contains("--endpoints") && save.contains("--token"), "snapshot save --help: {save}");
}

#[test]
fn client_commands_keep_the_client_flags() {
    let commands: [&[&str]; 3] = [&["--json", "list", "--help"], &["list", "--json", "--help"], &["list", "--help"]];
    for args in commands {
        let help = stdout_of(args);
        assert!(help.contains("Usage:") && help.contains(" list"), "{args:?}: {help}");
        for flag in ["--json", "--endpoints", "--cacert", "--token", "--namespace"] {
            assert!(help.contains(flag), "{args:?} lacks {flag}: {help}");
        }
    }
    let top = stdout_of(&["--help"]);
    assert!(top.contains("--endpoints") && top.contains("--cacert"), "strand --help: {top}");
}

#[test]
fn completion_prints_a_script_for_each_shell() {
    let bash = stdout_of(&["completion", "bash"]);
    assert!(bash.contains("strand") && bash.contains("complete"), "bash: {bash}");
    assert!(bash.contains("snapshot") && bash.contains("mail"), "bash completes the subcommands");
    let zsh = stdout_of(&["completion", "zsh"]);
    assert!(zsh.contains("#compdef strand"), "zsh: {zsh}");
    let fish = stdout_of(&["completion", "fish"]);
    assert!(fish.contains("complete -c strand"), "fish: {fish}");
    let unknown = strand(&["completion", "tcsh"]);
    assert_eq!(unknown.status.code(), Some(2), "{unknown:?}");
}

#[test]
fn man_writes_a_page_per_command() {
    let page = stdout_of(&["man"]);
    assert!(page.contains(".TH") && page.contains("strand"), "strand man: {page}");

    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("man1");
    stdout_of(&["man", "--dir", target.to_str().unwrap()]);
    for name in ["strand.1", "strand-create.1", "strand-mail-send.1", "strand-node.1", "strand-dev.1"] {
        let text = std::fs::read_to_string(target.join(name)).unwrap_or_else(|error| panic!("{name}: {error}"));
        assert!(text.contains(".TH"), "{name}: {text}");
    }
    let node = std::fs::read_to_string(target.join("strand-node.1")).unwrap();
    assert!(node.contains("tls") && !node.contains("cacert") && !node.contains("endpoints"), "strand-node.1: {node}");
    let create = std::fs::read_to_string(target.join("strand-create.1")).unwrap();
    assert!(create.contains("endpoints"), "strand-create.1: {create}");
    assert!(!target.join("strand-help.1").exists(), "no page for the help subcommand");
}

#[test]
fn dev_refuses_overlapping_or_out_of_range_ports() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("dev");
    let data = data.to_str().unwrap();
    let limit = Duration::from_secs(30);
    let cases: [(&[&str], &str); 5] = [
        (&["--nodes", "3", "--base-port", "20000", "--peer-base-port", "20001"], "overlap"),
        (&["--nodes", "3", "--base-port", "20005", "--peer-base-port", "20003"], "overlap"),
        (&["--nodes", "3", "--base-port", "20000", "--peer-base-port", "20000"], "overlap"),
        (&["--nodes", "3", "--base-port", "65500"], "--peer-base-port"),
        (&["--nodes", "3", "--base-port", "20000", "--peer-base-port", "65534"], "--peer-base-port 65534"),
    ];
    for (args, text) in cases {
        let output = strand_within(&[&["dev", "--dir", data][..], args].concat(), limit);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "dev {args:?}: {stderr}");
        assert!(stderr.contains(text), "dev {args:?}: {stderr:?} lacks {text:?}");
        assert_eq!(stderr.trim().lines().count(), 1, "one-line error: {stderr}");
    }
    assert!(!dir.path().join("dev").exists(), "a refused dev cluster creates no directory");
}
