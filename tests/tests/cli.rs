//! Golden tests of the CLI against a one-node cluster: `--json` output (times normalised) and
//! exit codes (0 ok, 1 refused, 2 usage, 3 unavailable). `UPDATE_GOLDEN=1` rewrites the files.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::PathBuf;
use std::process::Command;

use tests::{Cluster, free_port, json_of, normalise_times, strand_binary};

enum Expect {
    /// Exit 0 and stdout equal to `tests/golden/<name>.json` after normalisation.
    Golden(&'static str),
    /// This exit code and stderr containing the text.
    Fails(i32, &'static str),
}

/// `strand` as alice against `endpoint`, with no namespace, actor or lease from the environment.
fn strand_at(endpoint: &str, args: &[&str]) -> std::process::Output {
    Command::new(strand_binary())
        .args(["--endpoints", endpoint, "--actor", "alice"])
        .args(args)
        .env_remove("STRAND_ACTOR")
        .env_remove("STRAND_NAMESPACE")
        .env_remove("STRAND_LEASE_ID")
        .output()
        .expect("run strand")
}

/// The JSON `strand` printed as alice against `endpoint`, which must exit 0.
fn json_at(endpoint: &str, args: &[&str]) -> serde_json::Value {
    let output = strand_at(endpoint, args);
    assert_eq!(output.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| panic!("{args:?}: {error}: {output:?}"))
}

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden").join(format!("{name}.json"))
}

fn run(endpoint: &str, args: &[&str], expect: Expect) {
    let mut command = Command::new(strand_binary());
    if !args.contains(&"--endpoints") {
        command.args(["--endpoints", endpoint]);
    }
    let output = command.args(["--actor", "alice"]).args(args).env_remove("STRAND_ACTOR").output().expect("run strand");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let code = output.status.code().unwrap_or(-1);
    match expect {
        Expect::Golden(name) => {
            assert_eq!(code, 0, "strand {args:?} failed: {stderr}");
            let mut value: serde_json::Value =
                serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("{args:?}: {error}: {stdout}"));
            normalise_times(&mut value);
            let actual = serde_json::to_string_pretty(&value).unwrap() + "\n";
            let path = golden_path(name);
            if std::env::var("UPDATE_GOLDEN").is_ok() {
                std::fs::write(&path, &actual).unwrap();
            }
            let expected = std::fs::read_to_string(&path)
                .unwrap_or_else(|_| panic!("missing {}; run with UPDATE_GOLDEN=1", path.display()));
            assert_eq!(actual, expected, "strand {args:?} differs from {}", path.display());
        }
        Expect::Fails(expected_code, text) => {
            assert_eq!(code, expected_code, "strand {args:?}: stdout {stdout} stderr {stderr}");
            assert!(stderr.contains(text), "strand {args:?}: stderr {stderr:?} lacks {text:?}");
            assert_eq!(stderr.trim().lines().count(), 1, "one-line error: {stderr}");
            assert!(!stderr.trim_end().chars().any(char::is_control), "no control character: {stderr:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_and_exit_codes() {
    let cluster = Cluster::start(1, None);
    cluster.wait_for_leader().await;
    cluster.wait_for_controller().await;
    let endpoint = cluster.endpoints()[0].clone();
    let down = format!("127.0.0.1:{}", free_port());
    let long_description = "d".repeat(api::limits::DESCRIPTION_BYTES_MAX + 1);
    let cases: Vec<(Vec<&str>, Expect)> = vec![
        (
            vec![
                "create",
                "--json",
                "first bead",
                "-t",
                "bug",
                "--priority",
                "1",
                "--labels",
                "a,b",
                "--metadata",
                r#"{"k":"v"}"#,
            ],
            Expect::Golden("create"),
        ),
        (vec!["create", "--json", "second", "--deps", "st-1", "--parent", "st-1"], Expect::Golden("create_child")),
        (vec!["show", "--json", "st-1"], Expect::Golden("show")),
        (vec!["show", "st-999"], Expect::Fails(1, "st-999 not found")),
        // A newline and a terminal escape in an id come back escaped, on one line.
        (vec!["show", "st-1\n\x1b[31mred"], Expect::Fails(1, r"st-1\n\u{1b}[31mred")),
        (vec!["ready", "--json"], Expect::Golden("ready")),
        (vec!["claim", "--json", "st-1"], Expect::Golden("claim")),
        (vec!["claim", "st-1", "--actor", "bob"], Expect::Fails(1, "already claimed by alice")),
        (vec!["update", "st-1", "--status", "bogus"], Expect::Fails(2, "invalid status \"bogus\"")),
        (vec!["update", "st-1", "--status", "pinned"], Expect::Fails(1, "cannot go from in_progress to pinned")),
        (
            vec!["update", "--json", "st-2", "--add-label", "x", "--set-metadata", "gc.routed_to=web"],
            Expect::Golden("update"),
        ),
        (vec!["create", "x", "--metadata", "{bad"], Expect::Fails(2, "--metadata is not a JSON object")),
        (vec!["create", ""], Expect::Fails(1, "title must not be empty")),
        (
            vec!["create", "big", "--description", &long_description],
            Expect::Fails(1, "description is 65537 bytes, over the limit of 65536"),
        ),
        (vec!["show", "--bogus-flag"], Expect::Fails(2, "--bogus-flag")),
        (vec!["list", "--json"], Expect::Golden("list_default")),
        (vec!["list", "--json", "--all", "--sort", "created", "--reverse"], Expect::Golden("list_all")),
        (vec!["dep", "add", "st-2", "st-1", "--type", "related"], Expect::Fails(0, "")),
        (vec!["dep", "list", "--json", "st-2"], Expect::Golden("dep_list")),
        (vec!["close", "--json", "st-1", "--reason", "done"], Expect::Golden("close")),
        (vec!["ready", "--json", "--claim", "--label", "nope"], Expect::Fails(1, "")),
        (
            vec!["node", "--id", "1", "--peers", "2=nowhere", "--data-dir", "unused"],
            Expect::Fails(2, "--peers entry \"2=nowhere\" is malformed"),
        ),
        (vec!["--endpoints", &down, "--timeout", "1s", "show", "st-1"], Expect::Fails(3, "cluster unavailable")),
        // Usage errors name what they are about, on one line.
        (
            vec!["--endpoints", "127.0.0.1:99999", "show", "st-1"],
            Expect::Fails(2, "is not HOST:PORT with a port from 1 to 65535"),
        ),
        (
            vec!["creat", "x"],
            Expect::Fails(
                2,
                "unrecognized subcommand 'creat'; tip: some similar subcommands exist: 'ready', 'certs', 'create'",
            ),
        ),
        (vec!["certs", "init"], Expect::Fails(2, "the following required arguments were not provided: --dir")),
        (
            vec!["node", "--id", "1", "--peers", "2=nowhere"],
            Expect::Fails(2, "e.g. 2=10.0.0.2:7500 (the peer listener)"),
        ),
        (vec!["ready", "--claim", "--label", "nope"], Expect::Fails(1, "no ready bead matched; nothing was claimed")),
        (vec!["order", "history", "nosuch"], Expect::Fails(1, "nosuch")),
    ];
    for (args, expect) in cases {
        match expect {
            Expect::Fails(0, _) => {
                let status =
                    Command::new(strand_binary()).args(["--endpoints", &endpoint]).args(&args).status().unwrap();
                assert!(status.success(), "strand {args:?}");
            }
            Expect::Fails(1, "") => {
                let output =
                    Command::new(strand_binary()).args(["--endpoints", &endpoint]).args(&args).output().unwrap();
                assert_eq!(output.status.code(), Some(1), "strand {args:?} claims nothing");
                assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "[]");
            }
            expect => run(&endpoint, &args, expect),
        }
    }

    // A negative number reaches the option's own parser, which says what it accepts; clap no
    // longer takes it for an unknown flag.
    for (args, accepted) in [
        (vec!["create", "x", "-p", "-1"], "expected 0-4"),
        (vec!["list", "-n", "-1"], "not in 0..="),
        (vec!["events", "--after", "-1"], "a whole number from 0"),
        (vec!["claim", "st-2", "--lease", "-5m"], "a duration cannot be negative; write one such as 10m"),
    ] {
        let output = Command::new(strand_binary()).args(["--endpoints", &endpoint]).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(accepted), "{args:?} should say what it accepts: {stderr}");
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("unexpected argument"), "{args:?}: {stderr}");
        let value = args[args.len() - 1];
        assert!(stderr.contains(&format!("invalid value '{value}'")), "{args:?}: {stderr}");
    }

