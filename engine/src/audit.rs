//! The audit: every receipt checked against the database and the journal. The store checks the
//! receipt chain and the messages (`SessionStore::audit`); [`audit`] adds the journal's side
//! (each receipt's intent committed with its event, each event with its receipt, and both saying
//! what the receipt says) and gives the whole [`AuditReport`].
//!
//! Source: docs/ARCHITECTURE.md, "Audit".

use std::collections::{HashMap, HashSet};

use pruning_journal::{CommittedEvent, Intent, IntentState, Journal, Selection};
use serde::Serialize;
use uuid::Uuid;

use crate::error::EngineError;
use crate::receipt::Receipt;
use crate::store::SessionStore;

/// Which receipts, messages and events an audit checks (the receipt chain is always walked
/// whole).
#[derive(Debug, Clone, Copy)]
pub enum AuditScope<'a> {
    /// Every session's.
    All,
    /// One session's.
    Session(&'a str),
    /// These sessions' (a server's workspace).
    Sessions(&'a HashSet<String>),
}

impl AuditScope<'_> {
    /// Whether session `session_id` is in scope.
    pub fn admits(&self, session_id: &str) -> bool {
        match self {
            AuditScope::All => true,
            AuditScope::Session(id) => *id == session_id,
            AuditScope::Sessions(ids) => ids.contains(session_id),
        }
    }
}

/// Journal events read per page while auditing.
const EVENT_PAGE: usize = 4096;

/// What kind of thing does not hold. Serialized in snake_case (`receipt_edited`, ...).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DiscrepancyKind {
    /// A receipt's columns no longer hash to its place in the receipt chain: it was edited.
    ReceiptEdited,
    /// The receipt chain has a hole, or its head names a receipt that is gone: a receipt was
    /// deleted.
    ReceiptMissing,
    /// A receipt row has no place in the chain: it was inserted behind the engine's back.
    ReceiptUnchained,
    /// A receipt row cannot be read as a receipt (a column of the wrong type or shape).
    ReceiptUnreadable,
    /// A receipt whose intent the journal does not hold as committed.
    ReceiptNotJournaled,
    /// A receipt whose committed event is gone from the journal (not removed by retention).
    EventMissing,
    /// The journal's intent or event of a receipt says something else than the receipt (another
    /// session, message, request, revision, selection, count or time): one of them was edited.
    JournalMismatch,
    /// A journaled event whose receipt is not in the database.
    EventWithoutReceipt,
    /// A part a receipt removed is in the `part` table again.
    PartBack,
    /// A snapshot event of a part a receipt removed is in the `event` table again.
    SnapshotBack,
    /// An item a receipt removed is in a V2 message's content again.
    ContentBack,
    /// An archived receipt's entry is not in the prune archive (and was not purged): the
    /// archive file was deleted, replaced, or cut.
    ArchiveMissing,
    /// An archived receipt's entry does not read back to its entry hash, or it is not among the
    /// frames that read while a part of the file does not: the archive was damaged.
    ArchiveDamaged,
    /// A receipt contradicts itself: the part ids it names against its indexes, its count of
    /// what it removed and its bytes ([`Receipt::contradiction`]).
    ReceiptInconsistent,
    /// SQLite's integrity check finds the database file damaged (damaged pages, a broken
    /// freelist, an index out of step with its table): no write runs on it, and what a prune
    /// removed through a damaged index may have missed rows.
    DatabaseDamaged,
}

/// One thing that does not hold, with the ids it concerns and a sentence for people.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Discrepancy {
    /// What kind.
    pub kind: DiscrepancyKind,
    /// The receipt concerned, if one is.
    #[serde(rename = "receiptID", skip_serializing_if = "Option::is_none")]
    pub receipt_id: Option<String>,
    /// The journal sequence number concerned, if one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The part concerned, if one is.
    #[serde(rename = "partID", skip_serializing_if = "Option::is_none")]
    pub part_id: Option<String>,
    /// What does not hold, in words.
    pub detail: String,
}

