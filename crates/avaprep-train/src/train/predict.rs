//! Inference over a split's detector boxes, the AVA detections file, and [`predict`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use tch::Device;

use super::TrainError;
use super::checkpoint::{load_model, network_of};
use super::dataset::{Classes, ClipSample, Dataset, SplitClips};
use super::device::resolve_device;
use super::loader::{Augment, Loader, LoaderSpec, eval_batches};
use super::model::probabilities;
use super::net::Net;
use avaprep::annotations::{
    ActionId, Detection, FrameKey, KeyframeRange, ReadOptions, parse_detections,
};
use avaprep::eval::{EvalReport, evaluate};
use avaprep::fsutil::write_output;
use avaprep::records::{VideoPlan, own_seconds_file};
use avaprep::trainer_settings::{Precision, TrainConfig};

/// Scores every detector box of `clips` for every scored class, in eval mode without autograd.
pub(crate) fn infer(
    net: &Net,
    clips: &Arc<Vec<ClipSample>>,
    config: &TrainConfig,
    classes: &Classes,
    autocast: bool,
    cancel: &AtomicBool,
) -> Result<Vec<Detection>, TrainError> {
    let spec = LoaderSpec::of(config, classes.len(), net.vs.device());
    let scored: Vec<(usize, ActionId)> = classes
        .scored
        .ids()
        .filter_map(|id| Some((classes.index(id)?, id)))
        .collect();
    let batches = eval_batches(clips.len(), config.batch_size);
    let mut detections = Vec::new();
    for batch in Loader::spawn(clips.clone(), batches, Augment::Eval, spec) {
        if cancel.load(Ordering::Relaxed) {
            return Err(TrainError::Interrupted);
        }
        let batch = batch?;
        let probabilities = tch::no_grad(|| probabilities(&net.forward(&batch, false, autocast)));
        let probabilities = Vec::<Vec<f32>>::try_from(probabilities.to_device(Device::Cpu))?;
        for (&(sample, j), row) in batch.owners.iter().zip(&probabilities) {
            let clip = &clips[sample];
            for &(column, action) in &scored {
                detections.push(Detection {
                    key: clip.key,
                    bbox: clip.boxes[j].bbox,
                    action,
                    score: row[column],
                });
            }
        }
    }
    as_written(&detections)
}

/// The official detections format, PySlowFast's precision: 3 decimals for coordinates, 4 for
/// scores; each row's video and second as `key` writes them.
fn detection_rows(detections: &[Detection], key: impl Fn(FrameKey) -> String) -> String {
    let mut text = String::with_capacity(detections.len() * 56);
    for d in detections {
        let b = d.bbox;
        let _ = writeln!(
            text,
            "{},{:.3},{:.3},{:.3},{:.3},{},{:.4}",
            key(d.key),
            b.x1(),
            b.y1(),
            b.x2(),
            b.y2(),
            d.action,
            d.score
        );
    }
    text
}

/// The detections as the file holds them, read back with the evaluator's reader: every mAP the
/// trainer prints is then the one `avaprep eval` and the official evaluator get from the file.
fn as_written(detections: &[Detection]) -> Result<Vec<Detection>, TrainError> {
    let text = detection_rows(detections, |key| key.to_string());
    let every_second = KeyframeRange::new(0, u32::MAX).expect("a range");
    parse_detections(
        text.as_bytes(),
        "detections",
        &ReadOptions::new(every_second, None),
    )
    .map_err(|error| {
        TrainError::Config(format!(
            "the detections as written cannot be read back ({error}): a score that is not a number means the weights diverged"
        ))
    })
}

/// The official detections file, on the dataset's clock (the evaluator's, with its 4-digit
/// second).
pub fn write_detections(path: &Path, detections: &[Detection]) -> Result<(), TrainError> {
    let text = detection_rows(detections, |key| key.to_string());
    write_output(path, text.as_bytes()).map_err(|e| TrainError::io(path, e))
}

fn write_own_seconds(
    out: &Path,
    detections: &[Detection],
    plan: &VideoPlan,
) -> Result<Option<PathBuf>, TrainError> {
    // Beside a device or a descriptor (`--out /dev/stdout`) there is no folder of the user's.
    if !plan.own_clock || !avaprep::fsutil::is_plain_output(out) {
        return Ok(None);
    }
    let path = own_seconds_file(out);
    let text = detection_rows(detections, |key| {
        let (file, own) = plan
            .own_second(&key.video, f64::from(key.second))
            .expect("an own clock");
        format!("{file},{own}")
    });
    write_output(&path, text.as_bytes()).map_err(|e| TrainError::io(&path, e))?;
    Ok(Some(path))
}

