//! `session-prune stats [--top N] [--exact]`: where the bytes of the database are (read-only).
//! The technical content and the copies are estimated from a sample of rows unless `--exact`.

use pruning_opencode::{Exactness, Volume};

use super::{open_store, Outcome};
use crate::cli::config::Config;
use crate::output;
use crate::output::say;

/// `stats` flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many of the largest sessions to list.
    #[arg(long, default_value_t = 10, value_name = "N")]
    top: usize,
    /// Read every row, for exact technical and copy figures (on a large file, about as long as
    /// copying it); without it they are estimated from a sample of rows, and marked so.
    #[arg(long)]
    exact: bool,
}

/// Prints the statistics.
pub fn run(Args { top, exact }: Args, config: &Config) -> anyhow::Result<Outcome> {
    let store = open_store(config)?;
    super::require_opencode(&store, &config.db)?;
    let exactness = if exact {
        Exactness::Exact
    } else {
        Exactness::Estimated
    };
    let overview = store.overview(top, exactness)?;
    if config.json {
        output::json_document(&overview)?;
        return Ok(Outcome::Done);
    }
    let (stats, list) = (&overview.stats, &overview.sessions);
    let size = |v: &Volume| format!("{:>10} {:>11}", v.count, output::bytes(v.bytes));
    // An estimated figure is marked `~`: a figure of a table that was not read whole.
    let estimated = |table: &str| {
        stats
            .estimate
            .as_ref()
            .is_some_and(|e| e.estimated_tables.contains(&table))
    };
    let about = if stats.estimate.is_some() { "~" } else { "" };
    let guess = |table: &str, v: &Volume| {
        let about = if estimated(table) { "~" } else { "" };
        format!(
            "{:>10} {:>11}",
            format!("{about}{}", v.count),
            format!("{about}{}", output::bytes(v.bytes))
        )
    };
    if !stats.releases.is_empty() {
        let written: Vec<String> = stats
            .releases
            .iter()
            .map(|release| {
                let version = if release.version.is_empty() {
                    "an unnamed release"
                } else {
                    release.version.as_str()
                };
                format!(
                    "OpenCode {} ({} session(s))",
                    output::printable(version),
                    release.sessions
                )
            })
            .collect();
        say!("written by {}", written.join(", "))?;
    }
    for service in &stats.services {
        say!(
            "{} has the database open: it may write beside this tool (prunes keep clear of the \
             sessions it runs); `opencode service stop` stops it before a `vacuum`",
            service.describe()
        )?;
    }
    say!(
        "file {}  wal {}  free pages {} (given back by vacuum)",
        output::bytes(stats.database_bytes),
        output::bytes(stats.wal_bytes),
        output::bytes(stats.free_bytes)
    )?;
    say!("\n{:<34} {:>10} {:>11}", "table", "rows", "data")?;
    let m = &stats.migrated_v1;
    for table in &stats.tables {
        // A 1.x table that holds nothing but the copy OpenCode 2 migrated says so.
        let copy = match table.table {
            "message" => m.messages.count,
            "part" => m.parts.count,
            _ => 0,
        };
        let name = if copy > 0 && copy == table.volume.count {
            format!("{} (1.x copy, below)", table.table)
        } else {
            table.table.to_string()
        };
        say!("{:<34} {}", name, size(&table.volume))?;
    }
    // Lines of OpenCode 1.x's content only where the file has its tables.
    let has = |name: &str| stats.tables.iter().any(|table| table.table == name);
    if !stats.events.is_empty() {
        say!("\n{:<34} {:>10} {:>11}", "event type", "rows", "data")?;
        for event in &stats.events {
            say!(
                "{:<34} {}",
                output::printable(&event.event_type),
                size(&event.volume)
            )?;
        }
    }
    let t = &stats.technical;
    say!(
        "\n{:<34} {:>10} {:>11}",
        "technical content",
        "count",
        "bytes"
    )?;
    if has("part") {
        say!(
            "{:<34} {}",
            "tool parts (OpenCode 1.x)",
            guess("part", &t.tool_parts)
        )?;
        say!(
            "{:<34} {}",
            "reasoning parts (OpenCode 1.x)",
            guess("part", &t.reasoning_parts)
        )?;
    }
    if has("event") && (has("part") || t.snapshot_events.count > 0) {
        say!(
            "{:<34} {}",
            "snapshot events of them",
            guess("event", &t.snapshot_events)
        )?;
    }
    if has("session_message") {
        say!(
            "{:<34} {}",
            "tool/reasoning entries (OpenCode 2)",
            guess("session_message", &t.v2_entries)
        )?;
    }
    if t.shell_output.count + t.shell_sent.count > 0 {
        say!(
            "{:<34} {}",
            "user shell output (OpenCode 2)",
            guess("session_message", &t.shell_output)
        )?;
        say!(
            "{:<34} {}",
            "  sent to the model (kept)",
            guess("session_message", &t.shell_sent)
        )?;
    }
    say!(
        "{:<34} {}",
        "spill files (tool-output/, shell/)",
        size(&stats.spill.files)
    )?;
    say!(
        "{:<34} {}",
        "  of them named by no row",
        size(&stats.spill.unreferenced)
    )?;
    let c = &stats.copies;
    // OpenCode 1.x's copies: only where the file has its tables (OpenCode 2 keeps none).
    if has("message") || !stats.events.is_empty() {
        say!(
            "\n{:<34} {:>10} {:>11}",
            "copies OpenCode keeps",
            "count",
            "bytes"
        )?;
        for superseded in &c.superseded_snapshots {
            say!(
                "{:<34} {}",
                format!("superseded {}", output::printable(&superseded.event_type)),
                guess("event", &superseded.volume)
            )?;
        }
        say!(
            "{:<34} {}",
            "diff file bodies in messages",
            guess("message", &c.diffs_in_messages)
        )?;
        say!(
            "{:<34} {}",
            "  and in message.updated.1 events",
            guess("event", &c.diffs_in_snapshots)
        )?;
    }
    let superseded: u64 = c.superseded_snapshots.iter().map(|s| s.volume.bytes).sum();
    let technical = t.tool_parts.bytes
        + t.reasoning_parts.bytes
        + t.snapshot_events.bytes
        + t.v2_entries.bytes
        + t.shell_output.bytes;
    if has("message") || !stats.events.is_empty() {
        say!(
            "\n{about}{} is technical content and its snapshots, {about}{} superseded snapshots (partly the same \
             rows: a part's older snapshots), {about}{} file bodies of diffs; `{} clean --all` shows what a \
             clean would take (it compacts first; completed messages, last 2 turns kept; --diffs \
             for the bodies)",
            output::bytes(technical),
            output::bytes(superseded),
            output::bytes(c.diffs_in_messages.bytes + c.diffs_in_snapshots.bytes),
            config.invocation
        )?;
    } else {
        say!(
            "\n{about}{} is technical content (tool calls with their output, reasoning); `{} clean \
             --all` shows what a clean would take (completed messages, last 2 turns kept)",
            output::bytes(technical),
            config.invocation
        )?;
    }
    if m.sessions > 0 {
        say!(
            "\n{:<34} {:>10} {:>11}",
            "history OpenCode 2 migrated",
            "count",
            "bytes"
        )?;
        say!("{:<34} {:>10}", "sessions", m.sessions)?;
        say!(
            "{:<34} {}",
            "their OpenCode 1.x messages",
            size(&m.messages)
        )?;
        say!("{:<34} {}", "their OpenCode 1.x parts", size(&m.parts))?;
        say!(
            "{} of OpenCode 1.x rows that OpenCode 2 copied at its first start and never reads \
             again (not counted above); `{} clean --all --migrated-v1` shows what removing them \
             would take",
            output::bytes(m.bytes()),
            config.invocation
        )?;
    }
    if let Some(estimate) = &stats.estimate {
        let rows: u64 = stats.tables.iter().map(|t| t.volume.count).sum();
        say!(
            "\n~ estimated from {} rows read whole of {rows} (the rest by size) in {}: each ~ \
             byte figure is within {} of the exact one 19 times in 20, each ~ count within \
             about 6 % of its table's rows; `{} stats --exact` reads every row",
            estimate.sampled_rows,
            estimate.estimated_tables.join(", "),
            output::bytes(estimate.margin_bytes),
            config.invocation
        )?;
    }
    say!(
        "\n{:<32} {:>8} {:>11} {:>11}  title",
        "largest sessions",
        "messages",
        "total",
        "prunable"
    )?;
    for s in list {
        say!(
            "{:<32} {:>8} {:>11} {:>11}  {}",
            output::printable(&s.session_id),
            s.messages,
            output::bytes(s.total_bytes),
            format!(
                "{}{}",
                if s.prunable_estimated { "~" } else { "" },
                output::bytes(s.prunable_bytes)
            ),
            output::printable(&s.title)
        )?;
    }
    Ok(Outcome::Done)
}
