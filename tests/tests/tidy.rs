//! Tidy test: crates import only in the directions ARCHITECTURE.md and docs/style.md give.
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

/// Every `.rs` file under `dir`, by module path relative to `root` (`beads/listing.rs` is
/// `beads::listing`, a `mod.rs` its folder's module), with its text.
fn module_files(root: &Path, dir: &Path, found: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            module_files(root, &path, found);
            continue;
        }
        if path.extension().is_none_or(|extension| extension != "rs") {
            continue;
        }
        let relative = path.strip_prefix(root).unwrap().with_extension("");
        let mut parts: Vec<String> = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
        if parts.last().is_some_and(|last| last == "mod") {
            parts.pop();
        }
        found.insert(parts.join("::"), std::fs::read_to_string(&path).unwrap());
    }
}

/// The modules among `modules` that `text` names by a `crate::` path: the longest module path
/// each `crate::a::b::...` starts with, including the names of a `use crate::{a, b::c}` group.
fn crate_imports(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut paths = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            paths.extend(group[..end].split(',').map(|item| item.trim().to_string()));
        } else {
            let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
            paths.push(rest[..end].to_string());
        }
    }
    let mut imported = BTreeSet::new();
    for path in paths {
        let segments: Vec<&str> = path.split("::").filter(|segment| !segment.is_empty()).collect();
        let longest =
            (1..=segments.len()).rev().map(|length| segments[..length].join("::")).find(|m| modules.contains(m));
        imported.extend(longest);
    }
    imported
}

/// A cycle in `graph`, as the modules along it, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|step| step == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_cycle_finder_finds_cycles_and_only_them() {
    let graph = |edges: &[(&str, &str)]| {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in edges {
            graph.entry(from.to_string()).or_default().insert(to.to_string());
            graph.entry(to.to_string()).or_default();
        }
        graph
    };
    assert_eq!(find_cycle(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])), None);
    assert_eq!(find_cycle(&graph(&[("a", "b"), ("b", "c"), ("c", "a")])).map(|cycle| cycle.len()), Some(4));
    let modules: BTreeSet<String> = ["beads", "work", "work::lease", "output"].map(String::from).into();
    let text = "use crate::{Cli, output};\nuse crate::work::lease::Lease;\nlet x = crate::beads::parse(y);";
    let found: Vec<String> = crate_imports(text, &modules).into_iter().collect();
    assert_eq!(found, ["beads", "output", "work::lease"]);
}

/// Every module file of the crate whose sources are `src` (relative to the workspace), but its
/// root `root` (`main` or `lib`), which only declares the modules.
fn crate_module_files(src: &str, root: &str) -> BTreeMap<String, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").join(src);
    let mut files = BTreeMap::new();
    module_files(&dir, &dir, &mut files);
    files.remove(root);
    files
}

/// The CLI's files import one another without a cycle (ARCHITECTURE.md: shared helpers live in
/// their own modules, not in command files).
#[test]
fn cli_modules_import_without_cycles() {
    let files = crate_module_files("cli/src", "lib");
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let graph: BTreeMap<String, BTreeSet<String>> = files
        .iter()
        .map(|(module, text)| {
            let mut imports = crate_imports(text, &modules);
            imports.remove(module);
            (module.clone(), imports)
        })
        .collect();
    if let Some(cycle) = find_cycle(&graph) {
        panic!("cli/src has an import cycle: {}; move what they share into a module of its own", cycle.join(" -> "));
    }
}

/// The modules of `api` above the state machine: the commands, their dispatch
/// (`commands/apply.rs`, `commands/authorize.rs`) and their protobuf conversions.
const API_UPPER_LAYER: [&str; 3] = ["command", "commands", "convert"];

