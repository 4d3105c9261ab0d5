//! `session-prune history [SESSION] [--query TEXT] [--purpose search|stats|prune]`: pages of the
//! CodeNomad-compatible history scan (read-only; no journal is opened). `--json` prints the
//! contract page; `--all` follows the cursor to the end (with `--json`, one page per line).

use pruning_engine::history::HistoryPage;
use pruning_engine::{HistoryRequest, HistoryResult, Purpose};

use super::{open_store, Outcome};
use crate::cli::args::ScopeArgs;
use crate::cli::config::{scope, Config};
use crate::output;
use crate::output::say;

/// What a history page is for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PurposeArg {
    /// Find the query in text (and in tool and reasoning parts unless --no-technical).
    Search,
    /// Count tool and reasoning parts only.
    Stats,
    /// List prunable messages with their revisions (needs SESSION).
    Prune,
}

/// `history` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id (ses_...); all sessions in scope when left out.
    session: Option<String>,
    /// Text to find, case-insensitive (at most 200 characters).
    #[arg(long, short, default_value = "", value_name = "TEXT")]
    query: String,
    /// Search text parts only, not tool and reasoning parts.
    #[arg(long)]
    no_technical: bool,
    /// What the page is for.
    #[arg(long, value_enum, default_value = "search")]
    purpose: PurposeArg,
    /// Continue a scan where the page that printed this cursor stopped.
    #[arg(long, value_name = "CURSOR", conflicts_with = "all")]
    cursor: Option<String>,
    /// Print every page to the end of the scan (with --json: one page per line).
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    scope: ScopeArgs,
}

/// Validates the request (exit 2 on a bad one), then prints one page, or every page with
/// `--all`.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let scope = scope(args.scope)?;
    let purpose = match args.purpose {
        PurposeArg::Search => Purpose::Search,
        PurposeArg::Stats => Purpose::Stats,
        PurposeArg::Prune => Purpose::Prune,
    };
    let request = HistoryRequest::new(
        args.session,
        args.query,
        !args.no_technical,
        purpose,
        args.cursor,
    )?;
    execute(config, &request.within(scope), args.all)
}

/// Prints one page, or every page with `all`.
fn execute(config: &Config, request: &HistoryRequest, all: bool) -> anyhow::Result<Outcome> {
    let store = open_store(config)?;
    super::refuse_rowless(&store, &config.db)?;
    let mut request = request.clone();
    if request.purpose == Purpose::Search && request.query.is_empty() && !config.json {
        say!("no --query given: nothing to find, so only counts are shown (--purpose stats says the same; --purpose prune lists prunable messages)")?;
    }
    let mut totals = Totals::default();
    loop {
        let outcome = pruning_engine::history(&store, &request)?;
        let page = match &outcome.result {
            HistoryResult::Page(page) => page,
            HistoryResult::Blocked { reason } => {
                let detail =
                    output::printable(outcome.refusal.as_ref().map_or("", |r| r.detail.as_str()));
                if config.json && all {
                    output::json_line(&outcome.result)?;
                    eprintln!("blocked: {reason}: {detail}");
                } else if config.json {
                    output::json_document(&outcome.result)?;
                    eprintln!("blocked: {reason}: {detail}");
                } else {
                    say!("blocked: {reason}: {detail}")?;
                }
                return Ok(Outcome::Blocked);
            }
        };
        if config.json && all {
            output::json_line(&outcome.result)?;
        } else if config.json {
            output::json_document(&outcome.result)?;
        } else {
            print_page(page, &outcome.skipped)?;
        }
        totals.add(page);
        match (&page.cursor, all) {
            (Some(cursor), true) => request.cursor = Some(cursor.clone()),
            (Some(cursor), false) => {
                if !config.json {
                    say!("more history follows: add --cursor {cursor} (or run it again with --all, without a cursor, to page through to the end)")?;
                }
                break;
            }
            (None, _) => {
                if !config.json {
                    say!("end of history")?;
                }
                break;
            }
        }
    }
    if all && !config.json {
        let found = match request.purpose {
            Purpose::Search => format!(", {} hit(s)", totals.hits),
            Purpose::Stats => String::new(),
            Purpose::Prune => format!(", {} candidate(s)", totals.candidates),
        };
        say!(
            "in all: {} message(s) scanned, {} skipped, {} tool and {} reasoning part(s){found}",
            totals.scanned,
            totals.skipped,
            totals.tools,
            totals.reasoning
        )?;
    }
    Ok(Outcome::Done)
}

#[derive(Debug, Default)]
struct Totals {
    scanned: u64,
    skipped: u64,
    tools: u64,
    reasoning: u64,
    hits: u64,
    candidates: u64,
}

impl Totals {
    fn add(&mut self, page: &pruning_engine::history::HistoryPage) {
        self.scanned += u64::from(page.scanned);
        self.skipped += u64::from(page.skipped);
        self.tools += u64::from(page.tools);
        self.reasoning += u64::from(page.reasoning);
        self.hits += page.hits.len() as u64;
        self.candidates += page.candidates.len() as u64;
    }
}

fn print_page(page: &HistoryPage, skipped: &[(String, String)]) -> std::io::Result<()> {
    for hit in &page.hits {
        let kind = serde_json::to_value(hit.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        say!(
            "{} {} {} part {} ({kind}): {}",
            output::printable(&hit.session_id),
            output::printable(&hit.message_id),
            output::printable(&hit.role),
            hit.part_index,
            output::printable(&one_line(&hit.excerpt))
        )?;
    }
    for candidate in &page.candidates {
        say!(
            "candidate {} revision {} ({} tool, {} reasoning)",
            output::printable(&candidate.message_id),
            candidate.revision,
            candidate.tool_count,
            candidate.reasoning_count
        )?;
    }
    for (message_id, why) in skipped {
        say!(
            "skipped {}: {}",
            output::printable(message_id),
            output::printable(why)
        )?;
    }
    say!(
        "page: {} message(s) scanned, {} skipped, {} tool and {} reasoning part(s)",
        page.scanned,
        page.skipped,
        page.tools,
        page.reasoning
    )?;
    Ok(())
}

/// `text` on one line: every run of whitespace (newlines among it) becomes one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
