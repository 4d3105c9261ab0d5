//! How a clean tells its progress: a callback its caller gives (the command line draws a bar or
//! prints a line every few seconds, the server logs nothing until the run ends, a caller inside
//! OpenCode reports as its platform allows).

/// What a clean tells as it goes: each phase's total, then how far it is.
pub trait Progress {
    /// A phase starts over `total` things called `unit` (`sessions` for the compactions,
    /// `messages` for the prunes of parts, `user messages` for the diffs, `1.x messages` for
    /// the migrated rows, `shell rows` for the shell output).
    fn phase(&mut self, unit: &'static str, total: u64);

    /// `done` of the phase's total are done; `freed` bytes of row data are removed so far (or,
    /// in a dry run, would be), every phase together.
    fn update(&mut self, done: u64, freed: u64);

    /// The phase ended.
    fn finish(&mut self);
}

/// Progress nobody sees (`--json`, `--quiet`, the server's upkeep).
pub struct Silent;

impl Progress for Silent {
    fn phase(&mut self, _unit: &'static str, _total: u64) {}
    fn update(&mut self, _done: u64, _freed: u64) {}
    fn finish(&mut self) {}
}
