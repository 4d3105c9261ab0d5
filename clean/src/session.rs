//! The dry run of a clean of one session's technical parts, whole (the compaction of superseded
//! snapshots a `clean` makes first is not in it: `clean ID --no-compact`): every message the
//! clean looks at, planned by the clean policy and predicted by the same dry run a clean's walk
//! makes ([`crate::walk::predict`]), in the order `clean` prunes them. The server's `clean-plan`
//! route answers with it, so that the page prunes the parts `clean ID` prunes and no rule is
//! written twice (docs/ARCHITECTURE.md, "Where each rule lives").

use std::collections::BTreeMap;

use pruning_engine::contract::{check_body_size, check_id};
use pruning_engine::{BlockedReason, ContractError, PruneRequest, Scope, Selection};
use pruning_opencode::{CleanPolicy, OpenCodeStore, Planned, SkipReason};
use serde::{Deserialize, Serialize};

use crate::answer::Answer;
use crate::error::CleanError;
use crate::walk::predict;

/// `{sessionID, keepLastTurns?}`: which session's clean to plan, and how many user turns it
/// keeps (`clean --keep-last-turns`; 2 when left out, as `clean`'s default). The rest of the
/// policy is `clean`'s default ([`CleanPolicy::default`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CleanPlanRequest {
    /// The session, 1 to 256 characters.
    #[serde(rename = "sessionID")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    pub session_id: String,
    /// User turns kept, from the newest; 0 keeps none.
    #[serde(default = "default_keep_last_turns")]
    #[cfg_attr(
        feature = "openapi",
        schema(default = 2, minimum = 0, maximum = 4_294_967_295_u64)
    )]
    pub keep_last_turns: u32,
    /// Only the messages older than the session's last completed compaction, which OpenCode no
    /// longer sends the model (`clean --before-compaction`); a session without one has none.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(default = false))]
    pub before_compaction: bool,
}

fn default_keep_last_turns() -> u32 {
    CleanPolicy::default().keep_last_turns
}

impl CleanPlanRequest {
    /// Parses and validates a JSON body.
    ///
    /// Errors: [`ContractError`] for a body over 1 MiB, malformed JSON, an unknown key, a
    /// `keepLastTurns` that is not a whole number from 0 to 4294967295, or a `sessionID` outside
    /// 1..=256 characters.
    pub fn from_json(body: &str) -> Result<Self, ContractError> {
        check_body_size(body)?;
        let request: Self = ContractError::parse(body)?;
        check_id("sessionID", &request.session_id)?;
        Ok(request)
    }

    /// The clean policy it asks for: `clean`'s default with its kept turns.
    pub fn policy(&self) -> CleanPolicy {
        CleanPolicy {
            keep_last_turns: self.keep_last_turns,
            ..CleanPolicy::default()
        }
    }
}

/// What a clean of one session's technical parts would do now: the prunes it would make, and
/// the messages it leaves alone, counted as `clean`'s report counts them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionPlan {
    /// The session.
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// The user turns kept (`--keep-last-turns`).
    pub keep_last_turns: u32,
    /// Whether only the messages before the last compaction were looked at
    /// (`beforeCompaction`).
    pub before_compaction: bool,
    /// Assistant messages looked at: those before the kept turns.
    pub looked_at: u64,
    /// Assistant messages in the kept turns (and, with `beforeCompaction`, those after the last
    /// compaction), left alone.
    pub kept_in_turns: u64,
    /// Messages looked at with no part the policy takes (text only, or only `skill` output).
    pub nothing_to_prune: u64,
    /// Messages whose identical prune already committed.
    pub already_pruned: u64,
    /// Messages left alone, by reason (`clean`'s skip reasons, in the order of their names).
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, u64>))]
    pub skipped: BTreeMap<SkipReason, u64>,
    /// The prunes, in the order a clean makes them (oldest message first).
    pub prunes: Vec<PlannedMessage>,
    /// Parts the prunes not refused now would remove.
    pub parts: u64,
    /// Bytes the prunes not refused now would free, as their receipts will count them (part
    /// rows and their snapshots; a V2 message's entries).
    pub bytes: u64,
}

