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

/// Bytes for people, in binary units as every summary prints them: `120 B`, `7.4 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `avaprep`, with `--data-dir` where the data directory is not the default one: the start of
/// a command a hint names.
pub fn avaprep_in(data_dir: &std::path::Path) -> String {
    let default = [std::path::Path::new("./data"), std::path::Path::new("data")];
    match default.contains(&data_dir) {
        true => "avaprep".to_string(),
        false => format!("avaprep --data-dir {}", shell_word(data_dir)),
    }
}

/// A path as one word of a shell command (quoted where it holds a space or another character
/// the shell reads), for the commands a hint names.
pub fn shell_word(path: &std::path::Path) -> String {
    let text = path.display().to_string();
    shlex::try_quote(&text).map_or(text.clone(), |quoted| quoted.into_owned())
}

/// "1 box", "3 boxes": a count with its noun.
pub fn counted(count: u64, one: &str, many: &str) -> String {
    match count {
        1 => format!("1 {one}"),
        count => format!("{count} {many}"),
    }
}

/// "a, b, c and 4 more": the first `shown` names, and how many are left unnamed.
pub fn first_named(names: &[String], shown: usize) -> String {
    let named = names[..names.len().min(shown)].join(", ");
    match names.len().saturating_sub(shown) {
        0 => named,
        more => format!("{named} and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_lists_read_as_written() {
        assert_eq!(counted(1, "box", "boxes"), "1 box");
        assert_eq!(counted(0, "box", "boxes"), "0 boxes");
        let names: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        assert_eq!(first_named(&names, 2), "a, b and 2 more");
        assert_eq!(first_named(&names, 4), "a, b, c, d");
        assert_eq!(first_named(&names[..1], 3), "a");
        assert_eq!(human_bytes(120), "120 B");
        assert_eq!(human_bytes(7 * 1024 * 1024 + 400 * 1024), "7.4 MiB");
    }
}
