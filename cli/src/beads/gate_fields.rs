//! A gate bead's await fields. bd keeps them as columns (`await_type`, `await_id`, `timeout`,
//! `waiters`); Strand keeps them in the bead's metadata under those names, so they replicate and
//! compare like any other field, and prints them at the top level of a gate's JSON as bd does.
//!
//! `timeout` is Go's duration text (`30m`, `1h30m`, `1.5h`) in metadata and nanoseconds in JSON,
//! as Go's `time.Duration` prints; `waiters` is a JSON array of strings in metadata.

use std::time::Duration;

use api::go_duration::parse_go_duration;
use api::model::Bead;

/// The type of a gate bead.
pub const GATE_TYPE: &str = "gate";
/// Metadata key: what the gate waits for (one of [`GATE_TYPES`]; an imported gate may hold
/// another, which only `gate resolve` closes).
pub const AWAIT_TYPE_KEY: &str = "await_type";
/// The await types `gate create` makes, bd's: `gate check` resolves `timer`, `gh:run`, `gh:pr`
/// and `bead` gates; a `human` gate waits for `gate resolve`. No check would ever resolve a gate
/// of another type, so `gate create` refuses one.
pub const GATE_TYPES: [&str; 5] = ["human", "timer", "gh:run", "gh:pr", "bead"];
/// Metadata key: what it waits on (a run id or workflow name, a PR number, `<rig>:<bead>`).
pub const AWAIT_ID_KEY: &str = "await_id";
/// Metadata key: how long after its creation a timer gate resolves (Go duration text).
pub const TIMEOUT_KEY: &str = "timeout";
/// Metadata key: who waits on the gate (a JSON array of strings).
pub const WAITERS_KEY: &str = "waiters";
/// Metadata key: a GitHub gate's run or pull request, where Gas City's gate-sweep order reads it
/// (the same as `await_id`).
pub const REF_KEY: &str = "ref";

/// The await fields of a gate bead.
#[derive(Debug, Default, PartialEq)]
pub struct GateFields {
    /// What it waits for; empty when unset.
    pub await_type: String,
    /// What it waits on; empty when unset.
    pub await_id: String,
    /// Its timeout; `None` when unset or unreadable.
    pub timeout: Option<Duration>,
    /// Who waits on it.
    pub waiters: Vec<String>,
}

impl GateFields {
    /// The fields of `bead` when it is a gate.
    pub fn of(bead: &Bead) -> Option<GateFields> {
        (bead.bead_type == GATE_TYPE).then(|| {
            let text = |key: &str| bead.metadata.get(key).cloned().unwrap_or_default();
            GateFields {
                await_type: text(AWAIT_TYPE_KEY),
                await_id: text(AWAIT_ID_KEY),
                timeout: bead.metadata.get(TIMEOUT_KEY).and_then(|timeout| parse_go_duration(timeout).ok()),
                waiters: bead.metadata.get(WAITERS_KEY).map(|waiters| parse_waiters(waiters)).unwrap_or_default(),
            }
        })
    }
}

/// The waiters of a `waiters` metadata value: a JSON array of strings; anything else is none.
pub fn parse_waiters(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_gate_beads_have_gate_fields() {
        let task = api::command::CreateBead { title: "t".into(), bead_type: "task".into(), ..Default::default() };
        let mut bead = task.into_bead(api::model::BeadId::from("st-1"));
        bead.metadata.insert(AWAIT_TYPE_KEY.into(), "timer".into());
        assert_eq!(GateFields::of(&bead), None);
        bead.bead_type = GATE_TYPE.into();
        bead.metadata.insert(TIMEOUT_KEY.into(), "2h".into());
        bead.metadata.insert(WAITERS_KEY.into(), r#"["a","b"]"#.into());
        let fields = GateFields::of(&bead).expect("a gate");
        assert_eq!(fields.await_type, "timer");
        assert_eq!(fields.timeout, Some(Duration::from_secs(7200)));
        assert_eq!(fields.waiters, vec!["a".to_string(), "b".to_string()]);
    }
}
