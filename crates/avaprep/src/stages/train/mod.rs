//! `train`: the trainer executable (`avaprep-train`, the one that links libtorch) run as a child
//! process on the prepared dataset; what it made is recorded in `work/train.json` for `eval`.
//!
//! The run directory is named by the stage's fingerprint: a run under the same inputs resumes
//! from its last checkpoint (a kill during training, then `avaprep run` again, continues), and a
//! change upstream or in `[train]` trains afresh beside the old run, never over it. A finished
//! run also holds the digest of what its training read ([`reads`]): when the stage is due again
//! on the same (videos added only to predict on change nothing it reads), its weights are kept.

mod reads;

use std::collections::VecDeque;
use std::io::{BufRead as _, BufReader, Read};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use super::{StageId, StageSource};
use crate::layout::DataLayout;
use crate::pipeline::spec::SpecError;
use crate::pipeline::{Closing, ItemError, ItemRecord, Stage, StageContext};
use crate::progress::Unit;
use crate::records::TrainedRun;
use crate::trainer_protocol::{
    CheckpointFiles, StopReason, TrainEvent, TrainSummary, TrainerCall, TrainerCommand, run_files,
};
use crate::trainer_settings::{Preset, TrainConfig};

/// What training reads: the lists, and the dataset's validation.
const TRAINING_READS: &[StageId] = &[StageId::Lists, StageId::Validate];

/// Why `avaprep train` must not start on this data directory now, as the pipeline's train stage
/// would not: the lists (or what they were made from) failed, did not finish, or changed since
/// they were made, or the last validation failed. Each reason names the command that brings it up
/// to date.
///
/// The validation is judged by what the last one found, the stage's or `avaprep validate`'s (see
/// [`super::validate::kept_failure`]), not by the stage's record: a validation by hand that
/// passes must let training start, and the record knows nothing of it.
pub fn upstream_blockers(data_dir: &Path) -> Vec<String> {
    struct Silent;
    impl crate::progress::Reporter for Silent {}
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let runner = crate::pipeline::Runner::<StageId> {
        stages: Vec::new(),
        store: crate::pipeline::StateStore::new(data_dir, None),
        shard: None,
        context: StageContext {
            data_dir,
            reporter: &Silent,
            cancel: &cancel,
            fingerprint: "",
            not_started: 0,
        },
        scrutiny: crate::pipeline::prints::Scrutiny::Listing,
        before_per_video: None,
    };
    let mut blockers: Vec<String> = runner
        .dependency_blockers(&[StageId::Lists])
        .iter()
        .map(|blocker| super::blocker_text(blocker, data_dir))
        .collect();
    blockers.extend(super::validate::kept_failure(data_dir));
    blockers
}

/// The `[train]` table of a pipeline file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainParams {
    /// The trainer's starting recipe, as `avaprep train --preset`.
    pub preset: String,
    /// Settings over the preset, keys as in a run's `config.toml` (`max_epochs = 10`,
    /// `schedule.kind = "step"`), resolved with the preset into the run folder's `config.toml`,
    /// which the trainer is given.
    pub settings: toml::Table,
}

impl Default for TrainParams {
    fn default() -> Self {
        TrainParams {
            preset: "ava-r50".into(),
            settings: toml::Table::new(),
        }
    }
}

impl TrainParams {
    /// The settings over the preset, checked whole: the one resolution of `[train]`, which the
    /// stage carries and writes into the run folder for the trainer.
    pub fn resolve(&self) -> Result<TrainConfig, String> {
        let preset =
            Preset::from_name(&self.preset).map_err(|message| format!("preset: {message}"))?;
        crate::trainer_settings::resolve_table(preset, &self.settings)
            .map_err(|message| format!("settings: {}", message.replace('\n', " ")))
    }
}

/// Writes the resolved settings into the run folder, where the trainer reads them (and writes
/// them again, with what it adds, when it starts).
fn write_run_config(config: &TrainConfig, run_dir: &Path) -> Result<PathBuf, ItemError> {
    let text = toml::to_string(config).expect("a training config serialises");
    let path = run_dir.join(run_files::CONFIG_TOML);
    std::fs::create_dir_all(run_dir).map_err(ItemError::output)?;
    crate::fsutil::write_atomic(&path, text.as_bytes())
        .map_err(|error| ItemError::output(format!("{}: {error}", path.display())))?;
    Ok(path)
}