impl Discrepancy {
    /// A discrepancy of `kind` described by `detail`, concerning nothing in particular yet.
    pub fn new(kind: DiscrepancyKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            receipt_id: None,
            seq: None,
            part_id: None,
            detail: detail.into(),
        }
    }

    /// The same, concerning receipt `id`.
    pub fn receipt(mut self, id: impl ToString) -> Self {
        self.receipt_id = Some(id.to_string());
        self
    }

    /// The same, concerning journal sequence number `seq`.
    pub fn at_seq(mut self, seq: u64) -> Self {
        self.seq = Some(seq);
        self
    }

    /// The same, concerning part `id`.
    pub fn part(mut self, id: impl Into<String>) -> Self {
        self.part_id = Some(id.into());
        self
    }
}

/// How a pruned message changed since its newest receipt. Serialized in snake_case.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChangeKind {
    /// Its content revision is not the receipt's revision after: it was written since (OpenCode
    /// continued or edited the message).
    Written,
    /// The message is gone (OpenCode deleted it, or its session).
    Deleted,
    /// The message cannot be read as prunable content any more (too large, not JSON, ...).
    Unreadable,
}

/// A pruned message that changed since its newest receipt: not a discrepancy (OpenCode owns its
/// messages), but reported so that the audit says why the revision no longer matches.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageChange {
    /// How it changed.
    pub change: ChangeKind,
    /// The message's newest receipt.
    #[serde(rename = "receiptID")]
    pub receipt_id: Uuid,
    /// Session id.
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// Message id.
    #[serde(rename = "messageID")]
    pub message_id: String,
    /// What changed, in words.
    pub detail: String,
}

/// A prune that committed (its receipt is in the database) while its intent is still pending in
/// the journal: the process stopped before its commit mark was durable. Not a discrepancy: the
/// next open of the journal for writing (any command that prunes) journals its event, with the
/// sequence number it was announced with (docs/ARCHITECTURE.md, "Recovery").
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitingRecovery {
    /// The receipt.
    #[serde(rename = "receiptID")]
    pub receipt_id: Uuid,
    /// Its pending intent.
    #[serde(rename = "intentID")]
    pub intent_id: Uuid,
    /// The same, in words.
    pub detail: String,
}

/// What a store found: the receipts in scope, the chain, and the discrepancies and changes of
/// its own side (chain, rows, messages).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreAudit {
    /// The receipts checked (those in scope), oldest first.
    pub receipts: Vec<Receipt>,
    /// Ids of every receipt in the database, of any session (to check events against).
    pub all_receipt_ids: HashSet<Uuid>,
    /// Each readable receipt's place among all receipts in the order they were written (1 for
    /// the first): which journal epoch made it (docs/ARCHITECTURE.md, "Journal epochs").
    pub places: HashMap<Uuid, u64>,
    /// Receipts in the chain.
    pub chain_length: u64,
    /// The newest chain hash (64 lowercase hex), when the chain has a receipt.
    pub chain_head: Option<String>,
    /// What does not hold.
    pub discrepancies: Vec<Discrepancy>,
    /// Messages changed since their newest receipt.
    pub changes: Vec<MessageChange>,
    /// Distinct messages checked.
    pub messages: u64,
    /// Archive entries of receipts in scope read back and hashed.
    pub archive_checked: u64,
    /// Receipts in scope whose archive entry was purged on purpose (`archive purge`).
    pub archive_purged: u64,
    /// Parts in scope that name a spill file the spill folder does not hold.
    pub missing_spill_files: Vec<MissingSpillFile>,
}

/// A part (V1 `part` row or V2 `session_message` row) whose tool output names a spill file
/// (`tool-output/tool_...`) that is not in the spill folder beside the database. Not a
/// discrepancy: OpenCode removes spill files after 7 days; a part `restore` put back after a
/// clean with `--include-spill-files` removed its file is one too.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingSpillFile {
    /// The session.
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// The `part` row's id (or the V2 `session_message` row's).
    #[serde(rename = "partID")]
    pub part_id: String,
    /// The spill file's name (`tool_...`).
    pub file: String,
}

