//! Which storage generation holds a message, decided once per request, and the routing of what
//! the store does with it (preview read, prune, dry run, whether a prune can be written) to
//! [`super::v1`] or [`super::v2`]. Nothing else in the store chooses a generation; `v1` and `v2`
//! know nothing of each other, and what their prunes share is in [`super::write`].
//!
//! Source: docs/ARCHITECTURE.md, "Storage generations".

use pruning_engine::{
    AbandonedRun, Applied, BlockedReason, Plan, PreviewRequest, PruneCommand, PruneRequest,
    Refusal, Selection, StoreError, StoredMessage,
};
use std::sync::Arc;

use rusqlite::Connection;

use super::archive::StoreArchive;
use super::migrated::{self, remove::MigratedPlan};
use super::schema::Schema;
use super::txn::{WriteTxn, Writer};
use super::v1::apply::{PlanUse, V1Plan};
use super::v1::compact::{CompactionPlan, Survey};
use super::v1::diffs::DiffsPlan;
use super::v1::fence::{FenceClock, FenceLimits};
use super::v1::known::Known;
use super::v1::read::{self, Texts};
use super::v2::apply::V2Plan;
use super::v2::shell::ShellPlan;
use super::write::{self, Failure, Prepared, Step};
use super::{v1, v2};

/// The storage generation that holds a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Generation {
    /// `message` + `part` rows (OpenCode 1.2 to 1.19).
    V1,
    /// A `session_message` row.
    V2,
}

impl Generation {
    /// Which generation holds message `message_id` of session `session_id`: the one with a row
    /// for it in that session. A database upgraded to V2 may hold the same message in both; then
    /// the V2 row is meant where V2 prunes can be written ([`v2::writable`]), else the V1 row. A
    /// message found in neither is V2 when a V2 row of another session has its id or the
    /// database has no V1 tables, so that the refusal names what is there; else V1.
    pub(crate) fn of(
        conn: &Connection,
        schema: &Schema,
        session_id: &str,
        message_id: &str,
    ) -> rusqlite::Result<Self> {
        if !schema.has_v2() {
            return Ok(Self::V1);
        }
        let in_v2 = v2::has_message(conn, Some(session_id), message_id)?;
        let in_v1 = schema.has_v1() && read::has_message(conn, session_id, message_id)?;
        let v2 = match (in_v2, in_v1) {
            (true, false) => true,
            (false, true) => false,
            (true, true) => v2::writable(conn)?,
            (false, false) => !schema.has_v1() || v2::has_message(conn, None, message_id)?,
        };
        Ok(if v2 { Self::V2 } else { Self::V1 })
    }

    /// Why no prune can be written in this generation here, in words; `None` when one can. V2
    /// rows where `session_v2` has no run claim (the session table OpenCode 1.17 to 1.19 share) are
    /// read-only for prunes.
    pub(crate) fn read_only(self, conn: &Connection) -> rusqlite::Result<Option<&'static str>> {
        Ok(match self {
            Self::V1 => None,
            Self::V2 if v2::writable(conn)? => None,
            Self::V2 => {
                Some(
                    "OpenCode 2 rows in the session table OpenCode 1.17 to 1.19 share are read-only for prunes",
                )
            }
        })
    }

    /// Whether the storage admits a prune of session `session_id` beyond [`Self::read_only`]:
    /// for V1, the schema profile admits V1 writes ([`Schema::v1_write_refusal`]) and the
    /// session's event bookkeeping is consistent; V2 has no such check. `false` when it cannot
    /// be read (failing closed).
    pub(crate) fn admits_prunes(
        self,
        conn: &Connection,
        schema: &Schema,
        session_id: &str,
    ) -> bool {
        match self {
            Self::V1 => {
                schema.v1_write_refusal().is_none()
                    && v1::fence::events_consistent(conn, schema, session_id)
            }
            Self::V2 => true,
        }
    }
}

/// Reads the message of a preview from the generation that holds it, with the session's scope
/// checked. Runs inside the caller's read transaction.
pub(crate) fn read(
    conn: &Connection,
    schema: &Schema,
    request: &PreviewRequest,
) -> rusqlite::Result<Result<StoredMessage, Refusal>> {
    match Generation::of(conn, schema, &request.session_id, &request.message_id)? {
        Generation::V1 => read::read_in_scope(conn, schema, request),
        Generation::V2 => v2::read_in_scope(conn, schema, request),
    }
}

