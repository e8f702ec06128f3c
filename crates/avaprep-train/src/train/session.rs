//! The training loop: epochs of SGD steps, evaluation rounds, early stopping, checkpoints.

use avaprep::trainer_protocol::run_files;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use tch::Tensor;

use super::checkpoint::{self, TrainState};
use super::dataset::{ClipSample, Dataset};
use super::device::resolve_device;
use super::early_stop::{EarlyStopping, Verdict};
use super::loader::{Augment, Batch, Loader, LoaderSpec, mix_seed, train_batches};
use super::metrics::{CurveNotes, Metrics, Record};
use super::model::upload;
use super::net::Net;
use super::optim::{LossScaler, Sgd};
use super::predict::{infer, write_detections};
use super::{StopReason, TrainError, TrainEvent, TrainSummary};
use avaprep::annotations::{FrameKey, GroundTruthRow};
use avaprep::eval::{EvalReport, evaluate};
use avaprep::fsutil::write_atomic;
use avaprep::trainer_settings::{Precision, TrainConfig};

/// Validation data: clips over the detector boxes, and what the evaluator needs.
struct Validation {
    clips: Arc<Vec<ClipSample>>,
    ground_truth: Vec<GroundTruthRow>,
    excluded: Vec<FrameKey>,
}

struct Session<'a> {
    config: &'a TrainConfig,
    run_dir: &'a Path,
    cancel: &'a AtomicBool,
    progress: &'a dyn Fn(TrainEvent),
    data: Dataset,
    train: Arc<Vec<ClipSample>>,
    /// None when the settings name no val split: the whole schedule runs, the last weights kept.
    val: Option<Validation>,
    net: Net,
    sgd: Sgd,
    state: TrainState,
    metrics: Metrics,
    precision: Precision,
    /// Clips and seconds of training steps in this invocation.
    throughput: (usize, f64),
}

enum EpochEnd {
    Finished,
    Cancelled,
}

pub(crate) fn run(
    config: &TrainConfig,
    data_dir: &Path,
    run_dir: &Path,
    cancel: &AtomicBool,
    progress: &dyn Fn(TrainEvent),
) -> Result<TrainSummary, TrainError> {
    config.validate().map_err(TrainError::Config)?;
    let (device, precision) = resolve_device(config)?;
    let previous = TrainState::load(run_dir)?;
    if previous.is_some() && !config.resume {
        return Err(TrainError::RunExists(run_dir.to_path_buf()));
    }
    std::fs::create_dir_all(run_dir).map_err(|e| TrainError::io(run_dir, e))?;
    let data = Dataset::open(data_dir)?;
    let train_split = data.clips(config, &config.train_split, true)?;
    let mut train = train_split.clips;
    if config.shuffle_labels {
        super::dataset::shuffle_labels(&mut train, config.seed);
    }
    let val = match &config.val_split {
        Some(val_split) => Some(data.clips(config, val_split, false)?),
        None => None,
    };
    let val_clips = val.as_ref().map_or(0, |v| v.clips.len());
    let keyframes_without_frames = train_split.keyframes_without_frames
        + val.as_ref().map_or(0, |v| v.keyframes_without_frames);
    let videos_without_frames: Vec<String> = (train_split.videos_without_frames.iter())
        .chain(val.iter().flat_map(|v| &v.videos_without_frames))
        .map(ToString::to_string)
        .collect();
    let val = val.map(|split| Validation {
        clips: Arc::new(split.clips),
        ground_truth: split.annotations.ground_truth,
        excluded: split.annotations.excluded,
    });
    let val_samples: &[ClipSample] = val.as_ref().map_or(&[], |v| &v.clips);
    super::dataset::check_frames_exist(&[&train, val_samples])?;
    // The initial weights are drawn from libtorch's global generator: seed it for the run.
    tch::manual_seed(config.seed as i64);
    let net = Net::new(config, data.classes.len(), device);
    if let Some(path) = &config.init_weights {
        let report = checkpoint::load_initial(&net.vs, path)?;
        write_json(run_dir, run_files::INIT, &report)?;
        progress(TrainEvent::Initialised(report));
    }
    let mut sgd = Sgd::new(&net.vs, config.momentum, config.weight_decay);
    let state = match previous {
        Some(state) => {
            let mut state = restore(run_dir, state, &net, &mut sgd, data.classes.len())?;
            // The early-stopping rule of the settings the run announced: a resume given another
            // `patience` or `min_delta` stops by those (unchanged, as the run would have).
            state.early_stopping.patience = config.patience;
            state.early_stopping.min_delta = config.min_delta;
            state
        }
        None => fresh_state(config, precision),
    };
    // Written once the run can go on: a resume refused leaves the run's settings as they were.
    let config_toml = write_config(config, run_dir)?;
    let resumed_from = (config.resume && state.step > 0).then_some((state.epoch, state.step));
    let metrics = Metrics::open(run_dir, resumed_from.map(|r| r.1), &config_toml)?;
    progress(TrainEvent::Started {
        device: super::device::device_name(device),
        precision,
        train_clips: train.len(),
        val_clips,
        keyframes_without_frames,
        videos_without_frames,
        resumed_from,
    });
    let mut session = Session {
        config,
        run_dir,
        cancel,
        progress,
        data,
        train: Arc::new(train),
        val,
        net,
        sgd,
        state,
        metrics,
        precision,
        throughput: (0, 0.0),
    };
    session.run()
}

