//! The measurements behind `scripts/bench/loader.sh` and `scripts/bench/train-step.sh`, which
//! compare them with pytorchvideo's loader and a PyTorch training step in the same run.

use std::path::Path;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tch::Device;

use super::TrainError;
use super::dataset::Dataset;
use super::loader::{Augment, Batch, Loader, LoaderSpec, train_batches};
use super::net::Net;
use super::optim::Sgd;
use super::session::batch_loss;
use avaprep::trainer_settings::{ModelPreset, TrainConfig};

#[derive(Debug, Clone, Serialize)]
pub struct LoaderThroughput {
    pub clips: usize,
    pub seconds: f64,
    pub clips_per_second: f64,
    pub frames_per_clip: i64,
    pub crop: u32,
    pub threads: usize,
}

/// Loads `passes` epochs of the training split with the training augmentation, as the trainer
/// does but with no model consuming the batches.
pub fn loader_throughput(
    data_dir: &Path,
    config: &TrainConfig,
    passes: usize,
) -> Result<LoaderThroughput, TrainError> {
    let data = Dataset::open(data_dir)?;
    let (clips, _, _) = data.clips(config, &config.train_split, true)?;
    let clips = std::sync::Arc::new(clips);
    let spec = LoaderSpec::of(config, data.classes.len());
    let started = Instant::now();
    let mut loaded = 0;
    for epoch in 0..passes {
        let batches = train_batches(clips.len(), config.batch_size, config.seed, epoch);
        let augment = Augment::Train {
            seed: config.seed,
            epoch,
            hflip: config.hflip,
        };
        for batch in Loader::spawn(clips.clone(), batches, augment, spec) {
            loaded += batch?.shape[0] as usize;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(LoaderThroughput {
        clips: loaded,
        seconds,
        clips_per_second: loaded as f64 / seconds,
        frames_per_clip: config.clip_frames,
        crop: config.crop_size,
        threads: config.threads,
    })
}

/// The shape of one synthetic training step.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct StepShape {
    pub model: ModelPreset,
    pub frames: i64,
    pub size: i64,
    pub batch: i64,
    pub boxes_per_clip: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepTimes {
    #[serde(flatten)]
    pub shape: StepShape,
    pub threads: usize,
    pub median_step_seconds: f64,
    pub steps: Vec<f64>,
}

/// Times `steps` SGD steps (forward, BCE, backward, update) on random clips and boxes after
/// `warmup` untimed ones, on the CPU with `threads` intra-op threads.
pub fn train_step_times(
    shape: StepShape,
    steps: usize,
    warmup: usize,
    threads: usize,
) -> Result<StepTimes, TrainError> {
    if steps == 0 {
        return Err(TrainError::Config("--steps must be at least 1".into()));
    }
    tch::set_num_threads(threads as i32);
    tch::manual_seed(0);
    let config = TrainConfig {
        model: shape.model,
        clip_frames: shape.frames,
        ..TrainConfig::ava_r50()
    };
    const CLASSES: usize = 80;
    let net = Net::new(&config, CLASSES, Device::Cpu);
    let mut sgd = Sgd::new(&net.vs, config.momentum, config.weight_decay);
    let batch = random_batch(shape, CLASSES);
    let mut times = Vec::with_capacity(steps);
    for step in 0..warmup + steps {
        let started = Instant::now();
        batch_loss(&net, &batch, false).backward();
        sgd.step(0.01);
        sgd.zero_grad();
        if step >= warmup {
            times.push(started.elapsed().as_secs_f64());
        }
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    Ok(StepTimes {
        shape,
        threads,
        median_step_seconds: sorted[sorted.len() / 2],
        steps: times,
    })
}

/// Uniform clips, boxes inside the frame at least 8 pixels wide, random 0/1 targets.
fn random_batch(shape: StepShape, classes: usize) -> Batch {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let StepShape {
        frames,
        size,
        batch,
        boxes_per_clip,
        ..
    } = shape;
    let values = (3 * frames * size * size * batch) as usize;
    let side = size as f32;
    let mut boxes = Vec::new();
    let mut owners = Vec::new();
    for clip in 0..batch as usize {
        for slot in 0..boxes_per_clip as usize {
            let (x1, y1) = (
                rng.random_range(0.0..side / 2.0),
                rng.random_range(0.0..side / 2.0),
            );
            let (x2, y2) = (
                rng.random_range(x1 + 8.0..=side),
                rng.random_range(y1 + 8.0..=side),
            );
            boxes.push([clip as f32, x1, y1, x2, y2]);
            owners.push((clip, slot));
        }
    }
    let targets = (0..boxes.len() * classes)
        .map(|_| f32::from(u8::from(rng.random_bool(0.1))))
        .collect();
    Batch {
        clips: (0..values).map(|_| rng.random_range(-1.0..1.0)).collect(),
        shape: [batch, 3, frames, size, size],
        boxes,
        targets,
        owners,
    }
}
