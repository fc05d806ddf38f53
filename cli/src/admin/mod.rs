//! Administering a cluster: its status, leadership and members (`cluster`), auth and tokens
//! (`auth`), TLS certificates (`certs`), a live view of the cluster and its work (`top`), and the command lines of what runs members or opens a
//! data directory (`member_args`), which the full build `strand-node` runs.

pub mod auth;
pub mod certs;
pub mod cluster;
pub mod member_args;
pub mod top;
