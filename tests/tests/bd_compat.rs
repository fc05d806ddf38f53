//! `strand` in place of `bd`: the command lines Gas City's Go code, default queries and agent
//! prompts send, replayed against a 3-node cluster, each checked for bd's exit code and JSON
//! shape (an array where bd prints an array, an object with `schema_version` where bd prints
//! one, and the keys Gas City reads).
//!
//! The suite is one table: each row cites where the command line comes from (Gas City at commit
//! ed267ad6, `gastownhall/gascity`; `A:` marks its April snapshot a46ccb1c), and one `check`
//! runs it. Rows run in order against one namespace, so later rows see earlier rows' beads.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::process::{Command, Output, Stdio};

use serde_json::Value;
use tests::{Cluster, strand_binary};

/// What a row's stdout must be.
enum Shape {
    /// Exit code only (text output).
    Text,
    /// A JSON array whose elements (if any) carry these keys.
    Array(&'static [&'static str]),
    /// Exactly `[]`, as Gas City's shell queries compare it.
    EmptyArray,
    /// One JSON object with these keys and `schema_version: 1`.
    Object(&'static [&'static str]),
}

/// One command line and what bd answers to it.
struct Row {
    source: &'static str,
    args: &'static [&'static str],
    code: i32,
    shape: Shape,
}

const ISSUE: &[&str] = &["id", "title", "status", "issue_type", "labels", "metadata", "created_at", "updated_at"];

