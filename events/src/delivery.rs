//! What a subscriber receives: an event, or the order to reload everything.

/// One item delivered by [`Subscription::recv`](crate::Subscription::recv).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery<E> {
    /// A committed event, in seq order (or again, after a
    /// [`Hub::republish`](crate::Hub::republish)).
    Event(E),
    /// The cursor is older than the journal keeps; the consumer must reload
    /// everything, then live events follow.
    ///
    /// The subscription resumes after the newest event kept when the resync
    /// was decided, so what follows is exactly what the reload may not have
    /// seen (possibly an event or two it did see: consumers dedupe by id).
    Resync {
        /// The lowest seq the source still keeps.
        first_kept: u64,
    },
}
