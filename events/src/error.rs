//! Why a subscription could not deliver.

/// The error returned by [`Subscription::recv`](crate::Subscription::recv).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecvError {
    /// Every [`Hub`](crate::Hub) handle was dropped and every event was
    /// delivered. Every later call returns this again.
    #[error("the event hub was dropped and every event has been delivered")]
    Closed,
    /// Reading missed events from the [`ReplaySource`](crate::ReplaySource)
    /// failed. Nothing was delivered and nothing was lost: the next call
    /// retries the same read.
    #[error("reading missed events from the replay source failed")]
    Source(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
}