/// Runs one prune transaction taken by `writer` (see [`write::in_transaction`] for its refusals and
/// errors): the generation is decided inside it, then that generation's checks and writes run,
/// and the receipt is inserted. `limits` are the V1 fence's quiet period and abandoned-run threshold.
///
/// The schema profile comes from `schema_of`, called inside the transaction, so that a
/// migration OpenCode committed before the write lock was taken is seen. What `known` learnt
/// stays for the next transaction only when this one committed its writes (or wrote nothing);
/// otherwise it is forgotten. With `archive`, the rows the prune removes are archived, durable
/// before the commit (see `super::archive`). A compaction uses `survey`, the session's
/// snapshots read before the transaction began (`super::v1::compact`). The write lock's hold
/// is recorded in the writer's lock times.
pub(crate) fn apply(
    writer: Writer<'_>,
    schema_of: impl Fn(&Connection) -> rusqlite::Result<Arc<Schema>>,
    known: &mut Known,
    command: &PruneCommand<'_>,
    limits: FenceLimits,
    archive: Option<&mut StoreArchive>,
    survey: Option<&Survey>,
) -> Result<Applied, StoreError> {
    let applied = write::in_transaction(writer, |txn| {
        let schema = schema_of(txn.conn())?;
        known.refresh(txn.conn())?;
        prune(txn, &schema, known, command, limits, archive, survey)
    });
    if !matches!(applied, Ok(Applied::Pruned { .. })) {
        known.forget();
    }
    applied
}

/// Runs the first prunes of `commands` in one group transaction taken by `writer`
/// ([`super::group::in_group`]: each under its own savepoint, as many as the write lock's
/// budget admits), each as [`apply`] runs one alone; one answer per prune taken. A compaction
/// uses its survey from `surveys` (keyed by intent id), read before the transaction began.
/// What `known` learnt stays past a prune unless the prune wrote rows and was rolled back to
/// its savepoint (then it is forgotten before the next prune of the transaction runs), and it is
/// forgotten after a failed commit or any failure.
pub(crate) fn apply_group(
    writer: Writer<'_>,
    schema_of: impl Fn(&Connection) -> rusqlite::Result<Arc<Schema>>,
    known: &mut Known,
    commands: &[PruneCommand<'_>],
    limits: FenceLimits,
    mut archive: Option<&mut StoreArchive>,
    surveys: &std::collections::HashMap<uuid::Uuid, Arc<Survey>>,
) -> Vec<Result<Applied, StoreError>> {
    // The prunes whose writes were kept in the transaction: a failed commit undoes them.
    let mut kept: Vec<usize> = Vec::new();
    let answers = super::group::in_group(writer, commands.len(), |txn, index| {
        let command = &commands[index];
        let conn = txn.conn();
        let schema = schema_of(conn)?;
        known.refresh(conn)?;
        let changes = conn.total_changes();
        let step = prune(
            txn,
            &schema,
            known,
            command,
            limits,
            archive.as_deref_mut(),
            surveys.get(&command.intent_id).map(Arc::as_ref),
        );
        if matches!(step, Ok(Step::Commit(_))) {
            kept.push(index);
        } else if conn.total_changes() != changes {
            // Rolled back after writing: what was learnt of those rows may be untrue.
            known.forget();
        }
        step
    });
    let undone = kept
        .iter()
        .any(|&index| !matches!(answers.get(index), Some(Ok(Applied::Pruned { .. }))));
    if undone || answers.iter().any(Result::is_err) {
        known.forget();
    }
    answers
}

/// What a prune of `request` would do (nothing is written): the checks before any write, inside
/// the caller's transaction, with the abandoned run the receipt would record. `now_ms` is the
/// time the fence compares with. A compaction uses `survey`.
pub(crate) fn dry_run(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    request: &PruneRequest,
    now_ms: i64,
    limits: FenceLimits,
    survey: Option<&Survey>,
) -> rusqlite::Result<Prepared<(Plan, Option<AbandonedRun>)>> {
    let key = hex::encode(super::receipts::live_key(
        conn,
        schema,
        pruning_engine::request_key(request),
    )?);
    known.refresh(conn)?;
    let prepared = prepare(
        conn,
        schema,
        known,
        request,
        &key,
        limits.at(now_ms),
        Purpose::DryRun,
        survey,
    )?;
    Ok(prepared.map(|planned| {
        let abandoned = planned.abandoned(now_ms);
        (planned.into_plan(), abandoned)
    }))
}

/// The rows the prune of `request` would remove, read inside the caller's read transaction after
/// the checks a prune runs before writing (at `now_ms`, ms since the Unix epoch), as its archive
/// entry holds them; `None` when the prune would write nothing (refused, or already committed).
/// A prune a clean planned is left for the prune. A compaction uses `survey`.
pub(crate) fn capture_ahead(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    request: &PruneRequest,
    now_ms: i64,
    limits: FenceLimits,
    survey: Option<&Survey>,
) -> rusqlite::Result<Option<pruning_archive::ArchivedRows>> {
    let key = hex::encode(super::receipts::live_key(
        conn,
        schema,
        pruning_engine::request_key(request),
    )?);
    known.refresh(conn)?;
    let prepared = prepare(
        conn,
        schema,
        known,
        request,
        &key,
        limits.at(now_ms),
        Purpose::CaptureAhead,
        survey,
    )?;
    match prepared {
        Prepared::Plan(planned) => planned.capture_ahead(conn, schema, known, request),
        Prepared::Refuse(_) | Prepared::Replayed(_) => Ok(None),
    }
}

/// What the checks before any write ([`prepare`]) run for, which decides how V1 reads a
/// message's parts and what it does with a prune a clean planned for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// A prune: the part rows' text is kept (its deletes compare it); a planned prune is taken.
    Prune,
    /// A dry run: no text kept; a planned prune is taken.
    DryRun,
    /// An archive entry written ahead of the prune: no text kept; a planned prune is left for
    /// the prune.
    CaptureAhead,
}

