//! What a command's failure is, and the exit code and stderr line each kind of failure maps to
//! (bd's codes: 0 ok, 1 refused or failed, 2 usage error, 3 cluster unavailable, 13 an unmet
//! `--if-assignee`/`--if-status` precondition).

use std::process::ExitCode;

use api::client::ClientError;
use api::outcome::Refusal;
use api::printable::printable;

/// The exit codes, as every command's `--help` lists them.
pub const EXIT_CODES: &str = "Exit codes: 0 ok; 1 operation refused or failed (lost claim, not found, invalid transition); 2 usage error; 3 cluster unavailable; 13 an --if-assignee or --if-status precondition did not hold.";

/// bd's exit code for an `--if-assignee`/`--if-status` precondition that did not hold.
const UNMET_EXIT_CODE: u8 = 13;

/// What a command's failure maps to.
#[derive(Debug)]
pub enum Failure {
    /// Refused or failed: exit 1.
    Refused(String),
    /// A conditional write found the bead at another revision: exit 1, and with `--json` bd's
    /// error object with `code: "precondition-failed"`, which Gas City's conditional writer reads.
    Precondition {
        /// What happened and what to do.
        message: String,
        /// The revision the write named.
        expected: u64,
        /// The bead's revision now.
        current: u64,
    },
    /// An `--if-assignee`/`--if-status` precondition did not hold: exit 13, bd's code for it.
    Unmet(String),
    /// Usage error: exit 2.
    Usage(String),
    /// Cluster unavailable: exit 3.
    Unavailable(String),
}

impl Failure {
    /// What went wrong, whatever the exit code.
    pub fn message(&self) -> &str {
        match self {
            Failure::Refused(message)
            | Failure::Usage(message)
            | Failure::Unavailable(message)
            | Failure::Unmet(message)
            | Failure::Precondition { message, .. } => message,
        }
    }
}

impl From<ClientError> for Failure {
    fn from(error: ClientError) -> Failure {
        match error {
            ClientError::Refused(Refusal::RevisionMismatch { expected, current, .. }) => {
                Failure::Precondition { message: format!("precondition failed: {error}"), expected, current }
            }
            ClientError::Unavailable(_) => Failure::Unavailable(error.to_string()),
            ClientError::Refused(_) | ClientError::Failed(_) => Failure::Refused(error.to_string()),
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Failure {
        Failure::Refused(format!("{error:#}"))
    }
}

/// The result of a command: `Ok(true)` success, `Ok(false)` nothing done (exit 1, no message).
/// Not to be confused with `api`'s names, which the CLI uses as they are: an `api::outcome::Outcome`
/// is what the cluster answered, and an `api::outcome::Answer` that or its refusal.
pub type CommandResult = Result<bool, Failure>;

/// The process's exit code for a command's result, after printing a failure's message on stderr
/// (with `json`, a failed precondition as bd's error object).
pub fn exit_code(outcome: CommandResult, json: bool) -> ExitCode {
    // An error quotes user text (ids, titles) and nodes' messages; `printable` escapes control
    // characters, so it stays one line and cannot drive the terminal.
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(Failure::Refused(message)) => {
            eprintln!("error: {}", printable(&message));
            ExitCode::from(1)
        }
        Err(Failure::Unmet(message)) => {
            eprintln!("error: {}", printable(&message));
            ExitCode::from(UNMET_EXIT_CODE)
        }
        Err(Failure::Precondition { message, expected, current }) => {
            if json {
                let error = serde_json::json!({
                    "error": message, "code": "precondition-failed",
                    "expected_revision": expected, "current_revision": current, "schema_version": 1,
                });
                eprintln!("{error}");
            } else {
                eprintln!("error: {}", printable(&message));
            }
            ExitCode::from(1)
        }
        Err(Failure::Usage(message)) => {
            eprintln!("error: {}", printable(&message));
            ExitCode::from(2)
        }
        Err(Failure::Unavailable(message)) => {
            eprintln!("error: {}", printable(&message));
            ExitCode::from(3)
        }
    }
}
