//! A clean's report in words (`clean` without `--json`; `--json` writes the report whole), and
//! the exit code it ends with.

use pruning_clean::{CompactionReport, DiffsReport, Report, ShellReport, Status};
use pruning_opencode::{AutoVacuum, SkipReason};

use super::CleanConfig;
use crate::commands::Outcome;
use crate::output;
use crate::output::say;

/// The process outcome of a clean that ended with this report: interrupted (130), a
/// failure (1), with `--apply` a prune refused by a condition that passes (3: a script
/// running `clean --apply && vacuum` learns that part of the work waits for a run to
/// come), else done (0).
pub(super) fn outcome(report: &Report, apply: bool) -> Outcome {
    if report.status == Status::Interrupted {
        Outcome::Interrupted
    } else if report.failed > 0 || report.unjournaled > 0 {
        Outcome::Failed
    } else if apply && !report.retry_later.is_empty() {
        Outcome::Blocked
    } else {
        Outcome::Done
    }
}

pub(super) fn print_report(
    report: &Report,
    clean: &CleanConfig,
    invocation: &str,
) -> std::io::Result<()> {
    let verb = if clean.apply { "pruned" } else { "would prune" };
    say!(
        "{}: {} session(s), {} assistant message(s) looked at, and {} more left alone in the last {} turn(s)",
        report.status.as_str(),
        report.sessions,
        report.considered,
        report.kept_recent,
        clean.clean.policy.keep_last_turns
    )?;
    let bytes_what = if clean.apply {
        "of row data removed (parts and their event snapshots)"
    } else {
        "of row data (parts and their event snapshots)"
    };
    say!(
        "{verb}: {} message(s), {} part(s), {} {bytes_what}",
        report.pruned,
        report.parts,
        output::bytes(report.bytes)
    )?;
    if let Some(compaction) = &report.compaction {
        print_compaction(compaction, clean.apply)?;
    }
    if let Some(diffs) = &report.diffs {
        print_diffs(diffs, clean.apply)?;
    }
    if let Some(shell) = &report.shell_output {
        print_shell(shell, clean.apply)?;
    }
    print_migrated(report, clean.apply, invocation)?;
    if let Some(lock) = report.write_lock.filter(|lock| lock.transactions > 0) {
        say!(
            "write lock: held by {} transaction(s), p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (OpenCode waits up to 5 s for it)",
            lock.transactions,
            lock.p50_ms,
            lock.p99_ms,
            lock.max_ms
        )?;
    }
    if let Some(check) = report.integrity_check {
        say!("{}", integrity_line(&check, clean.apply))?;
    }
    let kinds = &report.bytes_by_kind;
    let mut more = String::new();
    if report.shell_output.is_some() {
        more.push_str(&format!(
            ", {} of shell output",
            output::bytes(kinds.shell_output)
        ));
    }
    if report.migrated_v1.is_some() {
        more.push_str(&format!(
            ", {} of migrated 1.x rows",
            output::bytes(kinds.migrated_v1)
        ));
    }
    say!(
        "by kind: {} of parts, {} of their snapshots, {} of superseded snapshots, {} of diffs{more} ({} in all)",
        output::bytes(kinds.parts),
        output::bytes(kinds.part_snapshots),
        output::bytes(kinds.superseded_snapshots),
        output::bytes(kinds.diffs),
        output::bytes(kinds.total())
    )?;
    print_file(report)?;
    if let Some(archived) = report.archive_bytes {
        say!(
            "archived: {} written to the prune archive for them (their rows, compressed; `restore RECEIPT` puts one back)",
            output::bytes(archived)
        )?;
    }
    if report.already_pruned > 0 {
        say!(
            "already pruned by an identical request: {}",
            report.already_pruned
        )?;
    }
    if report.abandoned_runs > 0 {
        say!(
            "beside runs OpenCode left incomplete (idle for --abandoned-after; their own messages are left alone): {} run(s)",
            report.abandoned_runs
        )?;
    }
    if let Some(until) = &report.until_file_size {
        let measured = until
            .live_after
            .map(|after| format!(", {} measured", output::bytes(after)))
            .unwrap_or_default();
        let short = match (&report.given_back, until.reached) {
            (Some(given), _) if given.left_pages > 0 => format!(
                "; {} free page(s) are still in the file ({}): the next clean gives them back",
                given.left_pages,
                given.stopped.as_deref().unwrap_or("stopped")
            ),
            (_, false) => "; the policies leave too little to reach the target".to_string(),
            (_, true) => match until.live_after {
                Some(after) if after > until.target => format!(
                    "; {} over it: the rows freed left part-full pages, which stay; the same clean again takes more",
                    output::bytes(after - until.target)
                ),
                _ => String::new(),
            },
        };
        say!(
            "file size: {} of pages in use before, about {} after its pages are given back{measured} (target {}){short}",
            output::bytes(until.live_before),
            output::bytes(until.estimate_after),
            output::bytes(until.target),
        )?;
    }
    if let Some(until) = &report.until_live_size {
        let measured = until
            .live_after
            .map(|after| format!(", {} measured", output::bytes(after)))
            .unwrap_or_default();
        say!(
            "live data: {} before, about {} after{measured} (target {}){}",
            output::bytes(until.live_before),
            output::bytes(until.estimate_after),
            output::bytes(until.target),
            if until.reached {
                ""
            } else {
                "; the policies leave too little to reach the target"
            }
        )?;
    }
    if let Some(before) = &report.before_compaction {
        say!(
            "older than their session's last compaction: {} message(s) looked at, {} newer left alone",
            before.qualified,
            before.outside
        )?;
    }
    say!("nothing to prune: {} message(s)", report.nothing_to_prune)?;
    for (reason, count) in &report.skipped {
        say!(
            "skipped ({}): {count} message(s){}",
            reason.as_str(),
            explain(*reason)
        )?;
    }
    for (reason, count) in &report.blocked {
        match report.blocked_because.get(reason) {
            Some(why) => say!(
                "blocked ({reason}): {count} message(s); the first: {}",
                output::printable(why)
            )?,
            None => say!("blocked ({reason}): {count} message(s)")?,
        }
    }
    if report.unjournaled > 0 {
        say!(
            "of those, {} committed with their receipts but not yet journaled: the next run journals them and announces their events",
            report.unjournaled
        )?;
    }
    if report.failed > 0 || report.unjournaled > 0 {
        say!(
            "failed: {} message(s) (each whole or not at all: where a commit may have taken effect, the next run's recovery tells from the receipts); first failure: {}",
            report.failed,
            report.first_failure.as_deref().unwrap_or("")
        )?;
    }
    if report.not_reached > 0 {
        say!(
            "not reached (interrupted): {} message(s); run the same clean again to finish",
            report.not_reached
        )?;
    }
    if report.orphan_parts > 0 {
        say!(
            "orphan parts (no message row), left alone: {}",
            report.orphan_parts
        )?;
    }
    if report.spill_files_removed > 0 {
        say!(
            "spill files {}: {} ({})",
            if clean.apply {
                "removed"
            } else {
                "that would be removed"
            },
            report.spill_files_removed,
            output::bytes(report.spill_bytes_removed)
        )?;
    }
    if !report.retry_later.is_empty() {
        let counts: Vec<String> = report
            .retry_later
            .iter()
            .map(|(reason, count)| format!("{reason} {count}"))
            .collect();
        say!(
            "blocked by conditions that pass ({}): run it again later{}",
            counts.join(", "),
            if clean.apply {
                " (exit 3); what committed stays committed"
            } else {
                ""
            }
        )?;
    }
    if !clean.apply {
        say!("dry run: nothing written; add --apply to do it")?;
    } else if report.freed_bytes() > 0 && report.given_back.is_none() {
        say!(
            "the file shrinks only after `{invocation} vacuum` (with OpenCode stopped); `{invocation} vacuum --online-shrink`, once, makes every clean give the pages it frees back while OpenCode runs"
        )?;
    }
    Ok(())
}

