//! The progress of a clean on stderr: a bar on a terminal, a line every few seconds otherwise,
//! nothing with `--json` or `--quiet` (then the clean is given `pruning_clean::Silent`). Each
//! phase shows done/total, the bytes freed so far and the time its rest should take at the
//! pace it has kept since it began: the phase's, not the whole clean's (the messages come after
//! the compactions, at a pace of their own).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::output;

/// How long a phase runs, and how much of it must be done, before its pace is trusted for an
/// estimate of the time left.
const SETTLED: (Duration, f64) = (Duration::from_secs(2), 0.01);

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

    /// The time the rest of the phase should take at its pace so far, in words; `None` until
    /// the pace is settled ([`SETTLED`]).
    fn time_left(&self, done: u64) -> Option<String> {
        let elapsed = self.started.elapsed();
        let share = done as f64 / self.total.max(1) as f64;
        if elapsed < SETTLED.0 || share < SETTLED.1 {
            return None;
        }
        let left = elapsed.as_secs_f64() * (1.0 - share) / share;
        Some(duration_words(Duration::from_secs_f64(left.round())))
    }
}

/// A duration as a person reads a time left: `45s`, `3m 20s`, `1h 05m`.
fn duration_words(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m {:02}s", seconds / 60, seconds % 60),
        _ => format!("{}h {:02}m", seconds / 3600, seconds % 3600 / 60),
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
            let template = format!("{{bar:30}} {{pos}}/{{len}} {unit}  {{msg}}");
            if let Ok(style) = ProgressStyle::with_template(&template) {
                bar.set_style(style);
            }
            bar
        });
    }

    fn update(&mut self, done: u64, freed: u64) {
        let done = done.min(self.total);
        let freed = format!("{} freed", output::bytes(freed));
        let left = self.time_left(done).map_or_else(
            || "estimating the time left".to_string(),
            |t| format!("about {t} left in this phase"),
        );
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            bar.set_message(format!("{freed}  {left}"));
        } else if self.last_line.elapsed() >= Duration::from_secs(5) {
            self.last_line = Instant::now();
            let rate = done as f64 / self.started.elapsed().as_secs_f64().max(0.001);
            eprintln!(
                "{done}/{} {unit}, {freed}, {rate:.0} {unit}/s, {left}",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_left_is_written_in_the_largest_units_that_matter() {
        let words = |s| duration_words(Duration::from_secs(s));
        assert_eq!(words(0), "0s");
        assert_eq!(words(59), "59s");
        assert_eq!(words(200), "3m 20s");
        assert_eq!(words(3_900), "1h 05m");
    }
}
