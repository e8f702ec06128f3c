//! `slowfast/train.yaml`: a complete PySlowFast training config for SlowFast R50 on this data
//! directory, avaprep's `ava-r50` recipe in PySlowFast's keys, for its multi-GPU training
//! (`tools/run_net.py`). It takes the dataset keys from `ava.yaml` beside it (`_BASE_`).

use std::fmt::Write as _;
use std::path::Path;

use super::ListsParams;
use crate::trainer_settings::TrainConfig;
use crate::trainer_settings::schedule::ScheduleKind;

/// avaprep's `ava-r50` recipe (the trainer's `TrainConfig::ava_r50` and its R50 network) as
/// PySlowFast's config states it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recipe {
    /// Fast-pathway frames per clip and their distance, in frames of the extracted rate.
    pub clip_frames: u32,
    pub clip_stride: u32,
    pub crop_size: u32,
    /// Clips per step on one GPU (PySlowFast's `TRAIN.BATCH_SIZE` with `NUM_GPUS: 1`).
    pub batch_per_gpu: u32,
    /// The recipe's LR and warm-up start at the batch it was tuned for (PySlowFast's AVA
    /// recipe: 64 clips on 8 GPUs); the config scales both linearly to one GPU's batch.
    pub lr: f64,
    pub warmup_start_lr: f64,
    pub reference_batch: u32,
    pub warmup_epochs: f64,
    /// Epochs at which the LR is multiplied by `gamma`.
    pub milestones: [u32; 2],
    pub gamma: f64,
    pub momentum: f64,
    pub weight_decay: f64,
    pub epochs: u32,
    pub box_threshold: f64,
    pub dropout: f64,
    /// The network: PySlowFast's SlowFast R50 with the AVA head.
    pub depth: u32,
    pub stage_depths: [u32; 4],
    pub width_per_group: u32,
    pub alpha: u32,
    pub beta_inv: u32,
    pub fusion_kernel: u32,
    pub fusion_conv_channel_ratio: u32,
    pub spatial_strides: [u32; 4],
    pub spatial_dilations: [u32; 4],
    pub roi_output_size: u32,
    pub roi_spatial_scale_inv: u32,
}

impl Recipe {
    /// The trainer's `ava-r50` preset and the network it builds, in PySlowFast's terms.
    pub fn ava_r50() -> Self {
        let train = TrainConfig::ava_r50();
        let network = train.model.build(80, train.clip_frames);
        let ScheduleKind::Steps { milestones, gamma } = &train.schedule else {
            panic!("ava-r50 decays its LR in steps");
        };
        let whole = |values: [i64; 4]| values.map(|v| v as u32);
        Recipe {
            clip_frames: train.clip_frames as u32,
            clip_stride: train.clip_stride,
            crop_size: train.crop_size,
            batch_per_gpu: train.batch_size as u32,
            lr: train.lr,
            warmup_start_lr: train.warmup_start_lr,
            reference_batch: (train.batch_size * train.accumulate) as u32,
            warmup_epochs: train.warmup_epochs,
            milestones: [milestones[0] as u32, milestones[1] as u32],
            gamma: *gamma,
            momentum: train.momentum,
            weight_decay: train.weight_decay,
            epochs: train.epochs as u32,
            // Through its decimal text: 0.8f32 widened is 0.800000011920929.
            box_threshold: train.box_threshold.to_string().parse().expect("a number"),
            dropout: train.dropout.unwrap_or(network.dropout),
            depth: match network.stage_depths {
                [3, 4, 6, 3] => 50,
                other => panic!("ava-r50 is a ResNet-50, not {other:?}"),
            },
            stage_depths: network.stage_depths.map(|d| d as u32),
            width_per_group: network.width_per_group as u32,
            alpha: network.alpha as u32,
            beta_inv: network.beta_inv as u32,
            fusion_kernel: network.fusion_kernel as u32,
            fusion_conv_channel_ratio: network.fusion_conv_channel_ratio as u32,
            spatial_strides: whole(network.spatial_strides),
            spatial_dilations: whole(network.spatial_dilations),
            roi_output_size: network.roi_output_size as u32,
            roi_spatial_scale_inv: (1.0 / network.roi_spatial_scale).round() as u32,
        }
    }

    /// The LR for `batch` clips a step, by the linear scaling rule.
    pub fn lr_at(&self, batch: u32) -> f64 {
        self.lr * f64::from(batch) / f64::from(self.reference_batch)
    }

