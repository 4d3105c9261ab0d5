//! How a clean's writes take their turn beside other writers of the same engine: the command
//! line's clean writes at once ([`AtOnce`]); the server's upkeep (`serve --auto-clean`) takes
//! the server's write turn for each batch and each slice of its give back, so that the prunes
//! requests ask for go between them (docs/ARCHITECTURE.md, "Upkeep in the server").

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pruning_opencode::{GivenBack, OpenCodeStore};

/// Where a clean's writes wait for their turn.
pub trait Turns: Sync {
    /// Runs `work` (one batch of prunes, or one slice of a give back) in the clean's turn.
    fn take(&self, work: &mut dyn FnMut());

    /// How long one turn of the give back may last; `None`: the give back is one turn,
    /// however long.
    fn give_back_slice(&self) -> Option<Duration> {
        None
    }
}

/// The command line's turns: nothing else writes through this engine, the work runs at once.
pub struct AtOnce;

impl Turns for AtOnce {
    fn take(&self, work: &mut dyn FnMut()) {
        work();
    }
}

/// Gives the freed pages back, in turns of [`Turns::give_back_slice`] each, until none are
/// left, `stop` is set, or a turn gives back nothing; the turns' figures are added up.
///
/// Errors: the first turn's error (the turns before it stand).
pub(crate) fn give_back(
    store: &OpenCodeStore,
    turns: &dyn Turns,
    stop: &AtomicBool,
) -> Result<GivenBack, pruning_engine::StoreError> {
    let stopped = || stop.load(Ordering::SeqCst);
    let Some(slice) = turns.give_back_slice() else {
        let mut given = None;
        turns.take(&mut || given = Some(store.give_back_pages(&stopped)));
        return given.unwrap_or_else(|| Ok(GivenBack::default()));
    };
    let mut total: Option<GivenBack> = None;
    loop {
        let mut given = None;
        turns.take(&mut || {
            let until = Instant::now() + slice;
            given = Some(store.give_back_pages(&|| stopped() || Instant::now() >= until));
        });
        let Some(given) = given else {
            break;
        };
        let given = given?;
        let progress = given.pages > 0;
        let done = given.left_pages == 0 || stopped() || !progress;
        total = Some(match total {
            None => given,
            Some(sum) => add(sum, given),
        });
        if done {
            break;
        }
    }
    Ok(total.unwrap_or_default())
}

/// Two turns' give back as one: counts added, the longest step, what was left at the end.
fn add(sum: GivenBack, next: GivenBack) -> GivenBack {
    GivenBack {
        pages: sum.pages + next.pages,
        bytes: sum.bytes + next.bytes,
        steps: sum.steps + next.steps,
        longest_step_ms: sum.longest_step_ms.max(next.longest_step_ms),
        left_pages: next.left_pages,
        stopped: next.stopped,
        file_bytes_before: sum.file_bytes_before,
        file_bytes_after: next.file_bytes_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_turns_add_up_to_one_give_back() {
        let first = GivenBack {
            pages: 10,
            bytes: 40_960,
            steps: 2,
            longest_step_ms: 12.5,
            left_pages: 5,
            stopped: Some("it was stopped".into()),
            file_bytes_before: 100_000,
            file_bytes_after: 59_040,
        };
        let second = GivenBack {
            pages: 5,
            bytes: 20_480,
            steps: 1,
            longest_step_ms: 3.0,
            left_pages: 0,
            stopped: None,
            file_bytes_before: 59_040,
            file_bytes_after: 38_560,
        };
        assert_eq!(
            add(first, second),
            GivenBack {
                pages: 15,
                bytes: 61_440,
                steps: 3,
                longest_step_ms: 12.5,
                left_pages: 0,
                stopped: None,
                file_bytes_before: 100_000,
                file_bytes_after: 38_560,
            }
        );
    }
}