/// Where the trainer executable is: `AVAPREP_TRAINER` when set, else beside the running one.
pub fn trainer_path() -> PathBuf {
    if let Some(path) = std::env::var_os("AVAPREP_TRAINER") {
        return PathBuf::from(path);
    }
    std::env::current_exe()
        .map(|exe| exe.with_file_name(TRAINER))
        .unwrap_or_else(|_| PathBuf::from(TRAINER))
}

/// The trainer's file name.
pub const TRAINER: &str = "avaprep-train";

pub struct TrainStage {
    pub params: TrainParams,
    /// `params` resolved, as the run folder's `config.toml` holds it.
    pub config: TrainConfig,
    pub trainer: PathBuf,
}

impl TrainStage {
    /// Resolves `[train]` with the trainer's own resolution, so that a misspelt key or a bad
    /// value is found when the pipeline file is read, and checks the splits it names.
    pub fn from_source(source: &StageSource) -> Result<Self, SpecError> {
        let mut params: TrainParams = source.typed_params(StageId::Train)?;
        let mut settings = params
            .resolve()
            .map_err(|message| source.invalid(StageId::Train, message))?;
        source.check_split(
            StageId::Train,
            "settings.train_split",
            &settings.train_split,
        )?;
        if let Some(val_split) = &settings.val_split {
            source.check_known_split(StageId::Train, "settings.val_split", val_split)?;
            if !source.fetches(val_split) {
                // A run without its val split (train-only) trains the whole schedule and keeps
                // the last weights; the run's config.toml says so.
                let none = toml::Value::String(String::new());
                params.settings.insert("val_split".into(), none);
                settings.val_split = None;
            }
        }
        Ok(TrainStage {
            params,
            config: settings,
            trainer: trainer_path(),
        })
    }
}

impl Stage for TrainStage {
    type Id = StageId;

    fn id(&self) -> StageId {
        StageId::Train
    }