fn fresh_state(config: &TrainConfig, precision: Precision) -> TrainState {
    let scaler = (precision == Precision::Fp16).then(LossScaler::default);
    TrainState::new(
        EarlyStopping::new(config.patience, config.min_delta),
        scaler,
    )
}

fn restore(
    run_dir: &Path,
    state: TrainState,
    net: &Net,
    sgd: &mut Sgd,
    classes: usize,
) -> Result<TrainState, TrainError> {
    let missing =
        || TrainError::Checkpoint(format!("{}: names no model file", checkpoint::STATE_FILE));
    let model = checkpoint::named(run_dir, &state.files.model_file).ok_or_else(missing)?;
    if let Some(network) = checkpoint::network_of(&model)?
        && network.num_classes as usize != classes
    {
        return Err(TrainError::Checkpoint(format!(
            "{}: the run's checkpoint scores {} classes, and this dataset's label map now has {classes} (its actions changed since the run began): start another run with --run-dir DIR, or from these weights with `avaprep train --init {}`",
            model.display(),
            network.num_classes,
            avaprep::progress::shell_word(&model),
        )));
    }
    checkpoint::load_model(&net.vs, &model)?;
    if let Some(path) = checkpoint::named(run_dir, &state.files.optimizer_file) {
        sgd.load_state(checkpoint::read_tensors(&path)?)
            .map_err(TrainError::Checkpoint)?;
    }
    Ok(state)
}

/// The training loss of a batch: mean BCE with logits over boxes x classes.
pub(crate) fn batch_loss(net: &Net, batch: &Batch, autocast: bool) -> Tensor {
    let logits = net.forward(batch, true, autocast);
    let targets = upload(&super::net::targets(batch), logits.device());
    logits.binary_cross_entropy_with_logits::<Tensor>(&targets, None, None, tch::Reduction::Mean)
}

/// A batch's part of a training step: forward, the loss read back (the run logs it and stops on
/// one that is not finite), and backward of it times `gradient_scale` (the fp16 loss scale over
/// the accumulation count). The throughput benchmark times this same step. A loss that is not
/// finite comes back as the error, with no backward done.
pub(crate) fn backward_batch(
    net: &Net,
    batch: &Batch,
    autocast: bool,
    gradient_scale: f64,
) -> Result<f64, NotFinite> {
    let loss = batch_loss(net, batch, autocast);
    let value = loss.double_value(&[]);
    if !value.is_finite() {
        return Err(NotFinite(value));
    }
    (loss * gradient_scale).backward();
    Ok(value)
}

/// A training loss that is infinite or NaN: the caller names the batch it came from.
pub(crate) struct NotFinite(pub f64);

fn write_json(run_dir: &Path, name: &str, value: &impl serde::Serialize) -> Result<(), TrainError> {
    let path = run_dir.join(name);
    let json = serde_json::to_vec_pretty(value).expect("serialises");
    write_atomic(&path, &json).map_err(|e| TrainError::io(&path, e))
}

