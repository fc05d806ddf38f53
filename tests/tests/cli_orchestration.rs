//! The orchestration commands of the `strand` binary against 3 real `strand node` processes:
//! formulas and molecules, convoys, mail, hook (`--inject` prints docs/beads.md §7's block exactly),
//! purge, events and watch, with their JSON shapes and exit codes (0 ok, 1 refused or nothing
//! done, 2 usage). One cluster per test function, several checks per cluster.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use tests::{Cluster, WAIT_MAX, strand_binary};

const RELEASE_FORMULA: &str = r#"
formula = "release"
description = "Cut a release"
[vars]
version = { required = true }
[[steps]]
id = "build"
title = "Build {{version}}"
[[steps]]
id = "test"
title = "Test {{version}}"
needs = ["build"]
[[steps]]
id = "publish"
title = "Publish {{version}}"
needs = ["test"]
"#;

const CYCLIC_FORMULA: &str = r#"
formula = "loop"
[[steps]]
id = "first"
title = "First"
needs = ["second"]
[[steps]]
id = "second"
title = "Second"
needs = ["first"]
"#;

/// Runs `strand` against a cluster as one actor.
struct Strand {
    endpoints: String,
}

impl Strand {
    fn new(cluster: &Cluster) -> Strand {
        Strand { endpoints: cluster.endpoints().join(",") }
    }

    fn run(&self, actor: &str, args: &[&str]) -> Output {
        Command::new(strand_binary())
            .args(["--endpoints", &self.endpoints, "--actor", actor])
            .args(args)
            .env_remove("STRAND_ACTOR")
            .env_remove("STRAND_NAMESPACE")
            .output()
            .expect("run strand")
    }

    /// Runs with `--json`, expects exit 0, answers the parsed stdout.
    fn json(&self, actor: &str, args: &[&str]) -> Value {
        let mut with_json = args.to_vec();
        with_json.push("--json");
        let output = self.run(actor, &with_json);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "strand {args:?}: stdout {stdout} stderr {stderr}");
        serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("strand {args:?}: {error}: {stdout}"))
    }

    /// Expects this exit code; answers stdout.
    fn exits(&self, code: i32, actor: &str, args: &[&str]) -> String {
        let output = self.run(actor, args);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "strand {args:?}: stdout {stdout} stderr {stderr}");
        stdout
    }

    /// Expects this failing exit code and a one-line error on stderr containing `text`.
    fn fails(&self, code: i32, args: &[&str], text: &str) {
        let output = self.run("tester", args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "strand {args:?}: stderr {stderr}");
        assert!(stderr.contains(text), "strand {args:?}: stderr {stderr:?} lacks {text:?}");
        assert_eq!(stderr.trim().lines().count(), 1, "one-line error: {stderr}");
    }
}

fn id(value: &Value) -> String {
    value["id"].as_str().unwrap_or_else(|| panic!("no id in {value}")).to_string()
}

fn ids(values: &Value) -> Vec<String> {
    values.as_array().unwrap_or_else(|| panic!("not an array: {values}")).iter().map(id).collect()
}

fn labels(value: &Value) -> Vec<&str> {
    value["labels"].as_array().unwrap().iter().map(|label| label.as_str().unwrap()).collect()
}

fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn status_of(strand: &Strand, bead_id: &str) -> String {
    strand.json("tester", &["show", bead_id])[0]["status"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn molecules_close_in_order_and_convoys_close_with_their_children() {
    let dir = tempfile::tempdir().unwrap();
    let release = write_file(dir.path(), "release.toml", RELEASE_FORMULA);
    let cyclic = write_file(dir.path(), "cyclic.toml", CYCLIC_FORMULA);
    let cluster = Cluster::start(3, None);
    cluster.wait_for_leader().await;
    let strand = Strand::new(&cluster);

    // Validation is local: it names the step on a cycle and exits 1.
    strand.fails(1, &["formula", "validate", &cyclic], "step \"first\" is part of a dependency cycle");
    let valid = strand.json("tester", &["formula", "validate", &release]);
    assert_eq!(valid["name"], "release");
    assert_eq!(valid["steps"][2], json!({"id": "publish", "title": "Publish {{version}}", "needs": ["test"]}));

    // Cook from the file: step 1 is current, nothing closed.
    let cooked = strand.json("tester", &["mol", "cook", &release, "--var", "version=1.2"]);
    let root = id(&cooked["root"]);
    assert_eq!(cooked["root"]["type"], "molecule");
    assert_eq!(cooked["root"]["ref"], "release");
    let steps = ids(&cooked["steps"]);
    assert_eq!(steps.len(), 3);
    assert_eq!(cooked["steps"][1]["title"], "Test 1.2");
    assert_eq!(cooked["steps"][1]["needs"], json!([steps[0]]));
    let status = strand.json("tester", &["mol", "status", &root]);
    assert_eq!(
        (status["current"].as_str(), &status["closed"], &status["total"]),
        (Some(steps[0].as_str()), &json!(0), &json!(3))
    );
    let third = &status["steps"][2];
    assert_eq!((&third["step_index"], &third["state"]), (&json!(3), &json!("waiting")), "{status}");
    assert_eq!(status["steps"][0]["state"], "current");
    let text = strand.exits(0, "tester", &["mol", "status", &root]);
    assert!(text.contains("0/3 closed, current") && text.contains("current") && text.contains("waiting"), "{text}");

    // Close the steps in dependency order: the current step moves on, and the root closes last.
    for (closed, step) in steps.iter().enumerate() {
        assert_eq!(status_of(&strand, &root), "open");
        strand.exits(0, "tester", &["close", step]);
        let status = strand.json("tester", &["mol", "status", &root]);
        assert_eq!(status["closed"], json!(closed + 1));
        assert_eq!(status["current"].as_str(), steps.get(closed + 1).map(String::as_str));
    }
    assert_eq!(status_of(&strand, &root), "closed");

    // A stored formula cooks by name; a missing variable is refused naming it.
    let stored = strand.json("tester", &["formula", "put", &release]);
    assert_eq!((&stored["name"], &stored["steps"]), (&json!("release"), &json!(3)));
    let listed = strand.json("tester", &["formula", "list"]);
    assert_eq!(
        listed.as_array().unwrap().iter().map(|formula| &formula["name"]).collect::<Vec<_>>(),
        [&json!("release")]
    );
    assert_eq!(strand.exits(0, "tester", &["formula", "show", "release"]), RELEASE_FORMULA);
    // As bd prints it (dolt/agents/dog/prompt.template.md:21 reads the steps): the steps themselves.
    let shown = strand.json("tester", &["formula", "show", "release"]);
    assert_eq!((shown["steps"][2]["id"].as_str(), shown["step_count"].as_u64()), (Some("publish"), Some(3)));
    let named = strand.exits(0, "tester", &["mol", "cook", "release", "--var", "version=2", "--title", "R2"]);
    assert_eq!(strand.json("tester", &["show", named.trim()])[0]["title"], "R2");
    strand.fails(1, &["mol", "cook", "release"], "needs variable \"version\"");
    strand.fails(2, &["mol", "cook", "release", "--var", "novalue"], "is not key=value");

    // A convoy of two beads closes when its second child closes, with a convoy.closed event.
    let first = id(&strand.json("tester", &["create", "first part"]));
    let second = id(&strand.json("tester", &["create", "second part"]));
    let convoy = strand.json("tester", &["convoy", "create", "ship it", &first, &second]);
    let convoy_id = id(&convoy);
    assert_eq!(convoy["type"], "convoy");
    let stranded = strand.json("tester", &["convoy", "stranded", &convoy_id]);
    assert_eq!(ids(&stranded), [first.as_str(), second.as_str()]);
    strand.exits(0, "tester", &["close", &first]);
    let progress = strand.json("tester", &["convoy", "status", &convoy_id]);
    assert_eq!((&progress["closed"], &progress["total"]), (&json!(1), &json!(2)));
    assert_eq!(status_of(&strand, &convoy_id), "open");
    strand.exits(0, "tester", &["close", &second]);
    assert_eq!(status_of(&strand, &convoy_id), "closed");
    let closed_events = strand.json("tester", &["events", "--type", "convoy.closed"]);
    assert_eq!(
        closed_events.as_array().unwrap().iter().map(|event| &event["subject"]).collect::<Vec<_>>(),
        [&json!(convoy_id)]
    );
    strand.fails(1, &["convoy", "status", &first], "not a convoy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_round_trips_and_hook_injects_the_work_block() {
    let cluster = Cluster::start(3, None);
    cluster.wait_for_leader().await;
    let strand = Strand::new(&cluster);

    // alice -> bob; bob reads it, replies in the same thread; alice archives the reply.
    let sent = strand.json("alice", &["mail", "send", "--to", "bob", "--subject", "hello", "are you there?"]);
    let first = id(&sent);
    assert_eq!((&sent["type"], &sent["assignee"], &sent["from"]), (&json!("message"), &json!("bob"), &json!("alice")));
    assert_eq!(labels(&sent), ["gc:message", &format!("thread:{first}")]);
    assert_eq!(ids(&strand.json("bob", &["mail", "inbox"])), [first.as_str()]);
    let read = strand.json("bob", &["mail", "read", &first]);
    assert!(labels(&read).contains(&"read") && read["status"] == "open", "{read}");
    assert_eq!(strand.json("bob", &["mail", "inbox"]), json!([]));
    assert_eq!(ids(&strand.json("bob", &["mail", "inbox", "--all"])), [first.as_str()]);
    let text = strand.exits(0, "bob", &["mail", "read", &first]);
    assert!(
        text.contains("From: alice") && text.contains("Subject: hello") && text.contains("are you there?"),
        "{text}"
    );

    let reply = strand.json("bob", &["mail", "reply", &first, "yes, here\nsecond line"]);
    let second = id(&reply);
    assert_eq!(
        (&reply["assignee"], &reply["from"], &reply["title"]),
        (&json!("alice"), &json!("bob"), &json!("yes, here"))
    );
    assert!(labels(&reply).contains(&format!("thread:{first}").as_str()), "{reply}");
    assert!(labels(&reply).contains(&format!("reply-to:{first}").as_str()), "{reply}");
    // Any message of the thread names it.
    assert_eq!(ids(&strand.json("alice", &["mail", "thread", &second])), [first.as_str(), second.as_str()]);
    assert_eq!(ids(&strand.json("alice", &["mail", "thread", &first])), [first.as_str(), second.as_str()]);
    assert_eq!(ids(&strand.json("alice", &["mail", "inbox"])), [second.as_str()]);
    strand.json("bob", &["mail", "unread", &first]);
    assert_eq!(ids(&strand.json("bob", &["mail", "inbox"])), [first.as_str()]);
    assert_eq!(strand.json("alice", &["mail", "archive", &second])["status"], "closed");
    strand.fails(1, &["mail", "archive", &second], "already archived");
    assert_eq!(strand.json("alice", &["mail", "inbox", "--all"]), json!([]));

    // No work: plain hook exits 1, --inject exits 0 and prints nothing.
    assert_eq!(strand.exits(1, "worker", &["hook", "--json"]).trim(), "[]");
    assert_eq!(strand.exits(0, "worker", &["hook", "--inject"]), "");

    // Work assigned to the agent: the exact block of docs/beads.md §7, one line per bead (`create`
    // gives bd's default priority, 2).
    let bead = id(&strand.json("tester", &["create", "fix the parser", "--assignee", "worker"]));
    let expected = format!(
        "<system-reminder>\nYou have pending work. Pick up the next item:\n\n<work-items>\n{bead} [open] P2 fix the parser @worker\n</work-items>\n\nClaim it and start working. Run 'strand hook' to see the full queue.\n</system-reminder>\n"
    );
    assert_eq!(strand.exits(0, "worker", &["hook", "--inject"]), expected);
    assert_eq!(ids(&strand.json("worker", &["hook"])), [bead.as_str()]);
    let claimed = strand.json("worker", &["hook", "--claim"]);
    assert_eq!(ids(&claimed), [bead.as_str()]);
    assert_eq!(claimed[0]["status"], "in_progress");

    // Slung to a pool: a pool member's hook offers it after the agent's own work.
    let slung = strand.json("tester", &["sling", "write the docs", "web", "--pool"]);
    let docs = id(&slung[0]);
    assert!(labels(&slung[0]).contains(&"pool:web"), "{slung}");
    assert_eq!(slung[1]["type"], "convoy");
    let queue = strand.json("worker", &["hook", "--pool", "web", "--limit", "5"]);
    assert_eq!(ids(&queue), [bead, docs]);
    strand.fails(2, &["sling", "x", "y", "--no-convoy", "--owned"], "--owned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_removes_closed_wisps_and_events_are_gap_free() {
    let dir = tempfile::tempdir().unwrap();
    let release = write_file(dir.path(), "release.toml", RELEASE_FORMULA);
    let cluster = Cluster::start(3, None);
    cluster.wait_for_leader().await;
    let strand = Strand::new(&cluster);

    // A wisp of 3 steps, closed: root and steps (4 beads) go.
    let cooked = strand.json("tester", &["mol", "cook", &release, "--var", "version=1", "--wisp"]);
    assert_eq!(cooked["root"]["ephemeral"], true);
    let steps = ids(&cooked["steps"]);
    strand.exits(0, "tester", &["close", &steps[0], &steps[1], &steps[2]]);
    assert_eq!(status_of(&strand, &id(&cooked["root"])), "closed");
    assert_eq!(strand.json("tester", &["purge", "--dry-run"]), json!({"purged_count": 4}));
    assert_eq!(strand.json("tester", &["purge", "--older-than", "1h"]), json!({"purged_count": 0}));
    assert_eq!(strand.json("tester", &["purge"]), json!({"purged_count": 4}));
    assert_eq!(strand.exits(0, "tester", &["purge"]).trim(), "purged 0 closed wisps");
    strand.fails(1, &["show", &steps[0]], "not found");

    // Every change is an event with a gap-free seq; bead.created leads.
    let events = strand.json("tester", &["events"]);
    let events = events.as_array().unwrap();
    let seqs: Vec<u64> = events.iter().map(|event| event["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!((&events[0]["type"], &events[0]["actor"]), (&json!("bead.created"), &json!("tester")));
    assert!(events[0]["ts"].as_str().unwrap().ends_with('Z'), "{}", events[0]);
    let created = strand.json("tester", &["events", "--type", "bead.created"]);
    assert_eq!(created.as_array().unwrap().len(), 4);
    assert!(created.as_array().unwrap().iter().all(|event| event["type"] == "bead.created"));
    let after = strand.json("tester", &["events", "--after", &seqs[seqs.len() - 2].to_string()]);
    assert_eq!(after.as_array().unwrap().len(), 1);
    strand.fails(2, &["events", "--type", "bead.exploded"], "not an event type");

    // watch --from 1 replays every event still kept, one JSON object per line; Ctrl-C exits 0.
    let mut watch = Command::new(strand_binary())
        .args(["--endpoints", &strand.endpoints, "watch", "--from", "1", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if lines_tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let total = seqs.len() as u64 + 1;
    strand.exits(0, "tester", &["create", "one more"]);
    for seq in 1..=total {
        let line = lines_rx.recv_timeout(WAIT_MAX).expect("watch prints every event");
        let event: Value = serde_json::from_str(&line).unwrap_or_else(|error| panic!("{error}: {line}"));
        assert_eq!(event["seq"], json!(seq), "{line}");
    }
    let interrupted = Command::new("kill").args(["-INT", &watch.id().to_string()]).status().unwrap();
    assert!(interrupted.success(), "send SIGINT to strand watch");
    assert_eq!(watch.wait().unwrap().code(), Some(0), "Ctrl-C ends a watch with exit 0");

    // A watch of a namespace that does not exist yet (one the CLI derives from $BEADS_DIR, which
    // its first write makes) says what it waits for, instead of silence.
    let dir = tempfile::tempdir().unwrap();
    let mut unknown = Command::new(strand_binary())
        .args(["--endpoints", &strand.endpoints, "watch"])
        .env_remove("STRAND_NAMESPACE")
        .env("BEADS_DIR", dir.path().join(".beads"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    BufReader::new(unknown.stderr.take().unwrap()).read_line(&mut said).unwrap();
    unknown.kill().unwrap();
    unknown.wait().unwrap();
    assert!(said.contains("does not exist (yet): waiting for its first event"), "{said}");
}
