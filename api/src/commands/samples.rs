//! The values the command files' `samples()` are built of, shared with the storage-format test
//! (`tests/tests/storage_format.rs`), so that a sample reads the same wherever it is pinned. Every
//! field is set to a value other than its default where the type allows; nothing here reads a
//! clock or draws a random number.
#![doc(hidden)]

use std::collections::{BTreeMap, BTreeSet};

use crate::auth::{Role, TokenHash, TokenSpec};
use crate::command::ReadyFilter;
use crate::model::{Actor, Bead, BeadCounts, BeadId, DepType, Lease, Namespace, Status, Timestamp};

use super::{CreateBead, UpdateBead};

/// A formula's TOML.
pub const FORMULA: &str = "formula = \"release\"\nversion = 1\n[[steps]]\nid = \"build\"\ntitle = \"Build\"\n";
/// An order's TOML.
pub const ORDER: &str = "[order]\nformula = \"release\"\ngate = \"cooldown\"\ninterval = \"24h\"\npool = \"web\"\n";

/// A fixed time: 2026-01-01T00:00:00Z plus `offset` milliseconds.
pub fn at(offset: i64) -> Timestamp {
    Timestamp(1_767_225_600_000 + offset)
}

/// The id `st-<number>`.
pub fn bead_id(number: u64) -> BeadId {
    BeadId(format!("st-{number}"))
}

/// The namespace `rig`.
pub fn rig() -> Namespace {
    Namespace("rig".into())
}

/// The actor `ann`.
pub fn ann() -> Actor {
    Actor("ann".into())
}

/// A token hash whose 32 bytes all differ.
pub fn token_hash() -> TokenHash {
    TokenHash(std::array::from_fn(|index| (index as u8).wrapping_mul(37).wrapping_add(11)))
}

/// A lease held by `ann`.
pub fn lease() -> Lease {
    Lease { id: 41, holder: "ann".into(), ttl_ms: 30_000, renewed_at: 40, expires_at: at(30_000) }
}

/// A bead with every field set.
pub fn bead() -> Bead {
    Bead {
        id: bead_id(7),
        seq: 7,
        title: "Ship the release".into(),
        description: "Tag, build and publish.".into(),
        notes: "[comment] bob: looks good".into(),
        status: Status::InProgress,
        bead_type: "feature".into(),
        priority: Some(1),
        assignee: "ann".into(),
        from: "bob".into(),
        parent_id: Some(bead_id(1)),
        reference: "build".into(),
        labels: BTreeSet::from(["pool:web".into(), "urgent".into()]),
        metadata: BTreeMap::from([("gc.merge".into(), "mr".into()), ("empty".into(), String::new())]),
        ephemeral: true,
        no_history: true,
        created_at: at(1),
        updated_at: at(2),
        revision: 42,
        started_at: Some(at(3)),
        closed_at: Some(at(4)),
        close_reason: Some("done".into()),
        defer_until: Some(at(5)),
        depends_on: BTreeMap::from([(bead_id(2), DepType::blocks()), (bead_id(3), DepType("waits-for".into()))]),
        lease: Some(lease()),
        delivery_count: 2,
        // Never encoded (`serde(skip)`).
        counts: BeadCounts::default(),
    }
}

/// A create with every field set.
pub fn create_bead() -> CreateBead {
    CreateBead {
        title: "Write the notes".into(),
        description: "For 1.2.".into(),
        notes: "draft".into(),
        bead_type: "task".into(),
        priority: Some(2),
        assignee: "ann".into(),
        from: "bob".into(),
        parent_id: Some(bead_id(1)),
        reference: "notes".into(),
        needs: vec!["st-2".into(), "waits-for:st-3".into()],
        labels: BTreeSet::from(["docs".into()]),
        metadata: BTreeMap::from([("gc.routed_to".into(), "web".into())]),
        ephemeral: true,
        no_history: true,
        defer_until: Some(at(60_000)),
        requested_status: Some(Status::Blocked),
    }
}

/// An update with every field set.
pub fn update_bead() -> UpdateBead {
    UpdateBead {
        id: bead_id(1),
        title: Some("Ship 1.2".into()),
        description: Some("Now.".into()),
        notes: Some("reset".into()),
        append_notes: Some("[comment] ann: on it".into()),
        status: Some(Status::Deferred),
        bead_type: Some("bug".into()),
        priority: Some(0),
        assignee: Some("bob".into()),
        parent_id: Some(bead_id(6)),
        add_labels: BTreeSet::from(["hot".into()]),
        remove_labels: BTreeSet::from(["cold".into()]),
        metadata: BTreeMap::from([("k".into(), Some("v".into())), ("gone".into(), None)]),
        claim_for: Some(ann()),
        lease_ms: Some(30_000),
        ephemeral: Some(false),
        no_history: Some(true),
    }
}

/// A ready filter with every field set.
pub fn ready_filter() -> ReadyFilter {
    ReadyFilter {
        assignee: Some("ann".into()),
        unassigned: true,
        labels_all: vec!["a".into()],
        labels_any: vec!["b".into(), "c".into()],
        exclude_labels: vec!["d".into()],
        metadata_equals: vec![("gc.merge".into(), "mr".into())],
        metadata_has_keys: vec!["gc.routed_to".into()],
        parent: Some(bead_id(1)),
        types: vec!["task".into()],
        exclude_types: vec!["epic".into()],
        include_ephemeral: true,
        limit: 5,
    }
}

/// A token spec of `role` for namespace `rig`, acting as `ci-bot`.
pub fn token_spec(role: Role) -> TokenSpec {
    TokenSpec {
        name: format!("{role}-token"),
        hash: token_hash(),
        role,
        namespaces: BTreeSet::from([rig()]),
        actor: Some(Actor("ci-bot".into())),
    }
}