/// `api` imports in layers (ARCHITECTURE.md): the state machine (`api/src/state`) offers its
/// primitives and the commands use them, never the reverse, as mini-redis's `cmd` uses its `Db`.
/// Modules are taken whole (`state::namespace` is `state`) and the upper layer
/// ([`API_UPPER_LAYER`]) as one; each file is read up to its tests (`#[cfg(test)]`), comment
/// lines left out. Nothing the state reaches, itself included, is in the upper layer, and the
/// graph has no cycle.
#[test]
fn api_modules_import_in_layers() {
    let files = crate_module_files("api/src", "lib");
    assert!(files.contains_key("state::namespace") && files.contains_key("commands::apply"), "api/src was read");
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let layer = |module: &str| {
        let first = module.split("::").next().unwrap_or(module);
        if API_UPPER_LAYER.contains(&first) { "(commands)".to_string() } else { first.to_string() }
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut importers: BTreeMap<(String, String), String> = BTreeMap::new();
    for (module, text) in &files {
        if module.starts_with("state::tests") {
            continue;
        }
        let code = text.split("\n#[cfg(test)]").next().unwrap_or(text);
        let code: Vec<&str> = code.lines().filter(|line| !line.trim_start().starts_with("//")).collect();
        let from = layer(module);
        let imports = graph.entry(from.clone()).or_default();
        for imported in crate_imports(&code.join("\n"), &modules) {
            let to = layer(&imported);
            if to != from {
                importers.entry((from.clone(), to.clone())).or_insert_with(|| module.clone());
                imports.insert(to);
            }
        }
    }
    let mut reached = BTreeSet::from(["state".to_string()]);
    let mut path: BTreeMap<String, String> = BTreeMap::new();
    let mut next = vec!["state".to_string()];
    while let Some(module) = next.pop() {
        for imported in graph.get(&module).into_iter().flatten() {
            if reached.insert(imported.clone()) {
                path.insert(imported.clone(), module.clone());
                next.push(imported.clone());
            }
        }
    }
    if reached.contains("(commands)") {
        let mut chain = vec!["(commands)".to_string()];
        while let Some(from) = path.get(chain.last().expect("not empty")) {
            chain.push(from.clone());
        }
        chain.reverse();
        let files: Vec<String> = chain
            .windows(2)
            .map(|step| format!("{} (in {})", step[1], importers[&(step[0].clone(), step[1].clone())]))
            .collect();
        panic!(
            "api::state reaches the command dispatch: state -> {}; give the state a primitive, or move plain data \
             down (api::input), so commands use the state and not the reverse",
            files.join(" -> ")
        );
    }
    if let Some(cycle) = find_cycle(&graph) {
        panic!("api/src has an import cycle between layers: {}", cycle.join(" -> "));
    }
}

/// The pure core: the bead model, the commands, the plain data they carry and their answers, the
/// state machine and the parsers it applies. ARCHITECTURE.md: no I/O, no async, no clock, no wire types.
const PURE_CORE: [&str; 13] = [
    "state",
    "model.rs",
    "input.rs",
    "command.rs",
    "outcome.rs",
    "auth.rs",
    "order.rs",
    "formula.rs",
    "validate.rs",
    "limits.rs",
    "suggest.rs",
    "printable.rs",
    "go_duration.rs",
];

/// The pure core of `api` uses neither gRPC, tokio nor the generated protobuf types, and reads no
/// clock: the state machine is a function of the log. A registered command's file is read up to
/// its `mod wire`, where its protobuf mapping lives. (Converting a stamped time with
/// `UNIX_EPOCH` and `Duration` is fine.) Comment lines are not read.
#[test]
fn the_state_machine_is_pure() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").join("api/src");
    let forbidden = [
        "tonic",
        "tokio",
        "prost",
        "crate::proto",
        "crate::convert",
        "crate::client",
        "crate::tls",
        "SystemTime::now",
        "Instant::now",
        "std::time::Instant",
        "std::fs",
        "std::net",
        "rand::",
    ];
    let mut checked = 0;
    let mut parts: Vec<(String, String)> = Vec::new();
    for part in PURE_CORE {
        let mut files = BTreeMap::new();
        let path = root.join(part);
        if path.is_dir() {
            module_files(&root, &path, &mut files);
        } else {
            files.insert(part.to_string(), std::fs::read_to_string(&path).unwrap());
        }
        parts.extend(files);
    }
    // A command's file (`api/src/commands/`) is pure up to its `mod wire`, which holds its
    // protobuf mapping (a file that registers nothing, such as `samples.rs`, is pure throughout);
    // the registry's own `mod.rs` derives the proto dispatch and is not.
    let mut commands = BTreeMap::new();
    module_files(&root, &root.join("commands"), &mut commands);
    let mut registered = 0;
    for (module, text) in commands {
        if module == "commands" {
            continue;
        }
        let end = match text.find("\nmod wire {") {
            Some(wire) => wire,
            None if !text.contains("\nregistered!(") => text.len(),
            None => panic!("{module} registers a command but has no `mod wire` section"),
        };
        registered += usize::from(text.contains("\nregistered!("));
        parts.push((module, text[..end].to_string()));
    }
    assert!(registered >= 50, "the command files were read: {registered}");
    for (module, text) in parts {
        checked += 1;
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for word in forbidden {
                // At the start of a path: `strand::audit` is no use of `rand::`.
                let used = line
                    .match_indices(word)
                    .any(|(at, _)| !line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':'));
                assert!(!used, "api module {module}, line {}: `{word}` in the pure core ({})", number + 1, line.trim());
            }
        }
    }
    assert!(checked > PURE_CORE.len(), "the state module's files were read");
}

