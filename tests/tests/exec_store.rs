//! Gas City's exec-store protocol (docs/beads.md §6), op by op, through `deploy/gc-exec-store`
//! against a live 3-node cluster, the way the orchestrator runs it: a cleared environment with
//! only the orchestrator's `GC_*` variables and the `STRAND_*` ones.
//!
//! The session is a transcript compared with `tests/golden/exec_store.txt` (times normalised;
//! `UPDATE_GOLDEN=1` rewrites it), and the rules that matter most are also asserted directly:
//! exit codes 0/1/2, "not found" wording, `[]` for empty lists, malformed stdin changes nothing,
//! and each store root is its own empty store.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use tests::{Cluster, free_port, normalise_times, strand_binary};

fn wrapper() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/gc-exec-store")
}

/// One run of the wrapper.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|error| panic!("{error}: {:?}", self.stdout))
    }
}

/// The environment the orchestrator gives the script: its store variables and the STRAND_* ones.
struct Store {
    environment: Vec<(String, String)>,
}

impl Store {
    fn new(strand_variables: &[(&str, &str)], root: &str) -> Store {
        let mut environment = vec![
            ("PATH".to_string(), "/usr/bin:/bin".to_string()),
            ("STRAND_BIN".to_string(), strand_binary().display().to_string()),
            ("GC_STORE_ROOT".to_string(), root.to_string()),
            ("GC_STORE_SCOPE".to_string(), "city".to_string()),
            ("GC_BEADS_PREFIX".to_string(), "gc".to_string()),
            ("GC_RIG".to_string(), "web".to_string()),
            ("GC_RIG_ROOT".to_string(), root.to_string()),
            ("GC_SESSION_NAME".to_string(), "mayor".to_string()),
        ];
        environment.extend(strand_variables.iter().map(|(name, value)| (name.to_string(), value.to_string())));
        Store { environment }
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Run {
        let mut child = Command::new(wrapper())
            .args(args)
            .env_clear()
            .envs(self.environment.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run deploy/gc-exec-store");
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
        drop(input);
        let output = child.wait_with_output().unwrap();
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// The session's transcript: each step's command, stdin, exit code, stdout and stderr.
#[derive(Default)]
struct Transcript {
    text: String,
    /// Text that differs from run to run (a temporary directory) and what it reads as instead.
    replacements: Vec<(String, &'static str)>,
}

impl Drop for Transcript {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- the session so far ----{}", self.text);
        }
    }
}

impl Transcript {
    fn section(&mut self, title: &str) {
        writeln!(self.text, "\n## {title}").unwrap();
    }

    fn step(&mut self, store: &Store, args: &[&str], stdin: Option<&str>) -> Run {
        let run = store.run(args, stdin);
        let start = self.text.len();
        self.record(args, stdin, &run);
        for (from, to) in &self.replacements {
            let recorded = self.text[start..].replace(from.as_str(), to);
            self.text.truncate(start);
            self.text.push_str(&recorded);
        }
        run
    }

    fn record(&mut self, args: &[&str], stdin: Option<&str>, run: &Run) {
        write!(self.text, "$ {}", args.join(" ")).unwrap();
        match stdin {
            Some(text) => writeln!(self.text, " <<< {text:?}").unwrap(),
            None => writeln!(self.text).unwrap(),
        }
        writeln!(self.text, "exit {}", run.code).unwrap();
        let stdout = run.stdout.trim_end();
        if !stdout.is_empty() {
            let shown = match serde_json::from_str::<Value>(stdout) {
                Ok(mut value) => {
                    normalise_times(&mut value);
                    serde_json::to_string(&value).unwrap()
                }
                Err(_) => stdout.to_string(),
            };
            writeln!(self.text, "{shown}").unwrap();
        }
        for line in run.stderr.lines() {
            writeln!(self.text, "stderr: {line}").unwrap();
        }
    }

    /// A step that must exit 1, say "not found", write one line on stderr and nothing on stdout.
    fn not_found(&mut self, store: &Store, args: &[&str], stdin: Option<&str>) {
        let run = self.step(store, args, stdin);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("not found"), "{args:?}: {}", run.stderr);
        assert_eq!(run.stderr.trim().lines().count(), 1, "{args:?}: one line: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    }

    /// A step that must exit 0 and print a JSON array of this many beads (or rows).
    fn array(&mut self, store: &Store, args: &[&str], length: usize) -> Vec<Value> {
        let run = self.step(store, args, None);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        let items = run.json().as_array().unwrap_or_else(|| panic!("{args:?} prints an array: {}", run.stdout)).clone();
        assert_eq!(items.len(), length, "{args:?}: {}", run.stdout);
        items
    }

    fn ok(&mut self, store: &Store, args: &[&str], stdin: Option<&str>) -> Run {
        let run = self.step(store, args, stdin);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        run
    }

    fn fails(&mut self, store: &Store, args: &[&str], stdin: Option<&str>, text: &str) {
        let run = self.step(store, args, stdin);
        assert_eq!(run.code, 1, "{args:?}: {} {}", run.stdout, run.stderr);
        assert!(run.stderr.contains(text), "{args:?}: {:?} lacks {text:?}", run.stderr);
        assert_eq!(run.stderr.trim().lines().count(), 1, "{args:?}: one line: {}", run.stderr);
    }
}

/// Every bead of a store, as `list` prints it (which must succeed).
fn listed(store: &Store) -> String {
    let run = store.run(&["list"], None);
    assert_eq!(run.code, 0, "list: {}", run.stderr);
    run.stdout
}

/// The newest event seq of the first store (`gc:city:alpha:...`), from `strand namespace list`.
fn last_event_seq(cluster: &Cluster) -> u64 {
    let output = Command::new(strand_binary())
        .args(["--endpoints", &cluster.endpoints().join(","), "--json", "namespace", "list"])
        .output()
        .unwrap();
    assert!(output.status.success(), "namespace list: {}", String::from_utf8_lossy(&output.stderr));
    let namespaces: Value = serde_json::from_slice(&output.stdout).unwrap();
    let store = namespaces
        .as_array()
        .unwrap()
        .iter()
        .find(|namespace| namespace["name"].as_str().unwrap().starts_with("gc:city:alpha:"));
    store.expect("the store's namespace")["last_event_seq"].as_u64().unwrap()
}

fn titles(items: &[Value]) -> Vec<&str> {
    items.iter().map(|item| item["title"].as_str().unwrap()).collect()
}

fn write_formula(dir: &Path) -> String {
    let path = dir.join("review.toml");
    std::fs::write(
        &path,
        r#"formula = "review"
description = "Review a change"
version = 1
[vars]
change = { required = true }
[[steps]]
id = "read"
title = "Read {{change}}"
[[steps]]
id = "approve"
title = "Approve {{change}}"
needs = ["read"]
"#,
    )
    .unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_store_protocol_op_by_op_against_a_live_cluster() {
    let cluster = Cluster::start(3, None);
    cluster.wait_for_leader().await;
    let endpoints = cluster.endpoints().join(",");
    let dir = tempfile::tempdir().unwrap();
    let city = Store::new(&[("STRAND_ENDPOINTS", &endpoints)], "/srv/cities/alpha");
    let mut session = Transcript::default();
    session.replacements.push((dir.path().display().to_string(), "<dir>"));

    session.section("a store root seen for the first time is an empty store");
    assert_eq!(session.ok(&city, &["probe"], None).stdout, "");
    session.ok(&city, &["health"], None);
    session.array(&city, &["list"], 0);
    session.array(&city, &["ready"], 0);
    session.array(&city, &["children", "gc-1"], 0);
    session.array(&city, &["list-by-label", "anything", "0"], 0);
    session.array(&city, &["dep-list", "gc-1", "down"], 0);
    session.not_found(&city, &["get", "gc-999"], None);

    session.section("create: id assigned, status always open, type defaults to task");
    let first = session.ok(&city, &["create"], Some(r#"{"title":"first","status":"closed"}"#)).json();
    assert_eq!(
        (first["id"].as_str(), first["status"].as_str(), first["type"].as_str()),
        (Some("gc-1"), Some("open"), Some("task"))
    );
    // Unlike `bd create` (priority 2), the exec store keeps a priority never given unset.
    assert!(first.get("priority").is_none(), "{first}");
    let second = session
        .ok(
            &city,
            &["create"],
            Some(
                r#"{"title":"second","type":"bug","priority":1,"labels":["role:worker"],"assignee":"mayor","from":"priya","metadata":{"k":"v"},"description":"original","no_history":true}"#,
            ),
        )
        .json();
    assert_eq!(second["id"], "gc-2");
    session.ok(&city, &["create"], Some(r#"{"title":"child-1","parent_id":"gc-1","ref":"step-a"}"#));
    session.ok(&city, &["create"], Some(r#"{"title":"child-2","parent_id":"gc-1","needs":["gc-2"]}"#));
    let got = session.ok(&city, &["get", "gc-2"], None).json();
    for field in ["title", "type", "priority", "assignee", "from", "description", "labels", "metadata", "no_history"] {
        assert_eq!(got[field], second[field], "{field} round-trips");
    }
    assert_eq!(got["no_history"], true, "no_history is kept");
    assert!(got["updated_at"].as_str().is_some_and(|time| time.ends_with('Z')), "updated_at is RFC 3339: {got}");

    session.section("children in creation order; a blocked bead is not ready");
    let children = session.array(&city, &["children", "gc-1"], 2);
    assert_eq!(titles(&children), ["child-1", "child-2"]);
    assert_eq!(titles(&session.array(&city, &["ready"], 3)), ["second", "first", "child-1"]);

    session.section("update: null and missing fields unchanged, labels added, metadata per key");
    assert_eq!(session.ok(&city, &["update", "gc-2"], Some(r#"{"description":"updated","labels":["extra"],"remove_labels":["role:worker"],"metadata":{"k2":"v2"}}"#)).stdout, "");
    session.ok(&city, &["update", "gc-2"], Some("{}"));
    session.ok(&city, &["update", "gc-2"], Some(r#"{"title":null,"description":null}"#));
    let got = session.ok(&city, &["get", "gc-2"], None).json();
    assert_eq!((got["title"].as_str(), got["description"].as_str()), (Some("second"), Some("updated")));
    assert_eq!(got["labels"], serde_json::json!(["extra"]));
    assert_eq!(got["metadata"], serde_json::json!({"k": "v", "k2": "v2"}));
    session.not_found(&city, &["update", "gc-999"], Some(r#"{"description":"x"}"#));

    session.section("statuses fold to three");
    session.ok(&city, &["update", "gc-2"], Some(r#"{"status":"in_progress"}"#));
    session.ok(&city, &["update", "gc-3"], Some(r#"{"status":"blocked"}"#));
    assert_eq!(session.ok(&city, &["get", "gc-3"], None).json()["status"], "open");
    assert_eq!(titles(&session.array(&city, &["list-by-status", "open", "0"], 3)), ["first", "child-1", "child-2"]);
    session.array(&city, &["list-by-status", "in_progress", "0"], 1);
    session.array(&city, &["list-by-status", "open", "2"], 2);
    session.fails(&city, &["update", "gc-3"], Some(r#"{"status":"bogus"}"#), "invalid status");

    session.section("set-metadata: the raw value on stdin; empty is not absent");
    session.ok(&city, &["set-metadata", "gc-1", "empty"], Some(""));
    session.ok(&city, &["set-metadata", "gc-1", "note"], Some("two\nlines"));
    let got = session.ok(&city, &["get", "gc-1"], None).json();
    assert_eq!(got["metadata"], serde_json::json!({"empty": "", "note": "two\nlines"}));
    session.not_found(&city, &["set-metadata", "gc-999", "k"], Some("v"));

    session.section("list-by-label: exact match, newest first, limit");
    session.ok(&city, &["create"], Some(r#"{"title":"a","labels":["batch:1"]}"#));
    session.ok(&city, &["create"], Some(r#"{"title":"b","labels":["batch:1"]}"#));
    assert_eq!(titles(&session.array(&city, &["list-by-label", "batch:1", "0"], 2)), ["b", "a"]);
    session.array(&city, &["list-by-label", "batch:1", "1"], 1);
    session.array(&city, &["list-by-label", "batch", "0"], 0);

    session.section("close: idempotent, leaves ready");
    session.ok(&city, &["close", "gc-1"], None);
    session.ok(&city, &["close", "gc-1"], None);
    session.not_found(&city, &["close", "gc-999"], None);
    assert_eq!(session.ok(&city, &["get", "gc-1"], None).json()["status"], "closed");
    assert!(!titles(&session.array(&city, &["ready"], 2)).contains(&"first"));

    session.section("list filters");
    session.array(&city, &["list"], 6);
    session.array(&city, &["list", "--status=closed"], 1);
    session.array(&city, &["list", "--status", "in_progress"], 1);
    session.array(&city, &["list", "--type=bug"], 1);
    session.array(&city, &["list", "--assignee=mayor"], 1);
    assert_eq!(titles(&session.array(&city, &["list", "--limit=2"], 2)), ["first", "second"]);
    session.fails(&city, &["list", "--colour=red"], None, "unknown flag");

    session.section("dependencies");
    session.ok(&city, &["dep-add", "gc-5", "gc-6", "blocks"], None);
    session.ok(&city, &["dep-add", "gc-5", "gc-6", "blocks"], None);
    session.array(&city, &["dep-list", "gc-5", "down"], 1);
    session.ok(&city, &["dep-add", "gc-5", "gc-6", "tracks"], None);
    assert_eq!(session.array(&city, &["dep-list", "gc-5", "down"], 1)[0]["type"], "tracks");
    assert_eq!(session.array(&city, &["dep-list", "gc-6", "up"], 1)[0]["issue_id"], "gc-5");
    session.ok(&city, &["dep-remove", "gc-5", "gc-6"], None);
    session.ok(&city, &["dep-remove", "gc-5", "gc-6"], None);
    session.array(&city, &["dep-list", "gc-5", "down"], 0);
    session.array(&city, &["dep-list", "gc-999", "down"], 0);

    session.section("delete");
    session.fails(&city, &["delete", "gc-6"], None, "delete: takes --force ID");
    session.ok(&city, &["delete", "--force", "gc-6"], None);
    session.not_found(&city, &["get", "gc-6"], None);

    session.section("mol-cook: the root id as plain text; a refused cook creates nothing");
    let formula = write_formula(dir.path());
    let cook = format!(r#"{{"formula":{formula:?},"title":"Review 42","vars":["change=PR 42"]}}"#);
    let root = session.ok(&city, &["mol-cook"], Some(&cook)).stdout.trim().to_string();
    assert_eq!(root, "gc-7");
    let steps = session.array(&city, &["children", &root], 2);
    assert_eq!(titles(&steps), ["Read PR 42", "Approve PR 42"]);
    let before = listed(&city);
    session.fails(&city, &["mol-cook"], Some(&format!(r#"{{"formula":{formula:?},"vars":[]}}"#)), "change");
    session.fails(&city, &["mol-cook"], Some(r#"{"formula":"no-such-formula"}"#), "not found");
    assert_eq!(listed(&city), before, "a refused cook wrote nothing");

    session.section("purge removes closed ephemeral beads");
    session.ok(&city, &["create"], Some(r#"{"title":"wisp","ephemeral":true}"#));
    session.ok(&city, &["close", "gc-10"], None);
    assert_eq!(
        session.ok(&city, &["purge"], Some(r#"{"dry_run":true}"#)).json(),
        serde_json::json!({"purged_count": 1})
    );
    assert_eq!(
        session.ok(&city, &["purge"], Some(r#"{"dry_run":false}"#)).json(),
        serde_json::json!({"purged_count": 1})
    );
    assert_eq!(
        session.ok(&city, &["purge"], Some(r#"{"dry_run":false}"#)).json(),
        serde_json::json!({"purged_count": 0})
    );

    session.section("reopen; ready with and without wisps; lifecycle operations a cluster does not need");
    session.ok(&city, &["reopen", "gc-1"], None);
    assert_eq!(session.ok(&city, &["get", "gc-1"], None).json()["status"], "open");
    session.ok(&city, &["reopen", "gc-2"], None);
    session.not_found(&city, &["reopen", "gc-999"], None);
    session.ok(&city, &["create"], Some(r#"{"title":"open wisp","ephemeral":true}"#));
    assert!(!titles(&session.ok(&city, &["ready"], None).json().as_array().unwrap().clone()).contains(&"open wisp"));
    let with_wisps = session.ok(&city, &["ready", "--include-ephemeral"], None).json();
    assert!(titles(with_wisps.as_array().unwrap()).contains(&"open wisp"), "{with_wisps}");
    session.fails(&city, &["ready", "--sort"], None, "unknown flag");
    for op in ["start", "stop", "init", "recover"] {
        let run = session.step(&city, &[op], None);
        assert_eq!(run.code, 2, "{op}: {}", run.stderr);
        assert!(run.stderr.contains("not needed"), "{op}: {}", run.stderr);
    }

    session.section("bad input: exit 1, one line, nothing written");
    let before = listed(&city);
    let events_before = last_event_seq(&cluster);
    session.fails(&city, &["create"], Some("not json"), "stdin is not the JSON object");
    session.fails(&city, &["create"], Some(r#"{"title":5}"#), "stdin is not the JSON object");
    session.fails(&city, &["create"], Some(""), "stdin is not the JSON object");
    session.fails(&city, &["create"], Some(r#"{"title":""}"#), "title must not be empty");
    session.fails(&city, &["update", "gc-2"], Some("[1]"), "stdin is not the JSON object");
    session.fails(&city, &["update", "gc-2"], Some(r#"{"priority":"high"}"#), "stdin is not the JSON object");
    session.fails(&city, &["purge"], Some("{"), "stdin is not the JSON object");
    session.fails(&city, &["purge"], Some("{}"), "missing field `dry_run`");
    session.fails(&city, &["purge"], Some(r#"{"dryRun":true}"#), "unknown field `dryRun`");
    session.fails(&city, &["purge"], Some("[false]"), "it is not an object");
    session.fails(&city, &["update", "gc-2"], Some(r#"[null,"closed"]"#), "it is not an object");
    session.fails(&city, &["update", "gc-2"], Some(r#"{"parent_id":"gc-999"}"#), "parent gc-999 does not exist");
    session.fails(&city, &["get"], None, "get: takes ID");
    session.fails(&city, &["list-by-label", "x", "many"], None, "not a whole number");
    session.fails(&city, &[], None, "no operation given");
    assert_eq!(listed(&city), before, "bad input changed no bead");
    assert_eq!(last_event_seq(&cluster), events_before, "bad input appended no event");

    session.section("an unknown operation: exit 2, no output");
    let unknown = session.step(&city, &["frobnicate", "gc-1"], None);
    assert_eq!((unknown.code, unknown.stdout.as_str()), (2, ""));

    session.section("another store root is another, empty store with its own ids");
    let rig = Store::new(&[("STRAND_ENDPOINTS", &endpoints)], "/srv/cities/alpha/rigs/web");
    session.array(&rig, &["list"], 0);
    session.not_found(&rig, &["get", "gc-2"], None);
    assert_eq!(session.ok(&rig, &["create"], Some(r#"{"title":"rig work"}"#)).json()["id"], "gc-1");
    let deferred = r#"{"title":"later","defer_until":"2099-01-01T10:00:00+02:00"}"#;
    let later = session.ok(&rig, &["create"], Some(deferred)).json();
    assert_eq!(later["id"], "gc-2", "an offset time is accepted");
    assert_eq!(later["defer_until"], "2099-01-01T08:00:00.000Z", "defer_until round-trips, in UTC");
    assert_eq!(session.ok(&rig, &["get", "gc-2"], None).json()["defer_until"], "2099-01-01T08:00:00.000Z");
    assert_eq!(titles(&session.array(&rig, &["ready"], 1)), ["rig work"], "deferred work is not ready");
    assert_eq!(titles(&session.array(&city, &["list-by-label", "batch:1", "0"], 1)), ["a"], "b (gc-6) was deleted");

    session.section("the cluster found through STRAND_CONFIG");
    let config = dir.path().join("strand.toml");
    let quoted: Vec<String> = cluster.endpoints().iter().map(|endpoint| format!("{endpoint:?}")).collect();
    std::fs::write(&config, format!("endpoints = [{}]\n", quoted.join(", "))).unwrap();
    let configured = Store::new(&[("STRAND_CONFIG", &config.display().to_string())], "/srv/cities/alpha/rigs/web");
    assert_eq!(session.ok(&configured, &["get", "gc-1"], None).json()["title"], "rig work");

    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/exec_store.txt");
    if std::env::var("UPDATE_GOLDEN").is_ok() {
        std::fs::write(&golden, &session.text).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).expect("tests/golden/exec_store.txt; run with UPDATE_GOLDEN=1");
    assert_eq!(session.text, expected, "the exec-store session differs from {}", golden.display());
}

#[test]
fn an_unreachable_cluster_or_a_bad_config_is_exit_1_never_2_or_3() {
    let down = format!("127.0.0.1:{}", free_port());
    let store = Store::new(&[("STRAND_ENDPOINTS", &down), ("STRAND_TIMEOUT", "1s")], "/srv/cities/down");
    for args in [&["probe"][..], &["get", "gc-1"], &["list"]] {
        let run = store.run(args, None);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("cluster unavailable"), "{args:?}: {}", run.stderr);
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("strand.toml");
    std::fs::write(&config, "endpoints = 7400\n").unwrap();
    let store = Store::new(&[("STRAND_CONFIG", &config.display().to_string())], "/srv/cities/down");
    let run = store.run(&["probe"], None);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("STRAND_CONFIG file") && run.stderr.contains("endpoints"), "{}", run.stderr);
    let bad_timeout = Store::new(&[("STRAND_ENDPOINTS", &down), ("STRAND_TIMEOUT", "30")], "/srv/cities/down");
    let run = bad_timeout.run(&["close", "gc-1"], None);
    assert_eq!(run.code, 1, "a command line clap refuses is exit 1 here, never 2: {}", run.stderr);
    // A node that takes connections and never answers (frozen): health and probe still answer
    // inside the orchestrator's 10 s probe limit, with the default timeout.
    let frozen = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let frozen_address = frozen.local_addr().unwrap().to_string();
    let store = Store::new(&[("STRAND_ENDPOINTS", &frozen_address)], "/srv/cities/frozen");
    for op in ["health", "probe"] {
        let started = std::time::Instant::now();
        let run = store.run(&[op], None);
        assert_eq!(run.code, 1, "{op}: {}", run.stderr);
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{op} took {:?}", started.elapsed());
        assert!(run.stderr.contains("cluster unavailable"), "{op}: {}", run.stderr);
    }
    drop(frozen);
    let missing = Store::new(&[("STRAND_BIN", "/nonexistent/strand")], "/srv/cities/down");
    let run = missing.run(&["probe"], None);
    assert_ne!(run.code, 0);
    assert_ne!(run.code, 2, "a missing binary is never read as an unknown operation");
}