    /// `DATA.SAMPLING_RATE`: the clip stride in rows of lists at `list_fps` rows a second, for
    /// frames `period` seconds apart; `None` when it is not a whole number of rows.
    pub fn sampling_rate(&self, list_fps: f64, period: f64) -> Option<u32> {
        let rows = list_fps * period * f64::from(self.clip_stride);
        let whole = rows.round();
        (whole >= 1.0 && (rows - whole).abs() < 1e-6).then_some(whole as u32)
    }

    /// The clip in the lists' rows, as the lists stage checks clips.
    pub fn list_clip(&self, lists: &ListsParams, sampling_rate: u32) -> ListsParams {
        ListsParams {
            num_frames: self.clip_frames,
            sampling_rate,
            ..lists.clone()
        }
    }
}

/// The config's text. `output_dir` is where PySlowFast writes checkpoints and logs.
pub fn train_yaml(
    recipe: &Recipe,
    sampling_rate: u32,
    list_fps: f64,
    num_classes: u32,
    output_dir: &Path,
    test_split: bool,
) -> String {
    let batch = recipe.batch_per_gpu;
    let lr = recipe.lr_at(batch);
    let warmup_start_lr =
        recipe.warmup_start_lr * f64::from(batch) / f64::from(recipe.reference_batch);
    let pairs = |values: [u32; 4]| {
        let pairs: Vec<String> = values.iter().map(|v| format!("[{v}, {v}]")).collect();
        format!("[{}]", pairs.join(", "))
    };
    let seconds = f64::from(recipe.clip_frames * sampling_rate) / list_fps;
    let mut text = String::new();
    writeln!(
        text,
        "# Written by `avaprep lists`: PySlowFast's training config for SlowFast R50 on this data\n\
         # directory, avaprep's `ava-r50` recipe ({frames} frames {stride} apart: {seconds:.1} s, crop\n\
         # {crop}, {epochs} epochs, steps at {m0} and {m1}, warm-up {warmup} epochs), with the dataset\n\
         # keys of ava.yaml beside it. The LR is stated for one GPU at {batch} clips a step; for N\n\
         # GPUs scale the batch and both LRs by N (the linear rule: BASE_LR = {lr} x TRAIN.BATCH_SIZE /\n\
         # {batch}), e.g. on 8 GPUs: NUM_GPUS 8 TRAIN.BATCH_SIZE {b8} SOLVER.BASE_LR {lr8}\n\
         # SOLVER.WARMUP_START_LR {w8}, PySlowFast's own AVA recipe.",
        frames = recipe.clip_frames,
        stride = recipe.clip_stride,
        crop = recipe.crop_size,
        epochs = recipe.epochs,
        m0 = recipe.milestones[0],
        m1 = recipe.milestones[1],
        warmup = recipe.warmup_epochs,
        lr = short(lr),
        b8 = batch * 8,
        lr8 = short(recipe.lr_at(batch * 8)),
        w8 = yaml_float(warmup_start_lr * 8.0),
    )
    .expect("a string");
    let [m0, m1] = recipe.milestones;
    let gamma = recipe.gamma;
    write!(
        text,
        "_BASE_: ava.yaml
TRAIN:
  ENABLE: True
  DATASET: ava
  BATCH_SIZE: {batch}
  EVAL_PERIOD: 1
  CHECKPOINT_PERIOD: 1
  AUTO_RESUME: True
TEST:
  ENABLE: {test}
  DATASET: ava
  BATCH_SIZE: {batch}
DATA:
  NUM_FRAMES: {frames}
  SAMPLING_RATE: {sampling_rate}
  TRAIN_JITTER_SCALES: [256, 320]
  TRAIN_CROP_SIZE: {crop}
  TEST_CROP_SIZE: {crop}
  INPUT_CHANNEL_NUM: [3, 3]
DETECTION:
  ENABLE: True
  ALIGNED: True
  SPATIAL_SCALE_FACTOR: {scale}
  ROI_XFORM_RESOLUTION: {roi}
AVA:
  DETECTION_SCORE_THRESH: {threshold}
MODEL:
  NUM_CLASSES: {num_classes}
  ARCH: slowfast
  MODEL_NAME: SlowFast
  LOSS_FUNC: bce
  DROPOUT_RATE: {dropout}
  HEAD_ACT: sigmoid
SLOWFAST:
  ALPHA: {alpha}
  BETA_INV: {beta_inv}
  FUSION_CONV_CHANNEL_RATIO: {fusion_ratio}
  FUSION_KERNEL_SZ: {fusion_kernel}
RESNET:
  ZERO_INIT_FINAL_BN: True
  WIDTH_PER_GROUP: {width}
  NUM_GROUPS: 1
  DEPTH: {depth}
  TRANS_FUNC: bottleneck_transform
  STRIDE_1X1: False
  NUM_BLOCK_TEMP_KERNEL: {blocks}
  SPATIAL_DILATIONS: {dilations}
  SPATIAL_STRIDES: {strides}
NONLOCAL:
  LOCATION: [[[], []], [[], []], [[], []], [[], []]]
  GROUP: [[1, 1], [1, 1], [1, 1], [1, 1]]
  INSTANTIATION: dot_product
  POOL: [[[1, 2, 2], [1, 2, 2]], [[1, 2, 2], [1, 2, 2]], [[1, 2, 2], [1, 2, 2]], [[1, 2, 2], [1, 2, 2]]]
BN:
  USE_PRECISE_STATS: False
  NUM_BATCHES_PRECISE: 200
SOLVER:
  BASE_LR: {lr}
  LR_POLICY: steps_with_relative_lrs
  STEPS: [0, {m0}, {m1}]
  LRS: [1, {g1}, {g2}]
  MAX_EPOCH: {epochs}
  MOMENTUM: {momentum}
  WEIGHT_DECAY: {weight_decay}
  WARMUP_EPOCHS: {warmup:.1}
  WARMUP_START_LR: {warmup_start_lr}
  OPTIMIZING_METHOD: sgd
DATA_LOADER:
  NUM_WORKERS: 8
  PIN_MEMORY: True
NUM_GPUS: 1
NUM_SHARDS: 1
RNG_SEED: 0
OUTPUT_DIR: {output_dir}
",
        frames = recipe.clip_frames,
        crop = recipe.crop_size,
        scale = recipe.roi_spatial_scale_inv,
        roi = recipe.roi_output_size,
        threshold = recipe.box_threshold,
        dropout = recipe.dropout,
        alpha = recipe.alpha,
        beta_inv = recipe.beta_inv,
        fusion_ratio = recipe.fusion_conv_channel_ratio,
        fusion_kernel = recipe.fusion_kernel,
        width = recipe.width_per_group,
        depth = recipe.depth,
        blocks = pairs(recipe.stage_depths),
        dilations = pairs(recipe.spatial_dilations),
        strides = pairs(recipe.spatial_strides),
        lr = short(lr),
        g1 = short(gamma),
        g2 = short(gamma * gamma),
        epochs = recipe.epochs,
        momentum = recipe.momentum,
        weight_decay = yaml_float(recipe.weight_decay),
        warmup_start_lr = yaml_float(warmup_start_lr),
        warmup = recipe.warmup_epochs,
        output_dir = super::pyslowfast_config::yaml_string(&output_dir.to_string_lossy()),
        // Without a val split there is nothing to test on (TEST_LISTS is empty).
        test = if test_split { "True" } else { "False" },
    )
    .expect("a string");
    text
}

