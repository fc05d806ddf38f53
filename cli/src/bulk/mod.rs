//! Many bead writes at once, all or nothing: `strand tx` (`tx`), Gas City's graph plan of
//! `create --graph` (`graph`), and `strand import` of `bd export` JSONL (`import`).

pub mod graph;
pub mod import;
pub mod tx;
