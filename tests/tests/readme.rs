//! The README's runnable recipes, run as written: every ```` ```console ```` block of the README is
//! a list of steps, and each step's exit code and output must be what the block shows.
//!
//! A block is run in a network namespace of its own (`unshare --net`), so it uses the README's
//! own ports (7400...) whatever else runs on the machine, in a fresh working directory, with the
//! `strand` this build made first on `PATH` and no `STRAND_*` variable from the environment.
//!
//! What a block says:
//! - `$ COMMAND`: a step, run by bash; lines after it that start with `> ` continue it (a here
//!   document, say). It must exit 0, or N when its line ends in a comment `# exit N...`.
//! - The lines after a step, up to the next `$`, are its output (stdout and stderr together),
//!   line by line: `[..]` in a line stands for any text, and a line `...` for any number of
//!   lines. A step followed by no lines must print nothing.
//! - A step ending in `&` runs in the background; its output is not checked.
//! - A `strand dev` step starts a cluster and runs until stopped, as in a terminal of its own: it
//!   runs in the background, and the block goes on once it printed "nodes ready". The lines
//!   shown after it are matched against what it printed by then.
//!
//! Each section that holds such blocks is in [`SECTIONS`], with what it expects to be running
//! (the `make run` cluster, or nothing). A ```` ```toml ```` block whose first line is `# NAME`
//! is written to the file NAME in the working directory of its section's blocks first. Every
//! process a block started is killed when it ends.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tests::strand_binary;

/// What a section's blocks expect to find running when they start.
#[derive(Clone, Copy, Debug)]
enum Setup {
    /// `make run`: a local 3-node cluster (`strand dev --nodes 3`) in the working directory.
    MakeRun,
    /// Nothing: the block starts what it needs.
    Nothing,
    /// Nothing running, and a newer build at `new/strand` (`strand` in the test-only apply-next
    /// mode, `tests::apply_next_binary`, which applies one apply version more).
    NewBuild,
}

/// The sections whose ```` ```console ```` blocks are run, and what each expects.
const SECTIONS: &[(&str, Setup)] = &[
    ("A ten-minute tour", Setup::MakeRun),
    ("Namespaces", Setup::MakeRun),
    ("Leased claims", Setup::MakeRun),
    ("Orders", Setup::MakeRun),
    ("Durability: what a cluster survives", Setup::Nothing),
    ("Securing a cluster", Setup::Nothing),
    ("Upgrading", Setup::NewBuild),
];

/// How long one block may take, start to end.
const BLOCK_TIME_MAX: Duration = Duration::from_secs(240);
/// How long a `strand dev` step may take to say its nodes are ready.
const DEV_READY_SECONDS: u32 = 60;

/// A fenced block of the README.
struct Block {
    /// The heading it is under.
    section: String,
    /// Its info string (`console`, `sh`, `toml`...).
    language: String,
    /// Its line in the README, from 1 (of the opening fence).
    line: usize,
    /// How far its fence is indented.
    indent: usize,
    lines: Vec<String>,
}

fn blocks_of(readme: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut section = String::new();
    let mut open: Option<Block> = None;
    for (index, line) in readme.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (Some(_), Some(_)) => blocks.push(open.take().unwrap()),
            (Some(block), None) => {
                // A block indented under a list item is indented on every line as its fence is.
                let indent = line.len() - line.trim_start().len();
                block.lines.push(line[indent.min(block.indent)..].to_string());
            }
            (None, Some(info)) => {
                open = Some(Block {
                    section: section.clone(),
                    language: info.trim().to_string(),
                    line: index + 1,
                    indent: line.len() - line.trim_start().len(),
                    lines: Vec::new(),
                });
            }
            (None, None) => {
                if let Some(heading) = line.strip_prefix('#') {
                    section = heading.trim_start_matches('#').trim().to_string();
                }
            }
        }
    }
    assert!(open.is_none(), "the README ends inside a fenced block");
    blocks
}

/// One step of a console block.
#[derive(Debug)]
struct Step {
    command: String,
    exit: i32,
    expected: Vec<String>,
    background: bool,
    dev: bool,
}

