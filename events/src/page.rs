//! One read from the replay source, with detection of a cursor older than the source keeps.

use crate::{RecvError, ReplaySource, Sequenced};

/// What one read after a cursor found.
pub(crate) enum Page<E> {
    /// Events with seq > the cursor, ascending (possibly none).
    Events(Vec<E>),
    /// Events after the cursor were trimmed: the subscriber must resync and
    /// then resume after `resume_after`.
    Trimmed { first_kept: u64, resume_after: u64 },
}

/// Reads up to `limit` events after `cursor` from `source`.
///
/// A first event more than one past the cursor means a hole; the source's
/// `first_seq` tells whether it is trimming ([`Page::Trimmed`]). A hole the
/// source does not explain is passed through as it is: the source is the
/// authority on which events exist.
pub(crate) fn read<S: ReplaySource>(
    source: &S,
    cursor: u64,
    limit: usize,
) -> Result<Page<S::Event>, RecvError> {
    let mut events = source.events_after(cursor, limit).map_err(boxed)?;
    // Defensive: keep only what the contract promises.
    events.retain(|e| e.seq() > cursor);
    let Some(first) = events.first().map(Sequenced::seq) else {
        return Ok(Page::Events(events));
    };
    if first == cursor.saturating_add(1) {
        return Ok(Page::Events(events));
    }
    match source.first_seq().map_err(boxed)? {
        Some(first_kept) if first_kept > cursor.saturating_add(1) => {
            let newest = source.last_seq().map_err(boxed)?.unwrap_or(0);
            Ok(Page::Trimmed {
                first_kept,
                resume_after: newest.max(first_kept - 1).max(cursor),
            })
        }
        _ => Ok(Page::Events(events)),
    }
}

fn boxed<E: std::error::Error + Send + Sync + 'static>(error: E) -> RecvError {
    RecvError::Source(Box::new(error))
}
