//! The measurements behind `scripts/bench/loader.sh` and `scripts/bench/train-step.sh`, which
//! compare them with pytorchvideo's loader and a PyTorch training step in the same run.

use std::path::Path;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tch::Device;

use super::TrainError;
use super::checkpoint::{write_tensors, write_weights};
use super::dataset::Dataset;
use super::device::resolve_device;
use super::loader::{Augment, Batch, Loader, LoaderSpec, Pixels, train_batches};
use super::net::{Net, targets};
use super::optim::Sgd;
use super::session::{NotFinite, backward_batch, batch_loss};
use avaprep::trainer_settings::{ModelPreset, Precision, TrainConfig};

#[derive(Debug, Clone, Serialize)]
pub struct LoaderThroughput {
    pub clips: usize,
    pub seconds: f64,
    pub clips_per_second: f64,
    pub frames_per_clip: i64,
    pub crop: u32,
    pub threads: usize,
    pub device: String,
}

/// Loads `passes` epochs of the training split with the training augmentation, as the trainer
/// does but with no model consuming the batches, for a network on the settings' device (whose
/// loader normalises clips for the CPU and leaves bytes for a GPU).
pub fn loader_throughput(
    data_dir: &Path,
    config: &TrainConfig,
    passes: usize,
) -> Result<LoaderThroughput, TrainError> {
    let data = Dataset::open(data_dir)?;
    let clips = data.clips(config, &config.train_split, true)?.clips;
    let clips = std::sync::Arc::new(clips);
    let (device, _) = resolve_device(config)?;
    let spec = LoaderSpec::of(config, data.classes.len(), device);
    let started = Instant::now();
    let mut loaded = 0;
    for epoch in 0..passes {
        for batch in epoch_loader(&clips, config, spec, epoch) {
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
        device: format!("{device:?}"),
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
        sgd.apply_gradients(None, None, 0.01);
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
        clips: Pixels::Normalised((0..values).map(|_| rng.random_range(-1.0..1.0)).collect()),
        shape: [batch, 3, frames, size, size],
        sizes: vec![(size, size); batch as usize],
        boxes,
        targets,
        owners,
    }
}

/// What `scripts/bench/gpu-train.sh` measures of avaprep's side: training steps on the loader's
/// batches of a prepared data directory, each as the trainer takes it (forward, BCE, the loss read
/// back, backward, gradient clipping where the settings ask, SGD), with an update every batch
/// where the recipe accumulates several.
#[derive(Debug, Clone, Serialize)]
pub struct TrainThroughput {
    pub device: String,
    pub precision: Precision,
    pub train_clips: usize,
    pub batch: usize,
    pub steps: usize,
    pub seconds: f64,
    pub steps_per_second: f64,
    pub clips_per_second: f64,
    /// The share of the timed steps' wall time spent waiting for the loader's next batch: near 0
    /// when the GPU bounds training, near 1 when the loader does.
    pub loader_wait_share: f64,
    /// The losses of the first two steps, on the first two batches: the PyTorch side, given the
    /// same weights, batches and optimizer, must reproduce them.
    pub first_losses: [f64; 2],
}

/// One measurement: `warmup` untimed steps (at least 2; the first two losses kept), then `steps`
/// timed ones. With `dump`, what the PyTorch side needs is written there: the initial weights
/// with their network (`weights.safetensors`), the first two batches and the first step's logits
/// (`batches.safetensors`) and the optimizer's settings (`optimizer.json`).
pub struct ThroughputRun<'a> {
    pub data_dir: &'a Path,
    pub config: &'a TrainConfig,
    pub steps: usize,
    pub warmup: usize,
    pub dump: Option<&'a Path>,
}

/// A trainer's network, optimizer and step settings, ready to take batches.
struct Stepper {
    net: Net,
    sgd: Sgd,
    autocast: bool,
    lr: f64,
    grad_clip: Option<f64>,
}

impl Stepper {
    /// One step of the trainer's (an update every batch, bf16 and fp32 needing no loss scale).
    fn step(&mut self, drawn: &Drawn) -> Result<f64, TrainError> {
        let loss = backward_batch(&self.net, &drawn.batch, self.autocast, 1.0).map_err(
            |NotFinite(loss)| TrainError::NonFiniteLoss {
                epoch: drawn.epoch,
                batch: drawn.index,
                loss,
                checkpoint: None,
            },
        )?;
        self.sgd.apply_gradients(None, self.grad_clip, self.lr);
        Ok(loss)
    }
}