/// The audit's answer. JSON: `{ok, receipts, events, messages, chain:{length, head}, archive:
/// {checked, purged}, discrepancies: [...], changedSince: [...], awaitingRecovery: [...],
/// missingSpillFiles: [{sessionID, partID, file}], journalEpoch: {number, afterSeq,
/// earlierReceipts} | null}`. `ok`
/// is true when `discrepancies` is empty.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditReport {
    /// True when everything holds.
    pub ok: bool,
    /// Receipts checked.
    pub receipts: u64,
    /// Journal events checked.
    pub events: u64,
    /// Distinct messages checked.
    pub messages: u64,
    /// The receipt chain.
    pub chain: ChainSummary,
    /// The archive entries of archived receipts.
    pub archive: ArchiveSummary,
    /// Everything that does not hold, receipts' side first, then the journal's.
    pub discrepancies: Vec<Discrepancy>,
    /// Pruned messages OpenCode changed since their newest receipt.
    pub changed_since: Vec<MessageChange>,
    /// Committed prunes whose intent the journal still holds as pending.
    pub awaiting_recovery: Vec<AwaitingRecovery>,
    /// Parts that name a spill file that is gone (not discrepancies; see
    /// [`MissingSpillFile`]).
    pub missing_spill_files: Vec<MissingSpillFile>,
    /// The journal's epoch, and the receipts in scope made before it, which no journal holds
    /// any more; null without a journal.
    pub journal_epoch: Option<EpochSummary>,
}

impl AuditReport {
    /// The report on a database file too damaged to be read (cut short, say): nothing could be
    /// counted, and one [`DiscrepancyKind::DatabaseDamaged`] says what was found and what to
    /// do (`detail`).
    pub fn of_a_damaged_database(detail: impl Into<String>) -> Self {
        Self {
            ok: false,
            receipts: 0,
            events: 0,
            messages: 0,
            chain: ChainSummary {
                length: 0,
                head: None,
            },
            archive: ArchiveSummary {
                checked: 0,
                purged: 0,
            },
            discrepancies: vec![Discrepancy::new(DiscrepancyKind::DatabaseDamaged, detail)],
            changed_since: Vec::new(),
            awaiting_recovery: Vec::new(),
            missing_spill_files: Vec::new(),
            journal_epoch: None,
        }
    }
}

/// The journal's epoch, as the audit saw it (docs/ARCHITECTURE.md, "Journal epochs").
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochSummary {
    /// The epoch number: 1 for a database's first journal.
    pub number: u64,
    /// Sequence numbers up to this one were given by the epochs before it.
    pub after_seq: u64,
    /// Receipts in scope those epochs made: checked against the database and the chain, not
    /// against a journal.
    pub earlier_receipts: u64,
}

/// The receipt chain's length and head.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainSummary {
    /// Receipts in the chain.
    pub length: u64,
    /// The newest chain hash (64 lowercase hex), null for an empty chain.
    pub head: Option<String>,
}

/// What the audit found of the archive entries of the receipts it checked.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ArchiveSummary {
    /// Entries read back and hashed.
    pub checked: u64,
    /// Entries purged on purpose (not discrepancies).
    pub purged: u64,
}