impl Purpose {
    fn texts(self) -> Texts {
        match self {
            Self::Prune => Texts::Keep,
            Self::DryRun | Self::CaptureAhead => Texts::Skip,
        }
    }

    fn plans(self) -> PlanUse {
        match self {
            Self::Prune | Self::DryRun => PlanUse::Take,
            Self::CaptureAhead => PlanUse::Peek,
        }
    }
}

/// A planned prune: of a message of either generation, of a V1 user message's diffs, of a V1
/// session's superseded snapshots, of a message's 1.x rows OpenCode 2 migrated, or of the
/// output an OpenCode 2 `shell` row keeps.
enum Planned {
    /// A V1 message's.
    V1(V1Plan),
    /// A V2 message's.
    V2(V2Plan),
    /// A V1 user message's diffs.
    Diffs(DiffsPlan),
    /// A V1 session's superseded snapshots.
    Compaction(CompactionPlan),
    /// A message's 1.x rows that OpenCode 2 migrated.
    Migrated(MigratedPlan),
    /// The output an OpenCode 2 `shell` row keeps.
    Shell(ShellPlan),
}

impl Planned {
    fn plan(&self) -> &Plan {
        match self {
            Self::V1(planned) => &planned.plan,
            Self::V2(planned) => &planned.plan,
            Self::Diffs(planned) => &planned.plan,
            Self::Compaction(planned) => &planned.plan,
            Self::Migrated(planned) => &planned.plan,
            Self::Shell(planned) => &planned.plan,
        }
    }

    fn into_plan(self) -> Plan {
        match self {
            Self::V1(planned) => planned.plan,
            Self::V2(planned) => planned.plan,
            Self::Diffs(planned) => planned.plan,
            Self::Compaction(planned) => planned.plan,
            Self::Migrated(planned) => planned.plan,
            Self::Shell(planned) => planned.plan,
        }
    }

    /// What the receipt records of the abandoned run the V1 fence admitted the prune beside,
    /// idle until `now_ms` (ms since the Unix epoch).
    fn abandoned(&self, now_ms: i64) -> Option<AbandonedRun> {
        let run = match self {
            Self::V1(planned) => planned.abandoned.as_ref(),
            Self::Diffs(planned) => planned.abandoned.as_ref(),
            Self::Compaction(planned) => planned.abandoned.as_ref(),
            Self::V2(planned) => planned.abandoned.as_ref(),
            Self::Shell(planned) => planned.abandoned.as_ref(),
            Self::Migrated(_) => None,
        };
        run.map(|run| AbandonedRun {
            message_id: run.message_id.clone(),
            idle_ms: now_ms.saturating_sub(run.last_write_ms),
        })
    }

    /// The receipt's `storage` column.
    fn storage(&self) -> &'static str {
        match self {
            Self::V1(_) | Self::Diffs(_) | Self::Compaction(_) | Self::Migrated(_) => {
                v1::apply::STORAGE
            }
            Self::V2(_) | Self::Shell(_) => v2::apply::STORAGE,
        }
    }

    /// The rows the prune will remove, read (not removed) inside the caller's read transaction,
    /// as its archive entry holds them; `None` where a kind's capture finds the rows planned
    /// not there as planned (the prune will then be a conflict).
    fn capture_ahead(
        &self,
        conn: &Connection,
        schema: &Schema,
        known: &mut Known,
        request: &PruneRequest,
    ) -> rusqlite::Result<Option<pruning_archive::ArchivedRows>> {
        match self {
            Self::V1(planned) => v1::apply::capture_ahead(conn, schema, known, request, planned),
            Self::V2(_) | Self::Shell(_) => v2::apply::capture_row(conn, request).map(Some),
            Self::Diffs(planned) => v1::diffs::capture_ahead(conn, request, planned),
            Self::Compaction(planned) => {
                v1::compact::capture_ahead(conn, &request.session_id, planned)
            }
            Self::Migrated(_) => migrated::remove::capture_ahead(conn, request).map(Some),
        }
    }
}

