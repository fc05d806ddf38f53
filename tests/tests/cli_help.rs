//! The CLI's help, shell completions and man pages, its usage errors, and the checks `strand dev`,
//! `strand node` and `strand snapshot status` make before any cluster is involved; no cluster.
//! Each command's `--help` shows the client flags (endpoints, token, TLS files, actor, --json,
//! ...) only where it uses them, under headings of their own, and they stay accepted everywhere
//! (cli/src/help.rs walks every command for the rest).
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

/// Issue 36: the cluster's administration lists only the client flags it uses; a bead command
/// lists them under their headings, after its own; completion offers none of bd's ignored flags.
#[test]
fn help_lists_the_client_flags_apart_and_only_where_used() {
    for args in [&["member", "add", "--help"][..], &["cluster", "move-leader", "--help"]] {
        let help = stdout_of(args);
        for flag in ["--namespace", "--actor", "--lease-id", "--consistency"] {
            assert!(!help.contains(flag), "{args:?} lists {flag}: {help}");
        }
        let connection = help.find("Connection options:").unwrap_or_else(|| panic!("{args:?}: {help}"));
        assert!(help[connection..].contains("--endpoints"), "{args:?}: {help}");
    }
    let create = stdout_of(&["create", "--help"]);
    let (own, client) = create.split_once("Connection options:").expect("a heading of their own");
    assert!(own.contains("--priority") && !own.contains("--endpoints") && !own.contains("--namespace"), "{create}");
    assert!(client.contains("--endpoints") && client.contains("Global options:"), "{create}");
    assert!(client.split("Global options:").nth(1).unwrap().contains("--namespace"), "{create}");

    let bash = stdout_of(&["completion", "bash"]);
    let cluster =
        bash.split("strand__subcmd__cluster)").nth(1).unwrap().lines().find(|line| line.contains("opts=")).unwrap();
    assert!(cluster.contains("--endpoints"), "{cluster}");
    for flag in ["--sandbox", "--no-daemon", "--db", "--namespace", "--format"] {
        assert!(!cluster.contains(&format!("{flag} ")), "`strand cluster ` completes {flag}: {cluster}");
    }
}

/// Issue 36: a usage error exits 2, names the help of the command it is about, and says what is
/// accepted; a node that cannot start says so once; a directory is no backup.
#[test]
fn usage_errors_name_the_command_help_and_what_is_accepted() {
    let id = "a node id is a whole number of 1 or more";
    let address = "not HOST:PORT with a port from 1 to 65535";
    let negative = "a duration cannot be negative; write one such as 5s or 2m";
    let cases: [(&[&str], &str, &str); 9] = [
        (&["member", "add", "9", "notanaddress"], address, "member add"),
        (&["member", "add", "9", "127.0.0.1:7509", "--client-address", "x"], address, "member add"),
        (&["member", "add", "0", "127.0.0.1:7509"], id, "member add"),
        (&["member", "add", "-3"], id, "member add"),
        (&["member", "promote", "x"], id, "member promote"),
        (&["cluster", "move-leader", "2", "--wait", "-5s"], negative, "cluster move-leader"),
        (&["--namespace", "member", "list", "--wait"], "unexpected argument '--wait'", "list"),
        (&["member", "add"], "required arguments were not provided", "member add"),
        (
            &["snapshot", "restore", "x.backup", "--data-dir", "d", "--id", "1", "--peers", "2=h:1"],
            "--advertise-peer",
            "",
        ),
    ];
    for (args, says, command) in cases {
        let output = strand(&[&["--endpoints", "127.0.0.1:1", "--timeout", "1s"][..], args].concat());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr:?} lacks {says:?}");
        if !command.is_empty() {
            assert!(stderr.trim_end().ends_with(&format!("; see `strand {command} --help`")), "{args:?}: {stderr}");
        }
        assert_eq!(stderr.trim().lines().count(), 1, "one-line error: {stderr}");
    }
    let timeout = strand(&["--timeout", "-5s", "list"]);
    let stderr = String::from_utf8_lossy(&timeout.stderr);
    assert_eq!(timeout.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("--timeout \"-5s\": {negative}")), "{stderr}");

    // A node whose start is refused says why once, as every failure is said: no log line too.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("empty");
    let (client, peer) = (format!("127.0.0.1:{}", tests::free_port()), format!("127.0.0.1:{}", tests::free_port()));
    let node = strand_within(
        &["node", "--id", "1", "--listen", &client, "--listen-peer", &peer, "--force-new-cluster", "--data-dir"]
            .into_iter()
            .chain([data.to_str().unwrap()])
            .collect::<Vec<_>>(),
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&node.stderr);
    assert_eq!(node.status.code(), Some(1), "{stderr}");
    let said: Vec<&str> = stderr.lines().filter(|line| line.contains("refusing --force-new-cluster")).collect();
    assert_eq!(said.len(), 1, "said once: {stderr}");
    assert!(said[0].starts_with("error: ") && !stderr.contains("ERROR"), "{stderr}");

    // A directory where a backup file is expected is named as one.
    let status = strand(&["snapshot", "status", dir.path().to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert_eq!(status.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is a directory, not a backup; give a backup file made by `strand snapshot save FILE`"),
        "{stderr}"
    );
}

/// The client build links nothing of the node: no RocksDB (its C API's symbols) and no C++
/// runtime, whose loading and static initialisers every one-shot command would pay for; the full
/// build beside it has both (so the check can see them).
#[test]
fn the_client_build_links_no_rocksdb_and_the_full_build_does() {
    let client = strand_binary();
    let full = client.with_file_name("strand-node");
    let holds = |binary: &std::path::Path, text: &str| {
        let found = Command::new("grep").args(["-q", "-a", "-F", text]).arg(binary).status().unwrap();
        assert!(matches!(found.code(), Some(0 | 1)), "grep failed on {}", binary.display());
        found.success()
    };
    for marker in ["rocksdb_open", "libstdc++.so"] {
        assert!(holds(&full, marker), "strand-node lacks {marker}: the check no longer sees RocksDB");
        assert!(!holds(&client, marker), "the client strand holds {marker}: something on its path reaches the node");
    }
}

/// Without `strand-node` beside it, the client's `node` says what to install, and exits 2.
#[test]
fn node_without_the_full_build_beside_the_client_says_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let client = dir.path().join("strand");
    std::fs::copy(strand_binary(), &client).unwrap();
    let output = Command::new(&client).args(["node", "--id", "1"]).stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("strand-node") && stderr.contains(&dir.path().display().to_string()), "{stderr}");
}
