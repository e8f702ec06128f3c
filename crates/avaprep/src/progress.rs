//! How library code tells its caller about progress: the [`Reporter`] trait. The terminal side
//! (progress bars, logs, JSON lines) is the executables' printer.

/// Progress events from stages. Implementations must be cheap: stages call them from worker threads.
pub trait Reporter: Sync {
    /// A stage starts with `items` to do, of which `already_done` were completed by an earlier run.
    fn stage_started(&self, _stage: &str, _items: usize, _already_done: usize) {}
    /// One item finished (successfully or not) or was skipped as already done.
    fn item_finished(&self, _stage: &str, _item: &str, _error: Option<&str>) {}
    /// Progress inside one item, in the item's own unit (0 for `total` when unknown).
    fn item_progress(&self, _stage: &str, _item: &str, _done: u64, _total: u64, _unit: Unit) {}
    /// A line for people about a long item (an evaluation during training).
    fn stage_note(&self, _stage: &str, _text: &str) {}
    fn stage_finished(&self, _stage: &str) {}
}

/// What an item's progress counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Frames,
    /// Optimizer steps of a training epoch.
    Steps,
}

/// A reporter that shows nothing: for tests and library callers.
pub struct Silent;

impl Reporter for Silent {}
