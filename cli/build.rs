//! Names the build by its source: the git commit the tree was built from and whether the sources
//! of the binaries (`SOURCES`) had uncommitted changes, as `STRAND_GIT_COMMIT` (12 hex digits, or
//! `unknown` outside a git checkout) and `STRAND_GIT_DIRTY` (`true` or `false`) for `api::version::set_build_source`, and
//! `STRAND_VERSION_SUFFIX` (`+COMMIT` or `+COMMIT.dirty`) for `--version`.
//! A build from a source tarball sets `STRAND_BUILD_COMMIT` (and `STRAND_BUILD_DIRTY`) instead.
use std::process::Command;

/// What the binaries are built from, relative to the workspace: a change to a tracked file in
/// them makes the build dirty.
const SOURCES: [&str; 6] = ["api", "node", "raft-store", "cli", "Cargo.toml", "Cargo.lock"];

fn git(args: &[&str]) -> Option<String> {
    // No optional locks: `git status` leaves the index as it is, so reading it reruns nothing.
    // Run at the workspace's root (a build script starts in its package's directory).
    let output = Command::new("git").arg("--no-optional-locks").args(args).current_dir("..").output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=STRAND_BUILD_COMMIT");
    println!("cargo:rerun-if-env-changed=STRAND_BUILD_DIRTY");
    // A new commit, a checkout, a staged change, or a change to the sources of the crates the
    // binaries are built from renames the build (cargo scans a directory's files).
    for source in SOURCES {
        println!("cargo:rerun-if-changed=../{source}");
    }
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
        if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{reference}");
        }
    }
    let (commit, dirty) = match std::env::var("STRAND_BUILD_COMMIT") {
        Ok(commit) => (commit, std::env::var("STRAND_BUILD_DIRTY").is_ok_and(|dirty| dirty == "true")),
        Err(_) => {
            let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
            // Tracked files of the sources only: a build's outputs, scratch files and the docs do
            // not dirty it.
            let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
            status.extend(SOURCES);
            let dirty = git(&status).is_some_and(|changes| !changes.is_empty());
            (commit, dirty)
        }
    };
    println!("cargo:rustc-env=STRAND_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=STRAND_GIT_DIRTY={dirty}");
    // The semver build metadata `--version` appends to the crate version.
    let suffix = if dirty { format!("+{commit}.dirty") } else { format!("+{commit}") };
    println!("cargo:rustc-env=STRAND_VERSION_SUFFIX={suffix}");
}