    fn depends_on(&self) -> &'static [StageId] {
        TRAINING_READS
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "version": 1,
            "preset": self.params.preset,
            "settings": self.params.settings,
        })
    }

    fn run_item(&self, context: &StageContext, _item: &str) -> Result<ItemRecord, ItemError> {
        let layout = DataLayout::new(context.data_dir);
        let reads = reads::training_reads(context.data_dir, &self.params(), &self.config);
        let own_dir = run_dir(&layout, context.fingerprint);
        let trained_on_the_same = reads.as_deref().and_then(|reads| {
            reads::runs_trained_on(&layout.runs(), reads, &own_dir)
                .into_iter()
                .find_map(|dir| Some((finished_run(&layout, &dir)?, dir)))
        });
        if let Some((trained, dir)) = trained_on_the_same {
            context.reporter.stage_note(
                self.id().name(),
                &format!(
                    "what training reads (the train and val videos, their labels and frames, the settings) is the same as when {} was trained: its weights are kept, no training",
                    dir.display()
                ),
            );
            return self.record_trained(context, &layout, &trained, 0);
        }
        let run_dir = pipeline_folder(&own_dir);
        if run_dir != own_dir {
            context.reporter.stage_note(
                self.id().name(),
                &format!(
                    "{} was trained by hand since the pipeline made it (`avaprep train`): the pipeline trains in {}",
                    own_dir.display(),
                    run_dir.display()
                ),
            );
        }
        let call = TrainerCall {
            data_dir: context.data_dir.to_path_buf(),
            command: TrainerCommand::Train {
                run_dir: run_dir.clone(),
                // The run's own folder (named by the stage's fingerprint) continues from its
                // checkpoint where a stopped run left one.
                resume: run_dir.join(run_files::CHECKPOINT).is_file(),
            },
            preset: self.params.preset.clone(),
            config: write_run_config(&self.config, &run_dir)?,
        };
        let resumed_at_step = std::cell::Cell::new(0);
        let follow = |event: TrainEvent| match event {
            TrainEvent::Started {
                device,
                train_clips,
                val_clips,
                resumed_from,
                videos_without_frames,
                ..
            } => {
                let validation = match val_clips {
                    0 => "no val split: the whole schedule, the last weights kept".to_string(),
                    clips => format!("{clips} val clips"),
                };
                let resumed = resumed_from.map_or(String::new(), |(epoch, step)| {
                    resumed_at_step.set(step);
                    format!(", resumed from the checkpoint at epoch {epoch}, step {step}")
                });
                context.reporter.stage_note(
                    self.id().name(),
                    &format!(
                        "{device}: {train_clips} train clips, {validation}{resumed}{}; run folder {}",
                        TrainEvent::left_out_text(&videos_without_frames),
                        run_dir.display()
                    ),
                );
            }
            TrainEvent::Batch {
                epoch,
                batch,
                batches,
                ..
            } => context.reporter.item_progress(
                self.id().name(),
                &format!("epoch {}", epoch + 1),
                batch as u64,
                batches as u64,
                Unit::Steps,
            ),
            TrainEvent::Evaluated { epoch, map, best } => context.reporter.stage_note(
                self.id().name(),
                &format!("epoch {epoch}: val mAP {}, best {}", show(map), show(best)),
            ),
            _ => {}
        };
        run_trainer(&self.trainer, &call, context, &follow)?;
        let trained = trained_run(&layout, &run_dir)?;
        if let Some(reads) = &reads {
            crate::fsutil::write_atomic(&run_dir.join(run_files::READS), reads.as_bytes())
                .map_err(ItemError::output)?;
        }
        self.record_trained(context, &layout, &trained, resumed_at_step.get())
    }

    /// Where the model, its curves and its run folder are, and why training stopped.
    fn closing(&self, data_dir: &Path) -> Option<Closing> {
        let layout = DataLayout::new(data_dir);
        let trained = TrainedRun::load(&layout).ok()?;
        let at = |relative: &str| layout.root().join(relative).display().to_string();
        let mut lines = vec![
            format!("model       {}", at(&trained.weights)),
            format!("curves      {}", at(&trained.curves)),
            format!("run         {}", at(&trained.run_dir)),
            format!(
                "stopped     {} ({} epochs, {} steps)",
                trained.stop, trained.epochs_run, trained.steps
            ),
        ];
        if trained.val_split.is_empty() {
            lines.push("validated   no: no val split, so the last weights".into());
        }
        Some(Closing {
            record_type: "trained",
            record: serde_json::to_value(&trained).ok()?,
            lines,
        })
    }
}

impl TrainStage {
    /// Records the run in `work/train.json` for eval, and as the stage's item.
    fn record_trained(
        &self,
        context: &StageContext,
        layout: &DataLayout,
        trained: &TrainedRun,
        resumed_at_step: u64,
    ) -> Result<ItemRecord, ItemError> {
        let path = TrainedRun::path(layout);
        let bytes = serde_json::to_vec_pretty(trained).expect("a record serialises");
        crate::fsutil::write_atomic(&path, &bytes).map_err(ItemError::output)?;
        let made = [layout.relative(&path), trained.weights.clone()];
        let made: Vec<&str> = made.iter().map(String::as_str).collect();
        let record =
            ItemRecord::of_files(context.data_dir, &made, &[]).map_err(ItemError::input)?;
        Ok(record.with_counts(&TrainCounts {
            epochs: trained.epochs_run,
            steps: trained.steps,
            resumed_at_step,
        }))
    }
}

/// The run in `run_dir` when it ran to its end (not stopped part way, to be continued) and its
/// weights are there.
fn finished_run(layout: &DataLayout, run_dir: &Path) -> Option<TrainedRun> {
    let summary: TrainSummary =
        serde_json::from_slice(&std::fs::read(run_dir.join(run_files::SUMMARY)).ok()?).ok()?;
    if matches!(summary.reason, StopReason::Cancelled { .. }) {
        return None;
    }
    let trained = trained_run(layout, run_dir).ok()?;
    layout
        .root()
        .join(&trained.weights)
        .is_file()
        .then_some(trained)
}