fn steps_of(block: &Block) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    for (offset, line) in block.lines.iter().enumerate() {
        if let Some(command) = line.strip_prefix("$ ") {
            let exit = match command.split_once("# exit ") {
                Some((_, rest)) => {
                    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    digits
                        .parse()
                        .unwrap_or_else(|_| panic!("README line {}: `# exit` needs a code", block.line + offset + 1))
                }
                None => 0,
            };
            let code = command.split(" #").next().unwrap_or(command).trim_end();
            steps.push(Step {
                command: command.to_string(),
                exit,
                expected: Vec::new(),
                background: code.ends_with('&') && !code.starts_with("strand dev"),
                dev: code.starts_with("strand dev"),
            });
            continue;
        }
        let Some(step) = steps.last_mut() else {
            panic!("README line {}: a console block starts with a `$ ` step", block.line + offset + 1)
        };
        match line.strip_prefix("> ").or_else(|| (line == ">").then_some("")) {
            Some(continued) if step.expected.is_empty() => {
                step.command.push('\n');
                step.command.push_str(continued);
            }
            _ => step.expected.push(line.trim_end().to_string()),
        }
    }
    for step in &mut steps {
        while step.expected.last().is_some_and(String::is_empty) {
            step.expected.pop();
        }
    }
    steps
}

/// Whether `actual` matches the `expected` line (`[..]`: any text).
fn line_matches(expected: &str, actual: &str) -> bool {
    let mut parts = expected.split("[..]");
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = actual.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    for (index, part) in parts.iter().enumerate() {
        if index == parts.len() - 1 {
            return rest.len() >= part.len() && rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// Whether the `actual` lines match the `expected` ones (a line `...`: any number of lines).
fn output_matches(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first == "..." => (0..=actual.len()).any(|skip| output_matches(rest, &actual[skip..])),
        Some((first, rest)) => {
            actual.split_first().is_some_and(|(line, others)| line_matches(first, line) && output_matches(rest, others))
        }
    }
}

/// The bash script that runs `steps` in the block's directory, leaving each step's output in
/// `out.N` and exit code in `rc.N`, and stopping at the first step whose code is not the expected.
fn script_of(steps: &[Step]) -> String {
    let mut script =
        String::from("set -u\nip link set lo up || { echo 'cannot bring up the loopback interface' >&2; exit 90; }\n");
    for (index, step) in steps.iter().enumerate() {
        if step.dev {
            let command = step.command.split(" #").next().unwrap_or(&step.command).trim_end().trim_end_matches('&');
            script.push_str(&format!(
                "{{ {command} & }} > out.{index} 2>&1 < /dev/null\n\
                 rc=1; for _ in $(seq {}); do grep -q 'nodes ready' out.{index} && {{ rc=0; break; }}; sleep 0.1; done\n\
                 echo $rc > rc.{index}; [ $rc = 0 ] || exit 0\n",
                DEV_READY_SECONDS * 10
            ));
            continue;
        }
        script.push_str(&format!(
            "{{\n{}\n}} > out.{index} 2>&1 < /dev/null\necho $? > rc.{index}\n[ \"$(cat rc.{index})\" = {} ] || exit 0\n",
            step.command, step.exit
        ));
    }
    script
}

/// Kills every process of a process group when dropped.
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.0)]).status();
    }
}

