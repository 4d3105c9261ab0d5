//! The sample an estimated overview reads: Poisson sampling with a chance proportional to each
//! row's size, and ratio estimates over it (docs/ARCHITECTURE.md, "The overview").
//!
//! A table's rows are read once, by size only (`octet_length` reads no value). Its
//! [`CERTAIN`] largest rows are always drawn (a row that holds much of a table must not be left
//! to chance); any other row of `len` bytes is drawn with chance `π = min(1, len / B)`, `B`
//! chosen so that those drawn are expected to hold [`READ_SHARE`] of the table's bytes `T` (at
//! least [`READ_FLOOR`]): `B = Σ len² / budget`, the sum over the rows not always drawn. A
//! table within the floor is read whole, and its figures are exact.
//! Whether a row is drawn is decided by a number `u` in `[0, 1)` hashed from its `rowid` (drawn
//! when `u < π`), so the same file gives the same sample and the same figures.
//!
//! `B` is known only at the end of the pass, so the pass keeps candidates: the rows drawn at a
//! smaller `B`, which draws every row a larger one would. While it runs, `B` is at least
//! `Σ len² so far (but the largest rows so far) / budget for the largest table the file can
//! hold`, which only grows, and candidates below that are let go; at most [`MAX_CANDIDATES`] are kept (when more would be, `B` is raised, which
//! draws fewer rows and is as sound).
//!
//! A byte figure `Y = Σ y` (bytes of each row that are tool output, say, `y <= len`) is
//! estimated as `T × (Σ y / π) / (Σ len / π)` over the drawn rows. Its standard deviation is
//! about `sqrt(B × T' × r (1 - r))` for a share `r` of the bytes, at most `sqrt(B × T') / 2`,
//! `T'` the bytes of the rows not always drawn.
//!
//! Counts come from a second sample, in which every row has the same chance, since the first
//! draws small rows rarely: the [`COUNTED`] rows of the table with the lowest second hash (a
//! simple random sample of them; every row of a table read whole). A count is the table's rows that are not empty times the share
//! of the counted rows it counts (an empty row holds no JSON, so no figure counts it; it is in
//! neither sample): within about `2 sqrt(r (1 - r) / COUNTED)` of the rows, 6 % at most.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::Volume;

/// Share of a table's bytes the drawn rows are expected to hold.
pub(super) const READ_SHARE: f64 = 0.05;

/// Bytes of a table read whole whatever its size: a table of at most this many bytes is read
/// whole, and a larger one has at least this many drawn.
pub(super) const READ_FLOOR: f64 = 8.0 * 1024.0 * 1024.0;

/// Most candidates a pass keeps: 24 bytes each.
pub(super) const MAX_CANDIDATES: usize = 1 << 20;

/// Rows of each table always drawn: its largest.
pub(super) const CERTAIN: usize = 8;

/// Rows of each table in the sample counts come from.
pub(super) const COUNTED: usize = 256;

/// Told apart from a table's seed for the counted sample's hash.
const COUNTED_SEED: u64 = 0x636f_756e_7465_6421;

/// A table's sizes: what its pass reads.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Sizes {
    /// Rows and their bytes (exact).
    pub(super) volume: Volume,
    /// Rows that are not empty.
    pub(super) nonempty: u64,
    /// `Σ len²`, bytes².
    pub(super) squares: f64,
}

/// The budget of bytes to read of a table of `table_bytes`: `max(READ_SHARE × T, READ_FLOOR)`.
pub(super) fn budget(table_bytes: f64) -> f64 {
    (table_bytes * READ_SHARE).max(READ_FLOOR)
}

/// A row the pass may draw: its `rowid`, size and `u`.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    rowid: i64,
    len: u64,
    u: f64,
}

