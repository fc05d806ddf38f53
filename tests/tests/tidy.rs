//! Tidy test: crates import only in the directions ARCHITECTURE.md and STYLE.md give.
//!
//! ```text
//! cli        -> api (and node, behind its optional `node` feature, for `strand node`)
//! node       -> api, raft-store
//! raft-store -> api
//! simulation -> node, raft-store, api
//! tests      -> api, node, raft-store (the fuzz targets decode what storage holds)
//! ```
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const CRATES: [&str; 6] = ["api", "raft-store", "node", "cli", "simulation", "tests"];

fn allowed() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    BTreeMap::from([
        ("api", BTreeSet::new()),
        ("raft-store", BTreeSet::from(["api"])),
        ("node", BTreeSet::from(["api", "raft-store"])),
        ("cli", BTreeSet::from(["api", "node", "raft-store"])),
        ("simulation", BTreeSet::from(["node", "raft-store", "api"])),
        ("tests", BTreeSet::from(["api", "node", "raft-store"])),
    ])
}

/// Workspace crates a manifest depends on (normal, dev and build dependencies), with whether
/// the dependency is optional.
fn workspace_dependencies(manifest: &toml::Table) -> BTreeMap<String, bool> {
    let mut found = BTreeMap::new();
    for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
        let Some(table) = manifest.get(section).and_then(|value| value.as_table()) else { continue };
        for (name, spec) in table {
            if CRATES.contains(&name.as_str()) {
                let optional = spec.get("optional").and_then(|value| value.as_bool()).unwrap_or(false);
                found.insert(name.clone(), optional);
            }
        }
    }
    found
}

#[test]
fn crates_import_only_downward() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ sits in the workspace");
    let allowed = allowed();
    for krate in CRATES {
        let path = root.join(krate).join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&path) else {
            assert!(!root.join(krate).join("src").exists(), "{krate} has sources but no Cargo.toml");
            continue;
        };
        let manifest: toml::Table = text.parse().unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        for (dependency, optional) in workspace_dependencies(&manifest) {
            assert!(
                allowed[krate].contains(dependency.as_str()),
                "{krate} must not depend on {dependency} (see ARCHITECTURE.md)"
            );
            if krate == "cli" && dependency != "api" {
                assert!(optional, "cli may use {dependency} only behind its optional `node` feature");
            }
        }
    }
}

#[test]
fn api_knows_nothing_of_rocksdb_or_openraft() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
    let text = std::fs::read_to_string(root.join("api/Cargo.toml")).expect("api manifest");
    for forbidden in ["rocksdb", "openraft"] {
        assert!(!text.contains(forbidden), "api must not depend on {forbidden}");
    }
    let store = std::fs::read_to_string(root.join("node/Cargo.toml")).expect("node manifest");
    assert!(!store.contains("rocksdb"), "only raft-store may know RocksDB");
}

/// The source files of a node module: `node/src/<name>.rs`, or every file under `node/src/<name>/`.
fn node_module_sources(root: &Path, name: &str) -> Vec<(String, String)> {
    let file = root.join("node/src").join(format!("{name}.rs"));
    let dir = root.join("node/src").join(name);
    let paths: Vec<_> = if file.exists() {
        vec![file]
    } else {
        std::fs::read_dir(&dir)
            .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect()
    };
    paths.into_iter().map(|path| (path.display().to_string(), std::fs::read_to_string(&path).unwrap())).collect()
}

/// The node's planes import one way (ARCHITECTURE.md): client → leader → peer → core; the peer
/// plane reaches the leader plane only through its `LeaderPlane` trait, and the leader plane
/// makes no gRPC status.
#[test]
fn node_planes_import_only_downward() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
    let forbidden: [(&str, &[&str]); 4] = [
        ("core", &["crate::client", "crate::leader", "crate::peer"]),
        ("peer", &["crate::client", "crate::leader"]),
        ("leader", &["crate::client", "Status::", "tonic::Status", "use tonic::{"]),
        ("client", &["crate::peer::service", "crate::peer::snapshot"]),
    ];
    for (module, imports) in forbidden {
        for (path, text) in node_module_sources(root, module) {
            for import in imports {
                assert!(!text.contains(import), "{path} uses {import}; see the planes in ARCHITECTURE.md");
            }
        }
    }
}
