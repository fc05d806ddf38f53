//! Checks of a command's fields against the named limits of [`crate::limits`], which each
//! command's file (`crate::commands`) composes into its validation.
//!
//! The node runs a command's validation (`crate::command::validate_command`) before proposing,
//! so bad input is refused without a Raft round; the state machine runs it again at apply, so the
//! outcome never depends on which node took the request. This module knows no command: the
//! state and the commands both use it.
//!
//! Actors (and assignees, senders, recipients), labels and metadata keys are identifiers: they
//! may hold no character [`crate::printable::printable`] would escape (control characters,
//! bidirectional overrides), so no agent can smuggle a terminal escape or a forged output row in
//! through them ([`validate_actor`], `check_identifier`). Titles, descriptions and other text
//! may hold them; the CLI escapes them when it prints.
//!
//! An id a bead is created under (`create --id`, an import) keeps to one charset
//! ([`validate_bead_id`]): ASCII letters, digits, `-`, `_`, `.` and `:`, starting with a letter
//! or digit, without `..`. Ids only named (a look-up, a dependency target such as
//! `external:rig:id`) are not judged.

use crate::input::ReadyFilter;
use crate::limits::*;
use crate::model::{Actor, Namespace, Status};
use crate::outcome::Refusal;
use crate::printable::{is_unsafe, printable};

pub(crate) fn check_size(what: &str, value: &str, limit: usize) -> Result<(), Refusal> {
    if value.len() > limit {
        return Err(Refusal::TooLarge { what: what.to_string(), size: value.len(), limit });
    }
    Ok(())
}

/// Refuses an identifier (an actor, a label, a metadata key) holding a character
/// [`printable`] would escape, naming the field `what`.
///
/// This rule is new (issue 28): a command an older build applied may be refused by this one, at
/// proposal and again at apply (`validate_command` runs in the state machine). That is sound only
/// because the nodes of a cluster run one build, as their peer protocol already requires.
pub(crate) fn check_identifier(what: &str, value: &str) -> Result<(), Refusal> {
    let Some(unsafe_character) = value.chars().find(|character| is_unsafe(*character)) else {
        return Ok(());
    };
    let (kind, kinds) = unsafe_kind(unsafe_character);
    Err(Refusal::Invalid(format!(
        "{what} \"{}\" has {kind}; actors, labels and metadata keys are identifiers: give one without {kinds}",
        printable(value)
    )))
}

/// What an unsafe character is (see [`is_unsafe`]), to name it in a refusal: the kind with the
/// character's code point where it cannot be seen (`a bidirectional override (U+202E)`), and the
/// kind in the plural.
fn unsafe_kind(character: char) -> (String, &'static str) {
    let code = u32::from(character);
    if character.is_control() {
        ("a control character".into(), "control characters")
    } else if ('\u{202a}'..='\u{202e}').contains(&character) || ('\u{2066}'..='\u{2069}').contains(&character) {
        // Embeddings, overrides and isolates: each turns the text after it around on screen.
        (format!("a bidirectional override (U+{code:04X})"), "bidirectional overrides")
    } else if matches!(character, '\u{2028}' | '\u{2029}') {
        (format!("a line or paragraph separator (U+{code:04X})"), "line or paragraph separators")
    } else {
        (format!("a bidirectional mark (U+{code:04X})"), "bidirectional marks")
    }
}

/// Refuses the actor a write is sent under (the proposal's, recorded in its events) when it holds
/// a control character; an empty actor (the client named no one) passes. A new rule, as
/// `check_identifier` says.
pub fn validate_actor(actor: &Actor) -> Result<(), Refusal> {
    check_identifier("actor", &actor.0)
}

pub(crate) fn check_title(title: &str) -> Result<(), Refusal> {
    if title.trim().is_empty() {
        return Err(Refusal::Invalid("title must not be empty; give the bead a title".into()));
    }
    check_size("title", title, TITLE_BYTES_MAX)
}

pub(crate) fn check_priority(priority: Option<u8>) -> Result<(), Refusal> {
    match priority {
        Some(value) if value > 4 => {
            Err(Refusal::Invalid(format!("priority {value} is out of range; use 0 (highest) to 4")))
        }
        _ => Ok(()),
    }
}

