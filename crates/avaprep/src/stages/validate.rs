//! The `validate` stage: every check of [`crate::validate`] on the data directory after `lists`.
//! A failed check fails the stage, so nothing after it (training) runs on data that would break
//! it; the report is kept in `slowfast/validation.json` either way.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{StageId, StageSource};
use crate::layout::DataLayout;
use crate::pipeline::spec::SpecError;
use crate::pipeline::state::CountsMismatch;
use crate::pipeline::{ItemError, ItemRecord, Stage, StageContext, StageReport};
use crate::validate::{Depth, Findings, ValidateRequest, ValidationReport, validate};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValidateParams {
    /// Decode a sample of the frames instead of all of them.
    pub quick: bool,
}

/// What the checks found, for the run's summary.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ValidateCounts {
    pub checks: u64,
    pub skipped: u64,
    pub frames: u64,
    pub decoded: u64,
}

/// Where the data directory's validation is kept, for the report.
pub fn validation_file(layout: &DataLayout) -> PathBuf {
    layout.slowfast().join("validation.json")
}

/// Keeps what the checks found as the data directory's validation (the stage's, and
/// `avaprep validate`'s of the data directory: the report once said "not validated yet" after
/// it passed).
pub fn keep_findings(layout: &DataLayout, report: &ValidationReport) -> std::io::Result<PathBuf> {
    let path = validation_file(layout);
    let json = serde_json::to_vec_pretty(&report.findings()).expect("a report serialises");
    crate::fsutil::write_atomic(&path, &json)?;
    Ok(path)
}

/// Why the data directory's last validation (the stage's or `avaprep validate`'s) bars training:
/// it failed, or its findings do not read. None where it passed or none is kept.
pub fn kept_failure(data_dir: &Path) -> Option<String> {
    let layout = DataLayout::new(data_dir);
    let path = validation_file(&layout);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => return Some(format!("{}: {error}", path.display())),
    };
    let validate = format!("{} validate", crate::progress::avaprep_in(data_dir));
    let findings: Findings = match serde_json::from_slice(&bytes) {
        Ok(findings) => findings,
        Err(error) => {
            return Some(format!(
                "{} does not read as a validation ({error}); run `{validate}` first",
                path.display()
            ));
        }
    };
    if findings.passed {
        return None;
    }
    let failed: Vec<&str> = findings
        .failed_checks()
        .map(|check| check.name.as_str())
        .collect();
    let failed = match failed.is_empty() {
        true => String::new(),
        false => format!(" ({})", failed.join(", ")),
    };
    Some(format!(
        "its last validation failed{failed}; `{validate}` shows why, and training starts once it passes"
    ))
}

pub struct ValidateStage {
    pub params: ValidateParams,
}

impl ValidateStage {
    pub fn from_source(source: &StageSource) -> Result<Self, SpecError> {
        let params = source.typed_params(StageId::Validate)?;
        Ok(ValidateStage { params })
    }
}

impl Stage for ValidateStage {
    type Id = StageId;

    fn id(&self) -> StageId {
        StageId::Validate
    }

    fn depends_on(&self) -> &'static [StageId] {
        &[StageId::Extract, StageId::Lists]
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "version": 1, "params": self.params })
    }

    fn run_item(&self, context: &StageContext, _item: &str) -> Result<ItemRecord, ItemError> {
        let depth = Depth::quick_if(self.params.quick);
        let request =
            ValidateRequest::for_data_dir(context.data_dir, depth).map_err(ItemError::input)?;
        let report =
            validate(&request, context.reporter, context.cancel).map_err(ItemError::input)?;
        let layout = DataLayout::new(context.data_dir);
        let path = keep_findings(&layout, &report).map_err(|error| {
            ItemError::input(format!("{}: {error}", validation_file(&layout).display()))
        })?;
        if !report.passed {
            let failed: Vec<String> = report
                .failed_checks()
                .map(|check| {
                    let first = check.examples.first().map_or("", String::as_str);
                    format!(
                        "{} ({} of {}: {first})",
                        check.id.name(),
                        check.failed,
                        check.checked
                    )
                })
                .collect();
            return Err(ItemError::input(format!(
                "validation failed: {}; `{} validate` shows what failed",
                failed.join(", "),
                crate::progress::avaprep_in(context.data_dir)
            )));
        }
        let counts = ValidateCounts {
            checks: report.checks.len() as u64,
            skipped: report.skipped_checks().count() as u64,
            frames: report.frames_listed,
            decoded: report.frames_decoded,
        };
        let made = layout.relative(&path);
        let record = ItemRecord::of_files(context.data_dir, &[made.as_str()], &[])
            .map_err(ItemError::input)?;
        Ok(record.with_counts(&counts))
    }

    fn summary(&self, report: &StageReport<StageId>) -> Result<Vec<String>, CountsMismatch> {
        let counts: ValidateCounts = report.counts_as()?;
        if counts.checks == 0 {
            return Ok(Vec::new());
        }
        Ok(vec![format!(
            "{} checks passed ({} skipped), {} frames, {} decoded",
            counts.checks - counts.skipped,
            counts.skipped,
            counts.frames,
            counts.decoded
        )])
    }
}
