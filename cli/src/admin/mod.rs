//! Running and administering a cluster: its status, leadership and members (`cluster`), auth and
//! tokens (`auth`), TLS certificates (`certs`), and, with the `node` feature, running a member or
//! a local cluster (`run_node`, whose log `log_limit` rate-limits) and backups (`snapshot`).

pub mod auth;
pub mod certs;
pub mod cluster;
#[cfg(feature = "node")]
pub mod log_limit;
#[cfg(feature = "node")]
pub mod run_node;
#[cfg(feature = "node")]
pub mod snapshot;