/// What [`predict`] wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictSummary {
    pub detections: PathBuf,
    /// The same rows on the videos' own clock, for a dataset of videos on their own clock,
    /// beside `detections` where that is a file (not a device or `/dev/stdout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_seconds: Option<PathBuf>,
    /// The dataset's videos are on their own clock.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_clock: bool,
    /// The boxes scored are the ground truth's (no person detector's were given to the import).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ground_truth_proposals: bool,
    pub clips: usize,
    pub rows: usize,
    /// The official evaluation when the split has ground truth.
    pub report: Option<EvalReport>,
}

/// Scores the detector boxes of `split` with `weights` (a `model-*` or `best-*` file, or any
/// safetensors with these names) and writes `out` in the AVA format; evaluates it when the split
/// has ground truth.
pub fn predict(
    config: &TrainConfig,
    data_dir: &Path,
    weights: &Path,
    split: &str,
    out: &Path,
    cancel: &AtomicBool,
) -> Result<PredictSummary, TrainError> {
    // A wrong weights file is named before the data is read. The weights' own network, where
    // they record it: `--preset` names it only for weights that do not.
    let recorded = network_of(weights)?;
    let (device, precision) = resolve_device(config)?;
    let data = Dataset::open(data_dir)?;
    let mut config = config.clone();
    if let Some(network) = &recorded {
        check_classes(weights, network, data.classes.len())?;
        config.clip_frames = network.num_frames;
    }
    check_actions(weights, &data.classes.full)?;
    let config = &config;
    let SplitClips {
        clips, annotations, ..
    } = data.clips(config, split, false)?;
    let net = match recorded {
        Some(network) => Net::of_network(network, device),
        None => Net::new(config, data.classes.len(), device),
    };
    load_model(&net.vs, weights)?;
    let clips = Arc::new(clips);
    let autocast = precision != Precision::Fp32;
    let detections = infer(&net, &clips, config, &data.classes, autocast, cancel)?;
    write_detections(out, &detections)?;
    let own_seconds = write_own_seconds(out, &detections, &data.plan)?;
    let report = (!annotations.ground_truth.is_empty()).then(|| {
        evaluate(
            &annotations.ground_truth,
            &detections,
            &data.classes.scored,
            &annotations.excluded,
        )
    });
    Ok(PredictSummary {
        detections: out.to_path_buf(),
        own_seconds,
        own_clock: data.plan.own_clock,
        ground_truth_proposals: data.plan.ground_truth_proposals,
        clips: clips.len(),
        rows: detections.len(),
        report,
    })
}

/// Weights that record their outputs' actions score this dataset's only where they are the same:
/// the same count of other actions would name every score wrong.
fn check_actions(
    weights: &Path,
    labels: &avaprep::annotations::LabelMap,
) -> Result<(), TrainError> {
    let here = super::checkpoint::output_actions(labels);
    match super::checkpoint::actions_of(weights)? {
        Some(trained) if trained != here => Err(TrainError::Checkpoint(format!(
            "{}: trained on the actions {}, but this dataset's label map has {}: its scores would be named as other actions; predict with weights trained on this dataset, or train from these with `avaprep train --init`",
            weights.display(),
            named_actions(&trained),
            named_actions(&here)
        ))),
        _ => Ok(()),
    }
}

fn named_actions(actions: &super::checkpoint::OutputActions) -> String {
    let named: Vec<String> = actions
        .iter()
        .map(|(id, name)| format!("{id} {name}"))
        .collect();
    named.join(", ")
}

/// Weights of another class count score another label map: named before anything is read.
fn check_classes(
    weights: &Path,
    network: &super::model::SlowFastConfig,
    classes: usize,
) -> Result<(), TrainError> {
    match network.num_classes as usize == classes {
        true => Ok(()),
        false => Err(TrainError::Checkpoint(format!(
            "{}: weights for {} classes, but this dataset's label map has {classes}; train on it, or start from these weights with `avaprep train --init`",
            weights.display(),
            network.num_classes
        ))),
    }
}
