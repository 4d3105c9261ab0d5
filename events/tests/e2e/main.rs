//! The event hub's integration tests, in one test binary: one module per behaviour, named
//! after it; `common` holds the in-memory event source they replay from.

mod common;

mod cancelled_recv_loses_nothing;
mod closed_hub_delivers_the_rest_then_closed;
mod concurrent_publish_during_replay_has_no_gap_or_duplicate;
mod cursor_older_than_kept_gets_resync;
mod lagging_subscriber_is_caught_up_from_source;
mod republish_reaches_subscribers_again;
mod source_error_is_returned_and_the_read_retried;
mod stream_yields_deliveries_until_closed;
mod subscriber_with_cursor_gets_missed_then_live;
mod two_subscribers_both_receive_each_event;
