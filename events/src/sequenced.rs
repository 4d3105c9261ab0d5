//! The one thing the hub needs to know about an event: its journal sequence number.

/// An event with a journal sequence number (1, 2, 3... strictly increasing in
/// commit order).
///
/// The hub relies on the numbering having no holes: a live event whose seq is
/// more than one past a subscriber's cursor tells the subscriber that events
/// are missing, and they are read from the [`ReplaySource`](crate::ReplaySource).
/// Seq 0 is never used: it is the cursor of a subscriber that saw nothing.
pub trait Sequenced: Clone + Send + Sync + 'static {
    /// The journal sequence number of this event.
    fn seq(&self) -> u64;
}
