//! The orchestration commands and reads of one namespace (docs/beads.md §7): formulas and molecules,
//! sling, hook, mail, convoys, purge and the event log.
//!
//! Each command checks everything first and only then changes beads, through the same
//! [`NamespaceState::create_bead`] and [`NamespaceState::modify`] paths as the plain commands, so
//! indexes, blocked states, events and container auto-close stay right, and a refused command
//! leaves nothing behind (a failed cook creates no bead; a sling of a 500-child convoy routes
//! all of them or none).

use std::collections::{BTreeMap, BTreeSet};

use super::{BeadRef, NamespaceState, StoredFormula};
use crate::formula::Formula;
use crate::input::{Cook, CreateBead, FormulaSource, MailSend, ReadyFilter, Sling};
use crate::limits::{
    DESCRIPTION_BYTES_MAX, EVENTS_PER_QUERY_MAX, FORMULAS_PER_NAMESPACE_MAX, LABELS_MAX, LIST_RESULTS_MAX,
    MAIL_SUBJECT_CHARS_MAX, METADATA_KEYS_MAX, PURGE_BEADS_MAX, ROUTED_BEADS_MAX, TITLE_BYTES_MAX,
};
use crate::model::{
    Actor, Bead, BeadId, CONVOY_TYPE, LABEL_MESSAGE, LABEL_OWNED, LABEL_READ, MERGE_KEY, MESSAGE_TYPE, MOLECULE_TYPE,
    POOL_LABEL_PREFIX, REPLY_TO_LABEL_PREFIX, ROUTED_TO_KEY, Status, THREAD_LABEL_PREFIX, Timestamp, event_type,
    is_container_type,
};
use crate::outcome::{FormulaInfo, Outcome, Progress, Refusal};
use crate::state::index::{CreatedKey, ReadyKey};

fn invalid(message: String) -> Refusal {
    Refusal::Invalid(message)
}

/// The effective cap of a list answer: `limit`, or everything up to [`LIST_RESULTS_MAX`].
fn cap(limit: u32) -> usize {
    if limit == 0 { LIST_RESULTS_MAX } else { (limit as usize).min(LIST_RESULTS_MAX) }
}