/// The file's lines: its size, what it comes to, and what the online shrink gave back.
fn print_file(report: &Report) -> std::io::Result<()> {
    let file = &report.file;
    let shrinks = file.auto_vacuum == AutoVacuum::Incremental;
    match (file.live_after, &report.given_back) {
        (Some(_), Some(given)) => {
            say!(
                "given back: {} of free pages to the disk in {} step(s) of at most 50 ms, while OpenCode may run; the file: {} -> {}",
                output::bytes(given.bytes),
                given.steps,
                output::bytes(given.file_bytes_before),
                output::bytes(given.file_bytes_after)
            )?;
            if let Some(why) = &given.stopped {
                say!(
                    "given back: {} free page(s) left ({why}): the next clean gives them back",
                    given.left_pages
                )?;
            }
        }
        (Some(live), None) => say!(
            "file: {}; {} of pages in use now, what `vacuum` leaves at most",
            output::bytes(file.bytes),
            output::bytes(live)
        )?,
        (None, _) if shrinks => say!(
            "file: {}; about {} once the clean gives its pages back (an estimate: the pages in use, less the row data the clean would remove; online shrink is on, no `vacuum` needed)",
            output::bytes(file.bytes),
            output::bytes(file.after_vacuum)
        )?,
        (None, _) => say!(
            "file: {}; at most about {} after `vacuum` (an estimate: the pages in use, less the row data the clean would remove)",
            output::bytes(file.bytes),
            output::bytes(file.after_vacuum)
        )?,
    }
    Ok(())
}