pub(crate) fn check_labels<'a>(labels: impl IntoIterator<Item = &'a String>) -> Result<(), Refusal> {
    for (count, label) in labels.into_iter().enumerate() {
        if count >= LABELS_MAX {
            return Err(Refusal::Invalid(format!("more than {LABELS_MAX} labels; drop some")));
        }
        if label.is_empty() {
            return Err(Refusal::Invalid("a label must not be empty".into()));
        }
        check_size("label", label, LABEL_BYTES_MAX)?;
    }
    Ok(())
}

/// Refuses labels about to be set that hold a control character. Labels only removed or filtered
/// on are not judged, so a label stored before the rule can still be found and taken off.
pub(crate) fn check_new_labels<'a>(labels: impl IntoIterator<Item = &'a String>) -> Result<(), Refusal> {
    labels.into_iter().try_for_each(|label| check_identifier("label", label))
}

pub(crate) fn check_metadata<'a>(
    entries: impl IntoIterator<Item = (&'a String, Option<&'a String>)>,
) -> Result<(), Refusal> {
    for (count, (key, value)) in entries.into_iter().enumerate() {
        if count >= METADATA_KEYS_MAX {
            return Err(Refusal::Invalid(format!("more than {METADATA_KEYS_MAX} metadata keys; drop some")));
        }
        if key.is_empty() {
            return Err(Refusal::Invalid("a metadata key must not be empty".into()));
        }
        check_size("metadata key", key, METADATA_KEY_BYTES_MAX)?;
        if let Some(value) = value {
            // Only a key being set is judged, so a key stored before the rule can be removed.
            check_identifier("metadata key", key)?;
            check_size(&format!("metadata value of {key}"), value, METADATA_VALUE_BYTES_MAX)?;
        }
    }
    Ok(())
}

pub(crate) fn check_names(fields: &[(&str, &str)]) -> Result<(), Refusal> {
    fields.iter().try_for_each(|(what, value)| check_size(what, value, NAME_BYTES_MAX))
}

/// Checks a namespace name: 1..=128 bytes of letters, digits, `-`, `_`, `.`, `/` and `:`.
pub fn validate_namespace(namespace: &Namespace) -> Result<(), Refusal> {
    let name = &namespace.0;
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_./:".contains(c);
    if name.is_empty() || name.len() > NAMESPACE_BYTES_MAX || !name.chars().all(allowed) {
        return Err(Refusal::Invalid(format!(
            "namespace {name:?} is invalid; use 1 to {NAMESPACE_BYTES_MAX} letters, digits, '-', '_', '.', '/' or ':'"
        )));
    }
    Ok(())
}

/// Whether `address` is `host:port`: a non-empty host, a port from 1 to 65535, and no whitespace
/// or control character (the node's peer and client addresses, the CLI's endpoints).
pub fn is_host_port(address: &str) -> bool {
    !address.chars().any(|c| c.is_control() || c.is_whitespace())
        && address
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|port| port != 0))
}

/// Checks an id prefix: 1..=32 bytes of letters, digits and `_`, starting with a letter.
pub fn validate_prefix(prefix: &str) -> Result<(), Refusal> {
    let valid = !prefix.is_empty()
        && prefix.len() <= PREFIX_BYTES_MAX
        && prefix.starts_with(|c: char| c.is_ascii_alphabetic())
        && prefix.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(Refusal::Invalid(format!(
            "id prefix {prefix:?} is invalid; use 1 to {PREFIX_BYTES_MAX} letters, digits or '_', starting with a letter"
        )));
    }
    Ok(())
}

/// What an id may hold, in the words every refusal of an id's characters ends with.
pub const ID_CHARSET: &str =
    "an id is letters, digits, '-', '_', '.' and ':', starting with a letter or digit (for example st-12)";

