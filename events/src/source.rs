//! Where a subscriber reads the events it missed: the journal, seen through a trait.

use crate::Sequenced;

/// Where missed events are read from (the journal).
///
/// Every method is blocking and must be fast (a local read): it is called
/// directly from the subscriber's task, inside
/// [`Subscription::recv`](crate::Subscription::recv), not on a blocking pool.
///
/// # Contract
///
/// * An event is readable here before it is passed to
///   [`Hub::publish`](crate::Hub::publish) (journal first, then publish).
/// * Sequence numbers are contiguous: trimming removes a prefix, never a
///   range in the middle.
pub trait ReplaySource: Send + Sync + 'static {
    /// The event type the source stores and the hub fans out.
    type Event: Sequenced;
    /// The error a read can fail with; it reaches the subscriber boxed in
    /// [`RecvError::Source`](crate::RecvError::Source).
    type Error: std::error::Error + Send + Sync + 'static;

    /// Up to `limit` events with seq > `since`, ascending.
    ///
    /// `limit` is at least 1. An empty result means nothing after `since` is
    /// kept.
    fn events_after(&self, since: u64, limit: usize) -> Result<Vec<Self::Event>, Self::Error>;

    /// Lowest seq still kept, if any (events before it were trimmed).
    ///
    /// A cursor older than `first_seq - 1` gets a
    /// [`Delivery::Resync`](crate::Delivery::Resync).
    fn first_seq(&self) -> Result<Option<u64>, Self::Error>;

    /// Highest seq kept, if any.
    ///
    /// Read only when a subscriber is resynced: it resumes after this seq.
    /// The default pages through [`events_after`](Self::events_after) from the
    /// start, which reads every kept event; a journal with an index should
    /// override it with a direct lookup.
    fn last_seq(&self) -> Result<Option<u64>, Self::Error> {
        const PAGE: usize = 1024;
        let mut last = None;
        let mut after = 0;
        loop {
            let page = self.events_after(after, PAGE)?;
            let Some(tail) = page.last().map(Sequenced::seq) else {
                return Ok(last);
            };
            // A source that does not move forward would loop for ever.
            if tail <= after {
                return Ok(last);
            }
            last = Some(tail);
            after = tail;
            if page.len() < PAGE {
                return Ok(last);
            }
        }
    }
}
