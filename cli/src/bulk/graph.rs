//! `strand create --graph FILE`: Gas City's graph plan (`ApplyGraphPlan`, which its bd store
//! sends as `bd create --graph FILE --json [--ephemeral|--no-history]`), applied as one
//! transaction: every node created, parents and metadata references filled in with the ids of
//! other nodes, every edge added, or nothing at all. It prints `{"ids": {key: id}}`.
//!
//! A plan is `{commit_message?, nodes: [{key, title, type?, priority?, description?, assignee?,
//! assign_after_create?, from?, labels?, metadata?, metadata_refs?, parent_key?, parent_id?}],
//! edges?: [{from_key|from_id, to_key|to_id, type?, metadata?}]}`; an edge means "from depends on
//! to", `blocks` unless typed. A node's parent is also its `parent-child` edge, so an edge that
//! repeats it is skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use api::command::{Command, CreateBead, Txn};
use api::model::{BeadId, DepType};
use api::outcome::Outcome;
use serde::Deserialize;

use crate::Failure;

/// A node of a plan.
#[derive(Deserialize)]
struct Node {
    key: String,
    title: String,
    #[serde(rename = "type", default)]
    bead_type: String,
    priority: Option<u8>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    assignee: String,
    /// Gas City assigns after creating; in one transaction that is the same.
    #[serde(default)]
    #[allow(dead_code)]
    assign_after_create: bool,
    #[serde(default)]
    from: String,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    #[serde(default)]
    metadata_refs: BTreeMap<String, String>,
    #[serde(default)]
    parent_key: String,
    #[serde(default)]
    parent_id: String,
}

/// An edge of a plan.
#[derive(Deserialize)]
struct Edge {
    #[serde(default)]
    from_key: String,
    #[serde(default)]
    from_id: String,
    #[serde(default)]
    to_key: String,
    #[serde(default)]
    to_id: String,
    #[serde(rename = "type", default)]
    dep_type: String,
    /// Edge metadata; Strand's edges carry none.
    #[serde(default)]
    #[allow(dead_code)]
    metadata: String,
}

/// A graph plan.
#[derive(Deserialize)]
struct Plan {
    #[serde(default)]
    #[allow(dead_code)]
    commit_message: String,
    nodes: Vec<Node>,
    #[serde(default)]
    edges: Vec<Edge>,
}

/// bd's default priority for a node that names none.
const NODE_PRIORITY_DEFAULT: u8 = 2;
/// The edge type a parent is also recorded as.
const PARENT_CHILD: &str = "parent-child";

fn refused(reason: impl std::fmt::Display) -> Failure {
    Failure::Refused(format!("graph plan: {reason}; nothing was created"))
}

/// The plan's nodes in an order where a parent comes before its children.
fn nodes_parents_first(nodes: &[Node]) -> Result<Vec<usize>, Failure> {
    let position: BTreeMap<&str, usize> =
        nodes.iter().enumerate().map(|(index, node)| (node.key.as_str(), index)).collect();
    let parents: Vec<Option<usize>> =
        nodes.iter().map(|node| position.get(node.parent_key.as_str()).copied()).collect();
    parents_first(&parents).ok_or_else(|| refused("parent_key links form a cycle"))
}

/// Positions of items in an order where each comes after its parent (`parents[i]`: where item
/// i's parent stands in the same list, if it is there), the given order kept otherwise; `None`
/// when parents form a cycle. Linear: each item's depth is found once.
pub fn parents_first(parents: &[Option<usize>]) -> Option<Vec<usize>> {
    let mut depth: Vec<Option<usize>> = vec![None; parents.len()];
    let mut on_path = vec![false; parents.len()];
    for start in 0..parents.len() {
        let mut path = Vec::new();
        let mut current = Some(start);
        while let Some(item) = current.filter(|item| depth[*item].is_none()) {
            if on_path[item] {
                return None;
            }
            on_path[item] = true;
            path.push(item);
            current = parents[item];
        }
        let first = current.and_then(|item| depth[item]).map_or(0, |above| above + 1);
        for (below, item) in (first..).zip(path.into_iter().rev()) {
            on_path[item] = false;
            depth[item] = Some(below);
        }
    }
    let mut order: Vec<usize> = (0..parents.len()).collect();
    order.sort_by_key(|item| depth[*item]);
    Some(order)
}

