//! The clean's error: a read the clean could not make. A prune that fails is no error of the
//! clean's: it is counted in the report (`failed`, `firstFailure`), and the clean goes on.

use pruning_engine::{EngineError, StoreError};

/// Why a clean could not run to its end (the prunes committed before stand).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CleanError {
    /// The database could not be read (listings, plans, sizes).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A dry run could not be made.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The apply's engine could not be opened at the clean's first write
    /// ([`crate::mode::Writer::open`]); its caller keeps why. Nothing was written.
    #[error("the clean's engine could not be opened")]
    EngineNotOpened,
}