/// Runs one block's steps in a network namespace of their own; answers the first failure.
fn run_block(block: &Block, setup: Setup, files: &[(String, String)]) -> Result<usize, String> {
    let mut steps = steps_of(block);
    if matches!(setup, Setup::MakeRun) {
        let make_run = Step {
            command: "strand dev --nodes 3".into(),
            exit: 0,
            expected: vec!["...".into()],
            background: false,
            dev: true,
        };
        steps.insert(0, make_run);
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    if matches!(setup, Setup::NewBuild) {
        std::fs::create_dir(dir.path().join("new")).unwrap();
        std::os::unix::fs::symlink(tests::apply_next_binary(), dir.path().join("new/strand")).unwrap();
    }
    std::fs::write(dir.path().join("steps.sh"), script_of(&steps)).unwrap();
    let bin = strand_binary().parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut command = Command::new("unshare");
    command.args(["--net", "bash", "steps.sh"]).current_dir(dir.path()).env("PATH", path);
    for (name, _) in std::env::vars() {
        if name.starts_with("STRAND_") || name == "BEADS_DIR" || name.starts_with("GC_") || name == "RUST_LOG" {
            command.env_remove(name);
        }
    }
    use std::os::unix::process::CommandExt;
    let child = command
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run unshare (util-linux): {error}"))?;
    let _group = Group(child.id());
    let Some(output) = tests::output_within(child, BLOCK_TIME_MAX) else {
        return Err(format!("the block did not finish within {BLOCK_TIME_MAX:?}"));
    };
    if !output.status.success() {
        return Err(format!(
            "the block could not run in a network namespace of its own (exit {:?}): {}{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    for (index, step) in steps.iter().enumerate() {
        let read = |name: String| std::fs::read_to_string(dir.path().join(name));
        let Ok(code) = read(format!("rc.{index}")) else {
            return Err(format!("step `{}` never ran", step.command));
        };
        let code: i32 = code.trim().parse().unwrap_or(-1);
        let printed = read(format!("out.{index}")).unwrap_or_default();
        let lines: Vec<&str> = printed.lines().map(str::trim_end).collect();
        let end = lines.iter().rposition(|line| !line.is_empty()).map_or(0, |at| at + 1);
        let lines = &lines[..end];
        let described = || {
            format!("step `{}`\n--- printed ---\n{printed}--- expected ---\n{}", step.command, step.expected.join("\n"))
        };
        if step.dev && code != 0 {
            return Err(format!("{} did not say its nodes are ready within {DEV_READY_SECONDS} s", described()));
        }
        if code != step.exit {
            return Err(format!("{}\nexit {code}, expected {}", described(), step.exit));
        }
        if !step.background && !output_matches(&step.expected, lines) {
            return Err(format!("{}\nthe output differs", described()));
        }
    }
    Ok(steps.len())
}

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap()
}

#[test]
fn the_matcher_takes_wildcards_and_nothing_more() {
    assert!(line_matches("claimed st-1 under lease [..]", "claimed st-1 under lease 17"));
    assert!(line_matches("[..] ready", "3 nodes ready"));
    assert!(line_matches("a [..] c [..] e", "a b c d e"));
    assert!(!line_matches("a [..] c", "a b d"));
    assert!(!line_matches("st-1", "st-12"));
    let expected = |lines: &[&str]| -> Vec<String> { lines.iter().map(|line| line.to_string()).collect() };
    assert!(output_matches(&expected(&["a", "...", "z"]), &["a", "b", "c", "z"]));
    assert!(output_matches(&expected(&["a", "...", "z"]), &["a", "z"]));
    assert!(!output_matches(&expected(&["a", "z"]), &["a", "b", "z"]));
    assert!(!output_matches(&expected(&[]), &["something"]), "no lines shown: nothing printed");
    let block = Block {
        section: "s".into(),
        language: "console".into(),
        line: 1,
        indent: 0,
        lines: ["$ cat <<'EOF'", "> one", "> EOF", "one", "$ false  # exit 1: it fails", "$ sleep 9 &"]
            .map(String::from)
            .to_vec(),
    };
    let steps = steps_of(&block);
    assert_eq!(steps.len(), 3);
    assert_eq!(
        (steps[0].command.as_str(), steps[0].expected.as_slice()),
        ("cat <<'EOF'\none\nEOF", &["one".to_string()][..])
    );
    assert_eq!((steps[1].exit, steps[2].background), (1, true));
}

#[test]
fn every_console_block_of_the_readme_runs_as_written() {
    let blocks = blocks_of(&readme());
    let mut ran = Vec::new();
    for (section, setup) in SECTIONS {
        let files: Vec<(String, String)> = blocks
            .iter()
            .filter(|block| &block.section == section && block.language == "toml")
            .filter_map(|block| {
                let name = block.lines.first()?.strip_prefix("# ")?.trim();
                (name.ends_with(".toml") && !name.contains(' '))
                    .then(|| (name.to_string(), block.lines.join("\n") + "\n"))
            })
            .collect();
        let console: Vec<&Block> =
            blocks.iter().filter(|block| &block.section == section && block.language == "console").collect();
        assert!(!console.is_empty(), "section {section:?} of the README has no console block to run");
        for block in console {
            match run_block(block, *setup, &files) {
                Ok(steps) => ran.push(format!("{section} (README line {}): {steps} steps", block.line)),
                Err(failure) => panic!("README line {} ({section}): {failure}", block.line),
            }
        }
    }
    let unlisted: Vec<String> = blocks
        .iter()
        .filter(|block| block.language == "console" && !SECTIONS.iter().any(|(section, _)| *section == block.section))
        .map(|block| format!("line {} ({})", block.line, block.section))
        .collect();
    assert!(
        unlisted.is_empty(),
        "console blocks in sections the runner does not know: {unlisted:?}; add them to SECTIONS"
    );
    eprintln!("{}", ran.join("\n"));
}
