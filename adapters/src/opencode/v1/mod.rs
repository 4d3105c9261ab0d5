//! The V1 generation (OpenCode 1.2 to 1.18): histories in `message` + `part`, with the `event`
//! table. A prune deletes the selected part rows, deletes the `message.part.updated.1`
//! snapshots that carry them, appends one `message.part.removed.1` event per removed part, and
//! inserts the receipt, in one transaction (see [`apply`]).

pub mod apply;
pub mod events;
pub mod fence;
pub mod foreign;
pub mod read;