pub fn train_throughput(run: ThroughputRun) -> Result<TrainThroughput, TrainError> {
    let config = run.config;
    if run.steps == 0 || run.warmup < 2 {
        return Err(TrainError::Config(
            "--steps must be at least 1 and --warmup at least 2".into(),
        ));
    }
    // Sets libtorch's autocast dtype to the precision's, as for a training run.
    let (device, precision) = resolve_device(config)?;
    if precision == Precision::Fp16 {
        return Err(TrainError::Config(
            "the benchmark measures bf16 and fp32 (fp16 trains with a loss scaler it does not \
             model)"
                .into(),
        ));
    }
    let data = Dataset::open(run.data_dir)?;
    let clips = data.clips(config, config.train_split.as_str(), true)?.clips;
    let train_clips = clips.len();
    let spec = LoaderSpec::of(config, data.classes.len(), device);
    let mut batches = EndlessBatches::new(std::sync::Arc::new(clips), config, spec);
    tch::manual_seed(config.seed as i64);
    let net = Net::new(config, data.classes.len(), device);
    let sgd = Sgd::new(&net.vs, config.momentum, config.weight_decay);
    let mut stepper = Stepper {
        net,
        sgd,
        autocast: precision != Precision::Fp32,
        lr: config.warmup_start_lr,
        grad_clip: config.grad_clip,
    };
    let (first, second) = (batches.next()?, batches.next()?);
    if let Some(folder) = run.dump {
        dump_first_steps(folder, config, &stepper, [&first.batch, &second.batch])?;
    }
    let first_losses = [stepper.step(&first)?, stepper.step(&second)?];
    for _ in 2..run.warmup {
        stepper.step(&batches.next()?)?;
    }
    synchronize(device);
    let started = Instant::now();
    let (mut waited, mut clips_trained) = (0.0, 0);
    for _ in 0..run.steps {
        let asked = Instant::now();
        let drawn = batches.next()?;
        waited += asked.elapsed().as_secs_f64();
        clips_trained += drawn.batch.shape[0] as usize;
        stepper.step(&drawn)?;
    }
    synchronize(device);
    let seconds = started.elapsed().as_secs_f64();
    Ok(TrainThroughput {
        device: format!("{device:?}"),
        precision,
        train_clips,
        batch: config.batch_size,
        steps: run.steps,
        seconds,
        steps_per_second: run.steps as f64 / seconds,
        clips_per_second: clips_trained as f64 / seconds,
        loader_wait_share: waited / seconds,
        first_losses,
    })
}

fn synchronize(device: Device) {
    if let Device::Cuda(index) = device {
        tch::Cuda::synchronize(index as i64);
    }
}

/// The optimizer's settings as the PyTorch side reads them.
#[derive(Serialize)]
struct OptimizerSettings {
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    grad_clip: Option<f64>,
    nesterov: bool,
}

fn dump_first_steps(
    folder: &Path,
    config: &TrainConfig,
    stepper: &Stepper,
    batches: [&Batch; 2],
) -> Result<(), TrainError> {
    std::fs::create_dir_all(folder).map_err(|error| TrainError::io(folder, error))?;
    let net = &stepper.net;
    write_weights(folder, "weights.safetensors", &net.vs, &net.config, None)?;
    // The first step's logits, before its update: the PyTorch side compares its own with these.
    let logits =
        tch::no_grad(|| net.forward(batches[0], true, stepper.autocast)).to_device(Device::Cpu);
    let mut tensors = vec![("logits".to_string(), logits)];
    for (index, batch) in batches.iter().enumerate() {
        // Made on the network's device, as its steps take them (a GPU normalises the clips).
        let (slow, fast, boxes) = net.inputs(batch, net.vs.device());
        tensors.extend([
            (format!("slow{index}"), slow.to_device(Device::Cpu)),
            (format!("fast{index}"), fast.to_device(Device::Cpu)),
            (format!("boxes{index}"), boxes),
            (format!("targets{index}"), targets(batch)),
        ]);
    }
    write_tensors(folder, "batches.safetensors", &tensors, None)?;
    let settings = OptimizerSettings {
        lr: stepper.lr,
        momentum: config.momentum,
        weight_decay: config.weight_decay,
        grad_clip: stepper.grad_clip,
        nesterov: true,
    };
    let path = folder.join("optimizer.json");
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(&settings).expect("serialises"),
    )
    .map_err(|error| TrainError::io(&path, error))
}

/// A batch and where it stands, as a training run's messages name it.
struct Drawn {
    batch: Batch,
    /// From 1.
    epoch: usize,
    /// In its epoch, from 0.
    index: usize,
}

/// The training split's batches, epoch after epoch, as the trainer draws them.
struct EndlessBatches {
    clips: std::sync::Arc<Vec<super::dataset::ClipSample>>,
    config: TrainConfig,
    spec: LoaderSpec,
    epoch: usize,
    /// Batches of this epoch given so far.
    given: usize,
    loader: Loader,
}

impl EndlessBatches {
    fn new(
        clips: std::sync::Arc<Vec<super::dataset::ClipSample>>,
        config: &TrainConfig,
        spec: LoaderSpec,
    ) -> Self {
        let loader = epoch_loader(&clips, config, spec, 0);
        Self {
            clips,
            config: config.clone(),
            spec,
            epoch: 0,
            given: 0,
            loader,
        }
    }

    fn next(&mut self) -> Result<Drawn, TrainError> {
        loop {
            if let Some(batch) = self.loader.next() {
                self.given += 1;
                return Ok(Drawn {
                    batch: batch?,
                    epoch: self.epoch + 1,
                    index: self.given - 1,
                });
            }
            self.epoch += 1;
            self.given = 0;
            self.loader = epoch_loader(&self.clips, &self.config, self.spec, self.epoch);
        }
    }
}

/// One epoch of the training split's batches, drawn and augmented as the trainer draws them.
fn epoch_loader(
    clips: &std::sync::Arc<Vec<super::dataset::ClipSample>>,
    config: &TrainConfig,
    spec: LoaderSpec,
    epoch: usize,
) -> Loader {
    let batches = train_batches(clips.len(), config.batch_size, config.seed, epoch);
    let augment = Augment::Train {
        seed: config.seed,
        epoch,
        hflip: config.hflip,
    };
    Loader::spawn(clips.clone(), batches, augment, spec)
}
