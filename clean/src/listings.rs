//! The sessions a clean walks and their listings, counted before the walk: the progress total,
//! the kept and outside-compaction counts.

use pruning_engine::StoreError;
use pruning_opencode::{Listing, OpenCodeStore};

use crate::Clean;

/// The sessions a clean walks and their listings. The listings are kept for the walk while
/// they hold at most [`Clean::listing_budget`] messages; beyond that they are dropped and the
/// walk reads each session's listing again, so that memory does not grow with the database.
/// With `--until-live-size`, which orders messages across sessions, every listing is kept.
pub(crate) struct Listings {
    pub(crate) ids: Vec<String>,
    pub(crate) kept_listings: Vec<Listing>,
    pub(crate) read_again: bool,
    /// Messages the walk looks at.
    pub(crate) total: u64,
    /// Assistant messages left to the kept turns.
    pub(crate) kept: u64,
    /// Of `total`, those not older than their session's last compaction.
    pub(crate) outside: u64,
}

impl Listings {
    /// Counts the sessions `clean` names (every session of the database when it names none).
    ///
    /// Errors: the store's reads.
    pub(crate) fn count(store: &OpenCodeStore, clean: &Clean) -> Result<Self, StoreError> {
        let ids = match &clean.sessions {
            None => store.clean_sessions()?,
            Some(ids) => ids.clone(),
        };
        let mut listings = Self {
            ids: Vec::new(),
            kept_listings: Vec::new(),
            read_again: false,
            total: 0,
            kept: 0,
            outside: 0,
        };
        for id in &ids {
            let listing = Self::listing_of(store, clean, id)?;
            listings.total += listing.ids.len() as u64;
            listings.kept += listing.kept;
            listings.outside += listing.after_compaction;
            if clean.until_live_size.is_none() && listings.total > clean.listing_budget {
                listings.read_again = true;
                listings.kept_listings = Vec::new();
            }
            if !listings.read_again {
                listings.kept_listings.push(listing);
            }
        }
        listings.ids = ids;
        Ok(listings)
    }

    /// The messages of `session_id` the clean looks at, oldest first.
    ///
    /// Errors: the store's reads.
    pub(crate) fn listing_of(
        store: &OpenCodeStore,
        clean: &Clean,
        session_id: &str,
    ) -> Result<Listing, StoreError> {
        store.clean_listing_before(
            session_id,
            clean.policy.keep_last_turns,
            clean.before_compaction,
        )
    }
}