/// The train stage's counts in its record.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrainCounts {
    pub epochs: u64,
    pub steps: u64,
    /// The step of the checkpoint this invocation resumed from; 0 when it started afresh.
    pub resumed_at_step: u64,
}

fn show(map: Option<f64>) -> String {
    map.map_or("-".into(), |map| format!("{map:.4}"))
}

/// `runs/pipeline-<fingerprint>`: the fingerprint is hex the engine made, never a name from a
/// file, so the folder stays under `runs/`.
fn run_dir(layout: &DataLayout, fingerprint: &str) -> PathBuf {
    let tag: String = fingerprint
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(12)
        .collect();
    layout.runs().join(format!("{RUN_PREFIX}{tag}"))
}

/// The stage's own folder, or the first after it (`-2`, `-3`, ...) that no training by hand has
/// taken over: a checkpoint continued with other settings or on other data is never the
/// pipeline's to continue.
fn pipeline_folder(own_dir: &Path) -> PathBuf {
    (1..)
        .map(|n| match n {
            1 => own_dir.to_path_buf(),
            n => own_dir.with_file_name(format!(
                "{}-{n}",
                own_dir.file_name().unwrap_or_default().to_string_lossy()
            )),
        })
        .find(|dir| !dir.join(run_files::BY_HAND).exists())
        .expect("a folder no training by hand took")
}

/// How the names of the pipeline's run folders begin.
const RUN_PREFIX: &str = "pipeline-";

fn trained_run(layout: &DataLayout, run_dir: &Path) -> Result<TrainedRun, ItemError> {
    let read = |name: &str| -> Result<Vec<u8>, ItemError> {
        let path = run_dir.join(name);
        std::fs::read(&path).map_err(|error| {
            ItemError::trainer(format!(
                "{}: {error} (the trainer ended without writing it)",
                path.display()
            ))
        })
    };
    let parse_error =
        |error: serde_json::Error| ItemError::trainer(format!("{}: {error}", run_dir.display()));
    let summary: TrainSummary =
        serde_json::from_slice(&read(run_files::SUMMARY)?).map_err(parse_error)?;
    let checkpoint: CheckpointFiles =
        serde_json::from_slice(&read(run_files::CHECKPOINT)?).map_err(parse_error)?;
    let config: TrainConfig =
        serde_json::from_slice(&read(run_files::CONFIG_JSON)?).map_err(parse_error)?;
    let weights = checkpoint.weights().ok_or_else(|| {
        ItemError::trainer(format!(
            "{}: {} names no weights",
            run_dir.display(),
            run_files::CHECKPOINT
        ))
    })?;
    Ok(TrainedRun {
        run_dir: layout.relative(run_dir),
        weights: layout.relative(&run_dir.join(weights)),
        curves: layout.relative(&run_dir.join(run_files::CURVES)),
        stop: summary.stop,
        epochs_run: summary.epochs_run as u64,
        steps: summary.steps,
        best: summary.best.map(|(map, epoch)| (map, epoch as u64)),
        val_split: config.val_split.map(String::from).unwrap_or_default(),
    })
}

/// What to do when the trainer executable is absent: the data tool is built without libtorch.
pub fn missing_trainer(trainer: &Path) -> String {
    format!(
        "the trainer {} is not installed: training needs libtorch, which the data tool leaves out. Build it with `eval \"$(scripts/setup.sh)\" && cargo build --release -p {TRAINER}` (or set AVAPREP_TRAINER to its path)",
        trainer.display()
    )
}