    // Counts agree with their nouns: "1 step", not "1 steps".
    let formula = cluster.dir().join("one.formula.toml");
    std::fs::write(&formula, "formula = \"one\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\n").unwrap();
    let output = Command::new(strand_binary()).args(["formula", "validate"]).arg(&formula).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("formula one is valid: 1 step\n"), "{stdout}");

    // A request over the gRPC size limit is too large for argv; send it through the client.
    let huge = api::command::CreateBead { title: "t".repeat(api::limits::REQUEST_BYTES_MAX + 1), ..Default::default() };
    let error = cluster.client().execute(api::command::Command::Create(huge)).await.expect_err("oversized request");
    assert!(error.to_string().contains("over the size limit"), "{error}");
}

/// Agent text never drives the operator's terminal: a title, an actor or a description holding a
/// newline, ESC, BEL or a bidirectional override prints escaped on one row (block fields keep
/// their lines, indented), and actors, labels and metadata keys refuse control characters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_text_is_escaped_in_human_output_and_refused_in_identifiers() {
    let cluster = Cluster::start(1, None);
    cluster.wait_for_leader().await;
    let endpoint = cluster.endpoints()[0].clone();
    let strand = |args: &[&str]| strand_at(&endpoint, args);
    let forged = "fake\nst-9 [closed] P0 victim @root\x1b[2J\x07\u{202e}";
    let created = strand(&["create", forged, "--description", "first line\n\x1b[31mst-8 [open] P0 forged"]);
    assert_eq!(created.status.code(), Some(0), "{created:?}");
    for args in [&["list"][..], &["show", "st-1"], &["ready"]] {
        let output = strand(args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        assert!(!stdout.contains(['\x1b', '\x07', '\u{202e}']), "{args:?} printed a raw control character: {stdout:?}");
        assert!(stdout.contains(r"fake\nst-9 [closed] P0 victim @root\u{1b}[2J\u{7}\u{202e}"), "{args:?}: {stdout}");
        // No line but the bead's own starts with an id: the forged rows stay inside it.
        let rows = stdout.lines().filter(|line| line.trim_start().starts_with("st-")).count();
        assert!(rows <= 1, "{args:?} shows a forged row: {stdout}");
        if args[0] == "show" {
            assert!(stdout.contains(r"\u{1b}[31mst-8 [open] P0 forged"), "{stdout}");
            let continuation = stdout.lines().find(|line| line.contains("st-8")).unwrap();
            assert!(continuation.starts_with(' '), "a description's later lines are indented: {stdout}");
        }
    }
    // The JSON keeps the text as it was, escaped by JSON itself.
    let json: serde_json::Value = serde_json::from_slice(&strand(&["show", "--json", "st-1"]).stdout).unwrap();
    assert_eq!(json[0]["title"], forged);

    let control = "has a control character";
    for (args, field, kind) in [
        (&["claim", "st-1", "--actor", "ev\x1b[2Jil"][..], "actor", control),
        (&["update", "st-1", "--add-label", "pool:\x1b[2J"], "label", control),
        (&["update", "st-1", "--set-metadata", "k\x07=v"], "metadata key", control),
        (&["create", "x", "--assignee", "bob\nroot"], "assignee", control),
        // Issue 36: a bidirectional override is named as one, not as a control character.
        (&["update", "st-1", "--add-label", "rtl\u{202e}"], "label", "has a bidirectional override (U+202E)"),
    ] {
        let output = strand(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(&format!("{field} \"")) && stderr.contains(kind), "{args:?}: {stderr}");
        assert!(!stderr.contains('\x1b') && stderr.trim().lines().count() == 1, "{stderr:?}");
    }
    let after: serde_json::Value = serde_json::from_slice(&strand(&["show", "--json", "st-1"]).stdout).unwrap();
    assert_eq!(after[0]["status"], "open", "{after}");
    assert_eq!(after[0]["labels"].as_array().map_or(0, Vec::len), 0, "{after}");
    assert!(after[0]["metadata"].get("k\x07").is_none(), "{after}");
}