/// The compaction lines of the report.
fn print_compaction(compaction: &CompactionReport, apply: bool) -> std::io::Result<()> {
    say!(
        "{}: {} session(s), {} superseded snapshot(s) ({} of parts, {} of messages, {} of sessions), {} of row data",
        if apply { "compacted" } else { "would compact" },
        compaction.sessions,
        compaction.snapshots,
        compaction.part_snapshots,
        compaction.message_snapshots,
        compaction.session_snapshots,
        output::bytes(compaction.bytes)
    )?;
    if compaction.already_compacted > 0 {
        say!(
            "already compacted by an identical request: {} session(s)",
            compaction.already_compacted
        )?;
    }
    if compaction.nothing_to_compact > 0 {
        say!(
            "nothing to compact: {} session(s)",
            compaction.nothing_to_compact
        )?;
    }
    for (reason, count) in &compaction.skipped {
        say!(
            "compaction skipped ({}): {count} session(s){}",
            reason.as_str(),
            explain(*reason)
        )?;
    }
    for (reason, count) in &compaction.blocked {
        say!("compaction blocked ({reason}): {count} session(s)")?;
    }
    if compaction.not_reached > 0 {
        say!(
            "compaction not reached (interrupted): {} session(s)",
            compaction.not_reached
        )?;
    }
    Ok(())
}

/// The diffs lines of the report.
fn print_diffs(diffs: &DiffsReport, apply: bool) -> std::io::Result<()> {
    say!(
        "diffs: {} {} file bod(ies) in {} of {} user message(s) looked at, {} of row data",
        if apply { "emptied" } else { "would empty" },
        diffs.entries,
        diffs.pruned,
        diffs.considered,
        output::bytes(diffs.bytes)
    )?;
    if diffs.already_pruned > 0 {
        say!(
            "diffs already emptied by an identical request: {} user message(s)",
            diffs.already_pruned
        )?;
    }
    for (reason, count) in &diffs.skipped {
        say!(
            "diffs skipped ({}): {count} user message(s){}",
            reason.as_str(),
            explain(*reason)
        )?;
    }
    for (reason, count) in &diffs.blocked {
        say!("diffs blocked ({reason}): {count} user message(s)")?;
    }
    if diffs.not_reached > 0 {
        say!(
            "diffs not reached (interrupted): {} user message(s)",
            diffs.not_reached
        )?;
    }
    Ok(())
}

