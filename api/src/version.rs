//! Apply versions: which rules entries of the log apply by; beside them, the other numbers a
//! build is known by: the storage format its nodes write ([`STORAGE_FORMAT`]) and its name
//! ([`build_name`]: the crate version, the commit it was built from, a dirty mark).
//!
//! The replicated state holds the cluster's **apply version** ([`crate::state::State::apply_version`]),
//! changed only by entries of the log (the leader's switch, `cluster version set`). Every rule
//! that can change an outcome is gated on it, so every replica switches rules at the same log
//! index whatever build it runs. A build declares the versions it can apply ([`build_apply_versions`]):
//! a node refuses to start on a state it cannot apply, and stops at an entry or snapshot that
//! would take the state outside its range.
//!
//! Invariant: the state machine never reads [`build_apply_versions`]; `tests/tests/tidy.rs`
//! (`apply_rules_never_read_the_build`) keeps it out of `state/` and `commands/`.
//!
//! Versions:
//! - 1: the rules of the first build with apply versions.
//! - 2 ([`DISK_DIGEST_VERSION`]): a consistency checkpoint's digest is taken over the records as
//!   stored, in the disk's key order, from a view of the disk at the checkpoint's index, beside
//!   apply rather than on its path (`raft_store::state_machine`); version 1 digests the state in
//!   memory, in its own order, while writes wait. The two digests of one state differ, so the
//!   replicas of one cluster must switch at the same index.
//! - [`NEXT_APPLY_VERSION`] (one past [`NEWEST_APPLY_VERSION`]) exists only in the test-only
//!   apply-next mode ([`test_apply_next`]: a debug build started with `STRAND_TEST_APPLY_NEXT=1`,
//!   which the rolling-upgrade tests and the simulator's upgrade fault run as the newer build): a
//!   create whose title starts with [`CANARY_NEXT_PREFIX`] is refused, so a replica that applied
//!   that rule early shows in answers and digests. A release build never enters that mode.
//!
//! Which builds run side by side: a build runs beside every build whose range shares a version
//! with its own and that sends apply versions (every build from the first with apply versions
//! on). Builds from before apply versions are kept out (see `node/src/peer/network.rs`).

use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The storage format this build's nodes write and read (`raft_store::codec`); `tests/golden/storage-format.txt` pins the bytes
/// of every type stored or sent between nodes under it, and `tests/tests/storage_format.rs`
/// fails until a changed layout bumps it. 12: a fourth space, `closed_index`, holds the index
/// entries of closed beads (`crate::state::closed_index`), built from the state space at the first
/// start that finds it missing (the storage's `META_CLOSED_INDEX`); a format-11 directory upgrades in place.
/// 11: the state records its apply version
/// (`RecordKey::ApplyVersion`), controller actions include the apply version's switch and
/// consistency checkpoints, and commands include `cluster version pin|unpin|set`; a format-10
/// directory upgrades in place (`raft_store::upgrade`). 10: the membership records each member's
/// peer address, client address and auto-promotion (the storage's `Member`, was the Raft library's `BasicNode`).
/// 9: the answers the dedup table keeps list
/// tokens by a fingerprint of their hash, never the hash. 8: proposals carry the client's token hash,
/// and the state keeps auth records (enabled, tokens). 7: namespaces carry a default lease and a
/// delivery limit. 6: beads carry a lease and a delivery count,
/// commands include lease renewals, releases and controller actions, transactions carry lease
/// fences, and the state keeps the controller's term. 5: beads carry `no_history`, commands include
/// imports, and an update may change `ephemeral` and `no_history`. 4: beads carry
/// their revision, and commands include transactions. 3: every stored value carries a CRC-32.
/// 2: standard Raft leader ids (one leader per term) in votes and log ids. Directories without
/// the format key were written in format 1.
pub const STORAGE_FORMAT: u32 = 12;

/// The apply version of a state that never recorded one: every cluster made before apply
/// versions existed applied these rules.
pub const FIRST_APPLY_VERSION: u32 = 1;

/// The newest apply version a build of this tree applies (outside the test-only apply-next mode).
pub const NEWEST_APPLY_VERSION: u32 = 2;

/// From this apply version on, a consistency checkpoint digests the disk, not the state in memory.
pub const DISK_DIGEST_VERSION: u32 = 2;

/// The version only the test-only apply-next mode applies, whose canary rule refuses
/// [`CANARY_NEXT_PREFIX`] titles.
pub const NEXT_APPLY_VERSION: u32 = NEWEST_APPLY_VERSION + 1;

/// The prefix of the titles the canary rule of [`NEXT_APPLY_VERSION`] refuses (the test-only apply-next mode).
pub const CANARY_NEXT_PREFIX: &str = "apply-next-canary";

