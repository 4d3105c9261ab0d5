//! The envelope of an event on the live broadcast channel.

/// A live event and how it was announced.
#[derive(Debug, Clone)]
pub(crate) struct Live<E> {
    /// The announced event.
    pub(crate) event: E,
    /// Sent by [`Hub::republish`](crate::Hub::republish): delivered even to
    /// subscribers whose cursor is already past its seq.
    pub(crate) republished: bool,
}
