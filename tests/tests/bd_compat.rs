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
    /// As `Object`, holding these values: (JSON pointer, the value as JSON text).
    ObjectHolding(&'static [&'static str], &'static [(&'static str, &'static str)]),
    /// As `Array`, and the element of this bead holds these values: (JSON pointer, the value as
    /// JSON text).
    ArrayHolding(&'static [&'static str], &'static str, &'static [(&'static str, &'static str)]),
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
        source: "A:examples/gastown/packs/gastown/agents/mayor/prompt.template.md:23 (bd create's priority 2)",
        args: &["create", "Write docs", "-t", "task", "--json"],
        code: 0,
        shape: Shape::ObjectHolding(&["id", "title", "priority"], &[("/priority", "2")]),
    },
    Row {
        source: "internal/beads/bdstore.go:1095,1120 (Create of a wisp)",
        args: &["create", "--json", "Patrol", "-t", "task", "--labels", "pool:workers", "--ephemeral"],
        code: 0,
        shape: Shape::Object(&["id", "ephemeral"]),
    },
    Row {
        source: "internal/beads/bdstore.go:1095-1123 (Create with a stable id, no history, deferred)",
        args: &[
            "create",
            "--json",
            "Session",
            "-t",
            "session",
            "--id",
            "gc-session-1",
            "--no-history",
            "--defer",
            "2099-01-01T00:00:00Z",
        ],
        code: 0,
        shape: Shape::Object(&["id", "no_history", "defer_until"]),
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
        source: "internal/beads/bdstore.go:1191 (Get of a blocker: bd's IssueDetails.Dependents, cmd/bd/show.go:149)",
        args: &["show", "--json", "st-2"],
        code: 0,
        shape: Shape::ArrayHolding(
            &["id", "dependencies", "dependents"],
            "st-2",
            &[("/dependents/0/id", r#""st-3""#), ("/dependents/0/dependency_type", r#""blocks""#)],
        ),
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
        shape: Shape::Array(&["id", "issue_type", "dependency_count", "dependent_count", "comment_count", "parent"]),
    },
    Row {
        source: "internal/beads/bdstore.go:2494-2532 (List, every optional flag)",
        args: &[
            "list",
            "--json",
            "--label=pool:workers",
            "--status=open",
            "--type=bug",
            "--all",
            "--created-before",
            "2099-01-01T00:00:00.123456789Z",
            "--include-infra",
            "--include-gates",
            "--include-templates",
            "--limit",
            "0",
            "--metadata-field",
            "gc.routed_to=workers",
            "--skip-labels",
        ],
        code: 0,
        shape: Shape::Array(&["id", "metadata"]),
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
        source: "internal/bootstrap/packs/core/assets/scripts/wisp-compact.sh:27 (bd's list takes wisps)",
        args: &["list", "--json", "--all", "-n", "0"],
        code: 0,
        shape: Shape::ArrayHolding(
            &["id", "ephemeral", "updated_at", "comment_count"],
            "st-4",
            &[("/ephemeral", "true"), ("/comment_count", "0")],
        ),
    },
    Row {
        source: "internal/beads/bdstore.go:2877 (Ready; bd's IssueWithCounts, cmd/bd/ready.go buildReadyIssueOutput)",
        args: &["ready", "--json", "--include-ephemeral", "--limit", "0"],
        code: 0,
        shape: Shape::ArrayHolding(
            &["id", "status", "dependency_count", "dependent_count", "comment_count"],
            "st-2",
            &[("/dependent_count", "1"), ("/comment_count", "0")],
        ),
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
        source: "internal/beads/bdstore.go:2622-2640 (listEphemeral)",
        args: &["query", "--json", "ephemeral=true AND label=pool:workers AND status=open", "--limit", "50"],
        code: 0,
        shape: Shape::Array(&["id", "ephemeral", "labels", "dependency_count"]),
    },
    Row {
        source: "internal/beads/bdstore.go:2692-2694 (getEphemeralByID)",
        args: &["query", "--json", "ephemeral=true AND id=st-4", "--all", "--limit", "1"],
        code: 0,
        shape: Shape::Array(&["id", "ephemeral"]),
    },
    Row {
        source: "internal/config/workquery.go:204-210 (ephemeral in-progress probe)",
        args: &["query", "--json", "ephemeral=true AND status=in_progress", "--limit=0"],
        code: 0,
        shape: Shape::EmptyArray,
    },
    Row {
        source: "internal/bootstrap/packs/core/assets/prompts/pool-worker.md:51",
        args: &["mol", "current", "st-1", "--json"],
        code: 0,
        shape: Shape::Array(&["molecule_id", "molecule_title", "steps", "completed", "total"]),
    },
    Row {
        source: "internal/bootstrap/packs/core/assets/prompts/pool-worker.md:75",
        args: &["mol", "progress", "st-1", "--json"],
        code: 0,
        shape: Shape::Object(&[
            "molecule_id",
            "molecule_title",
            "total",
            "completed",
            "in_progress",
            "current_step_id",
        ]),
    },
    Row {
        source: "bad input: mol current of an id that is not there",
        args: &["mol", "current", "st-999"],
        code: 1,
        shape: Shape::Text,
    },
    Row {
        source: "bad input: a query with an unknown field",
        args: &["query", "colour=red"],
        code: 2,
        shape: Shape::Text,
    },
    Row {
        source: "internal/beads/bdstore.go:1538 (Claim)",
        args: &["update", "st-2", "--claim", "--json", "--actor", "worker-1"],
        code: 0,
        shape: Shape::Array(&["id", "assignee", "status"]),
    },
    Row {
        source: "internal/beads/bdstore_conditional.go:67 (assign, a conditional-write verb)",
        args: &["assign", "st-2", "worker-2", "--json"],
        code: 0,
        shape: Shape::Object(&["id", "assignee", "revision"]),
    },
    Row {
        source: "internal/config/testdata/workquery/legacy_OnDeath_bd104.golden:1 (on_death release)",
        args: &[
            "update",
            "st-2",
            "--assignee",
            "",
            "--status",
            "open",
            "--set-metadata",
            "gc.run_target=rig/dispatcher",
        ],
        code: 0,
        shape: Shape::Text,
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
        source: "docs/tutorials/06-beads.md:204",
        args: &["label", "add", "st-2", "st-4", "priority:high", "--json"],
        code: 0,
        shape: Shape::Array(&["issue_id", "label", "status"]),
    },
    Row {
        source: "bd label list (the labels of one bead)",
        args: &["label", "list", "st-2", "--json"],
        code: 0,
        shape: Shape::Array(&[]),
    },
    Row {
        source: "internal/bootstrap/packs/core/assets/scripts/cascade-nudge-on-blocker-close.sh:4",
        args: &["dep", "st-2", "--blocks", "st-4"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "internal/bootstrap/packs/core/assets/scripts/wisp-compact.sh:84",
        args: &["comment", "st-2", "looked into it"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "internal/bootstrap/packs/core/assets/scripts/wisp-compact.sh:27,37 (comment_count // 0)",
        args: &["list", "--json", "--all", "-n", "0"],
        code: 0,
        shape: Shape::ArrayHolding(
            &["id", "comment_count", "dependent_count"],
            "st-2",
            &[("/comment_count", "1"), ("/dependent_count", "1")],
        ),
    },
    Row {
        source: "contrib/beads-scripts/gc-beads-k8s:370",
        args: &["update", "--json", "st-2", "--metadata", r#"{"gc.pod":"pod-1","gc.restarts":3}"#],
        code: 0,
        shape: Shape::Array(ISSUE),
    },
    Row {
        source: "internal/bootstrap/packs/core/formulas/mol-polecat-base.toml:262",
        args: &["create", "--title", "Found: race", "--type", "bug", "--priority", "1", "--design", "lock the map"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "examples/gastown gastown_test.go:239",
        args: &["list", "--include-ephemeral", "--status", "open", "--json"],
        code: 0,
        shape: Shape::Array(&["id", "ephemeral"]),
    },
    Row {
        source: "internal/bootstrap/packs/core/assets/scripts/wisp-compact.sh:83",
        args: &["update", "st-4", "--persistent", "--json"],
        code: 0,
        shape: Shape::Array(&["id", "ephemeral"]),
    },
    Row {
        source: "internal/beads/bdstore.go:1538 (Claim, before a guarded release)",
        args: &["update", "st-2", "--claim", "--actor", "w9", "--json"],
        code: 0,
        shape: Shape::Array(&["id", "assignee"]),
    },
    Row {
        source: "internal/beads/bdstore_conditional_release.go:83 (release-if-current)",
        args: &[
            "update",
            "st-2",
            "--if-assignee",
            "w9",
            "--if-status",
            "in_progress",
            "--status",
            "open",
            "--assignee",
            "",
        ],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "internal/beads/bdstore_conditional_release.go:93 (release of a bead no longer held: exit 13)",
        args: &[
            "update",
            "st-2",
            "--if-assignee",
            "w9",
            "--if-status",
            "in_progress",
            "--status",
            "open",
            "--assignee",
            "",
        ],
        code: 13,
        shape: Shape::Text,
    },
    Row {
        source: "cmd/gc/cmd_convoy_dispatch.go:1150",
        args: &["delete", "st-4", "st-6", "--cascade", "--force", "--json"],
        code: 0,
        shape: Shape::Object(&["deleted", "deleted_count"]),
    },
    Row {
        source: "internal/bootstrap/packs/core/assets/scripts/reaper.sh:1213-1217 (nothing matches)",
        args: &["prune", "--pattern", "gm-*", "--older-than", "720h", "--force", "--json"],
        code: 0,
        shape: Shape::Object(&["pruned_count"]),
    },
    Row {
        source: "bd prune without --force: a preview, exit 1 (st-1 is closed)",
        args: &["prune", "--pattern", "st-1"],
        code: 1,
        shape: Shape::Text,
    },
    Row {
        source: "internal/beads/binary_versions.go:54 (ProbeBDVersion)",
        args: &["version"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "A:examples/gastown/packs/maintenance/assets/scripts/gate-sweep.sh:16",
        args: &["gate", "check", "--type=timer", "--escalate"],
        code: 0,
        shape: Shape::Text,
    },
    Row {
        source: "A:examples/gastown/packs/maintenance/assets/scripts/gate-sweep.sh:20",
        args: &["gate", "list", "--type=condition", "--status=open", "--json"],
        code: 0,
        shape: Shape::EmptyArray,
    },
    Row {
        source: "A:examples/gastown/packs/gastown/agents/deacon/prompt.template.md:162",
        args: &["gate", "list", "--json"],
        code: 0,
        shape: Shape::EmptyArray,
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
        Shape::ObjectHolding(keys, values) => {
            let value = parsed();
            assert!(value.is_object(), "{}: not an object: {value}", row.source);
            check_keys(row, &value, keys);
            assert_eq!(value["schema_version"], 1, "{}", row.source);
            check_values(row, &value, values);
        }
        Shape::ArrayHolding(keys, id, values) => {
            let value = parsed();
            let elements = value.as_array().unwrap_or_else(|| panic!("{}: not an array: {value}", row.source));
            elements.iter().for_each(|element| check_keys(row, element, keys));
            let element = elements.iter().find(|element| element["id"] == id);
            let element = element.unwrap_or_else(|| panic!("{}: {:?} lacks {id}: {value}", row.source, row.args));
            check_values(row, element, values);
        }
    }
}

/// Checks the values at these JSON pointers, each given as JSON text.
fn check_values(row: &Row, value: &Value, values: &[(&str, &str)]) {
    for (pointer, expected) in values {
        let expected: Value = serde_json::from_str(expected).unwrap();
        assert_eq!(value.pointer(pointer), Some(&expected), "{}: {:?} at {pointer}: {value}", row.source, row.args);
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
    let notes = second["notes"].as_str().unwrap();
    assert!(
        notes.starts_with("root cause: a race\nfixed in abc123\n") && notes.ends_with(": looked into it"),
        "{notes}"
    );
    assert_eq!(second["metadata"]["gc.restarts"], "3", "a JSON number is kept as its text");
    assert!(second["labels"].as_array().unwrap().contains(&"priority:high".into()));
    assert_eq!((second["assignee"].as_str(), second["status"].as_str()), (Some(""), Some("open")), "released");
    assert!(second["labels"].as_array().unwrap().contains(&"pool:workers".into()));
    assert_eq!(show("st-1")[0]["status"], "closed");
    assert_eq!(strand(&cluster, &["show", "st-3"]).status.code(), Some(1), "deleted");
    let session = &show("gc-session-1")[0];
    assert_eq!((session["no_history"].as_bool(), session["ephemeral"].as_bool()), (Some(true), Some(false)));
    assert_eq!(session["defer_until"], "2099-01-01T00:00:00.000Z");
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
    assert!(stderr.contains("precondition failed"), "Gas City's classifier reads the text: {stderr}");
    // Gas City's conditional writer (internal/beads/bdstore_conditional.go:129-301): probes each
    // verb's help for --if-revision, then reads bd's JSON error object with its code.
    for verb in ["update", "close", "assign", "delete"] {
        let help = String::from_utf8_lossy(&strand(&cluster, &[verb, "--help"]).stdout).to_string();
        assert!(help.contains("--if-revision"), "{verb} --help: {help}");
    }
    let stale = strand(&cluster, &["delete", "--force", "--json", "st-1", "--if-revision", &revision]);
    assert_eq!(stale.status.code(), Some(1));
    let error: Value = serde_json::from_slice(&stale.stderr).unwrap();
    assert_eq!(
        (error["code"].as_str(), error["expected_revision"].as_u64()),
        (Some("precondition-failed"), revision.parse().ok())
    );
    assert!(error["current_revision"].as_u64() > error["expected_revision"].as_u64(), "{error}");
}

/// Creates a namespace (id prefix `st`): a namespace named with `--namespace` must exist.
fn create_namespace(cluster: &Cluster, namespace: &str) {
    let created = strand(cluster, &["namespace", "create", namespace, "--prefix", "st"]);
    assert!(created.status.success(), "namespace create {namespace}: {}", String::from_utf8_lossy(&created.stderr));
}

/// Runs strand with stdin, in a namespace.
fn strand_in(cluster: &Cluster, namespace: &str, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut child = Command::new(strand_binary())
        .arg("--endpoints")
        .arg(cluster.endpoints().join(","))
        .args(["--namespace", namespace])
        .args(args)
        .env_remove("STRAND_ENDPOINTS")
        .env_remove("STRAND_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run strand");
    child.stdin.take().unwrap().write_all(stdin.unwrap_or_default().as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn json_of(output: &Output) -> Value {
    assert_eq!(output.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn statuses(cluster: &Cluster, namespace: &str) -> Vec<(String, String)> {
    let listed = json_of(&strand_in(cluster, namespace, &["list", "--json", "--all", "--limit", "0"], None));
    let mut rows: Vec<(String, String)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|bead| (bead["id"].as_str().unwrap().to_string(), bead["status"].as_str().unwrap().to_string()))
        .collect();
    rows.sort();
    rows
}

#[test]
fn transactions_and_molecule_views_from_the_command_line() {
    let cluster = Cluster::start(3, None);
    create_namespace(&cluster, "tx");
    create_namespace(&cluster, "cascade");
    let graph = r#"[{"op":"create","title":"release","type":"molecule"},
        {"op":"create","title":"build","parent_id":"$0"},
        {"op":"create","title":"publish","parent_id":"$0","needs":["$1"]}]"#;
    let results = json_of(&strand_in(&cluster, "tx", &["tx", "--json"], Some(graph)));
    let ids: Vec<&str> =
        results["results"].as_array().unwrap().iter().map(|bead| bead["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["st-1", "st-2", "st-3"]);

    let current = json_of(&strand_in(&cluster, "tx", &["mol", "current", "st-1", "--json"], None));
    let molecule = &current[0];
    assert_eq!((molecule["molecule_id"].as_str(), molecule["total"].as_u64()), (Some("st-1"), Some(2)));
    let states: Vec<&str> =
        molecule["steps"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap()).collect();
    assert_eq!(states, ["ready", "pending"], "publish waits for build");
    assert_eq!(molecule["next_step"]["id"], "st-2");

    json_of(&strand_in(&cluster, "tx", &["update", "st-2", "--claim", "--actor", "w1", "--json"], None));
    let mine = json_of(&strand_in(&cluster, "tx", &["mol", "current", "--for", "w1", "--json"], None));
    assert_eq!((mine[0]["molecule_id"].as_str(), mine[0]["current_step"]["id"].as_str()), (Some("st-1"), Some("st-2")));
    let progress = json_of(&strand_in(&cluster, "tx", &["mol", "progress", "--actor", "w1", "--json"], None));
    assert_eq!((progress["in_progress"].as_u64(), progress["current_step_id"].as_str()), (Some(1), Some("st-2")));
    let none = strand_in(&cluster, "tx", &["mol", "current", "--for", "nobody", "--json"], None);
    assert_eq!(String::from_utf8_lossy(&none.stdout).trim(), "[]");

    let before = statuses(&cluster, "tx");
    let stale = r#"{"conditions":[{"id":"st-2","revision":1}],"writes":[{"op":"close","id":"st-2"},{"op":"close","id":"st-3"}]}"#;
    let refused = strand_in(&cluster, "tx", &["tx"], Some(stale));
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("revision"), "{refused:?}");
    let half = r#"[{"op":"close","id":"st-3"},{"op":"update","id":"st-404","title":"x"}]"#;
    let refused = strand_in(&cluster, "tx", &["tx"], Some(half));
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("write 2"), "{refused:?}");
    let typo = strand_in(&cluster, "tx", &["tx"], Some(r#"[{"op":"close","id":"st-3","resaon":"x"}]"#));
    assert!(String::from_utf8_lossy(&typo.stderr).contains("unknown field `resaon`"), "{typo:?}");
    assert_eq!(statuses(&cluster, "tx"), before, "a refused transaction changes nothing");

    // Gas City's ApplyGraphPlan through its bd store (internal/beads/bdstore_graph_apply.go:53-58).
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"commit_message":"cook","nodes":[
            {"key":"step","title":"Step","parent_key":"root","metadata_refs":{"gc.root_bead_id":"root"}},
            {"key":"root","title":"Root","type":"molecule","labels":["gc:wisp"]}],
          "edges":[{"from_key":"step","to_key":"root","type":"parent-child"},{"from_key":"step","to_id":"st-1"}]}"#,
    )
    .unwrap();
    let plan = plan.display().to_string();
    let applied = json_of(&strand_in(&cluster, "tx", &["create", "--graph", &plan, "--json", "--ephemeral"], None));
    let (root, step) = (applied["ids"]["root"].as_str().unwrap(), applied["ids"]["step"].as_str().unwrap());
    let step_bead = &json_of(&strand_in(&cluster, "tx", &["show", step, "--json"], None))[0];
    assert_eq!(
        (step_bead["parent"].as_str(), step_bead["metadata"]["gc.root_bead_id"].as_str()),
        (Some(root), Some(root))
    );
    assert_eq!((step_bead["ephemeral"].as_bool(), step_bead["needs"][0].as_str()), (Some(true), Some("st-1")));
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"nodes":[{"key":"a","title":"x","parent_key":"nowhere"}]}"#).unwrap();
    let refused = strand_in(&cluster, "tx", &["create", "--graph", &bad.display().to_string()], None);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no node has"), "{refused:?}");

    // gastown's `bd mol burn ID --force` (examples/gastown gastown_test.go:83).
    let burned = json_of(&strand_in(&cluster, "tx", &["mol", "burn", root, "--force", "--json"], None));
    assert_eq!(burned["deleted_count"], 2);
    assert_eq!(strand_in(&cluster, "tx", &["show", step], None).status.code(), Some(1));

    // The gastown pack's `bd mol wisp F --root-only --var k=v --json` (gastown_test.go:1077),
    // which reads `.new_epic_id`, and the whole wisp without --root-only.
    let formula = dir.path().join("patrol.toml");
    std::fs::write(&formula, "formula = \"patrol\"\n[vars]\nrig = { required = true }\n[[steps]]\nid = \"look\"\ntitle = \"Look at {{rig}}\"\n").unwrap();
    let formula = formula.display().to_string();
    let root_only = json_of(&strand_in(
        &cluster,
        "tx",
        &["mol", "wisp", &formula, "--root-only", "--var", "rig=web", "--json"],
        None,
    ));
    let root =
        &json_of(&strand_in(&cluster, "tx", &["show", root_only["new_epic_id"].as_str().unwrap(), "--json"], None))[0];
    assert_eq!(
        (root["type"].as_str(), root["ephemeral"].as_bool(), root["ref"].as_str()),
        (Some("molecule"), Some(true), Some("patrol"))
    );
    let whole = json_of(&strand_in(&cluster, "tx", &["mol", "wisp", &formula, "--var", "rig=web", "--json"], None));
    let id = whole["new_epic_id"].as_str().unwrap();
    let steps = json_of(&strand_in(&cluster, "tx", &["children", id, "--json"], None));
    assert_eq!(steps[0]["title"], "Look at web");

    // `delete --cascade` (cmd/gc/cmd_convoy_dispatch.go:1150) takes dependents and children, and
    // an edge from an id that is no bead leads nowhere.
    let family = r#"[{"op":"create","title":"convoy"},{"op":"create","title":"child","parent_id":"$0"},
        {"op":"create","title":"waits","needs":["$0"]},{"op":"dep-add","issue":"ghost-1","depends_on":"$0"}]"#;
    let made = json_of(&strand_in(&cluster, "cascade", &["tx", "--json"], Some(family)));
    let top = made["results"][0]["id"].as_str().unwrap().to_string();
    let deleted = json_of(&strand_in(&cluster, "cascade", &["delete", &top, "--cascade", "--force", "--json"], None));
    assert_eq!((deleted["deleted"][0].as_str(), deleted["deleted_count"].as_u64()), (Some(top.as_str()), Some(3)));
    assert!(statuses(&cluster, "cascade").is_empty(), "the convoy, its child and its dependent are gone");

    // `bd version`, as Gas City's ProbeBDVersion parses it (internal/beads/binary_versions.go:64-85).
    let bd = dir.path().join("bd");
    std::os::unix::fs::symlink(strand_binary(), &bd).unwrap();
    let version = Command::new(&bd).arg("version").output().unwrap();
    let line = String::from_utf8_lossy(&version.stdout).to_string();
    assert!(line.starts_with("bd version 1.0.4 (strand "), "{line}");
}

/// One `bd export` line.
fn export_line(id: &str, title: &str, extra: &str) -> String {
    format!(
        r#"{{"_type":"issue","id":"{id}","title":"{title}","status":"open","priority":2,"issue_type":"task","created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-03T00:00:00Z","dependency_count":0{extra}}}"#
    )
}

#[test]
fn a_bd_export_imports_whole_or_not_at_all() {
    let cluster = Cluster::start(3, None);
    create_namespace(&cluster, "imp");
    create_namespace(&cluster, "bulk");
    create_namespace(&cluster, "cycle");
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, lines: &[String]| -> String {
        let path = dir.path().join(name);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        path.display().to_string()
    };
    let export = file(
        "export.jsonl",
        &[
            export_line("gc-a1b", "epic", r#","issue_type":"epic""#),
            export_line(
                "gc-c2d",
                "child",
                r#","dependencies":[{"issue_id":"gc-c2d","depends_on_id":"gc-a1b","type":"parent-child"},{"issue_id":"gc-c2d","depends_on_id":"gc-e3f","type":"blocks"}]"#,
            ),
            export_line("gc-e3f", "blocker", r#","labels":["x"],"metadata":{"gc.kind":"work"}"#),
            r#"{"_type":"memory","key":"k","value":"v"}"#.to_string(),
        ],
    );
    let imported = json_of(&strand_in(&cluster, "imp", &["import", &export, "--json"], None));
    assert_eq!((imported["created"].as_u64(), imported["skipped"].as_u64()), (Some(3), Some(1)));
    let child = &json_of(&strand_in(&cluster, "imp", &["show", "gc-c2d", "--json"], None))[0];
    assert_eq!(
        (child["parent"].as_str(), child["created_at"].as_str()),
        (Some("gc-a1b"), Some("2026-01-02T03:04:05.000Z"))
    );
    let ready = json_of(&strand_in(&cluster, "imp", &["ready", "--json"], None));
    let ready: Vec<&str> = ready.as_array().unwrap().iter().map(|bead| bead["id"].as_str().unwrap()).collect();
    assert!(ready.contains(&"gc-e3f") && !ready.contains(&"gc-c2d"), "the imported edge blocks: {ready:?}");
    let before = statuses(&cluster, "imp");

    let again = strand_in(&cluster, "imp", &["import", &export], None);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"), "{again:?}");
    let bad = file("bad.jsonl", &[export_line("gc-new1", "fine", ""), "{oops".to_string()]);
    let refused = strand_in(&cluster, "imp", &["import", &bad], None);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("line 2 of"), "{refused:?}");
    assert_eq!(statuses(&cluster, "imp"), before, "a refused import changes nothing");

    // Larger than one batch: written in three, all there.
    let many: Vec<String> = (0..2500).map(|n| export_line(&format!("bd-{n:04x}"), "bulk", "")).collect();
    let imported = json_of(&strand_in(&cluster, "bulk", &["import", &file("many.jsonl", &many), "--json"], None));
    assert_eq!(imported["created"], 2500);
    assert_eq!(statuses(&cluster, "bulk").len(), 2500);
    // A parent nowhere is found before anything is written.
    let orphan = file("orphan.jsonl", &[export_line("or-1", "orphan", r#","parent":"gc-nowhere""#)]);
    let refused = strand_in(&cluster, "cycle", &["import", &orphan, "--dry-run"], None);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("gc-nowhere"), "{refused:?}");
    // A later batch refused by the cluster (it closes a cycle with a bead already there): the
    // earlier batches are taken out again, and the bead already there is exactly as it was.
    json_of(&strand_in(&cluster, "cycle", &["create", "--json", "waits for the import"], None));
    json_of(&strand_in(&cluster, "cycle", &["dep", "add", "st-1", "cy-last", "--json"], None));
    let before = json_of(&strand_in(&cluster, "cycle", &["show", "st-1", "--json"], None));
    let mut cyclic: Vec<String> = (0..1200).map(|n| export_line(&format!("cy-{n:04x}"), "bulk", "")).collect();
    cyclic.push(export_line(
        "cy-last",
        "closes a cycle",
        r#","dependencies":[{"issue_id":"cy-last","depends_on_id":"st-1","type":"blocks"}]"#,
    ));
    let refused = strand_in(&cluster, "cycle", &["import", &file("cyclic.jsonl", &cyclic)], None);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("cycle") && stderr.contains("taken out again"), "{stderr}");
    assert_eq!(statuses(&cluster, "cycle").len(), 1, "nothing of the refused import is left");
    let after = json_of(&strand_in(&cluster, "cycle", &["show", "st-1", "--json"], None));
    assert_eq!((&after[0]["revision"], &after[0]["needs"]), (&before[0]["revision"], &before[0]["needs"]));
}

/// Runs strand in a namespace with `dir` first on `PATH` (where a stand-in `gh` lives).
fn strand_with_path(cluster: &Cluster, namespace: &str, dir: &std::path::Path, args: &[&str]) -> Output {
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    Command::new(strand_binary())
        .arg("--endpoints")
        .arg(cluster.endpoints().join(","))
        .args(["--namespace", namespace])
        .args(args)
        .env_remove("STRAND_ENDPOINTS")
        .env_remove("STRAND_CONFIG")
        .env("PATH", path)
        .output()
        .expect("run strand")
}

/// bd's gates (cmd/bd/gate.go) as Gas City's gate-sweep order (examples/gastown/packs/maintenance/
/// assets/scripts/gate-sweep.sh) and the deacon's prompt run them: a gate blocks its step until
/// a check or a person resolves it.
#[test]
fn gates_block_their_step_until_checked_or_resolved() {
    let cluster = Cluster::start(3, None);
    create_namespace(&cluster, "gates");
    let run = |args: &[&str]| strand_in(&cluster, "gates", args, None);
    let ids_of = |value: &Value| -> Vec<String> {
        value.as_array().unwrap().iter().map(|bead| bead["id"].as_str().unwrap().to_string()).collect()
    };
    let ready = || ids_of(&json_of(&run(&["ready", "--json"])));
    assert_eq!(json_of(&run(&["create", "--json", "deploy"]))["id"], "st-1");
    assert_eq!(json_of(&run(&["create", "--json", "announce"]))["id"], "st-2");

    // Bad input: refused with a reason, and nothing is written.
    for (args, code, says) in [
        (&["gate", "create", "--blocks", "st-99"][..], 1, "issue not found: st-99"),
        (&["gate", "create", "--blocks", "st-1", "--type", "timer"][..], 2, "needs --timeout"),
        (&["gate", "create", "--blocks", "st-1", "--type", "timer", "--timeout", "5d"][..], 2, "not a duration"),
        (&["gate", "resolve", "st-1"][..], 1, "st-1 is not a gate issue (type=task)"),
        (&["gate", "show", "st-99"][..], 1, "gate not found: st-99"),
    ] {
        let output = run(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let everything = json_of(&run(&["list", "--all", "--include-gates", "--json"]));
    assert_eq!(ids_of(&everything), ["st-2", "st-1"], "a refused gate create writes nothing");

    // A human gate: blocks st-1 until resolved; its fields print at the top level, as bd's do.
    let human = json_of(&run(&["gate", "create", "--blocks", "st-1", "--reason", "design review", "--json"]));
    assert_eq!((human["id"].as_str(), human["await_type"].as_str()), (Some("st-3"), Some("human")));
    assert_eq!((human["issue_type"].as_str(), human["schema_version"].as_u64()), (Some("gate"), Some(1)));
    assert_eq!(ready(), ["st-2"], "the gate blocks st-1, and a gate itself is never ready work");
    for _ in 0..2 {
        assert_eq!(run(&["gate", "add-waiter", "st-3", "gastown/polecats/nux"]).status.code(), Some(0));
    }
    let shown = json_of(&run(&["gate", "show", "st-3", "--json"]));
    assert_eq!(shown["waiters"], serde_json::json!(["gastown/polecats/nux"]), "a waiter is registered once");

    // A timer gate past its timeout, and one that is not: `check --type=timer` closes the first.
    let expired =
        json_of(&run(&["gate", "create", "--blocks", "st-1", "--type", "timer", "--timeout", "1ms", "--json"]));
    assert_eq!((expired["id"].as_str(), expired["timeout"].as_u64()), (Some("st-4"), Some(1_000_000)));
    let later = json_of(&run(&["gate", "create", "--blocks", "st-2", "--type=timer", "--timeout=1h", "--json"]));
    assert_eq!(later["metadata"]["timeout"], "1h0m0s");
    let checked = json_of(&run(&["gate", "check", "--type=timer", "--escalate", "--json"]));
    assert_eq!(
        checked,
        serde_json::json!({"checked": 2, "resolved": 1, "escalated": 0, "errors": 0, "dry_run": false})
    );
    let open_gates = json_of(&run(&["gate", "list", "--json"]));
    assert_eq!(ids_of(&open_gates), ["st-5", "st-3"], "the expired timer closed, newest first: {open_gates}");
    assert_eq!(ids_of(&json_of(&run(&["gate", "list", "--all", "--json"]))).len(), 3);

    // GitHub gates, asked of `gh` as bd asks it (a stand-in `gh` answers here).
    let bin = tempfile::tempdir().unwrap();
    let gh = bin.path().join("gh");
    std::fs::write(
        &gh,
        "#!/bin/sh\ncase \"$1 $2 $3 $4\" in\n\
         'pr view 42 --json') echo '{\"state\":\"MERGED\",\"title\":\"Fix\"}' ;;\n\
         'run view 7 --json') echo '{\"status\":\"completed\",\"conclusion\":\"failure\",\"name\":\"ci\"}' ;;\n\
         'run list --workflow ci.yml') echo '[{\"databaseId\":9}]' ;;\n\
         'run view 9 --json') echo '{\"status\":\"completed\",\"conclusion\":\"success\",\"name\":\"ci\"}' ;;\n\
         *) echo \"no such thing: $*\" >&2; exit 1 ;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&gh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let create = |kind: &str, await_id: &str| -> String {
        let args = ["gate", "create", "--blocks", "st-2", "--type", kind, "--await-id", await_id, "--json"];
        json_of(&run(&args))["id"].as_str().unwrap().to_string()
    };
    assert_eq!([create("gh:pr", "42"), create("gh:run", "7"), create("gh:run", "ci.yml")], ["st-6", "st-7", "st-8"]);
    let listed = json_of(&run(&["gate", "list", "--type=gh", "--status=open", "--json"]));
    assert_eq!(ids_of(&listed), ["st-8", "st-7", "st-6"]);
    assert_eq!(listed[1]["metadata"]["ref"], "7", "gate-sweep reads the run from metadata.ref");
    let gh_check = |extra: &[&str]| {
        let args = [&["gate", "check", "--type=gh", "--json"][..], extra].concat();
        json_of(&strand_with_path(&cluster, "gates", bin.path(), &args))
    };
    let dry = gh_check(&["--dry-run"]);
    assert_eq!((dry["resolved"].as_u64(), dry["escalated"].as_u64()), (Some(2), Some(1)), "{dry}");
    assert_eq!(ids_of(&json_of(&run(&["gate", "list", "-t", "gh", "--json"]))).len(), 3, "a dry run closes nothing");
    assert_eq!(json_of(&run(&["gate", "show", "st-8", "--json"]))["await_id"], "ci.yml", "nor keeps a run");
    let checked = gh_check(&[]);
    assert_eq!(
        checked,
        serde_json::json!({"checked": 3, "resolved": 2, "escalated": 1, "errors": 0, "dry_run": false})
    );
    assert_eq!(
        ids_of(&json_of(&run(&["gate", "list", "--type=gh", "--json"]))),
        ["st-7"],
        "the failed run's gate stays"
    );
    let discovered = json_of(&run(&["gate", "show", "st-8", "--json"]));
    assert_eq!((discovered["await_id"].as_str(), discovered["metadata"]["ref"].as_str()), (Some("9"), Some("9")));
    assert_eq!(discovered["status"], "closed", "the workflow's newest run succeeded: {discovered}");

    // Resolving by hand (`gate close`, as gate-sweep spells it) unblocks the step.
    let closed = run(&["gate", "close", "st-3", "--reason", "approved"]);
    assert_eq!(closed.status.code(), Some(0), "{}", String::from_utf8_lossy(&closed.stderr));
    assert_eq!(json_of(&run(&["show", "st-3", "--json"]))[0]["close_reason"], "approved");
    assert_eq!(ready(), ["st-1"], "st-1's gates are closed; st-2 still waits on two");

    // Bead gates: one on a bead of this store resolves when it closes; one naming another rig
    // cannot be checked here (ids are unique only within a store) and stays pending.
    assert_eq!([create("bead", "gates:st-1"), create("bead", "otherrig:st-1")], ["st-9", "st-10"]);
    assert_eq!(run(&["close", "st-1"]).status.code(), Some(0));
    let checked = json_of(&run(&["gate", "check", "--type", "bead", "--json"]));
    assert_eq!(
        checked,
        serde_json::json!({"checked": 2, "resolved": 1, "escalated": 0, "errors": 0, "dry_run": false})
    );
    assert_eq!(ids_of(&json_of(&run(&["gate", "list", "--type=bead", "--json"]))), ["st-10"]);
}