/// Runs the trainer with `args` (its `--json` events on stdout go to `follow`); fails with the
/// end of its error output. The trainer dies with this process (so a killed `run` never leaves
/// a trainer writing into a run directory the next `run` resumes). It is told of this process's
/// first Ctrl-C, on which it saves a checkpoint and stops: in a process group of its own, it
/// hears it once, whether the terminal sent it or a job runner signalled this process alone
/// (which once let the trainer run its whole schedule).
pub fn run_trainer<T: serde::de::DeserializeOwned>(
    trainer: &Path,
    call: &TrainerCall,
    context: &StageContext,
    follow: &dyn Fn(T),
) -> Result<(), ItemError> {
    let args = call.args();
    if !trainer.is_file() {
        return Err(ItemError::trainer(missing_trainer(trainer)));
    }
    let mut command = Command::new(trainer);
    command
        .args(&args)
        // This process holds the data directory for the trainer, which would otherwise refuse
        // to start beside it.
        .env(
            crate::pipeline::lock::PARENT_HOLDS_LOCK,
            std::process::id().to_string(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: prctl, setpgid and signal are async-signal-safe; nothing else runs between fork
    // and exec.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::setpgid(0, 0);
            // A scheduler's SIGTERM reaches the whole job: the trainer stops at the one SIGINT
            // this process passes on, which would otherwise be its second and end it at once.
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|error| {
        ItemError::trainer(format!(
            "starting the trainer {}: {error}",
            trainer.display()
        ))
    })?;
    let stderr = child.stderr.take().expect("piped");
    let errors = std::thread::spawn(move || last_lines(stderr, 30));
    let stdout = child.stdout.take().expect("piped");
    let ended = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| pass_on_cancel(child.id(), context.cancel, &ended));
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(event) = serde_json::from_str::<T>(&line) {
                follow(event);
            }
        }
        ended.store(true, Ordering::SeqCst);
    });
    let status = child
        .wait()
        .map_err(|error| ItemError::trainer(format!("waiting for the trainer: {error}")))?;
    let errors = errors.join().unwrap_or_default();
    // A trainer that finished before it heard the Ctrl-C did its whole work: it is kept.
    if context.cancelled() && !status.success() {
        return Err(ItemError::trainer(match call.command {
            TrainerCommand::Train { .. } => {
                "interrupted; the last checkpoint is kept and `avaprep run` again continues from it"
            }
            TrainerCommand::Predict { .. } => "interrupted; `avaprep run` again predicts again",
        }));
    }
    if !status.success() {
        return Err(ItemError::trainer(format!(
            "{} {} failed ({status}):\n{}",
            trainer.display(),
            args.join(std::ffi::OsStr::new(" ")).to_string_lossy(),
            errors.trim_end()
        )));
    }
    Ok(())
}

/// Sends the trainer one SIGINT once `cancel` is set, until its output `ended`. The trainer is
/// not waited for meanwhile, so its process id is still its own.
fn pass_on_cancel(trainer: u32, cancel: &AtomicBool, ended: &AtomicBool) {
    while !ended.load(Ordering::SeqCst) {
        if cancel.load(Ordering::SeqCst) {
            // SAFETY: a signal to our own child, not yet reaped.
            unsafe { libc::kill(trainer as libc::pid_t, libc::SIGINT) };
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn last_lines(stream: impl Read, keep: usize) -> String {
    let mut lines = VecDeque::with_capacity(keep);
    for line in BufReader::new(stream).lines().map_while(Result::ok) {
        if lines.len() == keep {
            lines.pop_front();
        }
        lines.push_back(line);
    }
    Vec::from(lines).join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_trained_by_hand_is_left_to_the_next() {
        let runs = tempfile::tempdir().unwrap();
        let own = runs.path().join("pipeline-abc");
        let (second, third) = (
            runs.path().join("pipeline-abc-2"),
            runs.path().join("pipeline-abc-3"),
        );
        let take = |dir: &Path| {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join(run_files::BY_HAND), "avaprep train --resume\n").unwrap();
        };
        std::fs::create_dir_all(&own).unwrap();
        assert_eq!(pipeline_folder(&own), own);
        take(&own);
        assert_eq!(pipeline_folder(&own), second);
        std::fs::create_dir_all(&second).unwrap();
        assert_eq!(
            pipeline_folder(&own),
            second,
            "a folder of its own is the pipeline's"
        );
        take(&second);
        assert_eq!(pipeline_folder(&own), third);
    }

    #[test]
    fn the_run_folder_is_named_by_the_fingerprint_only() {
        let layout = DataLayout::new(Path::new("/data"));
        assert_eq!(
            run_dir(&layout, "../../etc/abcdef0123456789"),
            Path::new("/data/runs/pipeline-etcabcdef012")
        );
    }
}