/// Refuses an id a bead is to be created under (`create --id`, an imported bead) unless it is 1
/// to [`NAME_BYTES_MAX`] bytes of ASCII letters, digits, `-`, `_`, `.` and `:`, starts with a
/// letter or digit and holds no `..`: so no id is a path (`../../etc`), a transaction's `$N`,
/// or text with spaces or control characters. bd's ids (`bd-a3f8`, `st-1.2`, `gc-abc.1.3`) and
/// Gas City's stable ones (`gc-session-1`) are all of this form, whatever their prefix.
///
/// Ids a namespace assigns need no check: they are its prefix (letters, digits and `_`), or a
/// parent's, then `-` and a number. This rule is new (issue 28), with the caveat of
/// `check_identifier`: the nodes of a cluster run one build.
pub fn validate_bead_id(id: &str) -> Result<(), Refusal> {
    if id.is_empty() {
        return Err(Refusal::Invalid(format!("an id must not be empty; {ID_CHARSET}")));
    }
    if id.len() > NAME_BYTES_MAX {
        return Err(Refusal::Invalid(format!(
            "an id is at most {NAME_BYTES_MAX} bytes, and this one is {}; give a shorter one",
            id.len()
        )));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':');
    let wrong = if !id.chars().all(allowed) {
        "has characters an id cannot hold"
    } else if !id.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        "does not start with a letter or digit"
    } else if id.contains("..") {
        "holds \"..\", which an id cannot"
    } else {
        return Ok(());
    };
    Err(Refusal::Invalid(format!("id \"{}\" {wrong}; {ID_CHARSET}", printable(id))))
}

/// Checks a ready filter's strings against the limits.
pub fn validate_ready_filter(filter: &ReadyFilter) -> Result<(), Refusal> {
    check_labels(filter.labels_all.iter().chain(&filter.labels_any).chain(&filter.exclude_labels))
}

/// Checks a lease's length: [`LEASE_MS_MIN`] to [`LEASE_MS_MAX`] milliseconds.
pub fn validate_lease(lease_ms: u64) -> Result<(), Refusal> {
    if !(LEASE_MS_MIN..=LEASE_MS_MAX).contains(&lease_ms) {
        return Err(Refusal::Invalid(format!(
            "a lease of {lease_ms} ms is out of range: a lease lasts {} s to {} days",
            LEASE_MS_MIN / 1000,
            LEASE_MS_MAX / 86_400_000
        )));
    }
    Ok(())
}

/// Refuses an empty or malformed agent name for `what`.
pub(crate) fn check_actor(actor: &str, what: &str) -> Result<(), Refusal> {
    if actor.is_empty() {
        return Err(Refusal::Invalid(format!("{what} needs an agent; pass --agent or --actor, or set STRAND_ACTOR")));
    }
    check_names(&[("agent", actor)])?;
    check_identifier("agent", actor)
}

/// Refuses more routed beads than one command may hold.
pub(crate) fn check_routed(count: usize) -> Result<(), Refusal> {
    if count > ROUTED_BEADS_MAX {
        return Err(Refusal::Invalid(format!("more than {ROUTED_BEADS_MAX} beads in one command; split it")));
    }
    Ok(())
}