/// One pass over a table's row sizes: its exact sizes and its drawn rows.
#[derive(Debug)]
pub(super) struct Drawer {
    seed: u64,
    /// Bytes of the file and its WAL: no table holds more.
    most_bytes: f64,
    sizes: Sizes,
    /// The largest `B` candidates were let go at (0: none yet).
    threshold: f64,
    candidates: Vec<Candidate>,
    /// Candidates kept when the last were let go.
    kept: usize,
    /// The [`CERTAIN`] largest rows so far, smallest on top: `(len, rowid)`.
    largest: BinaryHeap<Reverse<(u64, i64)>>,
    /// `Σ len²` of `largest`.
    largest_squares: f64,
    /// The [`COUNTED`] non-empty rows with the lowest second hash so far, highest on top:
    /// `(hash, rowid)`.
    counted: BinaryHeap<(u64, i64)>,
}

impl Drawer {
    /// A pass over a table of a database of `database_bytes` (file and WAL); `seed` keeps the
    /// tables' draws apart.
    pub(super) fn new(database_bytes: u64, seed: u64) -> Self {
        Self {
            seed,
            most_bytes: database_bytes as f64,
            sizes: Sizes::default(),
            threshold: 0.0,
            candidates: Vec::new(),
            kept: 0,
            largest: BinaryHeap::with_capacity(CERTAIN + 1),
            largest_squares: 0.0,
            counted: BinaryHeap::with_capacity(COUNTED + 1),
        }
    }

    /// `Σ len²` of the rows so far that are not among the largest.
    fn other_squares(&self) -> f64 {
        (self.sizes.squares - self.largest_squares).max(0.0)
    }

    /// Takes the next row: `rowid` and its size `len`. A row of 0 bytes is never drawn: it
    /// holds no JSON, so no figure counts it.
    pub(super) fn offer(&mut self, rowid: i64, len: u64) {
        self.sizes.volume.count += 1;
        self.sizes.volume.bytes += len;
        self.sizes.squares += len as f64 * len as f64;
        if len == 0 {
            return;
        }
        self.sizes.nonempty += 1;
        self.largest.push(Reverse((len, rowid)));
        self.largest_squares += len as f64 * len as f64;
        if self.largest.len() > CERTAIN {
            if let Some(Reverse((smallest, _))) = self.largest.pop() {
                self.largest_squares -= smallest as f64 * smallest as f64;
            }
        }
        let second = hash(self.seed ^ COUNTED_SEED, rowid);
        if self.counted.len() < COUNTED || self.counted.peek().is_some_and(|&(top, _)| second < top)
        {
            self.counted.push((second, rowid));
            if self.counted.len() > COUNTED {
                self.counted.pop();
            }
        }
        let u = unit(self.seed, rowid);
        if self.threshold > 0.0 && u >= len as f64 / self.threshold {
            return;
        }
        self.candidates.push(Candidate { rowid, len, u });
        if self.candidates.len() >= MAX_CANDIDATES.min(2 * self.kept.max(4096)) {
            self.let_go();
        }
    }

    /// Lets go of the candidates no `B` the pass can end with draws.
    fn let_go(&mut self) {
        // Until the table is over the floor, it may be read whole: keep every row.
        if self.sizes.volume.bytes as f64 > READ_FLOOR {
            let lower = self.other_squares() / budget(self.most_bytes);
            self.threshold = self.threshold.max(lower);
        }
        if self.candidates.len() >= MAX_CANDIDATES {
            // Raise `B` until at most half are kept: a coarser sample, as sound.
            let mut ratios: Vec<f64> = self.candidates.iter().map(|c| c.u / c.len as f64).collect();
            let half = ratios.len() / 2;
            ratios.select_nth_unstable_by(half, f64::total_cmp);
            self.threshold = self.threshold.max(1.0 / ratios[half]);
        }
        let threshold = self.threshold;
        if threshold > 0.0 {
            self.candidates.retain(|c| c.u < c.len as f64 / threshold);
        }
        self.kept = self.candidates.len();
    }

