//! The progress of a clean on stderr: a bar on a terminal, a line every few seconds otherwise,
//! nothing with `--json` or `--quiet` (then the clean is given `pruning_clean::Silent`).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::output;

/// Progress on stderr, phase by phase: a bar on a terminal, a line every 5 s otherwise.
pub(super) struct Stderr {
    /// What the phase counts: `messages`, `sessions`, `user messages`.
    unit: &'static str,
    bar: Option<ProgressBar>,
    total: u64,
    started: Instant,
    last_line: Instant,
}

impl Stderr {
    pub(super) fn new() -> Self {
        Self {
            unit: "messages",
            bar: None,
            total: 0,
            started: Instant::now(),
            last_line: Instant::now(),
        }
    }
}

impl pruning_clean::Progress for Stderr {
    fn phase(&mut self, unit: &'static str, total: u64) {
        self.unit = unit;
        self.total = total;
        self.started = Instant::now();
        self.last_line = Instant::now();
        self.bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            let template =
                format!("{{bar:30}} {{pos}}/{{len}} {unit}  {{msg}}  {{per_sec}}  ETA {{eta}}");
            if let Ok(style) = ProgressStyle::with_template(&template) {
                bar.set_style(style);
            }
            bar
        });
    }

    fn update(&mut self, done: u64, freed: u64) {
        let done = done.min(self.total);
        let freed = format!("{} freed", output::bytes(freed));
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            bar.set_message(freed);
        } else if self.last_line.elapsed() >= Duration::from_secs(5) {
            self.last_line = Instant::now();
            let rate = done as f64 / self.started.elapsed().as_secs_f64().max(0.001);
            eprintln!(
                "{done}/{} {unit}, {freed}, {rate:.0} {unit}/s",
                self.total,
                unit = self.unit
            );
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