/// Audits the receipts in `scope` against the store and `journal`
/// (`None`: no journal file exists, so no receipt can have its event).
///
/// Journal checks: each receipt's intent is journaled as committed, and its event is in the log
/// unless retention removed it (sequence numbers up to [`Journal::trimmed_through`]); each
/// event kept in the log (in scope) has its receipt in the database (the events journaled
/// before the store's snapshot: a prune committing meanwhile is not half seen); the intent and
/// every event that announces the receipt name the same request, message, revisions, count and
/// time ([`DiscrepancyKind::JournalMismatch`]).
///
/// Errors: the store's ([`EngineError::Store`]) and the journal's reads.
pub fn audit<S: SessionStore>(
    store: &S,
    journal: Option<&Journal>,
    scope: AuditScope<'_>,
) -> Result<AuditReport, EngineError> {
    // The journal's newest event before the store's snapshot: a prune that commits while the
    // audit runs (in `serve`) journals its event after it, and its receipt may be missing from
    // the snapshot. Events up to this one committed before the snapshot was taken.
    let journaled_before = journal.map(Journal::last_seq).transpose()?.unwrap_or(0);
    let found = store.audit(scope)?;
    let mut discrepancies = found.discrepancies;
    let mut awaiting_recovery = Vec::new();
    let mut events = 0u64;
    let mut journal_epoch = None;
    for receipt in &found.receipts {
        if let Some(contradiction) = receipt.contradiction() {
            discrepancies.push(
                Discrepancy::new(
                    DiscrepancyKind::ReceiptInconsistent,
                    format!(
                        "receipt {} (message {}) contradicts itself: {contradiction}",
                        receipt.receipt_id, receipt.message_id
                    ),
                )
                .receipt(receipt.receipt_id),
            );
        }
    }
    match journal {
        None => {
            if !found.receipts.is_empty() {
                discrepancies.push(Discrepancy::new(
                    DiscrepancyKind::ReceiptNotJournaled,
                    format!(
                        "there is no journal, so none of the {} receipt(s) has its event (pass the journal with --journal PATH)",
                        found.receipts.len()
                    ),
                ));
            }
        }
        Some(journal) => {
            let trimmed = journal.trimmed_through()?;
            let epoch = journal.epoch()?;
            let mut summary = EpochSummary {
                number: epoch.number,
                after_seq: epoch.after_seq,
                earlier_receipts: 0,
            };
            let intents: HashMap<Uuid, Intent> = journal
                .intents()?
                .into_iter()
                .map(|intent| (intent.intent_id, intent))
                .collect();
            let by_id: HashMap<Uuid, &Receipt> = found
                .receipts
                .iter()
                .map(|receipt| (receipt.receipt_id, receipt))
                .collect();
            for receipt in &found.receipts {
                let intent = intents.get(&receipt.intent_id);
                if intent.is_some_and(|intent| intent.state.is_pending()) {
                    awaiting_recovery.push(AwaitingRecovery {
                        receipt_id: receipt.receipt_id,
                        intent_id: receipt.intent_id,
                        detail: format!(
                            "receipt {} committed while its intent {} is still pending in the \
                             journal: the next command that prunes journals its event",
                            receipt.receipt_id, receipt.intent_id
                        ),
                    });
                    continue;
                }
                // A receipt of an earlier epoch: its journal is gone, and this one started
                // after its event's number.
                let place = found.places.get(&receipt.receipt_id).copied();
                if intent.is_none() && place.is_some_and(|place| place <= epoch.after_seq) {
                    summary.earlier_receipts += 1;
                    continue;
                }
                let found_here = check_journaled(journal, trimmed, intent, receipt);
                let named = |discrepancy: &Discrepancy| {
                    discrepancy.receipt_id == Some(receipt.receipt_id.to_string())
                };
                // The digest finds what nothing else does: an edit the chain was hashed over
                // again, which leaves the fields the journal keeps as they were.
                let digest = if found_here.is_empty() && !discrepancies.iter().any(named) {
                    digest_mismatch(journal, receipt)?
                } else {
                    None
                };
                discrepancies.extend(found_here.into_iter().chain(digest));
            }
            journal_epoch = Some(summary);
            let mut since = trimmed;
            while since < journaled_before {
                let page = journal.events_after(since, EVENT_PAGE)?;
                let Some(last) = page.last() else { break };
                since = last.seq;
                for event in page.iter().filter(|event| event.seq <= journaled_before) {
                    if !scope.admits(&event.session_id) {
                        continue;
                    }
                    events += 1;
                    if !found.all_receipt_ids.contains(&event.event_id) {
                        discrepancies.push(
                            Discrepancy::new(
                                DiscrepancyKind::EventWithoutReceipt,
                                format!(
                                    "journal event {} (message {} of session {}) has no receipt {} in the database",
                                    event.seq, event.message_id, event.session_id, event.event_id
                                ),
                            )
                            .receipt(event.event_id)
                            .at_seq(event.seq),
                        );
                        continue;
                    }
                    // The event of the receipt's own intent is checked with the receipt (see
                    // `check_journaled`); another one announces it again (a retry whose
                    // journal no longer held the first event, say), and must say the same.
                    if let Some(receipt) = by_id.get(&event.event_id) {
                        if event.intent_id != receipt.intent_id {
                            discrepancies.extend(event_mismatch(event, receipt, false));
                        }
                    }
                }
            }
        }
    }
    Ok(AuditReport {
        ok: discrepancies.is_empty(),
        receipts: found.receipts.len() as u64,
        events,
        messages: found.messages,
        chain: ChainSummary {
            length: found.chain_length,
            head: found.chain_head,
        },
        archive: ArchiveSummary {
            checked: found.archive_checked,
            purged: found.archive_purged,
        },
        discrepancies,
        changed_since: found.changes,
        awaiting_recovery,
        missing_spill_files: found.missing_spill_files,
        journal_epoch,
    })
}

