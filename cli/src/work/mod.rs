//! The work an agent and its orchestrator do around beads: namespaces, `sling`, `hook` and
//! `purge` (`orchestration`), formulas and molecules (`molecule`, with bd's `mol current` and `mol
//! progress` in `molecule_progress`), orders (`order`), mail (`mail`), convoys (`convoy`), leased
//! claims (`lease`), and the event log and its stream (`events`).

pub mod convoy;
pub mod events;
pub mod lease;
pub mod mail;
pub mod molecule;
pub mod molecule_progress;
pub mod orchestration;
pub mod order;
