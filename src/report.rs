//! Everything a person or a script sees while avaprep works.
//!
//! Library code reports through the [`Reporter`] trait; only [`Printer`] touches the terminal.
//! Progress bars go to stderr and only when stderr is a terminal and neither `-q`, `-v` nor
//! `--json` was given, so bars never mix with logs or machine-readable output.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

/// Progress events from stages. Implementations must be cheap: stages call them from worker threads.
pub trait Reporter: Sync {
    /// A stage starts with `items` to do, of which `already_done` were completed by an earlier run.
    fn stage_started(&self, _stage: &str, _items: usize, _already_done: usize) {}
    /// One item finished (successfully or not) or was skipped as already done.
    fn item_finished(&self, _stage: &str, _item: &str, _error: Option<&str>) {}
    /// Progress inside one item, in the item's own unit (0 for `total` when unknown).
    fn item_progress(&self, _stage: &str, _item: &str, _done: u64, _total: u64, _unit: Unit) {}
    fn stage_finished(&self, _stage: &str) {}
}

/// What an item's progress counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Frames,
}

/// A reporter that shows nothing: for tests and library callers.
pub struct Silent;

impl Reporter for Silent {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    Quiet,
    Normal,
    Verbose,
}

/// Decides where every line of output goes, from the global flags.
pub struct Printer {
    verbosity: Verbosity,
    json: bool,
    bars: Option<MultiProgress>,
    stage_bars: Mutex<HashMap<String, ProgressBar>>,
    /// One bar per item in progress (a download, a video being extracted).
    item_bars: Mutex<HashMap<(String, String), ProgressBar>>,
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
        }
    }

    pub fn json(&self) -> bool {
        self.json
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
            None => eprintln!("{text}"),
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
    }

    fn stage_finished(&self, stage: &str) {
        if let Some(bar) = self.stage_bars.lock().expect("bar map").remove(stage) {
            bar.finish_and_clear();
        }
    }
}