/// The checks before any write of the prune's kind and generation, for `purpose`
/// ([`Purpose`]; `survey`: what a compaction uses): the one dispatch over the kinds of prune
/// that a prune, its dry run and its archive entry written ahead share. A diffs prune of a
/// message V2 holds is `not_deletable`: V2 user messages keep no summary diffs.
#[allow(clippy::too_many_arguments)]
fn prepare(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    request: &PruneRequest,
    request_key: &str,
    clock: FenceClock,
    purpose: Purpose,
    survey: Option<&Survey>,
) -> rusqlite::Result<Prepared<Planned>> {
    match request.selection {
        Selection::SupersededSnapshots(seqs) => {
            return Ok(v1::compact::prepare(
                conn,
                schema,
                known,
                request,
                seqs,
                request_key,
                clock,
                survey,
            )?
            .map(Planned::Compaction));
        }
        Selection::Diffs => {
            // An archive entry written ahead does not look: it always planned the V1 row's
            // diffs, and the prune's own check refuses it (its entry is then unused).
            if purpose != Purpose::CaptureAhead
                && Generation::of(conn, schema, &request.session_id, &request.message_id)?
                    == Generation::V2
            {
                return Ok(Prepared::Refuse(Refusal::new(
                    BlockedReason::NotDeletable,
                    "a V2 message: V2 user messages keep no summary diffs",
                )));
            }
            return Ok(
                v1::diffs::prepare(conn, schema, known, request, request_key, clock)?
                    .map(Planned::Diffs),
            );
        }
        Selection::MigratedV1 => {
            return Ok(
                migrated::remove::prepare(conn, schema, request, request_key)?
                    .map(Planned::Migrated),
            );
        }
        Selection::ShellOutput => {
            return Ok(
                v2::shell::prepare(conn, schema, request, request_key, clock)?.map(Planned::Shell),
            );
        }
        Selection::Indexes(_) | Selection::AllTechnical => {}
    }
    Ok(
        match Generation::of(conn, schema, &request.session_id, &request.message_id)? {
            Generation::V1 => v1::apply::prepare(
                conn,
                schema,
                known,
                request,
                request_key,
                clock,
                purpose.texts(),
                purpose.plans(),
            )?
            .map(Planned::V1),
            Generation::V2 => {
                v2::apply::prepare(conn, schema, request, request_key, clock)?.map(Planned::V2)
            }
        },
    )
}

/// The work inside the prune transaction `txn`: checks, identity, the generation's writes,
/// receipt.
fn prune(
    txn: &WriteTxn<'_>,
    schema: &Schema,
    known: &mut Known,
    command: &PruneCommand<'_>,
    limits: FenceLimits,
    archive: Option<&mut StoreArchive>,
    survey: Option<&Survey>,
) -> Result<Step, Failure> {
    let conn = txn.conn();
    let request = command.request;
    let key = hex::encode(command.request_key);
    let prepared = prepare(
        conn,
        schema,
        known,
        request,
        &key,
        limits.at(command.now_ms),
        Purpose::Prune,
        survey,
    )?;
    let planned = match prepared {
        Prepared::Refuse(refusal) => return Ok(Step::Refuse(refusal)),
        Prepared::Replayed(receipt) => return Ok(Step::Replayed(receipt)),
        Prepared::Plan(planned) => planned,
    };
    write::claim_identity(conn, schema, command.database_id)?;
    let capture = archive.is_some();
    let written = match &planned {
        Planned::V1(planned) => v1::apply::write(conn, schema, known, command, planned, capture)?,
        Planned::V2(planned) => v2::apply::write(conn, request, planned, capture)?,
        Planned::Diffs(planned) => v1::diffs::write(conn, command, planned, capture)?,
        Planned::Compaction(planned) => v1::compact::write(conn, known, command, planned, capture)?,
        Planned::Migrated(planned) => migrated::remove::write(conn, request, planned, capture)?,
        Planned::Shell(planned) => v2::shell::write(conn, request, planned, capture)?,
    };
    let mut written = match written {
        Ok(written) => written,
        Err(refusal) => return Ok(Step::Refuse(refusal)),
    };
    txn.inside_prune();
    // The entry is durable before the receipt is inserted, and so before the commit.
    let archive_hash = match (archive, written.removed_rows.take()) {
        (Some(archive), Some(rows)) => Some(
            archive
                .commit_entry(command, &rows)
                .map_err(Failure::Store)?,
        ),
        _ => None,
    };
    Ok(Step::Commit(Box::new(write::record(
        conn,
        command,
        planned.plan(),
        written,
        planned.storage(),
        planned.abandoned(command.now_ms),
        archive_hash,
    )?)))
}
