//! Everything a person or a script sees while a command works.
//!
//! Library code reports through `avaprep::progress::Reporter`; only [`Printer`] touches the
//! terminal. Progress bars go to stderr and only when stderr is a terminal and neither `-q`, `-v`
//! nor `--json` was given, so bars never mix with logs or machine-readable output.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use avaprep::progress::{Reporter, Unit};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    Quiet,
    Normal,
    /// `-v`: debug logs.
    Verbose,
    /// `-vv`: trace logs.
    Trace,
}

/// Decides where every line of output goes, from the global flags.
pub struct Printer {
    verbosity: Verbosity,
    /// `--json`: stdout carries JSON Lines records only.
    pub json: bool,
    bars: Option<MultiProgress>,
    stage_bars: Mutex<HashMap<String, ProgressBar>>,
    /// One bar per item in progress (a download, a video being extracted).
    item_bars: Mutex<HashMap<(String, String), ProgressBar>>,
    /// Items each stage still has to do, from `stage_started`.
    pending: Mutex<HashMap<String, usize>>,
    /// The overall byte bar of each stage whose items count bytes.
    stage_bytes: Mutex<HashMap<String, StageBytes>>,
}

/// Bytes across a stage's items, out of an estimated total: the sizes of the items seen so far,
/// plus their mean size for each item that has not reported yet (video sizes are not known
/// before their downloads start).
#[derive(Debug, Default)]
struct ByteTally {
    /// `(done, total)` of each item that reported bytes; total 0 when unknown.
    items: HashMap<String, (u64, u64)>,
    /// Items that have not reported bytes and have not finished.
    unseen: usize,
}

impl ByteTally {
    fn update(&mut self, item: &str, done: u64, total: u64) {
        if !self.items.contains_key(item) {
            self.unseen = self.unseen.saturating_sub(1);
        }
        self.items.insert(item.to_string(), (done, total));
    }

    /// An item finished without reporting bytes (failed, or skipped as already verified).
    fn finished_unseen(&mut self, item: &str) {
        if !self.items.contains_key(item) {
            self.unseen = self.unseen.saturating_sub(1);
        }
    }

    /// `(done, estimated total)`.
    fn estimate(&self) -> (u64, u64) {
        let done: u64 = self.items.values().map(|(done, _)| done).sum();
        let known: u64 = self
            .items
            .values()
            .map(|&(done, total)| total.max(done))
            .sum();
        let mean = known / self.items.len().max(1) as u64;
        (done, known + mean * self.unseen as u64)
    }
}

struct StageBytes {
    bar: ProgressBar,
    tally: ByteTally,
}

impl Printer {
    pub fn new(verbosity: Verbosity, json: bool) -> Self {
        let show_bars = verbosity == Verbosity::Normal && !json && std::io::stderr().is_terminal();
        Printer {
            verbosity,
            json,
            bars: show_bars.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr())),
            stage_bars: Mutex::new(HashMap::new()),
            item_bars: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            stage_bytes: Mutex::new(HashMap::new()),
        }
    }

    /// A line for people, on stderr; suppressed by `-q` and in `--json` mode.
    pub fn note(&self, text: &str) {
        if self.verbosity == Verbosity::Quiet || self.json {
            return;
        }
        match &self.bars {
            Some(bars) => {
                let _ = bars.println(text);
            }
            None => {
                // A closed terminal (after a hangup) must not panic the work.
                let _ = writeln!(std::io::stderr(), "{text}");
            }
        }
    }

    /// A result for people on stdout (a table, a summary), unless `--json` asked for JSON.
    pub fn result(&self, text: &str) {
        if !self.json {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{text}");
        }
    }

    /// One JSON Lines record on stdout, with a `type` field naming the record, in `--json` mode.
    pub fn record<T: Serialize>(&self, kind: &str, value: &T) {
        if !self.json {
            return;
        }
        let mut object = match serde_json::to_value(value) {
            Ok(serde_json::Value::Object(map)) => map,
            Ok(other) => {
                let mut map = serde_json::Map::new();
                map.insert("value".into(), other);
                map
            }
            Err(_) => return,
        };
        object.insert("type".into(), kind.into());
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{}", serde_json::Value::Object(object));
    }
}

impl Reporter for Printer {
    fn stage_started(&self, stage: &str, items: usize, already_done: usize) {
        let Some(bars) = &self.bars else {
            if self.verbosity != Verbosity::Quiet && !self.json {
                tracing::info!("{stage}: {items} items, {already_done} already done");
            }
            return;
        };
        let bar = bars.add(ProgressBar::new(items as u64));
        bar.set_style(
            ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len} {msg} ({eta})")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(stage.to_string());
        bar.set_position(already_done as u64);
        self.pending
            .lock()
            .expect("pending map")
            .insert(stage.to_string(), items.saturating_sub(already_done));
        bar.enable_steady_tick(Duration::from_millis(200));
        self.stage_bars
            .lock()
            .expect("bar map")
            .insert(stage.to_string(), bar);
    }

