//! Faults inside the node's own code ([`crate::nemesis::Fault::Code`]): arms the fault points of
//! `raft_store::faults` for one run, each with a chance per visit and a longest delay drawn from
//! the seed, and counts how often each fired. A failed disk write stops the node's Raft core; the
//! nemesis restarts such a node ([`crate::nemesis::Nemesis::restart_failed_writes`]), and the
//! Raft checker accepts that stop.
//!
//! Invariant: the chances and every firing are drawn from a generator of the run's seed alone,
//! in the order the single-threaded simulation reaches the points, so a run replays exactly; the
//! points are disarmed when the run's simulation ends.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use raft_store::faults::{self, FaultPoint};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Kept apart from every other generator of a run.
const CODE_SALT: u64 = 0x636f_6465_0000_0001;

/// Each point's chance per visit and longest delay.
#[derive(Clone, Debug)]
pub struct Chances(BTreeMap<FaultPoint, (f64, u64)>);

impl Chances {
    /// The chances of `seed`'s run: a delay point fires on up to 5 % of visits (a snapshot build
    /// on up to half: there are few), for up to 20 to 300 ms (a snapshot build up to 2 s); a
    /// lost response on up to 5 % of writes; a failed log write on 0.05 % to 0.4 % of appends.
    pub fn draw(seed: u64) -> (Chances, StdRng) {
        let mut rng = StdRng::seed_from_u64(seed ^ CODE_SALT);
        let mut chances = BTreeMap::new();
        for point in FaultPoint::ALL {
            let chance = match point {
                FaultPoint::SnapshotBuildDelay => rng.random_range(0.0..0.5),
                // Each one stops a node until the nemesis restarts it.
                FaultPoint::DiskWriteFail => rng.random_range(0.0005..0.004),
                _ => rng.random_range(0.0..0.05),
            };
            let longest = match point {
                FaultPoint::SnapshotBuildDelay => rng.random_range(100..=2_000),
                FaultPoint::ResponseDrop | FaultPoint::DiskWriteFail => 0,
                _ => rng.random_range(20..=300),
            };
            chances.insert(point, (chance, longest));
        }
        (Chances(chances), rng)
    }

    /// One line for the trace.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(point, (chance, longest))| match point {
                FaultPoint::ResponseDrop | FaultPoint::DiskWriteFail => {
                    format!("{} {:.2}%", point.name(), chance * 100.0)
                }
                _ => format!("{} {:.1}% up to {longest} ms", point.name(), chance * 100.0),
            })
            .collect();
        parts.join(", ")
    }
}

/// How often each point fired in a run.
pub type Fired = Rc<RefCell<BTreeMap<FaultPoint, usize>>>;

/// Arms the fault points on this thread with `seed`'s chances; answers the chances and the
/// counter of firings. A failed disk write stops a node until the nemesis restarts it, so none
/// fails from `healed_at` on, when the run's faults are removed.
pub fn arm(seed: u64, healed_at: Duration) -> (Chances, Fired) {
    let (chances, mut rng) = Chances::draw(seed);
    let fired: Fired = Rc::default();
    let (table, counter) = (chances.0.clone(), fired.clone());
    faults::arm(Box::new(move |point| {
        let healed = turmoil::sim_elapsed().is_none_or(|now| now >= healed_at);
        if point == FaultPoint::DiskWriteFail && healed {
            return None;
        }
        let (chance, longest) = *table.get(&point)?;
        if !rng.random_bool(chance) {
            return None;
        }
        *counter.borrow_mut().entry(point).or_default() += 1;
        Some(Duration::from_millis(if longest == 0 { 0 } else { rng.random_range(1..=longest) }))
    }));
    (chances, fired)
}

/// Disarms the fault points; answers one line for the trace.
pub fn disarm(fired: &Fired) -> String {
    faults::disarm();
    let fired = fired.borrow();
    let parts: Vec<String> = FaultPoint::ALL
        .iter()
        .map(|point| format!("{} {}", point.name(), fired.get(point).copied().unwrap_or(0)))
        .collect();
    format!("fault points fired: {}", parts.join(", "))
}
