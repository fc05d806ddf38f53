//! Auth in the state machine: enabling, tokens, and every write judged when it is applied.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::auth::{AuthCommand, Role, TokenHash, TokenSpec};
use crate::commands::get::Get;

fn spec(name: &str, role: Role, namespaces: &[&str], actor: Option<&str>) -> (TokenHash, TokenSpec) {
    let hash = TokenHash::of(&format!("secret of {name}"));
    let namespaces: BTreeSet<Namespace> = namespaces.iter().map(|name| Namespace(name.to_string())).collect();
    (hash, TokenSpec { name: name.into(), hash, role, namespaces, actor: actor.map(|actor| Actor(actor.into())) })
}

fn enabled() -> (Harness, TokenHash) {
    let mut harness = Harness::new();
    let (admin, admin_spec) = spec("root", Role::Admin, &[], None);
    harness.apply(Command::Auth(AuthCommand::Enable(admin_spec))).expect("enables");
    (harness, admin)
}

fn claim(actor: &str) -> Command {
    Command::Claim(crate::command::Claim { id: "st-1".into(), actor: Actor(actor.into()), lease_ms: None })
}

#[test]
fn without_auth_anyone_writes_and_enable_needs_an_admin_token_first() {
    let mut harness = Harness::new();
    harness.create("open to all");
    let (_, reader) = spec("r", Role::Reader, &[], None);
    let refused = harness.apply(Command::Auth(AuthCommand::Enable(reader))).unwrap_err();
    assert!(refused.to_string().contains("must be an admin"), "{refused}");
    let (admin, admin_spec) = spec("root", Role::Admin, &[], None);
    harness.apply(Command::Auth(AuthCommand::Enable(admin_spec.clone()))).expect("enables");
    // Now a write without a token is refused, and changes nothing.
    let refused = harness.apply(Command::Reopen(crate::command::Reopen { id: "st-1".into() })).unwrap_err();
    assert!(matches!(refused, Refusal::Unauthenticated(_)), "{refused}");
    assert!(matches!(
        harness.state.query_as(None, &harness.namespace, false, &crate::commands::formula_list::FormulaList.into()),
        Err(Refusal::Unauthenticated(_))
    ));
    harness.credential = Some(admin);
    let refused = harness.apply(Command::Auth(AuthCommand::Enable(admin_spec))).unwrap_err();
    assert!(refused.to_string().contains("already enabled"), "{refused}");
    assert_eq!(harness.state.bead_count(), 1);
}

#[test]
fn an_agent_acts_as_itself_in_its_namespaces_and_a_reader_only_reads() {
    let (mut harness, admin) = enabled();
    harness.credential = Some(admin);
    harness.create("work");
    let (agent, agent_spec) = spec("agent-1", Role::Agent, &["default"], Some("alice"));
    let (reader, reader_spec) = spec("watcher", Role::Reader, &[], None);
    harness.apply(Command::Auth(AuthCommand::TokenCreate(agent_spec))).expect("creates the agent token");
    harness.apply(Command::Auth(AuthCommand::TokenCreate(reader_spec))).expect("creates the reader token");

    harness.credential = Some(agent);
    harness.actor = Actor("bob".into());
    let refused = harness.apply(claim("bob")).unwrap_err();
    assert!(
        matches!(&refused, Refusal::PermissionDenied(message) if message.contains("acts only as alice")),
        "{refused}"
    );
    harness.actor = Actor("alice".into());
    assert!(harness.apply(claim("bob")).is_err(), "a claim for another actor is refused");
    let claimed = harness.apply(claim("alice")).expect("claims as itself");
    let Outcome::Bead(bead) = claimed else { panic!("{claimed:?}") };
    assert_eq!(bead.assignee, "alice");
    let refused = harness.apply(Command::Purge(crate::command::Purge { older_than_ms: 0 })).unwrap_err();
    assert!(matches!(refused, Refusal::PermissionDenied(_)), "{refused}");
    harness.namespace = Namespace("elsewhere".into());
    assert!(matches!(
        harness.apply(Command::Reopen(crate::command::Reopen { id: "st-1".into() })),
        Err(Refusal::PermissionDenied(_))
    ));
    assert!(!harness.state.namespaces.contains_key(&Namespace("elsewhere".into())), "a refusal creates nothing");
    harness.namespace = Namespace::default_namespace();

    harness.credential = Some(reader);
    assert!(matches!(
        harness.apply(Command::Reopen(crate::command::Reopen { id: "st-1".into() })),
        Err(Refusal::PermissionDenied(_))
    ));
    let read = harness.state.query_as(
        Some(&reader),
        &harness.namespace,
        false,
        &Query::from(Get { ids: vec!["st-1".into()] }),
    );
    assert!(read.is_ok(), "{read:?}");
    assert!(matches!(
        harness.state.query_as(Some(&reader), &harness.namespace, false, &Query::Tokens),
        Err(Refusal::PermissionDenied(_))
    ));
    let Ok(Outcome::Tokens { enabled, tokens }) =
        harness.state.query_as(Some(&reader), &harness.namespace, false, &Query::WhoAmI)
    else {
        panic!("whoami answers tokens")
    };
    assert!(enabled);
    assert_eq!(tokens.iter().map(|token| token.name.as_str()).collect::<Vec<_>>(), ["watcher"]);
}

