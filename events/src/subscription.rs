//! The receiving side: one subscriber's cursor and the replay-then-live state machine behind `recv`.

use std::collections::VecDeque;
use std::fmt;
use std::mem;
use std::sync::Arc;

use tokio::sync::broadcast;

use crate::live::Live;
use crate::page::{self, Page};
use crate::{Delivery, RecvError, ReplaySource, Sequenced, SubscriptionStream};

/// One subscriber: its cursor, its place in the live channel and whatever it
/// has read but not yet delivered.
///
/// Created by [`Hub::subscribe`](crate::Hub::subscribe). Every delivery goes
/// through [`recv`](Self::recv) (or the [`Stream`](tokio_stream::Stream) from
/// [`into_stream`](Self::into_stream)).
pub struct Subscription<S: ReplaySource> {
    source: Arc<S>,
    live: broadcast::Receiver<Live<S::Event>>,
    page_size: usize,
    /// Last seq delivered.
    cursor: u64,
    /// Read from the source, not yet delivered; ascending, all after `cursor`.
    ready: VecDeque<Ready<S::Event>>,
    phase: Phase<S::Event>,
}

/// A delivery decided but not yet handed out.
enum Ready<E> {
    Event(E),
    Resync { first_kept: u64, resume_after: u64 },
}

/// Where the subscription reads its next deliveries from.
enum Phase<E> {
    /// Reading the source until a short page says it is caught up; used
    /// first, and after the live channel lagged.
    CatchUp,
    /// Waiting on the live channel.
    Live,
    /// A live event arrived more than one past the cursor: the events in
    /// between are read from the source, then `held` is delivered.
    Fill { held: E },
    /// The hub is gone: a last catch-up from the source, then `Closed`.
    Draining,
    /// Everything is delivered.
    Closed,
}

impl<S: ReplaySource> Subscription<S> {
    pub(crate) fn new(
        source: Arc<S>,
        live: broadcast::Receiver<Live<S::Event>>,
        since: u64,
        page_size: usize,
    ) -> Self {
        Self {
            source,
            live,
            page_size,
            cursor: since,
            ready: VecDeque::new(),
            phase: Phase::CatchUp,
        }
    }