/// Issue 28: an id a bead is created under keeps to its charset and a taken one names `--id` and
/// `strand update`, neither speaking of an import; a gate of a type no check resolves is a usage
/// error that lists the known ones; a keepalive of a bead that holds no lease says why and what
/// to do; and every time `order show --json` and `snapshot save --json` print is RFC 3339.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_ids_gate_types_unleased_keepalives_and_json_times() {
    let cluster = Cluster::start(1, None);
    cluster.wait_for_leader().await;
    cluster.wait_for_controller().await;
    let endpoint = cluster.endpoints()[0].clone();
    let strand = |args: &[&str]| strand_at(&endpoint, args);
    let json = |args: &[&str]| json_at(&endpoint, args);
    let charset =
        "an id is letters, digits, '-', '_', '.' and ':', starting with a letter or digit (for example st-12)";

    // Ids outside the charset are refused by the cluster (exit 1), naming the id and the charset.
    for (id, says) in [
        ("../../etc", format!("id \"../../etc\" has characters an id cannot hold; {charset}")),
        ("gc 1", format!("id \"gc 1\" has characters an id cannot hold; {charset}")),
        ("st-1\n\x1b[2J", format!("id \"st-1\\n\\u{{1b}}[2J\" has characters an id cannot hold; {charset}")),
        (".hidden", format!("id \".hidden\" does not start with a letter or digit; {charset}")),
        ("st..1", format!("id \"st..1\" holds \"..\", which an id cannot; {charset}")),
    ] {
        let output = strand(&["create", "x", "--id", id]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{id:?}: {stderr}");
        assert!(stderr.contains(&says), "{id:?}: {stderr}");
        assert!(!stderr.contains("import"), "a create speaks of no import: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "one-line error: {stderr:?}");
        assert!(!stderr.trim_end().chars().any(char::is_control), "no control character: {stderr:?}");
    }
    assert_eq!(json(&["list", "--all", "--json"]), serde_json::json!([]), "a refused create writes nothing");

    // bd's ids, child ids and Gas City's stable ids are taken as they are; a second create under
    // one names it and what to do instead.
    for id in ["st-1", "gc-abc.1.3", "gc-session-1"] {
        assert_eq!(json(&["create", "first", "--id", id, "--json"])["id"], id);
    }
    run(
        &endpoint,
        &["create", "again", "--id", "st-1"],
        Expect::Fails(1, "bead st-1 already exists; give another --id, or update it with strand update st-1"),
    );
    let st1 = json(&["show", "st-1", "--json"]);
    assert_eq!(st1[0]["title"], "first", "the refused create changed nothing: {st1}");

    // A gate of a type no check resolves is a usage error, and nothing is created.
    run(
        &endpoint,
        &["gate", "create", "--blocks", "st-1", "--type", "bogus"],
        Expect::Fails(2, "unknown gate type \"bogus\"; use one of human, timer, gh:run, gh:pr, bead"),
    );
    let everything = json(&["list", "--all", "--include-gates", "--json"]);
    assert_eq!(everything.as_array().map(Vec::len), Some(3), "no gate was made: {everything}");

    // Keeping alive (or renewing) a claim without a lease says why there is none and what to do.
    json(&["claim", "st-1", "--json"]);
    let unleased = "st-1 holds no lease (it was claimed without --lease, or its lease expired); claim it with --lease to keep one alive";
    run(&endpoint, &["lease", "keepalive", "st-1"], Expect::Fails(1, unleased));
    run(&endpoint, &["lease", "renew", "st-1"], Expect::Fails(1, unleased));

    // Every time an order's JSON holds is RFC 3339, durations stay numbers.
    let formula = cluster.dir().join("patrol.toml");
    std::fs::write(&formula, "formula = \"patrol\"\n[[steps]]\nid = \"look\"\ntitle = \"Look around\"\n").unwrap();
    json(&["formula", "put", formula.to_str().unwrap(), "--json"]);
    let order = cluster.dir().join("patrol-sweep.toml");
    std::fs::write(&order, "[order]\nformula = \"patrol\"\ngate = \"cooldown\"\ninterval = \"1h\"\npool = \"dog\"\n")
        .unwrap();
    json(&["order", "put", order.to_str().unwrap(), "--json"]);
    json(&["order", "run", "patrol-sweep", "--json"]);
    let shown = json(&["order", "show", "patrol-sweep", "--json"]);
    let listed = json(&["order", "list", "--json"]);
    for value in [&shown, &listed[0]] {
        for key in ["last_fired_at", "next_due_at"] {
            let time = value[key].as_str().unwrap_or_else(|| panic!("{key} is a time: {value}"));
            assert!(api::model::Timestamp::parse_rfc3339(time).is_some() && time.ends_with('Z'), "{key}: {value}");
        }
        assert_rfc3339_times(value);
    }

    // A backup's header too.
    let backup = cluster.dir().join("issue-28.backup");
    let saved = json(&["--json", "snapshot", "save", backup.to_str().unwrap()]);
    let taken = saved["header"]["created_at"].as_str().unwrap_or_else(|| panic!("created_at: {saved}"));
    assert!(api::model::Timestamp::parse_rfc3339(taken).is_some(), "{saved}");
    assert_rfc3339_times(&saved);
}

/// Every field at any depth whose name ends in `_at` is an RFC 3339 time (or null), and none
/// ends in `_ms` but a duration (`ttl_ms`, `interval_ms`).
fn assert_rfc3339_times(value: &serde_json::Value) {
    match value {
        serde_json::Value::Array(items) => items.iter().for_each(assert_rfc3339_times),
        serde_json::Value::Object(fields) => {
            for (key, field) in fields {
                if key.ends_with("_at") && !field.is_null() {
                    let time = field.as_str().unwrap_or_else(|| panic!("{key} is not text: {value}"));
                    assert!(api::model::Timestamp::parse_rfc3339(time).is_some(), "{key} is not RFC 3339: {value}");
                }
                assert!(
                    !key.ends_with("_ms") || ["ttl_ms", "interval_ms"].contains(&key.as_str()),
                    "{key} is a point in time in ms: {value}"
                );
                assert_rfc3339_times(field);
            }
        }
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_namespace_must_exist_and_a_derived_one_is_made_by_its_first_write() {
    let cluster = Cluster::start(1, None);
    cluster.wait_for_leader().await;
    let endpoint = cluster.endpoints()[0].clone();
    let json = |args: &[&str]| json_at(&endpoint, args);
    let names = || -> Vec<String> {
        let listed = json(&["namespace", "list", "--json"]);
        listed.as_array().unwrap().iter().map(|info| info["name"].as_str().unwrap().to_string()).collect()
    };

    // `default` is made by its first write, named or not.
    assert_eq!(json(&["create", "first", "--json"])["id"], "st-1");
    assert_eq!(json(&["--namespace", "default", "create", "second", "--json"])["id"], "st-2");

    // A mistyped --namespace is refused on every kind of request, suggesting the close name; no
    // namespace is made.
    let did_you_mean =
        "namespace defualt does not exist; did you mean default? Or create it with `strand namespace create defualt`";
    for args in [
        &["--namespace", "defualt", "create", "lost"][..],
        &["--namespace", "defualt", "list", "--all"],
        &["--namespace", "defualt", "ready"],
        &["--namespace", "defualt", "show", "st-1"],
        &["--namespace", "defualt", "watch"],
        &["namespace", "configure", "defualt", "--max-deliveries", "2"],
        &["namespace", "delete", "defualt"],
    ] {
        run(&endpoint, args, Expect::Fails(1, did_you_mean));
    }
    let far = Command::new(strand_binary())
        .args(["--endpoints", &endpoint, "--actor", "alice", "create", "lost"])
        .env("STRAND_NAMESPACE", "billing")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&far.stderr);
    assert_eq!(far.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("namespace billing does not exist; create it with"), "{stderr}");
    assert!(!stderr.contains("did you mean"), "no close name, no suggestion: {stderr}");
    assert_eq!(names(), ["default"], "no refused request made a namespace");

    // Once created, it is used; its beads are its own.
    json(&["namespace", "create", "rig", "--prefix", "rg", "--json"]);
    assert_eq!(json(&["--namespace", "rig", "create", "in rig", "--json"])["id"], "rg-1");

    // A namespace the CLI derives from $BEADS_DIR is made by its first write, with
    // $GC_BEADS_PREFIX, as bd makes its database.
    let dir = tempfile::tempdir().unwrap();
    let beads_dir = dir.path().join(".beads");
    let derived = Command::new(strand_binary())
        .args(["--endpoints", &endpoint, "--actor", "alice", "create", "in a rig", "--json"])
        .env_remove("STRAND_NAMESPACE")
        .env("BEADS_DIR", &beads_dir)
        .env("GC_BEADS_PREFIX", "gc")
        .output()
        .unwrap();
    assert_eq!(derived.status.code(), Some(0), "{}", String::from_utf8_lossy(&derived.stderr));
    let created: serde_json::Value = serde_json::from_slice(&derived.stdout).unwrap();
    assert_eq!(created["id"], "gc-1", "{created}");
    assert_eq!(names().len(), 3, "the derived store was made: {:?}", names());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_gives_back_a_plain_claim_and_namespace_show_counts_a_namespace() {
    let cluster = Cluster::start(1, None);
    cluster.wait_for_leader().await;
    let endpoint = cluster.endpoints()[0].clone();
    let json = |args: &[&str]| json_at(&endpoint, args);
    json(&["namespace", "create", "rig", "--prefix", "rg", "--json"]);
    json(&["--namespace", "rig", "create", "parser", "--json"]);
    json(&["--namespace", "rig", "create", "lexer", "--json"]);
    json(&["--namespace", "rig", "claim", "rg-1", "--json"]);

    // Only the holder releases; anyone else is refused with the holder named, and nothing changes.
    run(
        &endpoint,
        &["--namespace", "rig", "release", "rg-1", "--actor", "bob"],
        Expect::Fails(1, "bead rg-1 is claimed by alice, not by bob; only its holder releases it"),
    );
    assert_eq!(json(&["--namespace", "rig", "show", "rg-1", "--json"])[0]["assignee"], "alice");
    let released = json(&["--namespace", "rig", "release", "rg-1", "--json"]);
    assert_eq!((&released["status"], &released["assignee"]), (&"open".into(), &"".into()), "{released}");
    run(&endpoint, &["--namespace", "rig", "release", "rg-1"], Expect::Fails(1, "rg-1 is not claimed (status open)"));
    json(&["--namespace", "rig", "claim", "rg-2", "--lease", "10m", "--json"]);
    run(&endpoint, &["--namespace", "rig", "release", "rg-2"], Expect::Fails(1, "`strand lease release rg-2`"));

    let shown = json(&["namespace", "show", "rig", "--json"]);
    assert_eq!(
        (&shown["name"], &shown["prefix"], &shown["beads"]),
        (&"rig".into(), &"rg".into(), &2.into()),
        "{shown}"
    );
    let counts = &shown["counts"];
    assert_eq!(
        (&counts["open"], &counts["in_progress"], &counts["ready"], &counts["leased"]),
        (&1.into(), &1.into(), &1.into(), &1.into()),
        "{shown}"
    );
    let text = strand_at(&endpoint, &["namespace", "show", "rig"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.starts_with("rig  prefix rg\n  2 beads: open 1, in_progress 1, blocked 0"), "{text}");
    run(&endpoint, &["namespace", "show", "rgi"], Expect::Fails(1, "namespace rgi does not exist; did you mean rig?"));

    // Its queues: rg-1 ready (no pool), rg-2 held by alice under a lease lapsing within 15m, not 1m.
    let queues = json(&["namespace", "queues", "rig", "--window", "15m", "--json"]);
    assert_eq!(
        (&queues["ready"], &queues["leased"], &queues["expiring"]),
        (&1.into(), &1.into(), &1.into()),
        "{queues}"
    );
    assert_eq!(queues["oldest_ready"]["id"], "rg-1", "{queues}");
    assert_eq!(queues["in_progress_by_assignee"], serde_json::json!([{ "name": "alice", "count": 1 }]), "{queues}");
    assert_eq!((&queues["leases"][0]["bead_id"], &queues["leases"][0]["holder"]), (&"rg-2".into(), &"alice".into()));
    let text = strand_at(&endpoint, &["namespace", "queues", "rig"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("  leased 1, 0 lapsing within 1m\n"), "{text}");
    run(
        &endpoint,
        &["namespace", "queues", "rgi"],
        Expect::Fails(1, "namespace rgi does not exist; did you mean rig?"),
    );
    run(&endpoint, &["namespace", "queues", "rig", "--window", "soon"], Expect::Fails(2, "--window"));
}

/// Issue 36: a reader that stops reading ends a listing quietly, text or JSON; `snapshot save`
/// and `status` print the cluster id (a hash) as the hex the text prints; `show` prints the notes
/// and comments in text; `member list` shows the client address a member was added with until it
/// answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_pipes_hash_ids_notes_and_stored_client_addresses() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;

    let cluster = Cluster::start(1, None);
    cluster.wait_for_leader().await;
    let endpoint = cluster.endpoints()[0].clone();
    let json = |args: &[&str]| json_at(&endpoint, args);
    let text = |args: &[&str]| {
        let output = strand_at(&endpoint, args);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    for title in ["first", "second", "third"] {
        json(&["create", title, "--json"]);
    }

    // The read end closed before strand prints (`| head` that has read enough): no panic, no
    // message, and SIGPIPE ends it as it ends `ls`. And through a shell's real `| head -1`.
    for listing in [&["list", "-n", "0"][..], &["list", "-n", "0", "--json"]] {
        let mut child = Command::new(strand_binary())
            .args(["--endpoints", &endpoint])
            .args(listing)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stderr), "", "{listing:?} ends quietly");
        assert_eq!(output.status.signal(), Some(13), "{listing:?} ends by SIGPIPE: {:?}", output.status);
        let piped = Command::new("bash")
            .arg("-c")
            .arg(format!("\"$0\" --endpoints {endpoint} {} | head -1", listing.join(" ")))
            .arg(strand_binary())
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&piped.stderr), "", "{listing:?} | head -1");
        assert_eq!(String::from_utf8_lossy(&piped.stdout).lines().count(), 1, "{piped:?}");
    }

    // A cluster id is a hash: in JSON, the 16 hex digits the text prints (not a number jq rounds).
    let backup = cluster.dir().join("issue-36.backup");
    let saved = json(&["--json", "snapshot", "save", backup.to_str().unwrap()]);
    let status = json(&["--json", "snapshot", "status", backup.to_str().unwrap()]);
    let hex = format!("{:016x}", cluster.cluster_id().await);
    for value in [&saved, &status] {
        assert_eq!(value["header"]["cluster_id"], hex.as_str(), "{value}");
    }
    assert!(text(&["snapshot", "status", backup.to_str().unwrap()]).contains(&format!("cluster {hex}")));

    // Notes and comments in the text of show, apart.
    json(&["update", "st-1", "--notes", "root cause: a race", "--json"]);
    json(&["comment", "st-1", "looked", "into", "it", "--json"]);
    let shown = text(&["show", "st-1"]);
    assert!(shown.contains("\n  notes: root cause: a race\n"), "{shown}");
    assert!(shown.contains("\n  comments:\n    alice: looked into it\n"), "{shown}");

    // A member added with --client-address shows it until it answers for itself.
    let added =
        strand_at(&endpoint, &["member", "add", "9", "127.0.0.1:1", "--client-address", "127.0.0.1:2", "--learner"]);
    assert_eq!(added.status.code(), Some(0), "{added:?}");
    let members = json(&["member", "list", "--json"]);
    let nine = members["members"].as_array().unwrap().iter().find(|member| member["id"] == 9).cloned();
    assert_eq!(nine.as_ref().map(|member| &member["client_address"]), Some(&"127.0.0.1:2".into()), "{members}");
    let listed = text(&["member", "list"]);
    let row = listed.lines().find(|line| line.trim_start().starts_with("9 ")).unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(row.split_whitespace().nth(1), Some("127.0.0.1:2"), "the client column: {listed}");
}

/// Issue 36: `--peers` is the members' peer addresses, this node's own entry optional, for
/// `strand node` and `strand snapshot restore` alike: a cluster whose first node lists itself
/// and whose second does not elects a leader, and members restored either way agree on the new
/// cluster id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_may_name_this_node_or_leave_it_out() {
    /// Node processes, killed when the test ends, however it ends.
    struct Nodes(Vec<std::process::Child>);
    impl Drop for Nodes {
        fn drop(&mut self) {
            for child in &mut self.0 {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let address = || format!("127.0.0.1:{}", free_port());
    let (clients, peers) = ([address(), address()], [address(), address()]);
    let everyone = format!("1={},2={}", peers[0], peers[1]);
    let others_of_2 = format!("1={}", peers[0]);
    let mut nodes = Nodes(Vec::new());
    for (index, peers_flag) in [&everyone, &others_of_2].into_iter().enumerate() {
        let id = (index + 1).to_string();
        let log = std::fs::File::create(dir.path().join(format!("node-{id}.log"))).unwrap();
        let child = Command::new(strand_binary())
            .args(["node", "--id", &id, "--listen", &clients[index], "--listen-peer", &peers[index]])
            .arg("--data-dir")
            .arg(dir.path().join(format!("node-{id}")))
            .args(["--peers", peers_flag])
            .stderr(log)
            .spawn()
            .unwrap();
        nodes.0.push(child);
    }
    let endpoints = clients.join(",");
    tests::wait_for("a leader of both nodes", || async {
        let output = strand_at(&endpoints, &["--timeout", "2s", "--json", "cluster", "status"]);
        let status: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
        (status["leader_id"].as_u64()? != 0 && status["voters"].as_array()?.len() == 2).then_some(())
    })
    .await;

    json_at(&endpoints, &["create", "kept", "--json"]);

    let backup = dir.path().join("two.backup");
    json_at(&endpoints, &["--json", "snapshot", "save", backup.to_str().unwrap()]);
    let restore = |id: &str, peers: &str, more: &[&str]| {
        Command::new(strand_binary())
            .args(["--json", "snapshot", "restore"])
            .arg(&backup)
            .arg("--data-dir")
            .arg(dir.path().join(format!("restored-{id}-{}", more.len())))
            .args(["--id", id, "--peers", peers])
            .args(more)
            .output()
            .unwrap()
    };
    let mismatch = restore("2", &everyone, &["--advertise-peer", &peers[0]]);
    assert_eq!(mismatch.status.code(), Some(2), "{mismatch:?}");
    assert!(String::from_utf8_lossy(&mismatch.stderr).contains("give one address"), "{mismatch:?}");
    let listed = json_of(&restore("1", &everyone, &[]));
    let left_out = json_of(&restore("2", &others_of_2, &["--advertise-peer", &peers[1]]));
    // Node 1, the lowest, draws the new cluster's id; node 2 learns it when the cluster runs.
    assert!(listed["cluster_id"].is_string() && left_out["cluster_id"].is_null(), "{listed} {left_out}");
    assert_eq!((&listed["members"], &left_out["members"]), (&serde_json::json!([1, 2]), &serde_json::json!([1, 2])));
}

/// Issue 42: `strand version` names the build: the crate version, the commit its sources were
/// built from and whether they had uncommitted changes (as git sees them now), the storage format,
/// the apply versions and the bd command line; `--version` says the same.
#[test]
fn version_names_the_commit_the_storage_format_and_what_the_build_speaks() {
    let git = |args: &[&str]| {
        let output = std::process::Command::new("git").args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output();
        output
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string())
    };
    let version = json_at("127.0.0.1:1", &["version", "--json"]);
    assert_eq!(version["version"], env!("CARGO_PKG_VERSION"), "{version}");
    assert_eq!(version["storage_format"], raft_store::codec::STORAGE_FORMAT, "{version}");
    let applies = api::version::build_apply_versions();
    assert_eq!(
        (&version["apply_versions"]["min"], &version["apply_versions"]["max"]),
        (&applies.min.into(), &applies.max.into())
    );
    assert_eq!(version["bd_compatible"], "1.0.4");
    let commit = version["commit"].as_str().unwrap();
    if let Some(head) = git(&["rev-parse", "--short=12", "HEAD"]) {
        assert_eq!(commit, head, "{version}");
        let sources = [
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            "../api",
            "../node",
            "../raft-store",
            "../cli",
            "../Cargo.toml",
            "../Cargo.lock",
        ];
        let dirty = git(&sources).is_some_and(|changes| !changes.is_empty());
        assert_eq!(version["dirty"], dirty, "{version}");
    }
    let suffix = if version["dirty"] == true { ".dirty" } else { "" };
    let build = format!("{}+{commit}{suffix}", env!("CARGO_PKG_VERSION"));
    assert_eq!(version["build"], build.as_str());
    let text = strand_at("127.0.0.1:1", &["version"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.starts_with(&format!("strand {build}\ncommit: {commit}")), "{text}");
    assert!(text.contains(&format!("storage format: {}\n", raft_store::codec::STORAGE_FORMAT)), "{text}");
    let flag = strand_at("127.0.0.1:1", &["--version"]);
    assert_eq!(String::from_utf8_lossy(&flag.stdout), text, "--version says what version does");
    let short = strand_at("127.0.0.1:1", &["-V"]);
    assert_eq!(String::from_utf8_lossy(&short.stdout).trim(), format!("strand {build}"));
}
