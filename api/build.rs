//! Generates the gRPC code of `proto/strand.proto` (needs `protoc`, installed by `.ci/run` and
//! the Makefile), and the RPC table (`rpc_table.rs`): every unary RPC of the services clients
//! call, read from the compiled schema, as two macros the plumbing is derived from (see
//! `src/registry.rs`), and the command registry (`commands_registry.rs`): the files of
//! `src/commands/`, each declaring itself with a `registered!(KIND INDEX Name [Type])` line (see
//! `src/commands/mod.rs`), with the enum of registered answers (`answers_registry.rs`, included
//! by `src/outcome.rs`). A new unary RPC of an all-unary client service in `strand.proto` is
//! served, sent and fuzzed with no other line (what it means, its conversion, is written in its
//! command's file or in `convert.rs`), and a new command file is registered with no line
//! elsewhere.
use std::fmt::Write as _;

use prost::Message as _;

/// Services the table leaves out: the peer plane's, and the operator's (fanned out to every member
/// rather than answered by the leader plane).
const NOT_CLIENT_SERVICES: &[&str] = &["Raft", "Cluster"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/strand.proto");
    println!("cargo:rerun-if-changed=src/commands");
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    // Type names let the codec find a message's schema; the descriptor set is that schema
    // (`src/decode_budget.rs`).
    let descriptor_path = out_dir.join("strand_descriptor.bin");
    let mut config = tonic_prost_build::Config::new();
    config.enable_type_names();
    tonic_prost_build::configure()
        .codec_path("crate::decode_budget::BudgetCodec")
        .file_descriptor_set_path(&descriptor_path)
        .compile_with_config(config, &["proto/strand.proto"], &["proto"])?;
    let set = prost_types::FileDescriptorSet::decode(std::fs::read(&descriptor_path)?.as_slice())?;
    std::fs::write(out_dir.join("rpc_table.rs"), rpc_table(&set)?)?;
    let manifest_dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let (registry, answers) = commands_registry(&manifest_dir.join("src/commands"))?;
    std::fs::write(out_dir.join("commands_registry.rs"), registry)?;
    std::fs::write(out_dir.join("answers_registry.rs"), answers)?;
    Ok(())
}

/// The kinds of write a command file registers; they share one index sequence, the variant
/// indexes of `Command`.
const WRITE_KINDS: [&str; 3] = ["write", "bead_write", "cluster_write"];

/// One registration: its list (0 writes, 1 reads, 2 answers), index, kind, variant name, type
/// name and module.
type Entry = (usize, u32, String, String, String, String);

/// The module declarations of `src/commands/*.rs` and the `registry!` call that lists what each
/// registers, by list, in index order; and the `RegisteredAnswer` enum, one variant per registered
/// answer, which `src/outcome.rs` includes (an answer shape is defined there, below the state
/// machine, and its command's file registers it). A write's or an answer's index is a stored
/// variant index: each list's indexes must run 0, 1, 2, ... with no gap and no duplicate, or the
/// build stops here.
fn commands_registry(dir: &std::path::Path) -> Result<(String, String), Box<dyn std::error::Error>> {
    let mut modules = String::new();
    let mut entries: Vec<Entry> = Vec::new();
    let mut paths: Vec<_> =
        std::fs::read_dir(dir)?.map(|entry| entry.map(|entry| entry.path())).collect::<Result<_, _>>()?;
    paths.sort();
    for path in paths {
        let Some(module) = path.file_stem().and_then(|stem| stem.to_str()) else { continue };
        if path.extension().is_none_or(|extension| extension != "rs") || module == "mod" {
            continue;
        }
        writeln!(modules, "#[path = {:?}]\npub mod {module};", path.display().to_string())?;
        for line in std::fs::read_to_string(&path)?.lines() {
            let code = line.trim_start();
            if code.starts_with("//") || !code.contains("registered!(") {
                continue;
            }
            // Any other use is a mistake: a registration this script did not read would leave its
            // command out of every dispatch without a word.
            let malformed = || {
                format!(
                    "{}: `{line}` is not `registered!(KIND INDEX Name [Type]);` at the start of a line",
                    path.display()
                )
            };
            let rest =
                line.strip_prefix("registered!(").and_then(|rest| rest.strip_suffix(");")).ok_or_else(malformed)?;
            let words: Vec<&str> = rest.split_whitespace().collect();
            let (kind, index, name, type_name) = match words.as_slice() {
                [kind, index, name] => (*kind, *index, *name, *name),
                [kind, index, name, type_name] => (*kind, *index, *name, *type_name),
                _ => return Err(malformed().into()),
            };
            let index: u32 = index.parse().map_err(|_| malformed())?;
            let list = match kind {
                kind if WRITE_KINDS.contains(&kind) => 0,
                "read" => 1,
                "answer" => 2,
                other => {
                    return Err(format!(
                        "{}: kind {other} is not write, bead_write, cluster_write, read or answer",
                        path.display()
                    )
                    .into());
                }
            };
            entries.push((list, index, kind.into(), name.into(), type_name.into(), module.into()));
        }
    }
    entries.sort();
    for (list, singular) in ["write", "read", "answer"].into_iter().enumerate() {
        let indexes: Vec<u32> = entries.iter().filter(|entry| entry.0 == list).map(|entry| entry.1).collect();
        if indexes.iter().enumerate().any(|(expected, index)| *index != expected as u32) {
            return Err(format!(
                "the registered {singular}s are numbered {indexes:?}; number them 0, 1, 2, ... with no gap or repeat \
                 (a write's or an answer's index is stored: a new one takes the next number, and none is reused)"
            )
            .into());
        }
    }
    let line = |entry: &Entry| format!("{}({}::{})", entry.3, entry.5, entry.4);
    let mut lists = String::from("    writes {\n");
    for entry in entries.iter().filter(|entry| entry.0 == 0) {
        writeln!(lists, "        {} {},", entry.2, line(entry))?;
    }
    lists.push_str("    }\n    bead_writes {\n");
    for entry in entries.iter().filter(|entry| entry.0 == 0 && entry.2 == "bead_write") {
        writeln!(lists, "        {},", line(entry))?;
    }
    for (list, plural) in [(1, "reads"), (2, "answers")] {
        writeln!(lists, "    }}\n    {plural} {{")?;
        for entry in entries.iter().filter(|entry| entry.0 == list) {
            writeln!(lists, "        {},", line(entry))?;
        }
    }
    lists.push_str("    }\n");
    let mut answers = String::from(
        "/// An answer shape registered by its command (`crate::commands`): the last variant of [`Outcome`].\n\
         /// Generated by `build.rs`, one variant per `registered!(answer ...)` line, in index order.\n\
         #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]\n\
         pub enum RegisteredAnswer {\n",
    );
    for entry in entries.iter().filter(|entry| entry.0 == 2) {
        writeln!(answers, "    #[allow(missing_docs)]\n    {}({}),", entry.3, entry.4)?;
    }
    answers.push_str("}\n");
    Ok((format!("{modules}\nregistry! {{\n{lists}}}\n"), answers))
}