const ROWS: &[Row] = &[
    Row {
        source: "internal/beads/bdstore.go:1076 (Create)",
        args: &[
            "create",
            "--json",
            "Fix login",
            "-t",
            "task",
            "--priority",
            "1",
            "--labels",
            "ui,auth",
            "--metadata",
            r#"{"gc.routed_to":"workers"}"#,
        ],
        code: 0,
        shape: Shape::Object(&["id", "title", "status", "issue_type", "revision", "metadata"]),
    },
    Row {
        source: "internal/bootstrap/packs/core/formulas/mol-polecat-base.toml:336",
        args: &["create", "--title", "Found: flaky test", "--type", "bug", "--priority", "2"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "A:examples/gastown/packs/gastown/agents/mayor/prompt.template.md:23",
        args: &["create", "Write docs", "-t", "task", "--json"],
        code: 0,
        shape: Shape::Object(&["id", "title"]),
    },
    Row {
        source: "internal/beads/bdstore.go:1191 (Get)",
        args: &["show", "--json", "st-1"],
        code: 0,
        shape: Shape::Array(&["id", "issue_type", "parent", "dependencies", "revision"]),
    },
    Row {
        source: "internal/beads/bdstore.go:1247 (Update)",
        args: &[
            "update",
            "--json",
            "st-1",
            "--title",
            "Fix the login page",
            "--status",
            "in_progress",
            "--set-metadata",
            "gc.step=1",
        ],
        code: 0,
        shape: Shape::Array(ISSUE),
    },
    Row {
        source: "issue 14: default sling query for a pool, bd update {} --label=pool:<name>",
        args: &["update", "st-2", "--label=pool:workers"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "internal/bootstrap/packs/core/formulas/mol-polecat-report.toml:166",
        args: &["update", "st-2", "--notes", "root cause: a race"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "internal/bootstrap/packs/core/skills/gc-work/SKILL.md:60",
        args: &["update", "st-2", "--append-notes", "fixed in abc123"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "internal/beads/bdstore.go:1580 (UpdateAll)",
        args: &["update", "--json", "st-2", "st-3", "--set-metadata", "gc.routed_to=workers"],
        code: 0,
        shape: Shape::Array(ISSUE),
    },
    Row {
        source: "internal/beads/bdstore.go:2931 (DepAdd)",
        args: &["dep", "add", "st-3", "st-2", "--type", "blocks"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "internal/bootstrap/packs/core/assets/scripts/cross-rig-deps.sh:62",
        args: &["dep", "add", "st-3", "external:other-rig:or-7", "--type=related"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "internal/beads/bdstore.go:2962 (DepList down)",
        args: &["dep", "list", "st-3", "--json"],
        code: 0,
        shape: Shape::Array(&["id", "status", "dependency_type"]),
    },
    Row {
        source: "internal/beads/bdstore.go:2962 (DepList up); cascade-nudge-on-blocker-close.sh:109",
        args: &["dep", "list", "st-2", "--direction=up", "--type=blocks", "--json"],
        code: 0,
        shape: Shape::Array(&["id", "status", "assignee", "dependency_type"]),
    },
    Row {
        source: "internal/beads/bdstore.go:3002 (DepListBatch)",
        args: &["dep", "list", "st-2", "st-3", "--json"],
        code: 0,
        shape: Shape::Array(&["issue_id", "depends_on_id", "type"]),
    },
    Row {
        source: "internal/bootstrap/packs/core/assets/scripts/cross-rig-deps.sh:61",
        args: &["dep", "remove", "st-3", "external:other-rig:or-7"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "internal/beads/bdstore.go:2488 (List)",
        args: &["list", "--json", "--label=ui", "--include-infra", "--include-gates", "--limit", "0"],
        code: 0,
        shape: Shape::Array(&["id", "issue_type", "dependency_count", "parent"]),
    },
    Row {
        source: "internal/beads/bdstore.go:2207 (Ping)",
        args: &["list", "--json", "--limit", "0"],
        code: 0,
        shape: Shape::Array(&["id"]),
    },
    Row {
        source: "internal/config/workquery.go:330 (work query, tier 1)",
        args: &["list", "--status", "in_progress", "--assignee=nobody", "--json", "--limit=1"],
        code: 0,
        shape: Shape::EmptyArray,
    },
    Row {
        source: "internal/bootstrap/packs/core/formulas/mol-polecat-base.toml:191",
        args: &["list", "--title-contains", "login", "--status", "open,in_progress,blocked", "--json"],
        code: 0,
        shape: Shape::Array(&["id", "title"]),
    },
    Row {
        source: "internal/bootstrap/packs/core/assets/scripts/wisp-compact.sh:27",
        args: &["list", "--json", "--all", "-n", "0"],
        code: 0,
        shape: Shape::Array(&["id"]),
    },
    Row {
        source: "internal/beads/bdstore.go:2877 (Ready)",
        args: &["ready", "--json", "--include-ephemeral", "--limit", "0"],
        code: 0,
        shape: Shape::Array(&["id", "status"]),
    },
    Row {
        source: "internal/config/workquery.go:180 (routed pool work query)",
        args: &[
            "ready",
            "--metadata-field",
            "gc.routed_to=workers",
            "--unassigned",
            "--exclude-type=epic",
            "--exclude-label",
            "hold:mayor",
            "--exclude-label",
            "hold:external",
            "--json",
            "--sort",
            "oldest",
            "--limit=20",
        ],
        code: 0,
        shape: Shape::Array(&["id", "metadata"]),
    },
    Row {
        source: "internal/config/workquery.go:418 (work query, tier 2)",
        args: &["ready", "--assignee=nobody", "--json", "--limit=1"],
        code: 0,
        shape: Shape::EmptyArray,
    },
    Row {
        source: "internal/beads/bdstore.go:1538 (Claim)",
        args: &["update", "st-2", "--claim", "--json", "--actor", "worker-1"],
        code: 0,
        shape: Shape::Array(&["id", "assignee", "status"]),
    },
    Row {
        source: "internal/beads/bdstore.go:2352 (Close, CloseAll)",
        args: &["close", "--force", "--json", "--reason", "done", "st-2"],
        code: 0,
        shape: Shape::Array(&["id", "status", "closed_at"]),
    },
    Row {
        source: "internal/beads/bdstore.go:2387 (Reopen)",
        args: &["reopen", "--json", "st-2"],
        code: 0,
        shape: Shape::Array(&["id", "status"]),
    },
    Row {
        source: "examples/swarm/packs/swarm/agents/coder/prompt.template.md:48 (reopen of an in-progress bead)",
        args: &["reopen", "st-1"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "internal/bootstrap/packs/core/assets/prompts/pool-worker.md:61",
        args: &["close", "st-1"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "internal/beads/bdstore.go:2399 (Delete)",
        args: &["delete", "--force", "--json", "st-3"],
        code: 0,
        shape: Shape::Object(&["deleted", "dependencies_removed"]),
    },
    Row {
        source: "bad input: a sort field bd does not have",
        args: &["list", "--sort", "size"],
        code: 2,
        shape: Shape::Text,
    },
    Row {
        source: "bad input: a malformed --if-revision",
        args: &["update", "st-1", "--title", "x", "--if-revision", "abc"],
        code: 2,
        shape: Shape::Text,
    },
    Row {
        source: "bad input: a flag bd does not have either",
        args: &["list", "--frobnicate"],
        code: 2,
        shape: Shape::Text,
    },
];

fn strand(cluster: &Cluster, args: &[&str]) -> Output {
    Command::new(strand_binary())
        .arg("--endpoints")
        .arg(cluster.endpoints().join(","))
        .args(args)
        .env_remove("STRAND_ENDPOINTS")
        .env_remove("STRAND_CONFIG")
        .env_remove("STRAND_NAMESPACE")
        .output()
        .expect("run strand")
}

fn check_keys(row: &Row, value: &Value, keys: &[&str]) {
    for key in keys {
        assert!(value.get(key).is_some(), "{}: {:?} lacks {key:?}: {value}", row.source, row.args);
    }
}

/// Runs one row and checks its exit code and shape.
fn check(cluster: &Cluster, row: &Row) {
    let output = strand(cluster, row.args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(row.code),
        "{}: {:?}\nstdout: {stdout}\nstderr: {stderr}",
        row.source,
        row.args
    );
    let parsed = || -> Value {
        serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("{}: {error}: {stdout}", row.source))
    };
    match row.shape {
        Shape::Text => {}
        Shape::EmptyArray => assert_eq!(stdout.trim(), "[]", "{}", row.source),
        Shape::Array(keys) => {
            let value = parsed();
            let elements = value.as_array().unwrap_or_else(|| panic!("{}: not an array: {value}", row.source));
            assert!(!elements.is_empty(), "{}: {:?} found nothing", row.source, row.args);
            elements.iter().for_each(|element| check_keys(row, element, keys));
        }
        Shape::Object(keys) => {
            let value = parsed();
            assert!(value.is_object(), "{}: not an object: {value}", row.source);
            check_keys(row, &value, keys);
            assert_eq!(value["schema_version"], 1, "{}", row.source);
        }
    }
}

#[test]
fn the_command_lines_gas_city_sends_work_with_bds_exit_codes_and_json_shapes() {
    let cluster = Cluster::start(3, None);
    for row in ROWS {
        check(&cluster, row);
    }
    // The effects the rows above rely on, read back.
    let show =
        |id: &str| -> Value { serde_json::from_slice(&strand(&cluster, &["show", "--json", id]).stdout).unwrap() };
    let second = &show("st-2")[0];
    assert_eq!(second["notes"], "root cause: a race\nfixed in abc123");
    assert!(second["labels"].as_array().unwrap().contains(&"pool:workers".into()));
    assert_eq!(second["status"], "open", "reopened");
    assert_eq!(show("st-1")[0]["status"], "closed");
    assert_eq!(strand(&cluster, &["show", "st-3"]).status.code(), Some(1), "deleted");
}

#[test]
fn of_concurrent_updates_conditional_on_one_revision_exactly_one_wins() {
    let cluster = Cluster::start(3, None);
    let created: Value = serde_json::from_slice(&strand(&cluster, &["create", "--json", "contended"]).stdout).unwrap();
    let revision = created["revision"].as_u64().unwrap().to_string();
    let writers: Vec<_> = (0..8)
        .map(|writer| {
            let title = format!("writer {writer}");
            let args = ["update", "st-1", "--title", title.as_str(), "--if-revision", revision.as_str()];
            let mut command = Command::new(strand_binary());
            command.arg("--endpoints").arg(cluster.endpoints().join(",")).args(args);
            command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
        })
        .collect();
    let codes: Vec<i32> = writers.into_iter().map(|mut child| child.wait().unwrap().code().unwrap()).collect();
    assert_eq!(codes.iter().filter(|code| **code == 0).count(), 1, "exactly one writer wins: {codes:?}");
    assert!(codes.iter().all(|code| *code == 0 || *code == 1), "the others are refused: {codes:?}");
    let stale = strand(&cluster, &["update", "st-1", "--title", "late", "--if-revision", &revision]);
    let stderr = String::from_utf8_lossy(&stale.stderr);
    assert!(stderr.contains("not ") && stderr.contains("revision"), "the refusal names the current revision: {stderr}");
}