#[test]
fn a_revoked_token_fails_from_the_next_command_and_the_last_admin_stays() {
    let (mut harness, admin) = enabled();
    harness.credential = Some(admin);
    let (agent, agent_spec) = spec("agent-1", Role::Agent, &[], None);
    harness.apply(Command::Auth(AuthCommand::TokenCreate(agent_spec.clone()))).expect("creates");
    let refused = harness.apply(Command::Auth(AuthCommand::TokenCreate(agent_spec))).unwrap_err();
    assert!(refused.to_string().contains("exists"), "{refused}");
    harness.credential = Some(agent);
    harness.actor = Actor("agent-1".into());
    harness.create("before");
    harness.credential = Some(admin);
    harness.apply(Command::Auth(AuthCommand::TokenRevoke { name: "agent-1".into() })).expect("revokes");
    harness.credential = Some(agent);
    let refused = harness.apply(Command::Reopen(crate::command::Reopen { id: "st-1".into() })).unwrap_err();
    assert!(matches!(refused, Refusal::Unauthenticated(_)), "{refused}");
    harness.credential = Some(admin);
    let refused = harness.apply(Command::Auth(AuthCommand::TokenRevoke { name: "root".into() })).unwrap_err();
    assert!(refused.to_string().contains("last admin"), "{refused}");
    harness.apply(Command::Auth(AuthCommand::Disable)).expect("disables");
    harness.credential = None;
    harness.create("open again");
}

#[test]
fn auth_records_survive_a_reload_from_the_changed_records() {
    let mut state = State::new();
    let mut disk: BTreeMap<RecordKey, Record> = BTreeMap::new();
    let mut index = 0;
    let mut apply = |state: &mut State, credential: Option<TokenHash>, command: Command| {
        index += 1;
        let proposal = Proposal {
            request_id: None,
            timestamp: Timestamp(index as i64),
            default_prefix: "st".into(),
            namespace: Namespace::default_namespace(),
            actor: Actor("tester".into()),
            event_retention: crate::limits::EVENT_RETENTION_DEFAULT,
            credential,
            command,
        };
        state.apply(index, &proposal).expect("applies");
        for (key, record) in state.take_changes() {
            match record {
                Some(record) => disk.insert(key, record),
                None => disk.remove(&key),
            };
        }
        State::from_records(disk.clone()).expect("reloads")
    };
    let (admin, admin_spec) = spec("root", Role::Admin, &[], None);
    apply(&mut state, None, Command::Auth(AuthCommand::Enable(admin_spec)));
    for name in ["a", "b"] {
        let (_, token) = spec(name, Role::Reader, &["x"], None);
        apply(&mut state, Some(admin), Command::Auth(AuthCommand::TokenCreate(token)));
    }
    let reloaded = apply(&mut state, Some(admin), Command::Auth(AuthCommand::TokenRevoke { name: "a".into() }));
    assert_eq!(reloaded.digest(), state.digest());
    let names = |state: &State| match state.query(&Namespace::default_namespace(), &Query::Tokens) {
        Ok(Outcome::Tokens { enabled: true, tokens }) => tokens.into_iter().map(|token| token.name).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(names(&reloaded), ["b", "root"]);
    assert!(reloaded.authenticate(Some(&admin)).expect("known").is_some());
    assert!(reloaded.authenticate(Some(&TokenHash::of("secret of a"))).is_err(), "a revoked token stays revoked");
    let reloaded = apply(&mut state, Some(admin), Command::Auth(AuthCommand::Disable));
    assert!(!reloaded.auth_enabled(), "disabling is persisted");
}