/// The journal's side of one receipt: its intent committed, with its event kept or trimmed, and
/// the intent and the event saying what the receipt says. Empty when that holds.
fn check_journaled(
    journal: &Journal,
    trimmed: u64,
    intent: Option<&Intent>,
    receipt: &Receipt,
) -> Vec<Discrepancy> {
    let id = receipt.receipt_id;
    let not_journaled = |detail: String| {
        vec![Discrepancy::new(DiscrepancyKind::ReceiptNotJournaled, detail).receipt(id)]
    };
    let (intent, seq) = match intent {
        None => {
            return not_journaled(format!(
                "receipt {id} (message {}) names intent {}, which the journal does not hold",
                receipt.message_id, receipt.intent_id
            ))
        }
        // Reported apart, as awaiting recovery.
        Some(Intent {
            state: IntentState::Pending,
            ..
        }) => return Vec::new(),
        Some(Intent {
            state: IntentState::Refused { reason } | IntentState::Abandoned { reason },
            ..
        }) => {
            return not_journaled(format!(
                "receipt {id}'s intent {} is journaled as not committed ({reason})",
                receipt.intent_id
            ))
        }
        Some(
            intent @ Intent {
                state: IntentState::Committed { seq, .. },
                ..
            },
        ) => (intent, *seq),
    };
    if seq <= trimmed {
        // The event is gone by retention: the intent is what is left to compare.
        return intent_mismatch(intent, receipt).into_iter().collect();
    }
    let detail = match journal.event(seq) {
        Ok(Some(event)) if event.event_id == id => {
            return intent_mismatch(intent, receipt)
                .into_iter()
                .chain(event_mismatch(&event, receipt, true))
                .collect()
        }
        // The intent is another receipt's: this one only names it.
        Ok(Some(event)) => format!(
            "receipt {id}'s event {seq} in the journal announces receipt {} instead",
            event.event_id
        ),
        Ok(None) => format!(
            "receipt {id}'s event {seq} is gone from the journal (retention removed only events \
             up to {trimmed})"
        ),
        Err(error) => {
            format!("receipt {id}'s event {seq} cannot be read from the journal: {error}")
        }
    };
    vec![Discrepancy::new(DiscrepancyKind::EventMissing, detail)
        .receipt(id)
        .at_seq(seq)]
}

/// The receipt against the digest the journal kept when its commit was made
/// ([`Receipt::digest`]): `None` when they agree, or when the journal kept none (a commit an
/// earlier build made).
///
/// Errors: the journal's read.
fn digest_mismatch(
    journal: &Journal,
    receipt: &Receipt,
) -> Result<Option<Discrepancy>, EngineError> {
    let Some(kept) = journal.receipt_digest(receipt.receipt_id)? else {
        return Ok(None);
    };
    if kept == receipt.digest() {
        return Ok(None);
    }
    Ok(Some(
        Discrepancy::new(
            DiscrepancyKind::JournalMismatch,
            format!(
                "receipt {} (message {}) is not the receipt the journal recorded when it \
                 committed: its digest differs (the receipt was edited afterwards, and its \
                 place in the receipt chain hashed again)",
                receipt.receipt_id, receipt.message_id
            ),
        )
        .receipt(receipt.receipt_id),
    ))
}

