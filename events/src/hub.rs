//! The publishing side: a cloneable handle that announces committed events and hands out subscriptions.

use std::fmt;
use std::sync::Arc;

use tokio::sync::broadcast;

use crate::live::Live;
use crate::{ReplaySource, Subscription};

/// How many events a subscriber reads from the source at a time, unless set
/// with [`Hub::with_page_size`].
pub const DEFAULT_PAGE_SIZE: usize = 1024;

/// The fan-out hub: announces committed events to every [`Subscription`].
///
/// A `Hub` is a cheap handle (an [`Arc`] inside); clones share one live
/// channel and one source. When the last handle is dropped, subscriptions
/// deliver what is left and then return
/// [`RecvError::Closed`](crate::RecvError::Closed).
pub struct Hub<S: ReplaySource> {
    inner: Arc<Inner<S>>,
}

struct Inner<S: ReplaySource> {
    source: Arc<S>,
    live: broadcast::Sender<Live<S::Event>>,
    page_size: usize,
}

impl<S: ReplaySource> Hub<S> {
    /// Creates a hub over `source` whose live broadcast buffer holds
    /// `capacity` events.
    ///
    /// A subscriber more than `capacity` events behind the live channel is
    /// caught up from the source, so a small capacity costs reads, not
    /// events. A capacity of 0 is taken as 1.
    ///
    /// # Panics
    ///
    /// Panics if `capacity` is greater than `usize::MAX / 2` (as
    /// [`tokio::sync::broadcast::channel`] does).
    pub fn new(source: Arc<S>, capacity: usize) -> Self {
        Self::with_page_size(source, capacity, DEFAULT_PAGE_SIZE)
    }

    /// Like [`Hub::new`], with subscribers reading the source `page_size`
    /// events at a time (0 is taken as 1).
    ///
    /// # Panics
    ///
    /// Panics if `capacity` is greater than `usize::MAX / 2`.
    pub fn with_page_size(source: Arc<S>, capacity: usize, page_size: usize) -> Self {
        let (live, _) = broadcast::channel(capacity.max(1));
        Self {
            inner: Arc::new(Inner {
                source,
                live,
                page_size: page_size.max(1),
            }),
        }
    }

    /// Announces a newly committed event.
    ///
    /// Call it only once the event is readable from the source. Never fails
    /// the caller: with no subscribers it is a no-op. Best-effort: a
    /// subscriber that cannot keep up reads the event from the source later.
    /// Events may be published out of seq order (concurrent committers):
    /// subscribers fill the gap from the source and drop the late copy.
    pub fn publish(&self, event: S::Event) {
        self.send(event, false);
    }

    /// Announces an event again (an identical retry re-publishes the same
    /// event id and seq).
    ///
    /// Subscribers that already saw that seq receive it again; consumers
    /// dedupe by id. This is what tells an intentional re-announcement from
    /// the replay/live overlap, which the hub dedupes. A subscriber that
    /// lags past the republished event is caught up from the source and
    /// does not get the second copy. Never fails the caller.
    pub fn republish(&self, event: S::Event) {
        self.send(event, true);
    }

    /// Subscribes after cursor `since` (0 = from the beginning).
    ///
    /// The subscription joins the live channel now, before anything is read
    /// from the source, so an event committed while the replay is read is not
    /// lost. Nothing is read until the first
    /// [`recv`](Subscription::recv).
    pub fn subscribe(&self, since: u64) -> Subscription<S> {
        Subscription::new(
            Arc::clone(&self.inner.source),
            self.inner.live.subscribe(),
            since,
            self.inner.page_size,
        )
    }

    /// The number of live subscriptions.
    pub fn receiver_count(&self) -> usize {
        self.inner.live.receiver_count()
    }

    fn send(&self, event: S::Event, republished: bool) {
        // The only failure is "no receiver", which is not an error here.
        let _ = self.inner.live.send(Live { event, republished });
    }
}

impl<S: ReplaySource> Clone for Hub<S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<S: ReplaySource> fmt::Debug for Hub<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub")
            .field("receiver_count", &self.receiver_count())
            .field("page_size", &self.inner.page_size)
            .finish_non_exhaustive()
    }
}
