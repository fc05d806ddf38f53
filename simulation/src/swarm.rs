//! What a run actually injects and drives: its [`Plan`]. A plain run's plan is its
//! configuration; a swarm run's (`--swarm`, after Groce et al., "Swarm testing", ISSTA 2012) is
//! drawn from its seed: a subset of the configured fault kinds, the nemesis' pace, the number of
//! agents and their mix of operations, so that each seed stresses the cluster its own way and
//! interleavings that one fixed mix makes rare come up.
//!
//! Invariant: the draw depends on the seed and the configured faults only, from a generator of
//! its own, so a swarm seed replays exactly (`--swarm --seed N`) and a plain run draws nothing.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::nemesis::{ACTION_GAP_MS_MAX, ACTION_GAP_MS_MIN, Fault};
use crate::run::RunConfig;
use crate::workload::Mix;

/// Kept apart from every other generator of a run.
const SWARM_SALT: u64 = 0x7377_6172_6d00_0001;
/// The most agents a swarm run draws.
pub const SWARM_AGENTS_MAX: usize = 8;

/// What one run injects and drives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The fault kinds the nemesis and the operator use.
    pub faults: Vec<Fault>,
    /// The nemesis' pause between two actions, in simulated milliseconds.
    pub action_gap_ms: (u64, u64),
    /// Concurrent agents.
    pub agents: usize,
    /// Their mix of operations.
    pub mix: Mix,
    /// Whether the plan was drawn (a swarm run).
    pub drawn: bool,
}

impl Plan {
    /// The plan of `config`: its own settings, or, for a swarm run, a draw from its seed.
    pub fn of(config: &RunConfig) -> Plan {
        let mut plan = Plan::unbounded(config);
        if let Some(max) = config.max_agents {
            plan.agents = plan.agents.min(max);
        }
        plan
    }

    /// The plan before [`RunConfig::max_agents`] bounds it.
    fn unbounded(config: &RunConfig) -> Plan {
        if !config.swarm {
            return Plan {
                faults: config.faults.clone(),
                action_gap_ms: (ACTION_GAP_MS_MIN, ACTION_GAP_MS_MAX),
                agents: config.agents,
                mix: Mix::DEFAULT,
                drawn: false,
            };
        }
        let mut rng = StdRng::seed_from_u64(config.seed ^ SWARM_SALT);
        // Each configured kind is in with even odds; at least one, when any was configured.
        let mut faults: Vec<Fault> = config.faults.iter().copied().filter(|_| rng.random_bool(0.5)).collect();
        if faults.is_empty() && !config.faults.is_empty() {
            faults.push(config.faults[rng.random_range(0..config.faults.len())]);
        }
        // A configured upgrade always stays: the simulator was started in the only mode that
        // runs it, to test it.
        if config.faults.contains(&Fault::Upgrade) && !faults.contains(&Fault::Upgrade) {
            faults.push(Fault::Upgrade);
        }
        let gap_max = rng.random_range(200..=4_000);
        let gap_min = rng.random_range(50..=gap_max / 2);
        let agents = rng.random_range(1..=SWARM_AGENTS_MAX);
        let mut weights = [0u32; 9];
        for weight in &mut weights {
            // A third of the kinds left out, the others weighted 1 to 10.
            *weight = if rng.random_bool(1.0 / 3.0) { 0 } else { rng.random_range(1..=10) };
        }
        weights[0] = weights[0].max(1);
        Plan { faults, action_gap_ms: (gap_min, gap_max), agents, mix: Mix(weights), drawn: true }
    }

    /// One line for traces and reports.
    pub fn describe(&self) -> String {
        let faults: Vec<String> = self.faults.iter().map(|fault| format!("{fault:?}").to_lowercase()).collect();
        format!(
            "faults {}; a nemesis action every {}..{} ms; {} agents; mix {}",
            if faults.is_empty() { "none".into() } else { faults.join(",") },
            self.action_gap_ms.0,
            self.action_gap_ms.1,
            self.agents,
            self.mix
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swarm_draw_follows_the_seed_and_stays_within_the_configured_faults() {
        let config = |seed| RunConfig { swarm: true, faults: Fault::ALL.to_vec(), ..RunConfig::new(seed) };
        let plans: Vec<Plan> = (0..40).map(|seed| Plan::of(&config(seed))).collect();
        assert_eq!(plans, (0..40).map(|seed| Plan::of(&config(seed))).collect::<Vec<_>>());
        for plan in &plans {
            assert!(!plan.faults.is_empty() && plan.faults.iter().all(|fault| Fault::ALL.contains(fault)));
            assert!(plan.action_gap_ms.0 <= plan.action_gap_ms.1 && plan.mix.0[0] >= 1);
            assert!((1..=SWARM_AGENTS_MAX).contains(&plan.agents));
        }
        let distinct: std::collections::BTreeSet<String> = plans.iter().map(Plan::describe).collect();
        assert!(distinct.len() > 30, "40 seeds drew only {} distinct plans", distinct.len());
        let plain = Plan::of(&RunConfig::new(7));
        assert!(!plain.drawn && plain.mix == Mix::DEFAULT && plain.faults == Fault::DEFAULT.to_vec());
    }
}
