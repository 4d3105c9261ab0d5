//! The V1 generation (OpenCode 1.2 to 1.19): histories in `message` + `part`, with the `event`
//! table. A prune deletes the selected part rows, deletes the `message.part.updated.1`
//! snapshots that carry them and appends one `message.part.removed.1` event per removed part
//! (see [`apply`]), inside the transaction that also inserts the receipt
//! (`crate::write`).

pub mod apply;
pub mod compact;
pub mod diffs;
pub mod events;
pub mod fence;
pub mod foreign;
pub mod known;
mod naming;
pub mod read;
pub mod runs;
pub mod snapshot;
pub(crate) mod snapshot_entity;
