//! A subscription seen as a `Stream` of deliveries (for SSE bodies and stream combinators).

use std::fmt;
use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio_stream::Stream;

use crate::{Delivery, RecvError, ReplaySource, Subscription};

type Item<S> = Result<Delivery<<S as ReplaySource>::Event>, RecvError>;
type Receiving<S> = Pin<Box<dyn Future<Output = (Item<S>, Subscription<S>)> + Send>>;

/// A [`Subscription`] as a [`Stream`] of the items [`Subscription::recv`]
/// returns.
///
/// The stream ends (yields `None`) where `recv` would return
/// [`RecvError::Closed`]; a [`RecvError::Source`] is yielded as an item and
/// the stream goes on (the next poll retries the read). Lag behaviour and
/// ordering are those of [`Subscription::recv`]. Dropping the stream drops
/// the subscription. Created by [`Subscription::into_stream`].
pub struct SubscriptionStream<S: ReplaySource> {
    state: State<S>,
}

enum State<S: ReplaySource> {
    Idle(Subscription<S>),
    Receiving(Receiving<S>),
    Done,
}

impl<S: ReplaySource> SubscriptionStream<S> {
    pub(crate) fn new(subscription: Subscription<S>) -> Self {
        Self {
            state: State::Idle(subscription),
        }
    }
}

// The stream never pins its fields in place: the receiving future is boxed,
// and the subscription is only moved while no future borrows it.
impl<S: ReplaySource> Unpin for SubscriptionStream<S> {}

impl<S: ReplaySource> Stream for SubscriptionStream<S> {
    type Item = Item<S>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match mem::replace(&mut this.state, State::Done) {
                State::Idle(mut subscription) => {
                    this.state = State::Receiving(Box::pin(async move {
                        let item = subscription.recv().await;
                        (item, subscription)
                    }));
                }
                State::Receiving(mut receiving) => {
                    return match receiving.as_mut().poll(cx) {
                        Poll::Pending => {
                            this.state = State::Receiving(receiving);
                            Poll::Pending
                        }
                        Poll::Ready((Err(RecvError::Closed), _)) => Poll::Ready(None),
                        Poll::Ready((item, subscription)) => {
                            this.state = State::Idle(subscription);
                            Poll::Ready(Some(item))
                        }
                    };
                }
                State::Done => return Poll::Ready(None),
            }
        }
    }
}

impl<S: ReplaySource> fmt::Debug for SubscriptionStream<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Idle(subscription) => return subscription.fmt(f),
            State::Receiving(_) => "receiving",
            State::Done => "done",
        };
        f.debug_struct("SubscriptionStream")
            .field("state", &state)
            .finish()
    }
}