/// The transaction a plan makes, and each key's write position.
fn transaction(plan: Plan, ephemeral: bool, no_history: bool) -> Result<(Txn, BTreeMap<String, usize>), Failure> {
    if plan.nodes.is_empty() {
        return Err(refused("it has no nodes"));
    }
    let mut keys = BTreeSet::new();
    for node in &plan.nodes {
        if node.key.is_empty() || node.title.trim().is_empty() {
            return Err(refused("every node needs a key and a title"));
        }
        if !keys.insert(node.key.as_str()) {
            return Err(refused(format!("key {:?} appears twice", node.key)));
        }
    }
    let known = |key: &str, what: &str| -> Result<(), Failure> {
        if keys.contains(key) { Ok(()) } else { Err(refused(format!("{what} names key {key:?}, which no node has"))) }
    };
    for node in &plan.nodes {
        if !node.parent_key.is_empty() {
            known(&node.parent_key, "a parent_key")?;
        }
        node.metadata_refs.values().try_for_each(|key| known(key, "a metadata_refs value"))?;
    }
    for edge in &plan.edges {
        for (key, id) in [(&edge.from_key, &edge.from_id), (&edge.to_key, &edge.to_id)] {
            match (key.is_empty(), id.is_empty()) {
                (true, true) => return Err(refused("an edge needs from_key or from_id, and to_key or to_id")),
                (false, true) => known(key, "an edge")?,
                _ => {}
            }
        }
    }
    let order = nodes_parents_first(&plan.nodes)?;
    let mut slot: BTreeMap<String, usize> = BTreeMap::new();
    for (write, node) in order.iter().enumerate() {
        slot.insert(plan.nodes[*node].key.clone(), write);
    }
    let reference = |key: &str| format!("${}", slot[key]);
    let mut parents: BTreeMap<String, String> = BTreeMap::new();
    let mut writes = Vec::with_capacity(plan.nodes.len() + plan.edges.len());
    // Metadata references are set after every create, so they may name any node, before or after.
    let mut references = Vec::new();
    let mut nodes: Vec<Option<Node>> = plan.nodes.into_iter().map(Some).collect();
    for index in order {
        let node = nodes[index].take().expect("each node is placed once");
        let parent = if !node.parent_key.is_empty() { reference(&node.parent_key) } else { node.parent_id.clone() };
        if !node.metadata_refs.is_empty() {
            let entries =
                node.metadata_refs.iter().map(|(meta_key, node_key)| (meta_key.clone(), Some(reference(node_key))));
            references.push(Command::SetMetadata(api::command::SetMetadata {
                id: BeadId(reference(&node.key)),
                entries: entries.collect(),
            }));
        }
        parents.insert(reference(&node.key), parent.clone());
        writes.push(Command::Create(CreateBead {
            title: node.title,
            description: node.description,
            bead_type: node.bead_type,
            priority: Some(node.priority.unwrap_or(NODE_PRIORITY_DEFAULT)),
            assignee: node.assignee,
            from: node.from,
            parent_id: (!parent.is_empty()).then_some(BeadId(parent)),
            labels: node.labels.into_iter().filter(|label| !label.is_empty()).collect(),
            metadata: node.metadata,
            ephemeral,
            no_history,
            ..CreateBead::default()
        }));
    }
    writes.append(&mut references);
    for edge in plan.edges {
        let end = |key: &str, id: &str| if id.is_empty() { reference(key) } else { id.to_string() };
        let (from, to) = (end(&edge.from_key, &edge.from_id), end(&edge.to_key, &edge.to_id));
        let dep_type = if edge.dep_type.is_empty() { DepType::BLOCKS.to_string() } else { edge.dep_type };
        if dep_type == PARENT_CHILD && parents.get(&from) == Some(&to) {
            continue;
        }
        writes.push(Command::DepAdd(api::command::DepAdd {
            issue_id: BeadId(from),
            depends_on_id: BeadId(to),
            dep_type: DepType(dep_type),
        }));
    }
    let txn = Txn { conditions: Vec::new(), fences: Vec::new(), writes };
    api::command::validate_txn(&txn).map_err(refused)?;
    Ok((txn, slot))
}