/// `WhoAmI` → `who_am_i`, as tonic names a method.
fn snake(name: &str) -> String {
    let mut out = String::new();
    for (index, ch) in name.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if index > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

/// `.strand.v1.CreateRequest` → `CreateRequest`.
fn short(type_name: &str) -> Result<&str, String> {
    type_name.strip_prefix(".strand.v1.").ok_or_else(|| format!("{type_name} is not a strand.v1 message"))
}

fn rpc_table(set: &prost_types::FileDescriptorSet) -> Result<String, Box<dyn std::error::Error>> {
    let mut clients = String::new();
    let mut leader = String::new();
    let mut requests = std::collections::BTreeSet::new();
    for service in set.file.iter().flat_map(|file| &file.service) {
        let name = service.name();
        if NOT_CLIENT_SERVICES.contains(&name) {
            continue;
        }
        let module = snake(name);
        let mut unary = String::new();
        let mut all_unary = true;
        for method in &service.method {
            if method.client_streaming() || method.server_streaming() {
                all_unary = false;
                continue;
            }
            let request = short(method.input_type())?;
            let response = short(method.output_type())?;
            let variant = request
                .strip_suffix("Request")
                .ok_or_else(|| format!("{name}.{}: a request message's name ends in Request", method.name()))?;
            if !requests.insert(request.to_string()) {
                return Err(format!("{request} is the request of two RPCs; give each RPC its own message").into());
            }
            writeln!(unary, "            {variant} {} {request} {response},", snake(method.name()))?;
        }
        writeln!(clients, "        {name} {module}_client::{name}Client {{\n{unary}        }}")?;
        if all_unary {
            writeln!(leader, "        {name} {module}_server::{name} {name}Service {{\n{unary}        }}")?;
        }
    }
    Ok(format!(
        "/// Calls `$callback!` with every unary RPC of the services clients call, by service:\n\
         /// `Service client_module::Client {{ Variant method Request Response, ... }}`, where `Variant`\n\
         /// is the request message's name without `Request`. Generated by `build.rs`.\n\
         #[macro_export]\n\
         macro_rules! for_each_client_rpc {{\n    ($callback:ident) => {{\n        $callback! {{\n{clients}        }}\n    }};\n}}\n\n\
         /// Calls `$callback!` with every service the leader plane answers whole (all its RPCs unary):\n\
         /// `Service server_module::Trait ServiceStruct {{ Variant method Request Response, ... }}`.\n\
         /// Generated by `build.rs`.\n\
         #[macro_export]\n\
         macro_rules! for_each_leader_service {{\n    ($callback:ident) => {{\n        $callback! {{\n{leader}        }}\n    }};\n}}\n"
    ))
}