    /// The table's sizes, its design, its drawn rows and its counted rows.
    pub(super) fn finish(self) -> Drawing {
        let bytes = self.sizes.volume.bytes as f64;
        let wanted = if bytes <= READ_FLOOR {
            0.0
        } else {
            self.other_squares() / budget(bytes)
        };
        let certain: Vec<(u64, i64)> = self.largest.into_iter().map(|Reverse(row)| row).collect();
        let certain_bytes: u64 = certain.iter().map(|(len, _)| len).sum();
        let design = Design {
            bytes_per_draw: wanted.max(self.threshold),
            sampled_bytes: self.sizes.volume.bytes.saturating_sub(certain_bytes),
        };
        let mut drawn: Vec<(i64, u64, f64)> = certain
            .iter()
            .map(|&(len, rowid)| (rowid, len, 1.0))
            .collect();
        let always: std::collections::HashSet<i64> = certain.iter().map(|&(_, r)| r).collect();
        drawn.extend(self.candidates.iter().filter_map(|c| {
            if always.contains(&c.rowid) {
                return None;
            }
            design
                .chance(c.len, c.u)
                .map(|chance| (c.rowid, c.len, chance))
        }));
        // A table read whole counts every row.
        let counted = if design.reads_whole() {
            drawn.iter().map(|&(rowid, _, _)| rowid).collect()
        } else {
            self.counted.into_iter().map(|(_, rowid)| rowid).collect()
        };
        Drawing {
            sizes: self.sizes,
            design,
            drawn,
            counted,
        }
    }
}

/// What a pass drew of one table.
#[derive(Debug)]
pub(super) struct Drawing {
    /// The table's sizes (exact).
    pub(super) sizes: Sizes,
    pub(super) design: Design,
    /// The drawn rows: `(rowid, size, π)`.
    pub(super) drawn: Vec<(i64, u64, f64)>,
    /// The counted rows' `rowid`s.
    pub(super) counted: Vec<i64>,
}

/// The chance of each row of one table to be drawn, but its largest (always drawn).
#[derive(Debug, Clone, Copy)]
pub(super) struct Design {
    /// `B`: bytes per draw; 0 when every row is drawn.
    bytes_per_draw: f64,
    /// Bytes of the rows not always drawn: `T'`.
    sampled_bytes: u64,
}

impl Design {
    /// `π` of a row of `len` bytes and number `u` when it is drawn, `None` when it is not.
    fn chance(&self, len: u64, u: f64) -> Option<f64> {
        if self.bytes_per_draw <= 0.0 {
            return Some(1.0);
        }
        let chance = (len as f64 / self.bytes_per_draw).min(1.0);
        (u < chance).then_some(chance)
    }

    /// Whether every row of the table is drawn (it is within the floor, or it has no row but
    /// its largest): its figures are exact.
    pub(super) fn reads_whole(&self) -> bool {
        self.bytes_per_draw <= 0.0 || self.sampled_bytes == 0
    }

    /// About twice the largest standard deviation of a byte figure of the table:
    /// `sqrt(B × T')`, a 95 % margin; 0 when the table is read whole.
    pub(super) fn margin(&self) -> u64 {
        (self.bytes_per_draw * self.sampled_bytes as f64).sqrt() as u64
    }
}

/// A hash of `rowid` and `seed` (SplitMix64's finalizer: every bit of the input moves about
/// half of the output's).
fn hash(seed: u64, rowid: i64) -> u64 {
    let mut z = (rowid as u64) ^ seed;
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A number in `[0, 1)` from `rowid` and `seed`.
fn unit(seed: u64, rowid: i64) -> f64 {
    (hash(seed, rowid) >> 11) as f64 / (1u64 << 53) as f64
}

/// Bytes summed over drawn rows, each weighted by `1 / π`, and a count summed over counted
/// rows.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Tally {
    count: f64,
    bytes: f64,
}

impl Tally {
    /// Adds a drawn row's `bytes` (`chance` is its `π`).
    pub(super) fn add_bytes(&mut self, bytes: u64, chance: f64) {
        self.bytes += bytes as f64 / chance;
    }

    /// Adds a counted row's `count`.
    pub(super) fn add_count(&mut self, count: u64) {
        self.count += count as f64;
    }

