//! Fan-out hub of committed events: replay from a cursor, then live delivery.
//!
//! The crate owns the delivery guarantee between a journal of committed
//! events and its subscribers, and nothing else. It knows no event type and
//! no storage: an event is anything [`Sequenced`], the journal is anything
//! that implements [`ReplaySource`].
//!
//! A [`Hub`] is the publishing side. Committers call [`Hub::publish`] after
//! an event is durable in the source (best-effort: it never fails the
//! caller). [`Hub::subscribe`] returns a [`Subscription`] whose
//! [`recv`](Subscription::recv) yields, in order:
//!
//! 1. the journaled events with a seq greater than the subscriber's cursor,
//!    read from the source a page at a time;
//! 2. then the live events, with no gap and no duplicate at the switch.
//!
//! A subscriber that falls behind the live buffer is caught up from the
//! source, never dropped. A cursor older than the source keeps gets one
//! [`Delivery::Resync`] instead of the trimmed events. An event announced
//! again with [`Hub::republish`] reaches every subscriber again, even those
//! that already saw its seq.
//!
//! ```
//! # use std::{convert::Infallible, sync::{Arc, Mutex}};
//! # use pruning_events::{Delivery, Hub, ReplaySource, Sequenced};
//! #[derive(Clone, Debug, PartialEq)]
//! struct Pruned { seq: u64 }
//! impl Sequenced for Pruned { fn seq(&self) -> u64 { self.seq } }
//!
//! struct Log(Mutex<Vec<Pruned>>);
//! impl ReplaySource for Log {
//!     type Event = Pruned;
//!     type Error = Infallible;
//!     fn events_after(&self, since: u64, limit: usize) -> Result<Vec<Pruned>, Infallible> {
//!         let log = self.0.lock().unwrap_or_else(|e| e.into_inner());
//!         Ok(log.iter().filter(|e| e.seq > since).take(limit).cloned().collect())
//!     }
//!     fn first_seq(&self) -> Result<Option<u64>, Infallible> {
//!         Ok(self.0.lock().unwrap_or_else(|e| e.into_inner()).first().map(|e| e.seq))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let log = Arc::new(Log(Mutex::new(vec![Pruned { seq: 1 }, Pruned { seq: 2 }])));
//! let hub = Hub::new(Arc::clone(&log), 64);
//! let mut sub = hub.subscribe(1);
//!
//! // Journal first, then publish.
//! log.0.lock().unwrap().push(Pruned { seq: 3 });
//! hub.publish(Pruned { seq: 3 });
//!
//! assert_eq!(sub.recv().await.unwrap(), Delivery::Event(Pruned { seq: 2 }));
//! assert_eq!(sub.recv().await.unwrap(), Delivery::Event(Pruned { seq: 3 }));
//! assert_eq!(sub.cursor(), 3);
//! # }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod delivery;
mod error;
mod hub;
mod live;
mod page;
mod sequenced;
mod source;
mod stream;
mod subscription;

pub use delivery::Delivery;
pub use error::RecvError;
pub use hub::{Hub, DEFAULT_PAGE_SIZE};
pub use sequenced::Sequenced;
pub use source::ReplaySource;
pub use stream::SubscriptionStream;
pub use subscription::Subscription;