/// `x` without the float noise of its arithmetic (`0.1 * 0.1` is 0.010000000000000002).
fn short(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let digits = 10f64.powi(12 - x.abs().log10().ceil() as i32);
    format!("{}", (x * digits).round() / digits)
}

/// A float YAML 1.1 reads as one: PyYAML takes `1e-7`, without a point, for a string.
fn yaml_float(x: f64) -> String {
    let text = format!("{:e}", short(x).parse::<f64>().expect("a number"));
    match text.split_once('e') {
        Some((mantissa, exponent)) if !mantissa.contains('.') => format!("{mantissa}.0e{exponent}"),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_yaml_floats_without_noise() {
        assert_eq!(short(0.1 * 0.1), "0.01");
        assert_eq!(short(0.1 * 8.0 / 64.0), "0.0125");
        assert_eq!(yaml_float(1e-7), "1.0e-7");
        assert_eq!(yaml_float(1.25e-4 * 8.0 / 64.0), "1.5625e-5");
    }

    #[test]
    fn the_recipe_is_the_trainer_s_ava_r50() {
        let recipe = Recipe::ava_r50();
        assert_eq!((recipe.clip_frames, recipe.clip_stride), (16, 1));
        assert_eq!((recipe.reference_batch, recipe.lr_at(8)), (64, 0.0125));
        assert_eq!(
            (recipe.depth, recipe.alpha, recipe.box_threshold),
            (50, 4, 0.8)
        );
        assert_eq!(recipe.roi_spatial_scale_inv, 16);
    }

    #[test]
    fn the_clip_stride_is_whole_rows_or_nothing() {
        assert_eq!(Recipe::ava_r50().sampling_rate(30.0, 0.2), Some(6));
        assert_eq!(Recipe::ava_r50().sampling_rate(5.0, 0.2), Some(1));
        assert_eq!(Recipe::ava_r50().sampling_rate(30.0, 0.25), None);
    }
}
