//! The `report` stage, where a pipeline has a `[report]` table: `avaprep report`'s page of the
//! dataset and the trained run (curves, per-class AP, the gallery with ground truth and
//! detections), written to the data directory's `report/` after scoring.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{StageId, StageSource};
use crate::bad_setting::BadSetting;
use crate::layout::DataLayout;
use crate::pipeline::spec::SpecError;
use crate::pipeline::state::CountsMismatch;
use crate::pipeline::{Closing, ItemError, ItemRecord, Stage, StageContext, StageReport};
use crate::records::TrainedRun;
use crate::report::{ReportError, ReportRequest, write_report};

/// The folder of the data directory the page goes to, as `avaprep report` writes it.
pub const REPORT_DIR: &str = "report";

/// The `[report]` table: `avaprep report`'s `--sample` and `--min-score`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReportParams {
    /// Keyframes drawn in the gallery, chosen evenly.
    pub sample: usize,
    /// Detections scoring below this are not drawn.
    #[serde(serialize_with = "crate::decimal::shortest")]
    pub min_score: f32,
}

/// `avaprep report`'s defaults and the `[report]` table's.
pub const DEFAULT_SAMPLE: usize = 8;
pub const DEFAULT_MIN_SCORE: f32 = 0.5;

impl Default for ReportParams {
    fn default() -> Self {
        ReportParams {
            sample: DEFAULT_SAMPLE,
            min_score: DEFAULT_MIN_SCORE,
        }
    }
}

impl ReportParams {
    pub fn validate(&self) -> Result<(), BadSetting> {
        check_min_score(self.min_score)
    }
}

/// A detection score threshold, from 0 to 1.
pub fn check_min_score(min_score: f32) -> Result<(), BadSetting> {
    match (0.0..=1.0).contains(&min_score) {
        true => Ok(()),
        false => Err(BadSetting::new(
            "min_score",
            min_score,
            "must be a score from 0 to 1",
        )),
    }
}

/// What the page shows, for the run's summary.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReportCounts {
    pub keyframes: u64,
    pub images: u64,
}

pub struct ReportStage {
    pub params: ReportParams,
}

impl ReportStage {
    /// `None` where the pipeline has no `[report]` table: the page is `avaprep report`'s then.
    pub fn from_source(source: &StageSource) -> Result<Option<Self>, SpecError> {
        if !source.has_table(StageId::Report) {
            return Ok(None);
        }
        let params = source.params(StageId::Report, ReportParams::validate)?;
        Ok(Some(ReportStage { params }))
    }
}

impl Stage for ReportStage {
    type Id = StageId;

    fn id(&self) -> StageId {
        StageId::Report
    }

    fn depends_on(&self) -> &'static [StageId] {
        &[StageId::Eval]
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "version": 1, "params": self.params })
    }

    fn run_item(&self, context: &StageContext, _item: &str) -> Result<ItemRecord, ItemError> {
        let layout = DataLayout::new(context.data_dir);
        let trained = TrainedRun::load(&layout).map_err(ItemError::input)?;
        let request = ReportRequest {
            data_dir: context.data_dir.to_path_buf(),
            run: Some(layout.root().join(&trained.run_dir)),
            out: layout.root().join(REPORT_DIR),
            keyframes: Vec::new(),
            sample: self.params.sample,
            min_score: self.params.min_score,
        };
        let summary = write_report(&request, context.cancel).map_err(|error| match error {
            ReportError::OutFolder { .. } => ItemError::output(error),
            error => ItemError::input(error),
        })?;
        let record =
            ItemRecord::of_files(context.data_dir, &[REPORT_DIR], &[]).map_err(ItemError::input)?;
        Ok(record.with_counts(&ReportCounts {
            keyframes: summary.keyframes as u64,
            images: summary.images as u64,
        }))
    }

    fn summary(&self, report: &StageReport<StageId>) -> Result<Vec<String>, CountsMismatch> {
        let counts: ReportCounts = report.counts_as()?;
        Ok(match counts.keyframes {
            0 => Vec::new(),
            keyframes => vec![format!(
                "{keyframes} keyframes drawn, {} images",
                counts.images
            )],
        })
    }

    /// Where the page is.
    fn closing(&self, data_dir: &Path) -> Option<Closing> {
        let page = data_dir.join(REPORT_DIR).join("index.html");
        page.is_file().then(|| Closing {
            record_type: "report",
            record: serde_json::json!({ "page": page }),
            lines: vec![format!("report      {}", page.display())],
        })
    }
}