/// The shell lines of the report.
fn print_shell(shell: &ShellReport, apply: bool) -> std::io::Result<()> {
    if shell.considered == 0 {
        return Ok(());
    }
    say!(
        "shell output (OpenCode 2, commands the user ran; never sent to the model again): {} {} of {} row(s) looked at, {} of row data",
        if apply { "emptied" } else { "would empty" },
        shell.emptied,
        shell.considered,
        output::bytes(shell.bytes)
    )?;
    if shell.already_emptied > 0 {
        say!(
            "shell output already emptied by an identical request: {} row(s)",
            shell.already_emptied
        )?;
    }
    for (reason, count) in &shell.skipped {
        say!(
            "shell output skipped ({}): {count} row(s){}",
            reason.as_str(),
            explain(*reason)
        )?;
    }
    for (reason, count) in &shell.blocked {
        say!("shell output blocked ({reason}): {count} row(s)")?;
    }
    if shell.not_reached > 0 {
        say!(
            "shell output not reached (interrupted): {} row(s)",
            shell.not_reached
        )?;
    }
    Ok(())
}

/// The lines of the report on the OpenCode 1.x history OpenCode 2 migrated: what
/// `--migrated-v1` removed (or would), or, without it, what there is to remove.
fn print_migrated(report: &Report, apply: bool, invocation: &str) -> std::io::Result<()> {
    let Some(migrated) = &report.migrated_v1 else {
        if let Some(history) = report.migrated_history {
            say!(
                "OpenCode 1.x history that OpenCode 2 migrated and never reads: {} session(s), {} \
                 (`{invocation} clean --all --migrated-v1` shows what removing it would take)",
                history.sessions,
                output::bytes(history.bytes())
            )?;
        }
        return Ok(());
    };
    say!(
        "migrated 1.x rows: {} {} message(s) ({} part(s)) of {} session(s), {} of row data",
        if apply { "removed" } else { "would remove" },
        migrated.messages,
        migrated.parts,
        migrated.sessions,
        output::bytes(migrated.bytes)
    )?;
    if migrated.already_removed > 0 {
        say!(
            "migrated 1.x rows already removed by an identical request: {} message(s)",
            migrated.already_removed
        )?;
    }
    for (reason, count) in &migrated.skipped_sessions {
        say!(
            "migrated 1.x rows skipped ({}): {count} session(s){}",
            reason.as_str(),
            explain(*reason)
        )?;
    }
    for (reason, count) in &migrated.skipped {
        say!(
            "migrated 1.x rows skipped ({}): {count} message(s){}",
            reason.as_str(),
            explain(*reason)
        )?;
    }
    for (reason, count) in &migrated.blocked {
        say!("migrated 1.x rows blocked ({reason}): {count} message(s)")?;
    }
    if migrated.not_reached > 0 {
        say!(
            "migrated 1.x rows not reached (interrupted): {} message(s)",
            migrated.not_reached
        )?;
    }
    Ok(())
}

/// What a skip reason means, for people (after its name, in the text report).
fn explain(reason: SkipReason) -> &'static str {
    match reason {
        SkipReason::ReadOnly => {
            " - stored where prunes are not written: read-only media, or OpenCode 2 rows in the session table OpenCode 1.17 to 1.19 share"
        }
        SkipReason::NotACopy => {
            " - OpenCode 2 holds no copy of some of its 1.x messages: its migration did not finish, or a 1.x wrote to the session since"
        }
        SkipReason::Incomplete => " - no time.completed: a run is writing it, or was killed",
        SkipReason::Unplaceable => " - a time that is not a number, or an id no request can name",
        SkipReason::NotStringified => {
            " - JSON, but not as OpenCode writes it: emptying its diffs would rewrite more than them"
        }
        SkipReason::TooRecent => " - completed within --older-than",
        SkipReason::Restored => {
            " - put back by `restore`: a clean leaves it (prune it by name, or --include-restored)"
        }
        SkipReason::Oversize
        | SkipReason::Malformed
        | SkipReason::RunningTool
        | SkipReason::UnknownPart => "",
    }
}

/// The `--timings` line of the integrity check: how long it took, and how long the clean
/// waited for it (it reads beside the planning; no write begins before its `ok`).
fn integrity_line(check: &pruning_opencode::IntegrityTimes, apply: bool) -> String {
    let waiter = if apply {
        "the first write waited"
    } else {
        "the dry run waited"
    };
    if check.overlapped {
        format!(
            "integrity check: {:.0} ms beside the planning; {waiter} {:.0} ms for it",
            check.check_ms, check.waited_ms
        )
    } else {
        format!(
            "integrity check: {:.0} ms, before any write",
            check.check_ms
        )
    }
}