/// Apply code decides every outcome by the state's apply version, never by the build (see
/// `api/src/version.rs`): the state machine, the commands' files and the data they share
/// (`input.rs`) never read the build's apply versions, its name or version, the environment, a
/// cargo feature or the build profile, except the test-only canary rule of the next version
/// (`State::canary_next`), whose one read of the test mode is counted.
#[test]
fn apply_rules_never_read_the_build() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").join("api/src");
    let mut files = BTreeMap::new();
    module_files(&root, &root.join("state"), &mut files);
    module_files(&root, &root.join("commands"), &mut files);
    let input = std::fs::read_to_string(root.join("input.rs")).expect("api/src/input.rs");
    files.insert("input".to_string(), input);
    assert!(files.len() > 50, "the state's, the commands' and the input's files were read: {}", files.len());
    let forbidden = [
        "build_apply_versions",
        "test_apply_next",
        "build_name",
        "CARGO_PKG_VERSION",
        "env!(",
        "std::env",
        "option_env!",
        "cfg!(feature",
        "cfg(feature",
        "debug_assertions",
    ];
    let mut test_mode_reads = Vec::new();
    for (module, text) in &files {
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            // The registry's generated code is included from the build directory.
            if line.contains("include!(concat!(env!(\"OUT_DIR\")") {
                continue;
            }
            for word in forbidden {
                assert!(
                    !line.contains(word),
                    "{module}, line {}: `{word}` in apply code ({})",
                    number + 1,
                    line.trim()
                );
            }
            if line.contains("canary_next_applies") {
                test_mode_reads.push(format!("{module}: {}", line.trim()));
            }
        }
    }
    assert_eq!(
        test_mode_reads.len(),
        1,
        "apply code reads the test-only apply-next mode only in its canary rule (State::canary_next): {test_mode_reads:#?}"
    );
    assert!(test_mode_reads.iter().all(|read| read.starts_with("state: ")), "{test_mode_reads:#?}");
}

/// `NamespaceState`'s fields are private to its module (`api/src/state/namespace/`), so every
/// change of a bead, an index or a dirty set goes through that module's methods.
#[test]
fn namespace_state_keeps_its_fields_private() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
    let text = std::fs::read_to_string(root.join("api/src/state/namespace/mod.rs")).unwrap();
    let start = text.find("pub struct NamespaceState {").expect("NamespaceState is declared in namespace/mod.rs");
    let body = &text[start..start + text[start..].find("\n}\n").expect("the struct ends")];
    let fields: Vec<&str> = body.lines().skip(1).map(str::trim).filter(|line| !line.starts_with("//")).collect();
    assert!(fields.len() >= 10, "the struct's fields were read: {fields:?}");
    for field in fields {
        assert!(!field.starts_with("pub"), "NamespaceState has a visible field: {field}; add a method instead");
    }
}
