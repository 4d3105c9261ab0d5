//! The progress of a clean on stderr: a bar on a terminal, a line every few seconds otherwise,
//! nothing with `--json`.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::report::Report;
use crate::output;

/// Progress on stderr: a bar on a terminal, a line every 5 s otherwise, nothing for `--json`.
pub(super) struct Progress {
    /// What is counted: `messages`, `sessions`, `user messages`.
    unit: &'static str,
    bar: Option<ProgressBar>,
    plain: bool,
    total: u64,
    done: u64,
    started: Instant,
    last_line: Instant,
}

impl Progress {
    /// Progress over `total` things called `unit` (nothing shown with `json`).
    pub(super) fn new(json: bool, total: u64, unit: &'static str) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (!json && terminal).then(|| {
            let bar = ProgressBar::new(total);
            let template =
                format!("{{bar:30}} {{pos}}/{{len}} {unit}  {{msg}}  {{per_sec}}  ETA {{eta}}");
            if let Ok(style) = ProgressStyle::with_template(&template) {
                bar.set_style(style);
            }
            bar
        });
        Self {
            unit,
            bar,
            plain: !json && !terminal,
            total,
            done: 0,
            started: Instant::now(),
            last_line: Instant::now(),
        }
    }

    /// `done` of the total are done; the report says what was freed so far.
    pub(super) fn update(&mut self, done: u64, report: &Report) {
        self.done = done.min(self.total);
        let freed = format!("{} freed", output::bytes(report.freed_bytes()));
        if let Some(bar) = &self.bar {
            bar.set_position(self.done);
            bar.set_message(freed);
        } else if self.plain && self.last_line.elapsed() >= Duration::from_secs(5) {
            self.last_line = Instant::now();
            let rate = self.done as f64 / self.started.elapsed().as_secs_f64().max(0.001);
            eprintln!(
                "{}/{} {unit}, {freed}, {rate:.0} {unit}/s",
                self.done,
                self.total,
                unit = self.unit
            );
        }
    }

    pub(super) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