/// The transition refusal for a status change, naming the allowed next statuses.
pub fn invalid_transition(id: &crate::model::BeadId, from: Status, to: Status) -> Refusal {
    let allowed: Vec<&str> = from.allowed_next().iter().map(|status| status.as_str()).collect();
    Refusal::InvalidTransition { id: id.clone(), from, to, allowed: allowed.join(", ") }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::command::{Command, Txn, validate_command};
    use crate::command::{CreateBead, MailSend, Sling, UpdateBead};
    use crate::model::{BeadId, Timestamp};

    const EVIL: &str = "ev\u{1b}[2Jil";

    fn refused(result: Result<(), Refusal>) -> String {
        match result {
            Err(Refusal::Invalid(message)) => message,
            other => panic!("expected an Invalid refusal, got {other:?}"),
        }
    }

    #[test]
    fn actors_with_control_characters_are_refused_naming_the_field() {
        let claim = Command::Claim(crate::command::Claim {
            id: BeadId::from("st-1"),
            actor: Actor(EVIL.into()),
            lease_ms: None,
        });
        assert_eq!(
            refused(validate_command(&claim)),
            "actor \"ev\\u{1b}[2Jil\" has a control character; actors, labels and metadata keys are identifiers: give one without control characters"
        );
        let claim_next = Command::ClaimNext(crate::command::ClaimNext {
            actor: Actor("a\nb".into()),
            filter: ReadyFilter::default(),
            lease_ms: None,
        });
        assert!(refused(validate_command(&claim_next)).starts_with("actor \"a\\nb\" has a control character"));
        let hook = Command::HookClaim(crate::command::HookClaim {
            agent: Actor("bell\u{7}".into()),
            pool: None,
            lease_ms: None,
        });
        assert!(refused(validate_command(&hook)).starts_with("agent \"bell\\u{7}\" has a control character"));
        assert!(refused(validate_actor(&Actor("csi\u{9b}2J".into()))).starts_with("actor \"csi\\u{9b}2J\""));
        assert_eq!(
            refused(validate_actor(&Actor("rtl\u{202e}".into()))),
            "actor \"rtl\\u{202e}\" has a bidirectional override (U+202E); actors, labels and metadata keys are identifiers: give one without bidirectional overrides"
        );
        for (actor, kind) in [
            ("isolate\u{2066}", "a bidirectional override (U+2066)"),
            ("embed\u{202a}", "a bidirectional override (U+202A)"),
            ("mark\u{200f}", "a bidirectional mark (U+200F)"),
            ("line\u{2028}", "a line or paragraph separator (U+2028)"),
        ] {
            let message = refused(validate_actor(&Actor(actor.into())));
            assert!(message.contains(&format!("\" has {kind};")), "{message}");
        }
        let update = UpdateBead {
            id: BeadId::from("st-1"),
            claim_for: Some(Actor("del\u{7f}".into())),
            ..UpdateBead::default()
        };
        assert!(refused(validate_command(&Command::Update(update))).starts_with("actor \"del\\u{7f}\""));
        let assign = UpdateBead { id: BeadId::from("st-1"), assignee: Some(EVIL.into()), ..UpdateBead::default() };
        assert!(refused(validate_command(&Command::Update(assign))).starts_with("assignee \""));
        let create = CreateBead { title: "t".into(), assignee: EVIL.into(), ..CreateBead::default() };
        assert!(refused(validate_command(&Command::Create(create))).starts_with("assignee \""));
        let mail = MailSend { to: EVIL.into(), subject: "s".into(), ..MailSend::default() };
        assert!(refused(validate_command(&Command::MailSend(mail))).starts_with("recipient \""));
        let sling = Sling {
            subject: "work".into(),
            target: "pool\u{1b}".into(),
            pool: true,
            formula: None,
            vars: BTreeMap::new(),
            no_convoy: false,
            owned: false,
            merge: None,
        };
        assert!(refused(validate_command(&Command::Sling(sling))).starts_with("sling target \""));
    }

    #[test]
    fn labels_and_metadata_keys_with_control_characters_are_refused() {
        let create = CreateBead { title: "t".into(), labels: [EVIL.to_string()].into(), ..CreateBead::default() };
        assert!(refused(validate_command(&Command::Create(create))).starts_with("label \"ev\\u{1b}[2Jil\" has"));
        let create = CreateBead {
            title: "t".into(),
            metadata: [("k\ney".to_string(), "v".to_string())].into(),
            ..CreateBead::default()
        };
        assert!(refused(validate_command(&Command::Create(create))).starts_with("metadata key \"k\\ney\" has"));
        let update =
            UpdateBead { id: BeadId::from("st-1"), add_labels: ["x\ty".to_string()].into(), ..UpdateBead::default() };
        assert!(refused(validate_command(&Command::Update(update))).starts_with("label \"x\\ty\" has"));
        let set = Command::SetMetadata(crate::command::SetMetadata {
            id: BeadId::from("st-1"),
            entries: [("\u{202e}key".to_string(), Some("v".to_string()))].into(),
        });
        assert!(refused(validate_command(&set)).starts_with("metadata key \"\\u{202e}key\" has"));
    }

    #[test]
    fn text_fields_keep_control_characters_and_old_identifiers_can_be_removed() {
        let create = CreateBead {
            title: "fake\nbad-1 [closed] P0 victim @root".into(),
            description: "line\n\x1b[31mred\x07".into(),
            notes: "tab\there".into(),
            assignee: "alice".into(),
            labels: ["role:worker".to_string()].into(),
            metadata: [("gc.merge".to_string(), "a\nb".to_string())].into(),
            ..CreateBead::default()
        };
        assert_eq!(validate_command(&Command::Create(create)), Ok(()));
        let update = UpdateBead {
            id: BeadId::from("st-1"),
            remove_labels: [EVIL.to_string()].into(),
            metadata: [(EVIL.to_string(), None)].into(),
            ..UpdateBead::default()
        };
        assert_eq!(validate_command(&Command::Update(update)), Ok(()), "removing an old label or key is allowed");
        assert_eq!(validate_actor(&Actor(String::new())), Ok(()));
        assert_eq!(validate_actor(&Actor("agent-ünï 🚀".into())), Ok(()));
    }

    #[test]
    fn ids_a_bead_is_created_under_keep_to_their_charset() {
        for id in ["st-1", "st-1.2", "bd-a3f8", "gc-abc.1.3", "gc-session-1", "Rig_2:st-9", "9lives", "a", "x-"] {
            assert_eq!(validate_bead_id(id), Ok(()), "{id}");
        }
        assert_eq!(validate_bead_id(&"a".repeat(NAME_BYTES_MAX)), Ok(()), "the longest id");
        assert_eq!(
            refused(validate_bead_id("../../etc")),
            "id \"../../etc\" has characters an id cannot hold; an id is letters, digits, '-', '_', '.' and ':', starting with a letter or digit (for example st-12)"
        );
        for id in ["a/b", "gc 1", "st-1\t", "$0", "ü-1", "st-1;rm", "st-1'", "a\\b", "\"st-1\""] {
            let message = refused(validate_bead_id(id));
            assert!(message.contains("has characters an id cannot hold"), "{id:?}: {message}");
            assert!(message.ends_with(ID_CHARSET), "{id:?}: {message}");
        }
        // Control characters and bidirectional overrides are named escaped, on one line.
        assert_eq!(
            refused(validate_bead_id("st-1\n\u{1b}[2J\u{202e}")),
            format!("id \"st-1\\n\\u{{1b}}[2J\\u{{202e}}\" has characters an id cannot hold; {ID_CHARSET}")
        );
        for id in [".hidden", "-st-1", "_st", ":x"] {
            assert!(refused(validate_bead_id(id)).contains("does not start with a letter or digit"), "{id}");
        }
        for id in ["st..1", "st-1..", "a.b..c"] {
            assert!(refused(validate_bead_id(id)).contains("holds \"..\", which an id cannot"), "{id}");
        }
        assert_eq!(refused(validate_bead_id("")), format!("an id must not be empty; {ID_CHARSET}"));
        assert!(refused(validate_bead_id(&"a".repeat(NAME_BYTES_MAX + 1))).starts_with("an id is at most 256 bytes"));
    }

    #[test]
    fn a_create_under_an_id_is_refused_as_a_create_and_an_import_as_an_import() {
        let create = CreateBead { title: "t".into(), ..CreateBead::default() };
        let as_create = Command::Import(crate::command::Import {
            beads: vec![create.clone().into_bead(BeadId::from("../../etc"))],
        });
        assert_eq!(
            refused(validate_command(&as_create)),
            format!("id \"../../etc\" has characters an id cannot hold; {ID_CHARSET}"),
            "no word of an import"
        );
        let untitled = Command::Import(crate::command::Import {
            beads: vec![CreateBead::default().into_bead(BeadId::from("st-7"))],
        });
        assert_eq!(refused(validate_command(&untitled)), "title must not be empty; give the bead a title");
        let mut imported = create.clone().into_bead(BeadId::from("gc 1"));
        imported.created_at = Timestamp(5);
        assert_eq!(
            refused(validate_command(&Command::Import(crate::command::Import { beads: vec![imported] }))),
            format!("imported bead \"gc 1\": id \"gc 1\" has characters an id cannot hold; {ID_CHARSET}")
        );
        // Two beads are an import, whatever their times.
        let pair = vec![create.clone().into_bead(BeadId::from("gc-1")), create.into_bead(BeadId::from("gc/2"))];
        assert!(
            refused(validate_command(&Command::Import(crate::command::Import { beads: pair })))
                .starts_with("imported bead \"gc/2\": id")
        );
        // A transaction's creates carry no id: the namespace assigns one.
        let txn = Txn {
            writes: vec![Command::Create(CreateBead { title: "t".into(), ..CreateBead::default() })],
            ..Txn::default()
        };
        assert_eq!(validate_command(&Command::Txn(txn)), Ok(()));
    }
}
