//! `strand auth`: turning auth on and off, and managing bearer tokens.
//!
//! The CLI draws every token itself ([`api::client::generate_token`]) and sends the cluster only its
//! SHA-256, so no token ever enters the Raft log, a snapshot or a node's memory beyond the
//! requests that carry it. A token is printed once, when it is made (or written to
//! `--token-file`, readable by its owner only).

use std::collections::BTreeSet;
use std::path::PathBuf;

use api::auth::{AuthCommand as Change, Role, TokenHash, TokenInfo, TokenSpec};
use api::command::{Command, Query};
use api::model::{Actor, Namespace};
use api::outcome::Outcome;
use api::printable::printable;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;

use crate::{Cli, CommandResult, Failure};

#[derive(Subcommand, Debug)]
pub enum AuthCommand {
    /// Turn auth on, on a cluster without it: makes the first admin token and prints it once.
    /// From then on every request needs a token (health stays open).
    Enable(EnableArgs),
    /// Turn auth off (admin token). The tokens stay, and work again after `auth enable`.
    Disable,
    /// The token this command line runs with: its name, role, namespaces and actor.
    Whoami,
    /// Bearer tokens: create (printed once), list, revoke.
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Args, Debug)]
pub struct EnableArgs {
    /// The first admin token's name.
    #[arg(long, default_value = "admin")]
    name: String,
    /// Also write the token to this file (mode 0600), for scripts.
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RoleArg {
    /// Everything, including namespace settings and deletion, purge, import and auth.
    Admin,
    /// Bead and orchestration commands in its namespaces, only as its own actor.
    Agent,
    /// Reads and watches in its namespaces.
    Reader,
}

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Make a token and print it once (admin token). The global `--namespace` limits it to
    /// namespaces (comma-separated; default: every namespace), and `--actor` names the actor an
    /// agent token acts as (default: NAME).
    Create {
        /// Unique name of the token.
        name: String,
        /// What the token may do.
        #[arg(long, value_enum)]
        role: RoleArg,
        /// Also write the token to this file (mode 0600), for scripts.
        #[arg(long, value_name = "PATH")]
        token_file: Option<PathBuf>,
    },
    /// Every token: name, role, namespaces, actor, when it was made (admin token; never the
    /// tokens themselves).
    List,
    /// Remove a token: requests with it fail from the next one on (admin token).
    Revoke {
        /// The token's name.
        name: String,
    },
}

/// Runs an auth command.
pub async fn run(cli: &Cli, command: &AuthCommand) -> CommandResult {
    match command {
        AuthCommand::Enable(args) => {
            let (token, spec) = draw(args.name.clone(), Role::Admin, BTreeSet::new(), None);
            save(args.token_file.as_ref(), &token)?;
            let answer = send(cli, Change::Enable(spec), &token).await?;
            let made = own_token(answer, &args.name)?;
            print_made(cli, &made, &token, "auth is enabled; every request now needs a token");
            Ok(true)
        }
        AuthCommand::Disable => {
            cli.client()?.execute(Command::Auth(Change::Disable)).await?;
            if cli.json {
                crate::output::print_value(&json!({ "enabled": false }));
            } else {
                println!("auth is disabled: requests need no token (the tokens are kept)");
            }
            Ok(true)
        }
        AuthCommand::Whoami => {
            let Outcome::Tokens { enabled, tokens } = cli.client()?.query(Query::WhoAmI).await? else {
                return Err(Failure::Refused("the cluster answered whoami with something else".into()));
            };
            if cli.json {
                let token = tokens.first().map(token_json);
                crate::output::print_value(&json!({ "enabled": enabled, "token": token }));
            } else if !enabled {
                println!("auth is not enabled on this cluster: requests need no token");
            } else if let Some(token) = tokens.first() {
                println!("{}", token_line(token));
            }
            Ok(true)
        }
        AuthCommand::Token(TokenCommand::Create { name, role, token_file }) => {
            let role = match role {
                RoleArg::Admin => Role::Admin,
                RoleArg::Agent => Role::Agent,
                RoleArg::Reader => Role::Reader,
            };
            let namespaces = match cli.namespace_given() {
                Some(list) => list.split(',').map(|name| Namespace(name.trim().to_string())).collect(),
                None => BTreeSet::new(),
            };
            let actor = cli.actor_given().map(|actor| Actor(actor.to_string()));
            let (token, spec) = draw(name.clone(), role, namespaces, actor);
            save(token_file.as_ref(), &token)?;
            let answer = send(cli, Change::TokenCreate(spec), &token).await?;
            let made = own_token(answer, name)?;
            print_made(cli, &made, &token, "token made");
            Ok(true)
        }
        AuthCommand::Token(TokenCommand::List) => {
            let Outcome::Tokens { enabled, tokens } = cli.client()?.query(Query::Tokens).await? else {
                return Err(Failure::Refused("the cluster answered the token list with something else".into()));
            };
            if cli.json {
                let tokens: Vec<_> = tokens.iter().map(token_json).collect();
                crate::output::print_value(&json!({ "enabled": enabled, "tokens": tokens }));
                return Ok(true);
            }
            println!("auth {}", if enabled { "enabled" } else { "disabled" });
            println!("{:<24} {:<7} {:<24} {:<20} {:<24} SHA256", "NAME", "ROLE", "NAMESPACES", "ACTOR", "CREATED");
            for token in &tokens {
                println!(
                    "{:<24} {:<7} {:<24} {:<20} {:<24} {}",
                    printable(&token.name),
                    token.role.name(),
                    namespaces_text(token),
                    printable(&token.actor.0),
                    token.created_at.to_rfc3339(),
                    token.fingerprint
                );
            }
            Ok(true)
        }
        AuthCommand::Token(TokenCommand::Revoke { name }) => {
            cli.client()?.execute(Command::Auth(Change::TokenRevoke { name: name.clone() })).await?;
            if cli.json {
                crate::output::print_value(&json!({ "revoked": name }));
            } else {
                println!("token {} revoked: requests with it now fail", printable(name));
            }
            Ok(true)
        }
    }
}