    fn item_finished(&self, stage: &str, item: &str, error: Option<&str>) {
        // Failures are reported once, in the run's summary; here only for -v.
        match error {
            Some(error) => tracing::debug!("{stage}: {item} failed: {error}"),
            None => tracing::debug!("{stage}: {item} done"),
        }
        let key = (stage.to_string(), item.to_string());
        if let Some(bar) = self.item_bars.lock().expect("bar map").remove(&key) {
            bar.finish_and_clear();
        }
        if let Some(bytes) = self.stage_bytes.lock().expect("bar map").get_mut(stage) {
            bytes.tally.finished_unseen(item);
            let (done, total) = bytes.tally.estimate();
            bytes.bar.set_length(total);
            bytes.bar.set_position(done);
        }
        if let Some(bar) = self.stage_bars.lock().expect("bar map").get(stage) {
            bar.inc(1);
            bar.set_message(item.to_string());
        }
    }

    fn item_progress(&self, stage: &str, item: &str, done: u64, total: u64, unit: Unit) {
        let Some(bars) = &self.bars else {
            return;
        };
        let mut item_bars = self.item_bars.lock().expect("bar map");
        let bar = item_bars
            .entry((stage.to_string(), item.to_string()))
            .or_insert_with(|| {
                let template = match unit {
                    Unit::Bytes => {
                        "{prefix:>16} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ({eta})"
                    }
                    Unit::Frames => "{prefix:>16} [{bar:30}] {pos}/{len} frames ({eta})",
                    Unit::Steps => "{prefix:>16} [{bar:30}] {pos}/{len} steps ({eta})",
                };
                let bar = bars.add(ProgressBar::new(total));
                bar.set_style(
                    ProgressStyle::with_template(template)
                        .expect("valid template")
                        .progress_chars("=> "),
                );
                bar.set_prefix(item.to_string());
                bar
            });
        if total > 0 {
            bar.set_length(total);
        }
        bar.set_position(done);
        drop(item_bars);
        if unit == Unit::Bytes {
            self.add_stage_bytes(bars, stage, item, done, total);
        }
    }

    fn stage_note(&self, stage: &str, text: &str) {
        self.note(&format!("{stage}: {text}"));
    }

    fn stage_finished(&self, stage: &str) {
        if let Some(bar) = self.stage_bars.lock().expect("bar map").remove(stage) {
            bar.finish_and_clear();
        }
        if let Some(bytes) = self.stage_bytes.lock().expect("bar map").remove(stage) {
            bytes.bar.finish_and_clear();
        }
    }
}

impl Printer {
    fn add_stage_bytes(
        &self,
        bars: &MultiProgress,
        stage: &str,
        item: &str,
        done: u64,
        total: u64,
    ) {
        let mut stages = self.stage_bytes.lock().expect("bar map");
        let bytes = stages.entry(stage.to_string()).or_insert_with(|| {
            let bar = bars.add(ProgressBar::new(0));
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix:>16} [{bar:30}] {bytes}/~{total_bytes} {bytes_per_sec} ({eta})",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            bar.set_prefix("all files");
            let unseen = self
                .pending
                .lock()
                .expect("pending map")
                .get(stage)
                .copied();
            StageBytes {
                bar,
                tally: ByteTally {
                    unseen: unseen.unwrap_or(0),
                    ..ByteTally::default()
                },
            }
        });
        bytes.tally.update(item, done, total);
        let (done, total) = bytes.tally.estimate();
        bytes.bar.set_length(total);
        bytes.bar.set_position(done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_total_is_estimated_from_the_sizes_seen() {
        let mut tally = ByteTally {
            unseen: 4,
            ..ByteTally::default()
        };
        tally.update("a", 10, 100);
        // One of four seen: three more of the mean size (100) are expected.
        assert_eq!(tally.estimate(), (10, 400));
        tally.update("a", 60, 100);
        tally.update("b", 0, 300);
        assert_eq!(tally.estimate(), (60, 400 + 2 * 200));
        // A failed item never reports bytes: it leaves the estimate.
        tally.finished_unseen("c");
        assert_eq!(tally.estimate(), (60, 400 + 200));
        tally.finished_unseen("a");
        assert_eq!(tally.unseen, 1);
        // An unknown length counts what has arrived.
        tally.update("d", 50, 0);
        assert_eq!(tally.estimate(), (110, 450));
    }
}