/// Reads a plan file, checks it and applies it; prints `{"ids": {key: id}}`.
pub async fn apply(cli: &crate::Cli, path: &Path, ephemeral: bool, no_history: bool) -> crate::CommandResult {
    let text = crate::wire::read_request_file(Some(path)).map_err(|failure| refused(failure.message()))?;
    let plan: Plan = serde_json::from_str(&text)
        .map_err(|error| refused(format!("{} is not a graph plan: {error}", path.display())))?;
    let (txn, slot) = transaction(plan, ephemeral, no_history)?;
    let answer = cli.client()?.execute(Command::Txn(txn)).await?;
    let Outcome::Txn(outcomes) = answer else {
        return Err(Failure::Refused(format!("the cluster answered a graph plan with {answer:?}")));
    };
    let created: Vec<Option<String>> = outcomes
        .into_iter()
        .map(|outcome| crate::answers::beads_of(outcome).into_iter().next().map(|bead| bead.id.0))
        .collect();
    let ids: BTreeMap<String, String> =
        slot.into_iter().filter_map(|(key, write)| created.get(write).cloned().flatten().map(|id| (key, id))).collect();
    if cli.json {
        crate::output::print_value(&serde_json::json!({ "ids": ids, "schema_version": 1 }));
    } else {
        for (key, id) in &ids {
            println!("{}: {}", api::printable::printable(key), api::printable::printable(id));
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Plan {
        serde_json::from_str(text).expect("a plan")
    }

    #[test]
    fn a_plan_becomes_one_transaction_with_parents_first_and_references() {
        let (txn, slot) = transaction(
            plan(
                r#"{"nodes":[{"key":"step","title":"Step","parent_key":"root","metadata_refs":{"gc.root":"root"}},
                             {"key":"root","title":"Root","type":"molecule","metadata_refs":{"gc.first":"step"}}],
                    "edges":[{"from_key":"step","to_key":"root","type":"parent-child"},
                             {"from_key":"step","to_id":"external:rig:x"}]}"#,
            ),
            true,
            false,
        )
        .unwrap_or_else(|_| panic!("accepted"));
        assert_eq!((slot["root"], slot["step"]), (0, 1), "the parent is created first");
        let Command::Create(step) = &txn.writes[1] else { panic!("a create") };
        assert_eq!(step.parent_id.as_ref().map(|id| id.0.as_str()), Some("$0"));
        assert!(step.ephemeral && step.priority == Some(2));
        // References are set after every create, so the root may name its later step.
        let Command::SetMetadata(api::command::SetMetadata { id, entries }) = &txn.writes[2] else {
            panic!("the root's references")
        };
        assert_eq!((id.0.as_str(), entries["gc.first"].as_deref()), ("$0", Some("$1")));
        let Command::SetMetadata(api::command::SetMetadata { id, entries }) = &txn.writes[3] else {
            panic!("the step's references")
        };
        assert_eq!((id.0.as_str(), entries["gc.root"].as_deref()), ("$1", Some("$0")));
        assert_eq!(txn.writes.len(), 5, "the parent-child edge repeating the parent is skipped");
        let Command::DepAdd(api::command::DepAdd { dep_type, .. }) = &txn.writes[4] else { panic!("an edge") };
        assert_eq!(dep_type.0, "blocks");
    }

    #[test]
    fn parents_come_first_in_linear_time_and_a_cycle_is_none() {
        assert_eq!(parents_first(&[Some(2), None, Some(1)]), Some(vec![1, 2, 0]));
        assert_eq!(parents_first(&[None, None]), Some(vec![0, 1]), "the given order is kept");
        assert_eq!(parents_first(&[Some(1), Some(0)]), None);
        assert_eq!(parents_first(&[Some(0)]), None, "its own parent");
        let chain: Vec<Option<usize>> = (0..100_000).map(|item| (item + 1 < 100_000).then_some(item + 1)).collect();
        assert_eq!(parents_first(&chain).map(|order| order[0]), Some(99_999), "a long chain, from its root");
    }

    #[test]
    fn a_bad_plan_is_refused_naming_what_is_wrong() {
        for (text, expected) in [
            (r#"{"nodes":[]}"#, "no nodes"),
            (r#"{"nodes":[{"key":"a","title":""}]}"#, "key and a title"),
            (r#"{"nodes":[{"key":"a","title":"x"},{"key":"a","title":"y"}]}"#, "appears twice"),
            (r#"{"nodes":[{"key":"a","title":"x","parent_key":"b"}]}"#, "no node has"),
            (
                r#"{"nodes":[{"key":"a","title":"x","parent_key":"b"},{"key":"b","title":"y","parent_key":"a"}]}"#,
                "cycle",
            ),
            (r#"{"nodes":[{"key":"a","title":"x"}],"edges":[{"to_key":"a"}]}"#, "from_key or from_id"),
        ] {
            let Err(Failure::Refused(message)) = transaction(plan(text), false, false) else { panic!("{text}") };
            assert!(message.contains(expected) && message.contains("nothing was created"), "{text}: {message}");
        }
    }
}