/// Writes `config.json` and `config.toml`; returns the TOML.
fn write_config(config: &TrainConfig, run_dir: &Path) -> Result<String, TrainError> {
    let json = serde_json::to_vec_pretty(config).expect("the config serialises");
    let toml = toml::to_string(config).map_err(|e| TrainError::Config(e.to_string()))?;
    for (name, bytes) in [
        (run_files::CONFIG_JSON, json.as_slice()),
        (run_files::CONFIG_TOML, toml.as_bytes()),
    ] {
        let path = run_dir.join(name);
        write_atomic(&path, bytes).map_err(|e| TrainError::io(&path, e))?;
    }
    Ok(toml)
}

impl Session<'_> {
    fn run(&mut self) -> Result<TrainSummary, TrainError> {
        let done = match &self.state.stopped {
            None | Some(StopReason::Cancelled { .. }) => false,
            // A larger patience on resume continues a run that stopped early.
            Some(StopReason::EarlyStopped { .. }) => {
                let stop = &self.state.early_stopping;
                stop.bad_rounds >= stop.patience || self.state.epoch >= self.config.last_epoch()
            }
            // A larger max_epochs (or schedule) on resume continues a finished run.
            Some(StopReason::Completed { .. } | StopReason::MaxEpochs { .. }) => {
                self.state.epoch >= self.config.last_epoch()
            }
        };
        let reason = match (done, self.state.stopped.clone()) {
            // A finished run resumed again only redoes the final detections.
            (true, Some(reason)) => reason,
            _ => {
                self.state.stopped = None;
                self.train_epochs()?
            }
        };
        self.state.stopped = Some(reason.clone());
        checkpoint::commit(self.run_dir, &self.state)?;
        (self.progress)(TrainEvent::Stopped {
            reason: reason.clone(),
        });
        self.finish(reason)
    }

    fn train_epochs(&mut self) -> Result<StopReason, TrainError> {
        let last = self.config.last_epoch();
        // A run whose evaluation failed resumes with that evaluation, not the next epoch.
        if self.state.pending_evaluation
            && let Some(stop) = self.evaluate_epoch()?
        {
            return Ok(stop);
        }
        while self.state.epoch < last {
            let started = Instant::now();
            if let EpochEnd::Cancelled = self.run_epoch()? {
                self.save_checkpoint()?;
                return Ok(StopReason::Cancelled {
                    epoch: self.state.epoch,
                    step: self.state.step,
                });
            }
            self.end_epoch(started)?;
            // Saved before evaluating, so a failed evaluation loses no training.
            self.state.pending_evaluation = true;
            self.save_checkpoint()?;
            if let Some(stop) = self.evaluate_epoch()? {
                return Ok(stop);
            }
        }
        Ok(match last < self.config.epochs {
            true => StopReason::MaxEpochs { epochs: last },
            false => StopReason::Completed { epochs: last },
        })
    }

    /// Trains the rest of the current epoch; stops early, at an optimizer step, when cancelled.
    fn run_epoch(&mut self) -> Result<EpochEnd, TrainError> {
        let (epoch, config) = (self.state.epoch, self.config);
        let batches = train_batches(self.train.len(), config.batch_size, config.seed, epoch);
        let total = batches.len();
        let first = self.state.batch.min(total);
        let loader = Loader::spawn(
            self.train.clone(),
            batches[first..].to_vec(),
            Augment::Train {
                seed: config.seed,
                epoch,
                hflip: config.hflip,
            },
            self.loader_spec(),
        );
        for (offset, batch) in loader.enumerate() {
            let index = first + offset;
            let position = epoch as f64 + index as f64 / total as f64;
            let lr = config.lr_schedule().lr_at(position);
            let started = Instant::now();
            let batch = batch?;
            // Dropout draws from libtorch's global generator: seeding it per batch makes a
            // resumed run draw what the uninterrupted one drew.
            tch::manual_seed(mix_seed(config.seed, epoch as u64, index as u64) as i64);
            let loss = self.forward_backward(&batch, epoch, index)?;
            let update = (index + 1).is_multiple_of(config.accumulate) || index + 1 == total;
            if update {
                self.update(lr);
            }
            self.state.batch = index + 1;
            self.state.epoch_loss_sum += loss;
            let clips = batch.shape[0] as usize;
            let seconds = started.elapsed().as_secs_f64();
            self.throughput.0 += clips;
            self.throughput.1 += seconds;
            self.metrics.push(Record::Batch {
                epoch: position,
                step: self.state.step,
                lr,
                loss,
                clips_per_s: clips as f64 / seconds.max(1e-9),
            })?;
            (self.progress)(TrainEvent::Batch {
                epoch,
                batch: index,
                batches: total,
                loss,
                lr,
            });
            if update && index + 1 < total && self.cancel.load(Ordering::Relaxed) {
                return Ok(EpochEnd::Cancelled);
            }
        }
        Ok(EpochEnd::Finished)
    }

    /// Mean BCE over boxes x classes; backward of it divided by the accumulation count.
    fn forward_backward(
        &mut self,
        batch: &Batch,
        epoch: usize,
        index: usize,
    ) -> Result<f64, TrainError> {
        let scale = self.state.scaler.as_ref().map_or(1.0, |s| s.scale);
        let autocast = self.precision != Precision::Fp32;
        backward_batch(
            &self.net,
            batch,
            autocast,
            scale / self.config.accumulate as f64,
        )
        .map_err(|NotFinite(loss)| TrainError::NonFiniteLoss {
            epoch: epoch + 1,
            batch: index,
            loss,
            checkpoint: TrainState::load(self.run_dir)
                .ok()
                .flatten()
                .map(|state| state.epoch),
        })
    }

    fn update(&mut self, lr: f64) {
        let scaler = self.state.scaler.as_mut();
        self.sgd.apply_gradients(scaler, self.config.grad_clip, lr);
        self.state.step += 1;
    }

    fn end_epoch(&mut self, started: Instant) -> Result<(), TrainError> {
        let batches = self.state.batch.max(1);
        let loss = self.state.epoch_loss_sum / batches as f64;
        let seconds = started.elapsed().as_secs_f64();
        let clips_per_s = self.train.len() as f64 / seconds.max(1e-9);
        self.state.epoch += 1;
        self.state.batch = 0;
        self.state.epoch_loss_sum = 0.0;
        self.metrics.push(Record::Epoch {
            epoch: self.state.epoch,
            step: self.state.step,
            loss,
            clips_per_s,
            seconds,
        })?;
        (self.progress)(TrainEvent::EpochEnd {
            epoch: self.state.epoch,
            loss,
            clips_per_s,
        });
        Ok(())
    }

    /// The evaluation after an epoch, then its checkpoint: the stop reason when early stopping
    /// ends the run.
    /// Saves the model, the optimizer and `self.state` as the run's current checkpoint.
    fn save_checkpoint(&mut self) -> Result<(), TrainError> {
        let net = &self.net;
        checkpoint::save(
            self.run_dir,
            &mut self.state,
            &net.vs,
            &net.config,
            &checkpoint::output_actions(&self.data.classes.full),
            &self.sgd,
        )
    }

    fn evaluate_epoch(&mut self) -> Result<Option<StopReason>, TrainError> {
        let verdict = self.maybe_evaluate()?;
        self.state.pending_evaluation = false;
        self.save_checkpoint()?;
        (self.progress)(TrainEvent::CheckpointSaved {
            epoch: self.state.epoch,
            step: self.state.step,
        });
        let notes = CurveNotes {
            status: format!("epoch {} of {}", self.state.epoch, self.config.last_epoch()),
            best: self.state.early_stopping.best,
        };
        self.metrics.write_summaries(&self.scored_ids(), &notes)?;
        if verdict != Some(Verdict::Stop) {
            return Ok(None);
        }
        let stop = &self.state.early_stopping;
        let (best_map, best_epoch) = stop.best.unwrap_or((f64::NAN, 0));
        Ok(Some(StopReason::EarlyStopped {
            epoch: self.state.epoch,
            best_epoch,
            best_map,
            patience: stop.patience,
        }))
    }

    /// Evaluates when due (every `eval_every` epochs and after the last); a new best writes the
    /// best weights, named in the state the next checkpoint commits.
    fn maybe_evaluate(&mut self) -> Result<Option<Verdict>, TrainError> {
        let epoch = self.state.epoch;
        let due = epoch.is_multiple_of(self.config.eval_every) || epoch == self.config.last_epoch();
        let Some(val) = self.val.as_ref().filter(|_| due) else {
            return Ok(None);
        };
        let started = Instant::now();
        let (report, _) = self.evaluate(val)?;
        let map = report.mean_ap;
        let verdict = self
            .state
            .early_stopping
            .update(map.unwrap_or(f64::NAN), epoch);
        if verdict == Verdict::Improved {
            let name = format!("best-s{}.safetensors", self.state.step);
            let actions = checkpoint::output_actions(&self.data.classes.full);
            checkpoint::write_weights(
                self.run_dir,
                &name,
                &self.net.vs,
                &self.net.config,
                Some(&actions),
            )?;
            self.state.files.best_file = Some(name);
        }
        let ap = report.classes.iter().map(|c| (c.id.0, c.ap)).collect();
        self.metrics.push(Record::Eval {
            epoch,
            step: self.state.step,
            map,
            ap,
            seconds: started.elapsed().as_secs_f64(),
        })?;
        (self.progress)(TrainEvent::Evaluated {
            epoch,
            map,
            best: self.state.early_stopping.best.map(|b| b.0),
        });
        Ok(Some(verdict))
    }

    /// The official frame-mAP of the current weights on the validation split.
    fn evaluate(
        &self,
        val: &Validation,
    ) -> Result<(EvalReport, Vec<avaprep::annotations::Detection>), TrainError> {
        let autocast = self.precision != Precision::Fp32;
        let detections = infer(
            &self.net,
            &val.clips,
            self.config,
            &self.data.classes,
            autocast,
            // Scored whole even after a Ctrl-C: it stops training at a step, and the weights
            // kept then are evaluated before the run ends.
            &AtomicBool::new(false),
        )?;
        let report = evaluate(
            &val.ground_truth,
            &detections,
            &self.data.classes.scored,
            &val.excluded,
        );
        Ok((report, detections))
    }

    /// Detections and evaluation of the best weights (the last ones if none was evaluated); a
    /// run without a val split has nothing to score.
    fn finish(&mut self, reason: StopReason) -> Result<TrainSummary, TrainError> {
        let notes = CurveNotes {
            status: reason.to_string(),
            best: self.state.early_stopping.best,
        };
        self.metrics.write_summaries(&self.scored_ids(), &notes)?;
        let mut summary = TrainSummary {
            stop: reason.to_string(),
            reason: reason.clone(),
            epochs_run: self.state.epoch,
            steps: self.state.step,
            best: self.state.early_stopping.best,
            last: self.state.early_stopping.last,
            best_weights_map: None,
            detections: None,
            train_clips_per_s: self.throughput.0 as f64 / self.throughput.1.max(1e-9),
        };
        if let Some(val) = self.val.as_ref()
            && !matches!(reason, StopReason::Cancelled { .. })
        {
            if let Some(best) = checkpoint::named(self.run_dir, &self.state.files.best_file) {
                checkpoint::load_model(&self.net.vs, &best)?;
            }
            let (report, detections) = self.evaluate(val)?;
            let path = self.run_dir.join(run_files::DETECTIONS);
            write_detections(&path, &detections)?;
            self.write_json(run_files::EVAL, &report)?;
            summary.best_weights_map = report.mean_ap;
            // Named beside the summary, not by the path the run folder was given: the folder
            // may be moved or read from another working directory.
            summary.detections = Some(run_files::DETECTIONS.into());
        }
        self.write_json(run_files::SUMMARY, &summary)?;
        Ok(summary)
    }

    fn write_json(&self, name: &str, value: &impl serde::Serialize) -> Result<(), TrainError> {
        write_json(self.run_dir, name, value)
    }

    fn loader_spec(&self) -> LoaderSpec {
        LoaderSpec::of(self.config, self.data.classes.len(), self.net.vs.device())
    }

    fn scored_ids(&self) -> Vec<u16> {
        self.data.classes.scored.ids().map(|id| id.0).collect()
    }
}