    /// The estimate for a table of `table` sizes (exact) whose samples tally `all` (each drawn
    /// row with its size, each counted row as one): the table's non-empty rows and bytes times
    /// this tally's share of them.
    pub(super) fn volume(self, all: Tally, table: Sizes) -> Volume {
        let drawn = all;
        let share = |part: f64, whole: f64| if whole > 0.0 { part / whole } else { 0.0 };
        Volume {
            count: (table.nonempty as f64 * share(self.count, drawn.count)).round() as u64,
            bytes: (table.volume.bytes as f64 * share(self.bytes, drawn.bytes)).round() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Draws a table of `count` rows of `len` bytes in a file of `database_bytes`; `tool` says
    /// which rows hold tool output. Returns the estimate of the tool rows, the exact figure,
    /// the margin and how many were drawn.
    fn tools(
        count: i64,
        len: u64,
        database_bytes: u64,
        tool: impl Fn(i64) -> bool,
    ) -> (Volume, Volume, u64, usize) {
        let mut drawer = Drawer::new(database_bytes, 11);
        for rowid in 0..count {
            drawer.offer(rowid, len);
        }
        let Drawing {
            sizes,
            design,
            drawn,
            counted,
        } = drawer.finish();
        let (mut tools, mut all) = (Tally::default(), Tally::default());
        for &(rowid, _, chance) in &drawn {
            all.add_bytes(len, chance);
            if tool(rowid) {
                tools.add_bytes(len, chance);
            }
        }
        for &rowid in &counted {
            all.add_count(1);
            if tool(rowid) {
                tools.add_count(1);
            }
        }
        let exact_count = (0..count).filter(|&r| tool(r)).count() as u64;
        let exact = Volume {
            count: exact_count,
            bytes: exact_count * len,
        };
        (
            tools.volume(all, sizes),
            exact,
            design.margin(),
            drawn.len(),
        )
    }

    #[test]
    fn a_table_within_the_floor_is_read_whole_and_estimated_exactly() {
        let (estimate, exact, margin, drawn) = tools(20_000, 100, 1 << 30, |r| r % 4 == 0);
        assert_eq!(drawn, 20_000);
        assert_eq!(estimate, exact);
        assert_eq!(margin, 0);
    }

    #[test]
    fn a_large_table_draws_the_read_share_of_its_bytes_and_the_same_rows_each_time() {
        // 400,000 rows of 1 KiB: 400 MiB, of which 5 % is about 20,480 rows (sd about 140).
        let (_, _, _, drawn) = tools(400_000, 1024, 500 << 20, |_| false);
        assert!((20_000..=20_960).contains(&drawn), "{drawn}");
        let (_, _, _, again) = tools(400_000, 1024, 500 << 20, |_| false);
        assert_eq!(again, drawn);
        // 100,000 of them: 100 MiB, 5 % of which is under the floor, so 8 MiB are drawn.
        let (_, _, _, floor) = tools(100_000, 1024, 500 << 20, |_| false);
        assert!((7_900..=8_480).contains(&floor), "{floor}");
    }

    #[test]
    fn the_estimate_of_a_share_is_within_the_margin() {
        // 400,000 rows of 500 bytes, every third one a tool part.
        let (estimate, exact, margin, _) = tools(400_000, 500, 300 << 20, |r| r % 3 == 0);
        assert!(
            estimate.bytes.abs_diff(exact.bytes) <= margin,
            "{estimate:?} against {exact:?} (margin {margin})"
        );
        // 2 sqrt(r (1 - r) / COUNTED) of the rows: 5.9 % of 400,000.
        assert!(
            estimate.count.abs_diff(exact.count) <= 23_600,
            "{estimate:?}"
        );
    }

    #[test]
    fn the_largest_rows_are_always_drawn_so_one_that_holds_most_of_a_table_counts_whole() {
        // 10,000 rows of 1 KiB and one of 20 MiB, a tool part: 30 MiB.
        let mut drawer = Drawer::new(40 << 20, 9);
        for rowid in 0..10_000 {
            drawer.offer(rowid, 1024);
        }
        drawer.offer(10_000, 20 << 20);
        let Drawing {
            sizes,
            design,
            drawn,
            ..
        } = drawer.finish();
        assert!(drawn.contains(&(10_000, 20 << 20, 1.0)));
        let (mut tools, mut all) = (Tally::default(), Tally::default());
        for &(rowid, len, chance) in &drawn {
            all.add_bytes(len, chance);
            if rowid == 10_000 {
                tools.add_bytes(len, chance);
            }
        }
        let estimate = tools.volume(all, sizes);
        // The margin is of the 10,000 small rows only.
        assert!(design.margin() < 10_000 * 1024, "{}", design.margin());
        assert!(
            estimate.bytes.abs_diff(20 << 20) <= design.margin(),
            "{estimate:?} (margin {})",
            design.margin()
        );
    }

    #[test]
    fn a_table_of_no_more_rows_than_are_always_drawn_is_read_whole() {
        // 4 rows of 5 MiB: over the floor, but every row is among the largest.
        let mut drawer = Drawer::new(1 << 30, 4);
        for rowid in 0..4 {
            drawer.offer(rowid, 5 << 20);
        }
        let Drawing {
            design,
            drawn,
            counted,
            ..
        } = drawer.finish();
        assert!(design.reads_whole());
        assert_eq!(design.margin(), 0);
        assert_eq!((drawn.len(), counted.len()), (4, 4));
        assert!(drawn.iter().all(|d| d.2 == 1.0));
    }

    #[test]
    fn empty_rows_are_never_drawn_and_never_counted() {
        let mut drawer = Drawer::new(1 << 30, 2);
        for rowid in 0..100 {
            drawer.offer(rowid, if rowid % 2 == 0 { 0 } else { 50 });
        }
        let Drawing {
            sizes,
            drawn,
            counted,
            ..
        } = drawer.finish();
        assert_eq!(
            (
                sizes.volume.count,
                sizes.nonempty,
                drawn.len(),
                counted.len()
            ),
            (100, 50, 50, 50)
        );
        let (mut odd, mut all) = (Tally::default(), Tally::default());
        for &(_, len, chance) in &drawn {
            all.add_bytes(len, chance);
            odd.add_bytes(len, chance);
        }
        for _ in &counted {
            all.add_count(1);
            odd.add_count(1);
        }
        assert_eq!(
            odd.volume(all, sizes),
            Volume {
                count: 50,
                bytes: 2500
            }
        );
    }

    #[test]
    fn more_candidates_than_kept_raise_the_bytes_per_draw_and_stay_sound() {
        // 3 Mi rows of 10 bytes (30 MiB) in a 30 MiB file: each is a candidate, so the pass
        // must raise `B` to keep at most MAX_CANDIDATES.
        let count = 3 * (1 << 20);
        let mut drawer = Drawer::new(30 << 20, 5);
        let mut most = 0;
        for rowid in 0..count {
            drawer.offer(rowid, 10);
            most = most.max(drawer.candidates.len());
        }
        assert!(most <= MAX_CANDIDATES, "{most}");
        let Drawing {
            sizes,
            design,
            drawn,
            ..
        } = drawer.finish();
        assert_eq!(sizes.volume.count, count as u64);
        assert!(
            !drawn.is_empty() && drawn.len() < MAX_CANDIDATES,
            "{}",
            drawn.len()
        );
        let (mut even, mut all) = (Tally::default(), Tally::default());
        for &(rowid, _, chance) in &drawn {
            all.add_bytes(10, chance);
            if rowid % 2 == 0 {
                even.add_bytes(10, chance);
            }
        }
        let estimate = even.volume(all, sizes);
        let exact = count as u64 * 10 / 2;
        assert!(
            estimate.bytes.abs_diff(exact) <= design.margin(),
            "{estimate:?} against {exact}"
        );
    }
}
