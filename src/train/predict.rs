//! Inference over a split's detector boxes, the AVA detections file, and [`predict`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor, nn};

use super::checkpoint::load_model;
use super::config::{Precision, TrainConfig};
use super::dataset::{Classes, ClipSample, ClipSpec, SplitAnnotations, build_clips};
use super::loader::{Augment, Batch, Loader, LoaderSpec, eval_batches};
use super::model::SlowFast;
use super::model::probabilities;
use super::{TrainError, session};
use crate::annotations::{ActionId, Detection, KeyframeRange};
use crate::eval::{EvalReport, evaluate};
use crate::fsutil::write_atomic;
use crate::layout::DataLayout;
use crate::records::VideoPlan;

/// The network and the variables it lives in.
pub(crate) struct Net {
    pub vs: nn::VarStore,
    pub model: SlowFast,
    pub alpha: i64,
}

impl Net {
    pub fn new(config: &TrainConfig, num_classes: usize, device: Device) -> Self {
        let mut cfg = config.model.build(num_classes as i64, config.clip_frames);
        if let Some(dropout) = config.dropout {
            cfg.dropout = dropout;
        }
        let vs = nn::VarStore::new(device);
        let model = SlowFast::new(&vs.root(), &cfg);
        Self {
            vs,
            model,
            alpha: cfg.alpha,
        }
    }

    /// Logits `[K, C]` for a batch; `autocast` runs the forward pass in reduced precision.
    pub fn forward(&self, batch: &Batch, train: bool, autocast: bool) -> Tensor {
        let device = self.vs.device();
        let clips = Tensor::from_slice(&batch.clips)
            .view(batch.shape)
            .to_device(device);
        let (slow, fast) = super::model::pack_pathways(&clips, self.alpha);
        let flat: Vec<f32> = batch.boxes.iter().flatten().copied().collect();
        let boxes = Tensor::from_slice(&flat).view([-1, 5]).to_device(device);
        tch::autocast(autocast, || {
            self.model.forward_t(&slow, &fast, &boxes, train)
        })
        .to_kind(Kind::Float)
    }
}

/// Data the run reads once: the plan, the label maps, the keyframe range.
pub(crate) struct Dataset {
    pub data_dir: PathBuf,
    pub plan: VideoPlan,
    pub classes: Classes,
    pub keyframes: KeyframeRange,
}

impl Dataset {
    pub fn open(data_dir: &Path) -> Result<Self, TrainError> {
        let plan = VideoPlan::load(&DataLayout::new(data_dir).video_plan())
            .map_err(super::DataError::from)?;
        let keyframes = KeyframeRange::new(plan.keyframes[0], plan.keyframes[1])
            .ok_or_else(|| TrainError::Config("the plan's keyframe range is empty".into()))?;
        Ok(Self {
            data_dir: data_dir.to_path_buf(),
            classes: Classes::read(data_dir)?,
            plan,
            keyframes,
        })
    }

    /// The clips of `split`: training boxes when `train`, detector boxes otherwise.
    pub fn clips(
        &self,
        config: &TrainConfig,
        split: &str,
        train: bool,
    ) -> Result<(Vec<ClipSample>, SplitAnnotations, usize), TrainError> {
        let annotations = SplitAnnotations::read(&self.data_dir, split, self.keyframes)?;
        let spec = ClipSpec {
            frames: config.clip_frames as usize,
            stride: config.clip_stride,
            box_threshold: config.box_threshold,
            label_iou: config.label_iou,
        };
        let (clips, without_frames) = build_clips(
            &self.data_dir,
            &self.plan,
            &annotations,
            &self.classes,
            &spec,
            train,
        )?;
        if clips.is_empty() {
            return Err(TrainError::EmptySplit(split.to_string()));
        }
        Ok((clips, annotations, without_frames))
    }
}

/// Scores every detector box of `clips` for every scored class, in eval mode without autograd.
pub(crate) fn infer(
    net: &Net,
    clips: &Arc<Vec<ClipSample>>,
    config: &TrainConfig,
    classes: &Classes,
    autocast: bool,
) -> Result<Vec<Detection>, TrainError> {
    let spec = LoaderSpec::of(config, classes.len());
    let scored: Vec<(usize, ActionId)> = classes
        .scored
        .ids()
        .filter_map(|id| Some((classes.index(id)?, id)))
        .collect();
    let batches = eval_batches(clips.len(), config.batch_size);
    let mut detections = Vec::new();
    for batch in Loader::spawn(clips.clone(), batches, Augment::Eval, spec) {
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
    Ok(detections)
}

/// The official detections format, PySlowFast's precision: 3 decimals for coordinates, 4 for
/// scores, the second as 4 digits.
pub fn write_detections(path: &Path, detections: &[Detection]) -> Result<(), TrainError> {
    let mut text = String::with_capacity(detections.len() * 56);
    for d in detections {
        let b = d.bbox;
        let _ = writeln!(
            text,
            "{},{:.3},{:.3},{:.3},{:.3},{},{:.4}",
            d.key,
            b.x1(),
            b.y1(),
            b.x2(),
            b.y2(),
            d.action,
            d.score
        );
    }
    write_atomic(path, text.as_bytes()).map_err(|e| TrainError::io(path, e))
}

/// What [`predict`] wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictSummary {
    pub detections: PathBuf,
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
    let (device, precision) = session::resolve_device(config)?;
    let data = Dataset::open(data_dir)?;
    let (clips, annotations, _) = data.clips(config, split, false)?;
    let net = Net::new(config, data.classes.len(), device);
    load_model(&net.vs, weights)?;
    if cancel.load(Ordering::Relaxed) {
        return Err(TrainError::Config("cancelled before inference".into()));
    }
    let clips = Arc::new(clips);
    let autocast = precision != Precision::Fp32;
    let detections = infer(&net, &clips, config, &data.classes, autocast)?;
    write_detections(out, &detections)?;
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
        clips: clips.len(),
        rows: detections.len(),
        report,
    })
}
