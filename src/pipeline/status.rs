//! `avaprep status`: where each stage stands, read from the state files without changing them.

use serde::Serialize;

use super::PipelineError;
use super::runner::{Runner, topological_order};
use super::state::{StageStatus, StateStore};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StageCondition {
    /// Done with the current fingerprint.
    Done,
    /// Ran with other parameters or inputs: the next run redoes it.
    Stale,
    /// Never ran (or its state was set aside as corrupt).
    Pending,
    /// Finished with failed items.
    Failed,
    /// Started and not finished: interrupted, or running now in another process.
    Interrupted,
    /// The state file exists but cannot be trusted; the next run rebuilds the stage.
    Corrupt,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageStatusLine {
    pub stage: String,
    pub condition: StageCondition,
    pub items_done: usize,
    pub items_planned: usize,
    pub failed: usize,
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub detail: Option<String>,
}

impl Runner<'_> {
    pub fn status(&self) -> Result<Vec<StageStatusLine>, PipelineError> {
        let order = topological_order(&self.stages)?;
        order
            .iter()
            .map(|stage| {
                status_line(
                    &self.store,
                    stage.name(),
                    &self.fingerprint_now(*stage),
                    self.context.data_dir,
                )
            })
            .collect()
    }
}

fn status_line(
    store: &StateStore,
    stage: &str,
    fingerprint: &str,
    data_dir: &std::path::Path,
) -> Result<StageStatusLine, PipelineError> {
    let mut line = StageStatusLine {
        stage: stage.to_string(),
        condition: StageCondition::Pending,
        items_done: 0,
        items_planned: 0,
        failed: 0,
        files: 0,
        bytes: 0,
        seconds: 0.0,
        detail: None,
    };
    match store.peek(stage)? {
        super::state::Peeked::Missing => {}
        super::state::Peeked::Corrupt(reason) => {
            line.condition = StageCondition::Corrupt;
            line.detail = Some(reason);
        }
        super::state::Peeked::Valid(state) => {
            line.condition = if state.fingerprint != fingerprint {
                StageCondition::Stale
            } else {
                match state.status {
                    StageStatus::Done => StageCondition::Done,
                    StageStatus::Failed => StageCondition::Failed,
                    StageStatus::Running => StageCondition::Interrupted,
                    StageStatus::Blocked => StageCondition::Stale,
                }
            };
            line.items_done = state.items.len();
            line.items_planned = state.planned_items;
            line.failed = state.failures.len();
            line.files = state.total_files();
            line.bytes = state.total_bytes();
            line.seconds = state.seconds;
            line.detail = state
                .failures
                .first()
                .map(|failure| format!("{}: {}", failure.item, failure.message));
            let changed: Vec<String> = state
                .items
                .iter()
                .filter_map(|(item, record)| {
                    Some(format!(
                        "{item}: {}",
                        record.change(data_dir, super::prints::Scrutiny::Listing)?
                    ))
                })
                .collect();
            if let Some(first) = changed.first() {
                line.condition = StageCondition::Stale;
                line.items_done -= changed.len();
                line.detail = Some(match changed.len() {
                    1 => format!("changed since made: {first}"),
                    n => format!("{n} items changed since made, first {first}"),
                });
            }
        }
    }
    Ok(line)
}