/// A new token and the spec that registers its hash.
pub fn draw(name: String, role: Role, namespaces: BTreeSet<Namespace>, actor: Option<Actor>) -> (String, TokenSpec) {
    let token = api::client::generate_token();
    let spec = TokenSpec { name, hash: TokenHash::of(&token), role, namespaces, actor };
    (token, spec)
}

/// Writes the token to `path` before the cluster hears of it, so a made token is never lost.
fn save(path: Option<&PathBuf>, token: &str) -> Result<(), Failure> {
    let Some(path) = path else { return Ok(()) };
    crate::admin::certs::write_file(path, &format!("{token}\n"), true).map_err(|error| {
        Failure::Usage(format!("cannot write the token to {} ({error}); nothing was sent", path.display()))
    })
}

/// Sends a change that registers `token`'s hash. When its outcome is unknown (no answer), the
/// cluster may have applied it, so the token is printed to stderr: it may be the only admin token.
async fn send(cli: &Cli, change: Change, token: &str) -> Result<Outcome, Failure> {
    match cli.client()?.execute(Command::Auth(change)).await {
        Ok(answer) => Ok(answer),
        Err(error @ api::client::ClientError::Refused(_)) => Err(error.into()),
        Err(error) => {
            eprintln!(
                "the cluster may have applied this before the failure below; if `strand auth token list` shows the token, it is: {token}"
            );
            Err(error.into())
        }
    }
}

/// The token named `name` in the cluster's answer.
fn own_token(answer: Outcome, name: &str) -> Result<TokenInfo, Failure> {
    match answer {
        Outcome::Tokens { tokens, .. } => tokens
            .into_iter()
            .find(|token| token.name == name)
            .ok_or_else(|| Failure::Refused(format!("the cluster's answer does not list token {name}"))),
        _ => Err(Failure::Refused("the cluster answered with something else than tokens".into())),
    }
}

/// A token as one line: its name, role, namespaces and actor.
fn token_line(token: &TokenInfo) -> String {
    format!(
        "{} (role {}, namespaces {}, actor {})",
        printable(&token.name),
        token.role,
        namespaces_text(token),
        printable(&token.actor.0)
    )
}

fn namespaces_text(token: &TokenInfo) -> String {
    if token.namespaces.is_empty() {
        return "*".into();
    }
    token.namespaces.iter().map(|namespace| namespace.0.as_str()).collect::<Vec<_>>().join(",")
}

fn token_json(token: &TokenInfo) -> serde_json::Value {
    json!({
        "name": token.name, "role": token.role.name(),
        "namespaces": token.namespaces.iter().map(|namespace| &namespace.0).collect::<Vec<_>>(),
        "actor": token.actor.0, "created_at": token.created_at.to_rfc3339(),
        "sha256_prefix": token.fingerprint,
    })
}

fn print_made(cli: &Cli, made: &TokenInfo, token: &str, headline: &str) {
    if cli.json {
        let mut value = token_json(made);
        value["token"] = json!(token);
        crate::output::print_value(&value);
        return;
    }
    println!("{headline}: {}", token_line(made));
    println!("{token}");
    println!(
        "this is the only time the token is shown; give it as --token, $STRAND_TOKEN, or `token` in $STRAND_CONFIG"
    );
}
