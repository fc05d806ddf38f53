//! Other programs' protocols spoken by `strand`: Gas City's exec-store protocol, `strand
//! exec-store OP [ARGS]` (`exec_store`).

pub mod exec_store;
