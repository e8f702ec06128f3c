//! A training run's folder as the report reads it: how it stopped, its clip, its curves, the
//! per-class AP of its evaluation and its detections.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{ReportError, read_json_if_present};
use crate::annotations::{
    ActionId, FrameKey, KeyframeRange, NormBox, ReadOptions, read_detections,
};
use crate::eval::EvalReport;
use crate::split::SplitName;
use crate::trainer_protocol::{TrainSummary, run_files};

/// The split the eval stage (and `avaprep train`'s last step) scores and writes detections for.
pub(crate) const SCORED_SPLIT: &str = "val";
/// The eval stage's detections of a split: `eval/<split>_detections.csv`.
const DETECTIONS_SUFFIX: &str = "_detections.csv";
pub use crate::trainer_protocol::run_files::CURVES;

/// `config.toml`, the fields that choose a clip's frames.
#[derive(Debug, Clone, Deserialize)]
struct ClipConfig {
    clip_frames: usize,
    clip_stride: u32,
}

/// One detected box with the classes it was given, best first.
#[derive(Debug, Clone)]
pub struct DetectedBox {
    pub bbox: NormBox,
    pub classes: Vec<(ActionId, f32)>,
}

#[derive(Debug, Clone)]
pub struct RunStats {
    pub dir: PathBuf,
    pub summary: Option<TrainSummary>,
    pub clip: (usize, u32),
    pub evaluation: Option<EvalReport>,
    /// The splits the detections are of (val, and those the eval stage predicted on besides,
    /// such as an import's test videos), and the boxes with a class scoring at least the
    /// threshold, by keyframe.
    pub detected_splits: BTreeSet<String>,
    pub detections: BTreeMap<FrameKey, Vec<DetectedBox>>,
    pub min_score: f32,
}

impl RunStats {
    pub fn read(dir: &Path, min_score: f32, keyframes: KeyframeRange) -> Result<Self, ReportError> {
        let config_path = dir.join(run_files::CONFIG_TOML);
        let config_text =
            std::fs::read_to_string(&config_path).map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound => ReportError::Invalid {
                    path: dir.to_path_buf(),
                    message: "not a training run's folder: it has no config.toml (the pipeline's \
                          runs are under DATA_DIR/runs/)"
                        .into(),
                },
                _ => ReportError::io(&config_path, error),
            })?;
        let config: ClipConfig =
            toml::from_str(&config_text).map_err(|error| ReportError::Invalid {
                path: config_path.clone(),
                message: format!("not a run's config: {error}"),
            })?;
        let summary = read_json_if_present::<TrainSummary>(&dir.join(run_files::SUMMARY))?;
        let eval_dir = dir.join("eval");
        // The eval stage's, else the one training wrote at its end (`avaprep train` by hand).
        let evaluation = match read_json_if_present::<EvalReport>(
            &eval_dir.join(format!("{SCORED_SPLIT}_eval.json")),
        )? {
            Some(evaluation) => Some(evaluation),
            None => read_json_if_present::<EvalReport>(&dir.join(run_files::EVAL))?,
        };
        let mut detection_files = split_detections(&eval_dir);
        let trainers = dir.join(run_files::DETECTIONS);
        if !detection_files.contains_key(SCORED_SPLIT) && trainers.is_file() {
            detection_files.insert(SCORED_SPLIT.to_string(), trainers);
        }
        let mut detections = BTreeMap::new();
        for path in detection_files.values() {
            detections.extend(group_detections(path, min_score, keyframes)?);
        }
        Ok(RunStats {
            dir: dir.to_path_buf(),
            summary,
            clip: (config.clip_frames, config.clip_stride),
            evaluation,
            detected_splits: detection_files.into_keys().collect(),
            detections,
            min_score,
        })
    }

    /// Copies the run's curves beside the page; the count of images copied.
    pub fn copy_curves(&self, images: &Path) -> Result<usize, ReportError> {
        let from = self.dir.join(CURVES);
        if !from.is_file() {
            return Ok(0);
        }
        let to = images.join(CURVES);
        let bytes = std::fs::read(&from).map_err(|e| ReportError::io(&from, e))?;
        crate::fsutil::write_atomic(&to, &bytes).map_err(|e| ReportError::io(&to, e))?;
        Ok(1)
    }

    pub fn has_curves(&self) -> bool {
        self.dir.join(CURVES).is_file()
    }
}

/// The eval stage's detection files, by split.
fn split_detections(eval_dir: &Path) -> BTreeMap<String, PathBuf> {
    let Ok(entries) = std::fs::read_dir(eval_dir) else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let split: SplitName = name.strip_suffix(DETECTIONS_SUFFIX)?.parse().ok()?;
            let path = entry.path();
            path.is_file().then(|| (split.to_string(), path))
        })
        .collect()
}

/// The submission format has one row per box and class: rows of the same box become one box.
fn group_detections(
    path: &Path,
    min_score: f32,
    keyframes: KeyframeRange,
) -> Result<BTreeMap<FrameKey, Vec<DetectedBox>>, ReportError> {
    let rows = read_detections(path, &ReadOptions::new(keyframes, None))?;
    let mut grouped: BTreeMap<FrameKey, Vec<DetectedBox>> = BTreeMap::new();
    for row in rows.iter().filter(|row| row.score >= min_score) {
        let boxes = grouped.entry(row.key).or_default();
        match boxes.iter_mut().find(|b| b.bbox == row.bbox) {
            Some(existing) => existing.classes.push((row.action, row.score)),
            None => boxes.push(DetectedBox {
                bbox: row.bbox,
                classes: vec![(row.action, row.score)],
            }),
        }
    }
    for boxes in grouped.values_mut() {
        for detected in boxes.iter_mut() {
            detected.classes.sort_by(|a, b| b.1.total_cmp(&a.1));
        }
    }
    Ok(grouped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{DroppedRows, FrameCounts};

    fn evaluation(mean_ap: f64) -> EvalReport {
        EvalReport {
            mean_ap: Some(mean_ap),
            classes_with_ground_truth: 0,
            iou_threshold: 0.5,
            max_detections_per_frame: None,
            classes: Vec::new(),
            frames: FrameCounts::default(),
            dropped: DroppedRows::default(),
        }
    }

    /// A run `avaprep train` made by hand has only the evaluation training wrote at its end: the
    /// report shows it (it once said there was none). The eval stage's, where there is one,
    /// comes first.
    #[test]
    fn the_evaluation_training_wrote_is_shown_where_the_eval_stage_wrote_none() {
        let run = tempfile::tempdir().unwrap();
        let write = |path: &Path, text: &str| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            &run.path().join(run_files::CONFIG_TOML),
            "clip_frames = 32\nclip_stride = 2\n",
        );
        let read = || RunStats::read(run.path(), 0.5, KeyframeRange::AVA).unwrap();
        assert!(read().evaluation.is_none());
        let json = |map| serde_json::to_string(&evaluation(map)).unwrap();
        write(&run.path().join(run_files::EVAL), &json(0.25));
        assert_eq!(read().evaluation.unwrap().mean_ap, Some(0.25));
        write(&run.path().join("eval/val_eval.json"), &json(0.5));
        assert_eq!(read().evaluation.unwrap().mean_ap, Some(0.5));
    }
}
