//! Strand's deterministic simulator: the real node code under turmoil, with crashes,
//! partitions, lost writes, clock jumps and damaged storage, and checkers that judge the observed
//! history.
//!
//! - [`cluster`]: N nodes as turmoil hosts running `node::run` unchanged, with the simulated
//!   listener and connector ([`net`]), a disk that outlives crashes, a jumpable clock, and a
//!   metrics observer.
//! - [`workload`]: agents using `api::client::Client` over the simulated network, recording
//!   every operation in the [`history`].
//! - [`nemesis`]: seeded faults between simulation steps; [`damage`]: what its corruption fault
//!   does to a stopped node's storage; [`code_faults`]: fault points inside the node's code.
//! - [`operator`]: membership changes through the cluster's own API while the nemesis acts
//!   (the membership fault).
//! - [`healed`]: after the faults, checks liveness, reads everything back, waits for convergence.
//! - [`checkers`]: one module per property.
//! - [`target`]: where the agents' and the reader's calls go, and their clock: the simulated
//!   cluster, or a real one; [`containers`]: the Jepsen-style run of the real build in the
//!   `deploy/` compose cluster, under real partitions and kills, judged by the same checkers.
//! - [`run`]: one seed, end to end; [`swarm`]: what a run injects and drives, drawn from its
//!   seed under `--swarm`.
//! - [`sweep`]: many seeds in worker processes; [`report`]: the summary, JSON and JUnit reports
//!   and a failing seed's artifacts, with its [`timeline`] and its nodes' [`logs`]; [`shrink`]:
//!   the smallest run of a failing seed that still fails.
//!
//! Invariant: nothing of the node is re-implemented here; the simulator only supplies what
//! `node::run` takes as parameters. The container run drives the real binaries and shares the
//! workload, the healed-phase reader and the checkers with the simulator unchanged.

pub mod checkers;
pub mod cluster;
pub mod code_faults;
pub mod containers;
pub mod damage;
pub mod healed;
pub mod history;
pub mod logs;
pub mod nemesis;
pub mod net;
pub mod operator;
pub mod report;
pub mod run;
pub mod shrink;
pub mod swarm;
pub mod sweep;
pub mod target;
pub mod timeline;
pub mod workload;