/// One field where the journal and a receipt differ: its name, the journal's value, the
/// receipt's.
type Difference = (&'static str, String, String);

/// The fields of `pairs` whose two values differ.
fn differences(pairs: Vec<Difference>) -> Vec<Difference> {
    pairs
        .into_iter()
        .filter(|(_, journal, receipt)| journal != receipt)
        .collect()
}

/// `differences` in words: `field: journal X, receipt Y; ...`.
fn in_words(differences: &[Difference]) -> String {
    differences
        .iter()
        .map(|(field, journal, receipt)| format!("{field}: journal {journal}, receipt {receipt}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A committed intent against the receipt it produced: the same request (key, session,
/// message, revision, and the indexes it named). `None` when they agree.
fn intent_mismatch(intent: &Intent, receipt: &Receipt) -> Option<Discrepancy> {
    let mut pairs = vec![
        (
            "requestKey",
            hex::encode(intent.request_key),
            receipt.request_key.clone(),
        ),
        (
            "sessionID",
            intent.session_id.clone(),
            receipt.session_id.clone(),
        ),
        (
            "messageID",
            intent.message_id.clone(),
            receipt.message_id.clone(),
        ),
        (
            "revisionBefore",
            intent.revision.clone(),
            receipt.revision_before.clone(),
        ),
    ];
    // Every technical part is whatever the message held: only named indexes can be compared.
    if let Selection::Indexes(indexes) = &intent.selection {
        let mut named = indexes.clone();
        named.sort_unstable();
        named.dedup();
        let mut removed = receipt.indexes.clone();
        removed.sort_unstable();
        pairs.push(("indexes", format!("{named:?}"), format!("{removed:?}")));
    }
    let found = differences(pairs);
    if found.is_empty() {
        return None;
    }
    Some(
        Discrepancy::new(
            DiscrepancyKind::JournalMismatch,
            format!(
                "receipt {}'s intent {} in the journal says otherwise: {}",
                receipt.receipt_id,
                intent.intent_id,
                in_words(&found)
            ),
        )
        .receipt(receipt.receipt_id),
    )
}

/// A journaled event against the receipt it announces: the same session, message, revision
/// after, count and time, and, for the event of the receipt's own intent (`own`), that intent.
/// `None` when they agree.
fn event_mismatch(event: &CommittedEvent, receipt: &Receipt, own: bool) -> Option<Discrepancy> {
    let mut pairs = vec![
        (
            "sessionID",
            event.session_id.clone(),
            receipt.session_id.clone(),
        ),
        (
            "messageID",
            event.message_id.clone(),
            receipt.message_id.clone(),
        ),
        (
            "revisionAfter",
            event.revision.clone(),
            receipt.revision_after.clone(),
        ),
        (
            "removedCount",
            event.removed_count.to_string(),
            receipt.removed_count.to_string(),
        ),
        (
            "committedAtMs",
            event.committed_at_ms.to_string(),
            receipt.committed_at_ms.to_string(),
        ),
        (
            "kind",
            format!("{:?}", event.kind),
            format!("{:?}", receipt.event_kind()),
        ),
    ];
    if own {
        pairs.insert(
            0,
            (
                "intentID",
                event.intent_id.to_string(),
                receipt.intent_id.to_string(),
            ),
        );
    }
    let found = differences(pairs);
    if found.is_empty() {
        return None;
    }
    Some(
        Discrepancy::new(
            DiscrepancyKind::JournalMismatch,
            format!(
                "journal event {} of receipt {} says otherwise: {}",
                event.seq,
                receipt.receipt_id,
                in_words(&found)
            ),
        )
        .receipt(receipt.receipt_id)
        .at_seq(event.seq),
    )
}
