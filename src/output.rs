//! Printing helpers shared by the commands: JSON documents and lines, byte sizes, times, and
//! [`say!`], the `println!` that returns its write error (a reader that went away, as in
//! `session-prune sessions | head`, is `io::ErrorKind::BrokenPipe`, which `main` ends quietly
//! on) instead of panicking.

/// Writes one line to stdout like `println!`, returning the `io::Result` of the write.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}
pub(crate) use say;

use std::io::Write;
use std::time::{Duration, UNIX_EPOCH};

use serde::Serialize;

/// Prints one JSON document (pretty, as the HTTP API answers) on stdout.
pub fn json_document<T: Serialize>(value: &T) -> anyhow::Result<()> {
    // The same bytes the HTTP API answers with.
    let text = pruning_engine::contract::document(value)?;
    std::io::stdout().lock().write_all(&text)?;
    Ok(())
}

/// Prints a browsing answer on stdout: the bytes the HTTP API answers with
/// ([`pruning_engine::browse::document`], compact).
pub fn json_compact<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let text = pruning_engine::browse::document(value)?;
    std::io::stdout().lock().write_all(&text)?;
    Ok(())
}

/// Prints one JSON line on stdout and flushes it (for streams).
pub fn json_line<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let mut text = serde_json::to_vec(value)?;
    text.push(b'\n');
    let mut out = std::io::stdout().lock();
    out.write_all(&text)?;
    out.flush()?;
    Ok(())
}

/// `1536` -> `1.5 KiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// ms since the Unix epoch -> RFC 3339 UTC with milliseconds.
pub fn time(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}

/// `text` with control characters (terminal escape sequences among them) shown as `?`, for
/// printing strings that came from the database.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// `outcome`, unless printing the answer failed for another reason than stdout's reader going
/// away (`io::ErrorKind::BrokenPipe`): a command's exit code does not depend on whether anyone
/// read its answer (a refused prune piped into `head -0` still exits 3).
///
/// Errors: the write error, when it is not a closed pipe.
pub fn unless_reader_gone<T>(printed: anyhow::Result<()>, outcome: T) -> anyhow::Result<T> {
    match printed {
        Ok(()) => Ok(outcome),
        Err(error) if error.chain().any(is_closed_pipe) => Ok(outcome),
        Err(error) => Err(error),
    }
}

/// Whether a cause is a write to a pipe whose reader went away (`io::ErrorKind::BrokenPipe`).
pub fn is_closed_pipe(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause
        .downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

/// What a receipt's prune removed, in words: `N part(s)`, `N superseded snapshot(s)` (a
/// compaction's), `the file bodies of N diff(s)` (a diffs prune's), or `its OpenCode 1.x copy
/// (the message row and N part(s))` (a removal of migrated rows), or `the output its shell
/// command kept` (an OpenCode 2 shell row's). A restore's receipt
/// names the operation of the prune it undid, so the same words say what it put back.
pub fn removed(receipt: &pruning_engine::Receipt) -> String {
    match &receipt.operation {
        Some(pruning_engine::Operation::Compaction(compacted)) => {
            format!("{} superseded snapshot(s)", compacted.total())
        }
        Some(pruning_engine::Operation::Diffs(diffs)) => {
            format!("the file bodies of {} diff(s)", diffs.entries)
        }
        Some(pruning_engine::Operation::MigratedV1(removed)) => format!(
            "its OpenCode 1.x copy (the message row and {} part(s))",
            removed.parts
        ),
        Some(pruning_engine::Operation::ShellOutput(_)) => {
            "the output its shell command kept".to_string()
        }
        None => format!("{} part(s)", receipt.part_ids.len()),
    }
}

/// What a receipt names: `message M`, or, for a compaction (which names no message), `the event
/// log of session S`.
pub fn subject(receipt: &pruning_engine::Receipt) -> String {
    if receipt.message_id.is_empty() {
        format!(
            "the event log of session {}",
            printable(&receipt.session_id)
        )
    } else {
        format!("message {}", printable(&receipt.message_id))
    }
}