/// An inclusive range of apply versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyRange {
    /// The lowest version the build applies.
    pub min: u32,
    /// The highest version the build applies.
    pub max: u32,
}

impl ApplyRange {
    /// Whether `version` is in the range.
    pub fn contains(self, version: u32) -> bool {
        (self.min..=self.max).contains(&version)
    }

    /// Parses `MIN-MAX`, as [`fmt::Display`] writes it (and as it travels between nodes).
    pub fn parse(text: &str) -> Option<ApplyRange> {
        let (min, max) = text.split_once('-')?;
        let range = ApplyRange { min: min.parse().ok()?, max: max.parse().ok()? };
        (range.min >= FIRST_APPLY_VERSION && range.min <= range.max).then_some(range)
    }
}

impl fmt::Display for ApplyRange {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}-{}", self.min, self.max)
    }
}

/// The variable that, set to `1` for a debug build, starts it in the test-only apply-next mode
/// ([`test_apply_next`]).
pub const TEST_APPLY_NEXT_ENV: &str = "STRAND_TEST_APPLY_NEXT";

/// Whether this process runs as the test-only apply-next build: a debug build (the one `make test`
/// and `cargo build` make) started with `STRAND_TEST_APPLY_NEXT=1`. It applies one version more
/// than other builds, [`NEXT_APPLY_VERSION`], and names itself `VERSION+apply-next`. A release build ignores the variable, so a node users
/// deploy never claims a version that only tests define.
pub fn test_apply_next() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    cfg!(debug_assertions)
        && *ON.get_or_init(|| std::env::var_os(TEST_APPLY_NEXT_ENV).is_some_and(|value| value == "1"))
}

/// The apply versions this build applies.
pub fn build_apply_versions() -> ApplyRange {
    let max = if test_apply_next() { NEXT_APPLY_VERSION } else { NEWEST_APPLY_VERSION };
    ApplyRange { min: FIRST_APPLY_VERSION, max }
}

/// The variable that, in the test-only apply-next mode, makes the canary rule apply
/// whatever the state's apply version: a build that decides a rule by itself, which the
/// rolling-upgrade tests must catch.
pub const UNGATED_CANARY_ENV: &str = "STRAND_TEST_UNGATED_CANARY";

/// Whether the canary rule applies to a state at apply version `version`: only in the test-only
/// apply-next mode, and there from [`NEXT_APPLY_VERSION`] on, or at any version with
/// [`UNGATED_CANARY_ENV`] set.
pub fn canary_next_applies(version: u32) -> bool {
    static UNGATED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    test_apply_next()
        && (version >= NEXT_APPLY_VERSION || *UNGATED.get_or_init(|| std::env::var_os(UNGATED_CANARY_ENV).is_some()))
}

/// Where a binary was built from: the git commit and whether the tree had uncommitted changes to
/// tracked files. The binary sets it once at start (`cli/build.rs` reads it from git); a library
/// use of this crate (the simulator, in-process tests) has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildSource {
    /// The commit, 12 hex digits (`unknown` when built outside a git checkout).
    pub commit: &'static str,
    /// Whether tracked files differed from the commit.
    pub dirty: bool,
}

static BUILD_SOURCE: OnceLock<BuildSource> = OnceLock::new();

/// Records where this binary was built from; a second call changes nothing.
pub fn set_build_source(source: BuildSource) {
    let _ = BUILD_SOURCE.set(source);
}

/// Where this binary was built from, once it said so.
pub fn build_source() -> Option<BuildSource> {
    BUILD_SOURCE.get().copied()
}

/// This build, as it names itself to other nodes and operators (`cluster status`, `member
/// list`, `strand version`): the crate version, then as semver build metadata the commit,
/// `dirty` when the tree had uncommitted changes, and `apply-next` in the test-only apply-next
/// mode, e.g. `0.1.0+3f2a9c1e0b7d.dirty`.
pub fn build_name() -> String {
    let mut metadata = Vec::new();
    if let Some(source) = build_source() {
        metadata.push(source.commit);
        if source.dirty {
            metadata.push("dirty");
        }
    }
    if test_apply_next() {
        metadata.push("apply-next");
    }
    let version = env!("CARGO_PKG_VERSION");
    if metadata.is_empty() { version.to_string() } else { format!("{version}+{}", metadata.join(".")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_round_trips_and_nonsense_is_refused() {
        let range = ApplyRange { min: 1, max: 3 };
        assert_eq!(ApplyRange::parse(&range.to_string()), Some(range));
        for bad in ["", "1", "3-1", "0-1", "a-b", "1-2-3", "-1-2"] {
            assert_eq!(ApplyRange::parse(bad), None, "{bad}");
        }
        assert!(range.contains(2) && !range.contains(4) && !range.contains(0));
    }
}