/// `text` cut to at most `bytes_max` bytes, on a character boundary.
fn truncated(text: &str, bytes_max: usize) -> String {
    let mut end = text.len().min(bytes_max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// A message's title: its subject, or the body's first non-blank line cut to 80 characters.
fn message_title(subject: &str, body: &str) -> String {
    let first_line = || body.lines().find(|line| !line.trim().is_empty()).unwrap_or_default();
    let source = if subject.trim().is_empty() { first_line() } else { subject };
    source.trim().chars().take(MAIL_SUBJECT_CHARS_MAX).collect()
}

impl NamespaceState {
    // ---- formulas and molecules ----

    fn formula_of(&self, source: &FormulaSource) -> Result<Formula, Refusal> {
        match source {
            FormulaSource::Inline(text) => Formula::parse(text),
            FormulaSource::Named(name) => {
                let stored = self.formulas.get(name).ok_or_else(|| {
                    invalid(format!("formula {name:?} not found; store it with `strand formula put FILE`"))
                })?;
                stored.parsed.clone()
            }
        }
    }

    /// Stores a formula under its own name, replacing an older one.
    pub(crate) fn formula_put(&mut self, source: &str) -> Result<Outcome, Refusal> {
        let formula = Formula::parse(source)?;
        let name = formula.formula.clone();
        if !self.formulas.contains_key(&name) && self.formulas.len() >= FORMULAS_PER_NAMESPACE_MAX {
            return Err(invalid(format!("namespace holds {FORMULAS_PER_NAMESPACE_MAX} formulas; delete some first")));
        }
        let info = formula_info(&formula, source);
        self.formulas.insert(name.clone(), StoredFormula { source: source.to_string(), parsed: Ok(formula) });
        self.dirty_formulas.insert(name);
        Ok(Outcome::Formulas(vec![info]))
    }

    /// Removes a stored formula.
    pub(crate) fn formula_delete(&mut self, name: &str) -> Result<Outcome, Refusal> {
        if self.formulas.remove(name).is_none() {
            return Err(invalid(format!("formula {name:?} not found; see `strand formula list`")));
        }
        self.dirty_formulas.insert(name.to_string());
        Ok(Outcome::Done)
    }

    /// A stored formula with its source.
    pub fn formula_get(&self, name: &str) -> Result<Outcome, Refusal> {
        let formula = self.formula_of(&FormulaSource::Named(name.to_string()))?;
        Ok(Outcome::Formulas(vec![formula_info(&formula, &self.formulas[name].source)]))
    }

    /// Every stored formula, by name, without sources.
    pub fn formula_list(&self) -> Outcome {
        let infos = self
            .formulas
            .values()
            .filter_map(|stored| stored.parsed.as_ref().ok())
            .map(|formula| formula_info(formula, ""))
            .collect();
        Outcome::Formulas(infos)
    }

    /// Cooks a formula: the root and one child per step, in this one command.
    pub(crate) fn mol_cook(&mut self, cook: &Cook, now: Timestamp) -> Result<Outcome, Refusal> {
        Ok(Outcome::Beads(self.cook_beads(cook, &BTreeMap::new(), now)?))
    }

    /// Cooks and returns the root followed by its steps; `metadata` goes on the root.
    pub(in crate::state) fn cook_beads(
        &mut self,
        cook: &Cook,
        metadata: &BTreeMap<String, String>,
        now: Timestamp,
    ) -> Result<Vec<Bead>, Refusal> {
        let formula = self.formula_of(&cook.formula)?;
        let steps = formula.render(&cook.vars)?;
        let title = cook.title.clone().filter(|title| !title.trim().is_empty()).unwrap_or(formula.formula.clone());
        let too_large = |what: String, size: usize, limit: usize| Refusal::TooLarge { what, size, limit };
        if formula.description.len() > DESCRIPTION_BYTES_MAX {
            let what = format!("formula {}'s description", formula.formula);
            return Err(too_large(what, formula.description.len(), DESCRIPTION_BYTES_MAX));
        }
        if title.len() > TITLE_BYTES_MAX {
            return Err(too_large("the molecule's title".into(), title.len(), TITLE_BYTES_MAX));
        }
        // Everything is checked; from here on every create succeeds.
        let root = self.create_bead(
            &CreateBead {
                title,
                description: formula.description.clone(),
                bead_type: MOLECULE_TYPE.into(),
                reference: formula.formula.clone(),
                metadata: metadata.clone(),
                ephemeral: cook.ephemeral,
                ..Default::default()
            },
            now,
        )?;
        let mut beads = vec![root.clone()];
        for step in steps {
            let needs = step.needs.iter().map(|&position| beads[position + 1].id.0.clone()).collect();
            let child = self.create_bead(
                &CreateBead {
                    title: step.title,
                    description: step.description,
                    bead_type: "task".into(),
                    parent_id: Some(root.id.clone()),
                    reference: step.id,
                    needs,
                    ephemeral: cook.ephemeral,
                    ..Default::default()
                },
                now,
            )?;
            beads.push(child);
        }
        Ok(beads)
    }

    /// A container's progress; `kind` is the type it must have.
    pub fn progress(&self, root_id: &BeadId, kind: &str) -> Result<Outcome, Refusal> {
        let root = self.bead(root_id)?;
        if root.bead_type != kind {
            return Err(invalid(format!("bead {root_id} is a {}, not a {kind}", root.bead_type)));
        }
        // In creation order, as `children_of` answers.
        let children: Vec<Bead> = self.children_of(root_id).iter().map(|id| self.beads.at(id).clone()).collect();
        let is_closed = |bead_id: &BeadId| self.beads.status(bead_id).is_none_or(|status| status == Status::Closed);
        let current = children
            .iter()
            .find(|child| child.status != Status::Closed && child.needs().iter().all(is_closed))
            .map(|child| child.id.clone());
        Ok(Outcome::Progress(Box::new(Progress { root: root.clone(), children, current })))
    }

    // ---- sling ----

    /// Resolves a sling subject: an existing bead, an unknown id (refused), or a title (`None`).
    fn sling_subject(&self, subject: &str) -> Result<Option<BeadId>, Refusal> {
        let bead_id = BeadId(subject.to_string());
        if self.beads.contains_key(&bead_id) {
            return Ok(Some(bead_id));
        }
        let looks_like_id = !subject.contains(char::is_whitespace)
            && subject.rsplit_once('-').is_some_and(|(prefix, n)| {
                !prefix.is_empty() && !n.is_empty() && n.chars().all(|c| c.is_ascii_digit())
            });
        if looks_like_id {
            return Err(Refusal::NotFound(bead_id));
        }
        Ok(None)
    }

    /// Checks that a bead may be routed to `sling.target`.
    fn check_routable(&self, bead_id: &BeadId, sling: &Sling) -> Result<(), Refusal> {
        let bead = self.bead(bead_id)?;
        if bead.status == Status::Closed {
            return Err(invalid(format!("bead {bead_id} is closed; reopen it before slinging it")));
        }
        let held_by_other =
            bead.status == Status::InProgress && !bead.assignee.is_empty() && bead.assignee != sling.target;
        if held_by_other && !sling.pool {
            return Err(Refusal::AlreadyClaimed { id: bead_id.clone(), holder: bead.assignee.clone() });
        }
        // What `route` will leave: one pool label in place of any others, and up to two keys.
        let labels_after = if sling.pool {
            bead.labels.iter().filter(|label| !label.starts_with(POOL_LABEL_PREFIX)).count() + 1
        } else {
            bead.labels.len()
        };
        let new_keys = [(sling.pool, ROUTED_TO_KEY), (sling.merge.is_some(), MERGE_KEY)];
        let keys_after = bead.metadata.len()
            + new_keys.iter().filter(|(set, key)| *set && !bead.metadata.contains_key(*key)).count();
        if labels_after > LABELS_MAX || keys_after > METADATA_KEYS_MAX {
            return Err(invalid(format!(
                "bead {bead_id} has too many labels or metadata keys to be routed; remove some first"
            )));
        }
        Ok(())
    }

    pub(in crate::state) fn route(&mut self, bead_id: &BeadId, sling: &Sling, now: Timestamp) -> Result<Bead, Refusal> {
        self.modify_and_read(bead_id, now, |bead| {
            if sling.pool {
                // A bead is routed to one pool: re-slinging moves it.
                bead.labels.retain(|label| !label.starts_with(POOL_LABEL_PREFIX));
                bead.labels.insert(format!("{POOL_LABEL_PREFIX}{}", sling.target));
                bead.metadata.insert(ROUTED_TO_KEY.into(), sling.target.clone());
            } else {
                bead.assignee = sling.target.clone();
            }
            if let Some(merge) = &sling.merge {
                bead.metadata.insert(MERGE_KEY.into(), merge.clone());
            }
        })
    }

    /// Routes work (docs/beads.md §7 sling), all in this one command.
    pub(crate) fn sling(&mut self, sling: &Sling, now: Timestamp) -> Result<Outcome, Refusal> {
        let subject = self.sling_subject(&sling.subject)?;
        if let Some(container_id) = subject.as_ref().filter(|id| is_container_type(&self.beads.at(id).bead_type)) {
            if sling.formula.is_some() {
                return Err(invalid(format!("{container_id} is a container; sling its children without --formula")));
            }
            return self.sling_container(container_id, sling, now);
        }
        if let Some(bead_id) = &subject {
            self.check_routable(bead_id, sling)?;
        }
        let mut beads = Vec::new();
        let work_id = match &sling.formula {
            Some(formula) => {
                let title = match &subject {
                    Some(bead_id) => self.beads.at(bead_id).title.clone(),
                    None => sling.subject.clone(),
                };
                let mut vars = sling.vars.clone();
                vars.entry("title".into()).or_insert(title.clone());
                if let Some(bead_id) = &subject {
                    vars.entry("issue".into()).or_insert(bead_id.0.clone());
                }
                let metadata: BTreeMap<String, String> =
                    subject.iter().map(|bead_id| ("gc.source_bead".to_string(), bead_id.0.clone())).collect();
                let cook = Cook { formula: formula.clone(), title: Some(title), vars, ephemeral: true };
                let cooked = self.cook_beads(&cook, &metadata, now)?;
                // The steps are routed with the root, so the agent's (or pool's) hook finds the
                // wisp's ready steps: the root itself is a molecule, which is never ready work.
                for step in &cooked[1..] {
                    beads.push(self.route(&step.id, sling, now)?);
                }
                cooked[0].id.clone()
            }
            None => match subject {
                Some(bead_id) => bead_id,
                None => self.create_bead(&CreateBead { title: sling.subject.clone(), ..Default::default() }, now)?.id,
            },
        };
        let routed = self.route(&work_id, sling, now)?;
        let mut answer = vec![routed.clone()];
        if !sling.no_convoy && routed.parent_id.is_none() {
            let labels: BTreeSet<String> = sling.owned.then(|| LABEL_OWNED.to_string()).into_iter().collect();
            let convoy = CreateBead {
                title: truncated(&format!("sling: {}", routed.title), TITLE_BYTES_MAX),
                bead_type: CONVOY_TYPE.into(),
                labels,
                ..Default::default()
            };
            let convoy = self.create_bead(&convoy, now)?;
            let routed = self.modify_and_read(&work_id, now, |bead| {
                bead.parent_id = Some(convoy.id.clone());
            })?;
            answer = vec![routed, self.beads.at(&convoy.id).clone()];
        }
        answer.extend(beads);
        Ok(Outcome::Beads(answer))
    }

    /// Routes every open child of a convoy or epic (children in progress, closed or otherwise
    /// not open are left where they are), and creates no convoy.
    fn sling_container(&mut self, container_id: &BeadId, sling: &Sling, now: Timestamp) -> Result<Outcome, Refusal> {
        let mut children = self.children_of(container_id);
        children.retain(|child| self.beads.status(child) == Some(Status::Open));
        children.sort_by_key(|child| self.beads.at(child).seq);
        if children.len() > ROUTED_BEADS_MAX {
            return Err(invalid(format!("{container_id} has more than {ROUTED_BEADS_MAX} open children; split it")));
        }
        for child in &children {
            self.check_routable(child, sling)?;
        }
        let routed = children.iter().map(|child| self.route(child, sling, now)).collect::<Result<_, _>>()?;
        Ok(Outcome::Beads(routed))
    }

    // ---- hook ----

    /// The agent's in-progress beads, oldest first.
    fn working_ids(&self, agent: &str) -> Vec<BeadId> {
        self.indexes.working.get(agent).map(|set| set.iter().map(|key| (*key.id).clone()).collect()).unwrap_or_default()
    }

    /// Ready beads for the agent: assigned to it, then unassigned ones routed to its pool.
    fn hook_ready(
        &self,
        agent: &str,
        pool: Option<&str>,
        limit: usize,
        now: Timestamp,
    ) -> Result<Vec<BeadId>, Refusal> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        // Wisps count: a slung formula's steps are ephemeral.
        let assigned = ReadyFilter {
            assignee: Some(agent.to_string()),
            include_ephemeral: true,
            limit: limit as u32,
            ..Default::default()
        };
        let mut ids = self.ready_ids(&assigned, now, |_| true)?;
        if let Some(pool) = pool
            && ids.len() < limit
        {
            let indexes = [&self.indexes.ready, &self.indexes.ready_ephemeral];
            let mut pooled: Vec<&ReadyKey> = indexes
                .iter()
                .flat_map(|index| {
                    index
                        .by_pool
                        .get(pool)
                        .into_iter()
                        .flatten()
                        .filter(|key| {
                            let bead = self.beads.at(&key.created.id);
                            bead.assignee.is_empty() && bead.defer_until.is_none_or(|until| until <= now)
                        })
                        .take(limit)
                })
                .collect();
            pooled.sort();
            ids.extend(pooled.into_iter().take(limit - ids.len()).map(|key| (*key.created.id).clone()));
        }
        Ok(ids)
    }

    /// The work query of docs/beads.md §7, without claiming.
    pub(crate) fn hook(&self, agent: &str, pool: Option<&str>, limit: u32, now: Timestamp) -> Result<Outcome, Refusal> {
        // A query is not validated on its way in as commands are; an empty assignee means
        // "unassigned", not an agent.
        crate::validate::check_actor(agent, "hook")?;
        let limit = cap(limit);
        let mut ids = self.working_ids(agent);
        ids.truncate(limit);
        let ready = self.hook_ready(agent, pool, limit - ids.len(), now)?;
        ids.extend(ready);
        Ok(Outcome::Beads(ids.iter().map(|bead_id| self.beads.at(bead_id).clone()).collect()))
    }

    /// The work query with `--claim`: the agent's own in-progress bead, else the first ready bead
    /// it can take, claimed in this command. An empty answer when there is no work.
    pub(crate) fn hook_claim(
        &mut self,
        agent: &Actor,
        pool: Option<&str>,
        lease_ms: Option<u64>,
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        if let Some(bead_id) = self.working_ids(&agent.0).first() {
            return Ok(Outcome::Beads(vec![self.beads.at(bead_id).clone()]));
        }
        let Some(bead_id) = self.hook_ready(&agent.0, pool, 1, now)?.into_iter().next() else {
            return Ok(Outcome::Beads(Vec::new()));
        };
        match self.take_claim(&bead_id, agent, lease_ms, now)? {
            Outcome::Bead(bead) => Ok(Outcome::Beads(vec![*bead])),
            other => unreachable!("take_claim answers with a bead, not {other:?}"),
        }
    }

    // ---- mail ----

    fn message(&self, bead_id: &BeadId) -> Result<BeadRef<'_>, Refusal> {
        let bead = self.bead(bead_id)?;
        if bead.bead_type != MESSAGE_TYPE {
            return Err(invalid(format!("bead {bead_id} is a {}, not a message", bead.bead_type)));
        }
        Ok(bead)
    }

    /// Sends a message from `sender`; a reply goes to the original's sender, in its thread.
    pub(crate) fn mail_send(&mut self, mail: &MailSend, sender: &Actor, now: Timestamp) -> Result<Outcome, Refusal> {
        if sender.0.trim().is_empty() {
            return Err(invalid("a message needs a sender; pass --actor NAME or set STRAND_ACTOR".into()));
        }
        let own_id = self.peek_next_id(None);
        let (recipient, thread, reply_label) = match &mail.reply_to {
            Some(original_id) => {
                let original = self.message(original_id)?;
                let thread = original
                    .labels
                    .iter()
                    .find_map(|label| label.strip_prefix(THREAD_LABEL_PREFIX))
                    .unwrap_or(&original.id.0)
                    .to_string();
                if original.from.is_empty() {
                    return Err(invalid(format!("message {original_id} has no sender to reply to")));
                }
                (original.from.clone(), thread, Some(format!("{REPLY_TO_LABEL_PREFIX}{original_id}")))
            }
            None => (mail.to.clone(), own_id.0.clone(), None),
        };
        if recipient.is_empty() {
            return Err(invalid("a message needs a recipient; pass --to AGENT".into()));
        }
        let title = message_title(&mail.subject, &mail.body);
        if title.is_empty() {
            return Err(invalid("a message needs a subject or a body".into()));
        }
        let mut labels: BTreeSet<String> = [LABEL_MESSAGE.to_string(), format!("{THREAD_LABEL_PREFIX}{thread}")].into();
        labels.extend(reply_label);
        let create = CreateBead {
            title,
            description: mail.body.clone(),
            bead_type: MESSAGE_TYPE.into(),
            assignee: recipient,
            from: sender.0.clone(),
            labels,
            ..Default::default()
        };
        let bead = self.create_bead(&create, now)?;
        debug_assert_eq!(bead.id, own_id, "the peeked id is the id the message got");
        self.emit(event_type::MAIL_SENT, &bead.id, bead.title.clone());
        Ok(Outcome::Bead(Box::new(bead)))
    }

    /// Marks a message read or unread.
    pub(crate) fn mail_mark(&mut self, bead_id: &BeadId, read: bool, now: Timestamp) -> Result<Outcome, Refusal> {
        let was_read = self.message(bead_id)?.labels.contains(LABEL_READ);
        let bead = self.modify_and_read(bead_id, now, |bead| {
            if read {
                bead.labels.insert(LABEL_READ.into());
            } else {
                bead.labels.remove(LABEL_READ);
            }
        })?;
        if read && !was_read {
            self.emit(event_type::MAIL_READ, bead_id, bead.title.clone());
        }
        Ok(Outcome::Bead(Box::new(bead)))
    }

    /// Archives (closes) a message; an archived message cannot be archived again.
    pub(crate) fn mail_archive(&mut self, bead_id: &BeadId, now: Timestamp) -> Result<Outcome, Refusal> {
        if self.message(bead_id)?.status == Status::Closed {
            return Err(invalid(format!("message {bead_id} is already archived")));
        }
        let bead = self.close_one(bead_id, Some("archived".into()), now)?;
        self.emit(event_type::MAIL_ARCHIVED, bead_id, bead.title.clone());
        Ok(Outcome::Bead(Box::new(bead)))
    }

    /// Open messages for a recipient, newest first (an index walk).
    pub(crate) fn inbox(&self, recipient: &str, include_read: bool, limit: u32) -> Result<Outcome, Refusal> {
        let index = if include_read { &self.indexes.mail } else { &self.indexes.unread };
        let beads = index
            .get(recipient)
            .into_iter()
            .flat_map(|set| set.iter().rev())
            .take(cap(limit))
            .map(|key| self.beads.at(&key.id).clone())
            .collect();
        Ok(Outcome::Beads(beads))
    }

    /// Every message of a thread, oldest first.
    pub fn thread(&self, thread: &str) -> Result<Outcome, Refusal> {
        let label = format!("{THREAD_LABEL_PREFIX}{thread}");
        let source = super::query::Source {
            held: self.indexes.by_label.get(&label),
            cold: Some(crate::state::closed_index::Listing::Label(&label)),
        };
        let beads = self
            .source_keys(source, crate::input::ListSort::CreatedAsc, None)
            .take(LIST_RESULTS_MAX)
            .map(|key| self.beads.at(&key.id).into_owned())
            .collect();
        Ok(Outcome::Beads(beads))
    }

    // ---- convoys ----

    fn convoy(&self, bead_id: &BeadId) -> Result<BeadRef<'_>, Refusal> {
        let bead = self.bead(bead_id)?;
        if bead.bead_type != CONVOY_TYPE {
            return Err(invalid(format!("bead {bead_id} is a {}, not a convoy", bead.bead_type)));
        }
        Ok(bead)
    }

    /// Checks that every bead exists and may become a child of `convoy_id`.
    fn check_trackable(&self, convoy_id: Option<&BeadId>, children: &[BeadId]) -> Result<(), Refusal> {
        for child in children {
            let bead = self.bead(child)?;
            if let Some(parent_id) = bead.parent_id.as_ref().filter(|parent_id| Some(*parent_id) != convoy_id) {
                // Moving it would silently take it out of a molecule, epic or other convoy.
                return Err(invalid(format!(
                    "{child} already belongs to {parent_id}; a bead is tracked by one parent (clear it with \
                     `strand update {child} --parent \"\"` first)"
                )));
            }
            if let Some(convoy_id) = convoy_id
                && self.would_cycle(child, convoy_id)
            {
                return Err(invalid(format!("{convoy_id} cannot track {child}: it would form a cycle")));
            }
        }
        Ok(())
    }

    fn adopt(&mut self, convoy_id: &BeadId, children: &[BeadId], now: Timestamp) -> Result<(), Refusal> {
        for child in children {
            self.modify(child, now, |bead| bead.parent_id = Some(convoy_id.clone()))?;
        }
        Ok(())
    }

    /// Creates a convoy tracking `children`.
    pub(crate) fn convoy_create(
        &mut self,
        title: &str,
        children: &[BeadId],
        owned: bool,
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        self.check_trackable(None, children)?;
        let labels = owned.then(|| LABEL_OWNED.to_string()).into_iter().collect();
        let create = CreateBead { title: title.into(), bead_type: CONVOY_TYPE.into(), labels, ..Default::default() };
        let convoy = self.create_bead(&create, now)?;
        self.adopt(&convoy.id, children, now)?;
        Ok(Outcome::Bead(Box::new(self.beads.at(&convoy.id).clone())))
    }

    /// Adds beads to an open convoy.
    pub(crate) fn convoy_add(
        &mut self,
        convoy_id: &BeadId,
        children: &[BeadId],
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        if self.convoy(convoy_id)?.status == Status::Closed {
            return Err(invalid(format!("convoy {convoy_id} is closed; reopen it before adding to it")));
        }
        self.check_trackable(Some(convoy_id), children)?;
        self.adopt(convoy_id, children, now)?;
        Ok(Outcome::Bead(Box::new(self.beads.at(convoy_id).clone())))
    }

    /// Force-closes a convoy (landing an already closed convoy changes nothing).
    pub(crate) fn convoy_land(
        &mut self,
        convoy_id: &BeadId,
        reason: &Option<String>,
        now: Timestamp,
    ) -> Result<Outcome, Refusal> {
        self.convoy(convoy_id)?;
        let reason = Some(reason.clone().unwrap_or_else(|| "landed".into()));
        Ok(Outcome::Bead(Box::new(self.close_one(convoy_id, reason, now)?)))
    }

    fn open_convoys(&self) -> Vec<BeadId> {
        let convoys = self.indexes.by_type.get(CONVOY_TYPE).into_iter().flatten();
        convoys.filter(|key| self.beads.status(&key.id) != Some(Status::Closed)).map(|key| (*key.id).clone()).collect()
    }

    /// Closes every open, not-owned convoy whose children are all closed; answers those closed.
    pub(crate) fn convoy_check(&mut self, now: Timestamp) -> Result<Outcome, Refusal> {
        let mut closed = Vec::new();
        for convoy_id in self.open_convoys() {
            if self.close_container_if_done(&convoy_id, now)? {
                closed.push(self.beads.at(&convoy_id).clone());
            }
        }
        Ok(Outcome::Beads(closed))
    }

    /// Whether an open, not-owned convoy has children and all of them are closed (what
    /// `convoy_check` would close).
    pub(in crate::state) fn has_closable_convoy(&self) -> bool {
        self.open_convoys().iter().any(|convoy_id| self.container_done(convoy_id))
    }

    /// Open children with no assignee, of one convoy or of every open convoy.
    pub fn stranded(&self, convoy_id: Option<&BeadId>) -> Result<Outcome, Refusal> {
        let convoys = match convoy_id {
            Some(convoy_id) => vec![self.convoy(convoy_id)?.id.clone()],
            None => self.open_convoys(),
        };
        let mut stranded = Vec::new();
        for convoy_id in convoys {
            // In creation order, as `children_of` answers; a closed child is never read.
            let open =
                self.children_of(&convoy_id).into_iter().filter(|id| self.beads.status(id) != Some(Status::Closed));
            let children = open.map(|id| self.beads.at(&id).into_owned()).filter(|child| child.assignee.is_empty());
            stranded.extend(children.take(LIST_RESULTS_MAX - stranded.len()));
        }
        Ok(Outcome::Beads(stranded))
    }

    // ---- purge ----

    /// Closed wisps closed at least `older_than_ms` before `now`, newest created first (so
    /// children go before their parents), at most [`PURGE_BEADS_MAX`].
    fn purgeable(&self, older_than_ms: i64, now: Timestamp) -> Vec<BeadId> {
        // The close-time order finds the old enough ones without walking the recent ones; which
        // of them go, and in what order, is by creation as before (every replica must agree).
        let cutoff = now.0.saturating_sub(older_than_ms);
        let old_enough = self.indexes.closed_ephemeral.iter().take_while(|(closed_at, _)| *closed_at <= cutoff);
        let mut doomed: Vec<&CreatedKey> = old_enough.map(|(_, key)| key).collect();
        let newest_first = |a: &&CreatedKey, b: &&CreatedKey| b.cmp(a);
        if doomed.len() > PURGE_BEADS_MAX {
            doomed.select_nth_unstable_by(PURGE_BEADS_MAX, newest_first);
            doomed.truncate(PURGE_BEADS_MAX);
        }
        doomed.sort_unstable_by(newest_first);
        doomed.into_iter().map(|key| (*key.id).clone()).collect()
    }

    /// Whether a closed wisp was closed at least `older_than_ms` before `now`.
    pub(in crate::state) fn has_purgeable(&self, older_than_ms: i64, now: Timestamp) -> bool {
        let cutoff = now.0.saturating_sub(older_than_ms);
        self.indexes.closed_ephemeral.first().is_some_and(|(closed_at, _)| *closed_at <= cutoff)
    }

    /// What `purge` would remove now.
    pub(crate) fn purge_preview(&self, older_than_ms: i64, now: Timestamp) -> Outcome {
        Outcome::Purged { purged_count: self.purgeable(older_than_ms, now).len() as u64 }
    }

    /// Removes closed wisps.
    pub(crate) fn purge(&mut self, older_than_ms: i64, now: Timestamp) -> Result<Outcome, Refusal> {
        let doomed = self.purgeable(older_than_ms, now);
        for bead_id in &doomed {
            self.remove(bead_id, now)?;
        }
        Ok(Outcome::Purged { purged_count: doomed.len() as u64 })
    }

    // ---- events ----

    /// Events after `after`, oldest first; a compacted range is refused (as etcd does).
    pub(crate) fn events_after(&self, after: u64, types: &[String], limit: u32) -> Result<Outcome, Refusal> {
        // 0 asks for everything still kept; any other position must not have been compacted.
        if after != 0 && after < self.meta.compacted_through {
            return Err(Refusal::Compacted { requested: after, compacted: self.meta.compacted_through });
        }
        let after = after.max(self.meta.compacted_through);
        let limit = if limit == 0 { EVENTS_PER_QUERY_MAX } else { limit.min(EVENTS_PER_QUERY_MAX) } as usize;
        let events = self
            .events
            .range(after.saturating_add(1)..)
            .map(|(_, event)| event)
            .filter(|event| types.is_empty() || types.contains(&event.event_type))
            .take(limit)
            .cloned()
            .collect();
        Ok(Outcome::Events { events, last_seq: self.meta.last_event_seq() })
    }
}

fn formula_info(formula: &Formula, source: &str) -> FormulaInfo {
    FormulaInfo {
        name: formula.formula.clone(),
        description: formula.description.clone(),
        steps: formula.steps.len() as u64,
        source: source.to_string(),
    }
}