/// One prune of a [`SessionPlan`]: the request `clean` would make (`prune`'s body).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PlannedMessage {
    /// The message.
    #[serde(rename = "messageID")]
    pub message_id: String,
    /// Its revision as read (64 lowercase hex characters).
    pub revision: String,
    /// The content indexes of the parts to remove, ascending.
    pub indexes: Vec<u32>,
    /// Whether these are every tool and reasoning part of the message: then `prune-batch`,
    /// which takes them all, removes the same parts.
    pub every_technical: bool,
    /// Bytes the prune would free, as its receipt will count them; 0 when it is refused now.
    pub bytes: u64,
    /// What the prune would be refused with now (`maintenance_required` while OpenCode may be
    /// using the session), or null. The fence is checked again when it is made.
    pub blocked: Option<BlockedReason>,
}

/// The dry run of a clean of `session_id`'s technical parts by `policy`, within `scope`, at
/// `now_ms` (ms since the Unix epoch): the messages `clean` looks at (`--before-compaction`:
/// only those OpenCode no longer sends the model), each planned and checked as `clean`'s dry run
/// checks it. The copies a clean also takes (superseded snapshots, diffs) are not in it. Nothing
/// is written.
///
/// Errors: [`CleanError`] when the database cannot be read.
pub fn plan_session(
    store: &OpenCodeStore,
    session_id: &str,
    policy: &CleanPolicy,
    before_compaction: bool,
    scope: &Scope,
    now_ms: i64,
) -> Result<SessionPlan, CleanError> {
    let listing =
        store.clean_listing_before(session_id, policy.keep_last_turns, before_compaction)?;
    let mut plan = SessionPlan {
        session_id: session_id.to_string(),
        keep_last_turns: policy.keep_last_turns,
        before_compaction,
        looked_at: listing.ids.len() as u64,
        kept_in_turns: listing.kept + listing.after_compaction,
        nothing_to_prune: 0,
        already_pruned: 0,
        skipped: BTreeMap::new(),
        prunes: Vec::new(),
        parts: 0,
        bytes: 0,
    };
    for message_id in &listing.ids {
        match store.clean_plan(session_id, message_id, policy, now_ms)? {
            Planned::Nothing => plan.nothing_to_prune += 1,
            Planned::Skipped { reason, .. } => *plan.skipped.entry(reason).or_default() += 1,
            Planned::Prune {
                request,
                every_technical,
                ..
            } => {
                let request = request.within(scope.clone());
                if let Some(planned) = check(store, request, every_technical, now_ms)? {
                    if planned.blocked.is_none() {
                        plan.parts += planned.indexes.len() as u64;
                        plan.bytes += planned.bytes;
                    }
                    plan.prunes.push(planned);
                } else {
                    plan.already_pruned += 1;
                }
            }
        }
    }
    Ok(plan)
}

/// The prune checked as it would be made now; `None` when an identical one already committed.
fn check(
    store: &OpenCodeStore,
    request: PruneRequest,
    every_technical: bool,
    now_ms: i64,
) -> Result<Option<PlannedMessage>, CleanError> {
    let (bytes, blocked) = match predict(store, &request, false, now_ms)?.answer {
        Answer::Removed(removal) => (removal.bytes, None),
        Answer::Already => return Ok(None),
        Answer::Refused(refusal) => (0, Some(refusal.reason)),
        Answer::Blocked(reason) => (0, Some(reason)),
        // A dry run answers none of these.
        Answer::Unjournaled(..) | Answer::NotReached | Answer::Failed(_) => (0, None),
    };
    let indexes = match request.selection {
        Selection::Indexes(indexes) => indexes,
        // The clean policy names its parts.
        _ => Vec::new(),
    };
    Ok(Some(PlannedMessage {
        message_id: request.message_id,
        revision: request.revision,
        indexes,
        every_technical,
        bytes,
        blocked,
    }))
}