    /// Receives the next delivery.
    ///
    /// Replays the journaled events with seq > the cursor first, read from
    /// the source a page at a time, then the live ones. Each seq is delivered
    /// once and in order: the replay/live overlap is deduped, and a live
    /// event more than one past the cursor (published out of order by
    /// concurrent committers) waits until the events before it are read from
    /// the source. The only repeats are events sent with
    /// [`Hub::republish`](crate::Hub::republish).
    ///
    /// A cursor older than the source keeps yields one
    /// [`Delivery::Resync`], after which delivery resumes past the newest
    /// event kept at that moment.
    ///
    /// # Lag
    ///
    /// If the subscriber falls more than the hub's capacity behind the live
    /// channel, the missed range is read again from the source. The
    /// subscriber is never dropped and never sees a gap; a republished copy
    /// that fell in the missed range is not delivered.
    ///
    /// # Errors
    ///
    /// * [`RecvError::Closed`] once every [`Hub`](crate::Hub) handle is
    ///   dropped and everything is delivered (including events the source
    ///   holds past the last live one).
    /// * [`RecvError::Source`] if a source read fails. Nothing is lost: the
    ///   next call retries.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. Its only await point is the live
    /// channel's `recv`, which is cancel safe, and everything read from the
    /// source is kept in the subscription, not in the future. If the future
    /// is dropped before it completes, no delivery is lost and the next call
    /// picks up where it left off.
    ///
    /// # Blocking
    ///
    /// Source reads run on the calling task (the source promises they are
    /// fast local reads).
    ///
    /// # Panics
    ///
    /// Does not panic, unless the source does.
    pub async fn recv(&mut self) -> Result<Delivery<S::Event>, RecvError> {
        loop {
            if let Some(ready) = self.ready.pop_front() {
                return Ok(self.hand_out(ready));
            }
            match &self.phase {
                Phase::CatchUp | Phase::Draining => self.catch_up()?,
                Phase::Fill { held } => {
                    let target = held.seq();
                    self.fill(target)?;
                }
                Phase::Live => match self.live.recv().await {
                    Ok(live) => {
                        if let Some(delivery) = self.on_live(live) {
                            return Ok(delivery);
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => self.phase = Phase::CatchUp,
                    Err(broadcast::error::RecvError::Closed) => self.phase = Phase::Draining,
                },
                Phase::Closed => return Err(RecvError::Closed),
            }
        }
    }

    /// Last seq delivered (the cursor to resume from).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Turns the subscription into a [`Stream`](tokio_stream::Stream) of
    /// deliveries that ends after [`RecvError::Closed`].
    pub fn into_stream(self) -> SubscriptionStream<S> {
        SubscriptionStream::new(self)
    }

    /// Delivers a decided item and moves the cursor past it.
    fn hand_out(&mut self, ready: Ready<S::Event>) -> Delivery<S::Event> {
        match ready {
            Ready::Event(event) => {
                self.cursor = self.cursor.max(event.seq());
                Delivery::Event(event)
            }
            Ready::Resync {
                first_kept,
                resume_after,
            } => {
                self.cursor = self.cursor.max(resume_after);
                Delivery::Resync { first_kept }
            }
        }
    }

    /// Reads one page after the cursor; a short page ends the catch-up.
    fn catch_up(&mut self) -> Result<(), RecvError> {
        match page::read(&*self.source, self.cursor, self.page_size)? {
            Page::Trimmed {
                first_kept,
                resume_after,
            } => self.ready.push_back(Ready::Resync {
                first_kept,
                resume_after,
            }),
            Page::Events(events) => {
                let caught_up = events.len() < self.page_size;
                self.ready.extend(events.into_iter().map(Ready::Event));
                if caught_up {
                    self.phase = match self.phase {
                        Phase::Draining => Phase::Closed,
                        _ => Phase::Live,
                    };
                }
            }
        }
        Ok(())
    }

    /// Reads one page of the gap before the held live event `target`, or
    /// releases the held event once nothing is missing before it.
    fn fill(&mut self, target: u64) -> Result<(), RecvError> {
        if target <= self.cursor {
            // Covered already (a resync resumed past it).
            self.phase = Phase::Live;
            return Ok(());
        }
        let missing = target - 1 - self.cursor;
        if missing > 0 {
            let limit = usize::try_from(missing).map_or(self.page_size, |m| m.min(self.page_size));
            match page::read(&*self.source, self.cursor, limit)? {
                Page::Trimmed {
                    first_kept,
                    resume_after,
                } => {
                    self.ready.push_back(Ready::Resync {
                        first_kept,
                        resume_after,
                    });
                    return Ok(());
                }
                Page::Events(mut events) => {
                    events.retain(|e| e.seq() < target);
                    if !events.is_empty() {
                        self.ready.extend(events.into_iter().map(Ready::Event));
                        return Ok(());
                    }
                    // The source has nothing more before the held event: it is
                    // the authority, so the held event goes next.
                }
            }
        }
        if let Phase::Fill { held } = mem::replace(&mut self.phase, Phase::Live) {
            self.ready.push_back(Ready::Event(held));
        }
        Ok(())
    }

    /// Decides what a live event means for this subscriber: deliver it now,
    /// drop it as already seen, or hold it while the gap before it is filled.
    fn on_live(&mut self, live: Live<S::Event>) -> Option<Delivery<S::Event>> {
        let seq = live.event.seq();
        if seq <= self.cursor {
            return live.republished.then_some(Delivery::Event(live.event));
        }
        if seq == self.cursor + 1 {
            self.cursor = seq;
            return Some(Delivery::Event(live.event));
        }
        self.phase = Phase::Fill { held: live.event };
        None
    }
}

impl<S: ReplaySource> fmt::Debug for Subscription<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let phase = match self.phase {
            Phase::CatchUp => "catch-up",
            Phase::Live => "live",
            Phase::Fill { .. } => "fill",
            Phase::Draining => "draining",
            Phase::Closed => "closed",
        };
        f.debug_struct("Subscription")
            .field("cursor", &self.cursor)
            .field("buffered", &self.ready.len())
            .field("phase", &phase)
            .finish_non_exhaustive()
    }
}
