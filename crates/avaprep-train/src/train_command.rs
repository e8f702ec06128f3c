//! `avaprep train`.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::Context as _;
use clap::Args;

use avaprep::layout::DataLayout;
use avaprep::pipeline::lock::{DataDirLock, LockMode};
use avaprep::trainer_protocol::{StopReason, run_files};
use avaprep::trainer_settings::{TrainConfig, differences};
use avaprep_shell::{ExitStatus, Printer, UsageError, command_line};

use crate::settings::{SettingsArgs, read_run_config};
use crate::train::{InitReport, TrainEvent};
use avaprep_shell::GlobalArgs;

#[derive(Debug, Args)]
pub struct TrainArgs {
    #[command(flatten)]
    pub settings: SettingsArgs,
    /// Where checkpoints, metrics, curves and detections go. Default: DATA_DIR/runs/<preset>;
    /// with --resume, the data directory's latest run (whether `train` or `run` made it).
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
    /// Continue a run from its last checkpoint, with the run's own settings (its config.toml);
    /// --set changes one on purpose. A run without a checkpoint is an error, never a fresh start.
    #[arg(long)]
    pub resume: bool,
    /// Start from these weights (safetensors from scripts/convert_checkpoint.py); tensors of
    /// another shape, such as a head for another class count, keep their fresh initialisation.
    #[arg(long, value_name = "FILE", conflicts_with = "resume")]
    pub init: Option<PathBuf>,
}

pub fn run(
    global: &GlobalArgs,
    args: &TrainArgs,
    printer: &Printer,
    cancel: &AtomicBool,
) -> anyhow::Result<ExitStatus> {
    // Settings first: a bad one is a usage error before anything is written, the lock included.
    let (config, run_dir) = match args.resume {
        true => resumed_run(global, args, printer)?,
        false => new_run(global, args, printer)?,
    };
    if std::fs::metadata(&run_dir).is_ok_and(|meta| !meta.is_dir()) {
        return Err(UsageError(format!(
            "--run-dir {}: is a file; name a folder for the run (it is made where missing)",
            run_dir.display()
        ))
        .into());
    }
    let _held = DataDirLock::acquire_unless_parent_holds(&global.data_dir, &command_line())?;
    refuse_stale_upstream(&global.data_dir)?;
    // A run folder outside the data directory has a lock of its own: two trainings of two data
    // directories must not write one run's checkpoints either.
    let _run_held = match inside(&run_dir, &global.data_dir) {
        true => None,
        false => Some(DataDirLock::acquire(
            &run_dir,
            LockMode::Exclusive,
            &command_line(),
        )?),
    };
    // Marked when training starts, after every check: a run refused is left as it was.
    let marking_failed: std::cell::RefCell<Option<anyhow::Error>> = Default::default();
    let progress = |event: TrainEvent| {
        if matches!(event, TrainEvent::Started { .. })
            && let Err(error) = mark_trained_here(&run_dir, _held.is_some())
        {
            marking_failed.replace(Some(error));
        }
        if printer.json
            && let Some(line) = tagged_line(&event)
        {
            println!("{line}");
        }
        if let Some(text) = event_text(&event) {
            printer.note(&text);
        }
    };
    let summary = crate::train::train(&config, &global.data_dir, &run_dir, cancel, &progress)?;
    if let Some(error) = marking_failed.take() {
        return Err(error);
    }
    printer.record("train_summary", &summary);
    printer.result(&format!(
        "{}; {} finished, {}; best val mAP {}; run: {}",
        summary.reason,
        avaprep::progress::counted(summary.epochs_run as u64, "epoch", "epochs"),
        avaprep::progress::counted(summary.steps, "step", "steps"),
        summary.best.map_or("-".into(), |(map, epoch)| format!(
            "{map:.4} (epoch {epoch})"
        )),
        run_dir.display()
    ));
    let plan = avaprep::records::VideoPlan::load(
        &avaprep::layout::DataLayout::new(&global.data_dir).video_plan(),
    );
    if summary.best.is_some() && plan.is_ok_and(|plan| plan.ground_truth_proposals) {
        printer.note(avaprep::stages::eval::GROUND_TRUTH_PROPOSALS);
    }
    if let StopReason::Cancelled { .. } = summary.reason {
        printer.note(&format!(
            "to continue: `{}`",
            resume_command(&global.data_dir, args.run_dir.as_deref())
        ));
    }
    // Stopped by Ctrl-C at a clean point: the work is not done, as for every other command.
    Ok(match summary.reason {
        StopReason::Cancelled { .. } => ExitStatus::Failure,
        _ => ExitStatus::Success,
    })
}

/// What the pipeline recorded of the folder's training no longer holds once it trains again, and
/// a training by hand (`by_hand`: this process holds the lock, not a pipeline) makes it no longer
/// the pipeline's.
fn mark_trained_here(run_dir: &Path, by_hand: bool) -> anyhow::Result<()> {
    if by_hand {
        let command = format!("{}\n", command_line());
        avaprep::fsutil::write_atomic(&run_dir.join(run_files::BY_HAND), command.as_bytes())
            .with_context(|| format!("{}: writing {}", run_dir.display(), run_files::BY_HAND))?;
    }
    avaprep::fsutil::remove_if_present(&run_dir.join(run_files::READS))
        .with_context(|| format!("{}: removing {}", run_dir.display(), run_files::READS))
}

/// The settings and folder of a new run: the recipe with `--set` over it, in the folder named or
/// `runs/<preset>`.
fn new_run(
    global: &GlobalArgs,
    args: &TrainArgs,
    printer: &Printer,
) -> anyhow::Result<(TrainConfig, PathBuf)> {
    let mut config = args.settings.train_config()?;
    if let Some(init) = &args.init {
        config.init_weights = Some(init.clone());
        // The weights' own network, where their header records it: the recipe's tensors would
        // match none of another network's, and the run would start from nothing.
        if let Some(network) = crate::train::network_of(init)?
            && let Some(changed) = config.take_network(&network)
            && !changed.is_empty()
        {
            printer.note(&format!(
                "building the network {} records: {}",
                init.display(),
                list(&changed)
            ));
        }
    }
    let run_dir = args.run_dir.clone().unwrap_or_else(|| {
        let runs = DataLayout::new(&global.data_dir).runs();
        runs.join(args.settings.preset().name())
    });
    Ok((config, run_dir))
}

/// The run `--resume` continues, with its own settings and `--set` over them. A recipe named
/// too (`--preset`, `--config`) must agree with the run: it once replaced the run's settings
/// without a word (a one-epoch run resumed under the preset's 30 epochs).
fn resumed_run(
    global: &GlobalArgs,
    args: &TrainArgs,
    printer: &Printer,
) -> anyhow::Result<(TrainConfig, PathBuf)> {
    let run_dir = match &args.run_dir {
        Some(run_dir) => run_dir.clone(),
        None => latest_run(&global.data_dir)?,
    };
    if !run_dir.join(run_files::CHECKPOINT).is_file() {
        return Err(UsageError(format!(
            "--resume: {} holds no run to continue (no {}); train without --resume to start one",
            run_dir.display(),
            run_files::CHECKPOINT
        ))
        .into());
    }
    let recorded = read_run_config(&run_dir)?;
    let mut config = avaprep::trainer_settings::resolve_recorded(
        toml::Table::try_from(&recorded).expect("a config serialises"),
        &args.settings.overrides,
    )
    .map_err(|message| UsageError(format!("training settings: {message}")))?;
    if args.settings.names_a_recipe() {
        let asked = args.settings.train_config()?;
        let differing = differences(&config, &asked);
        if !differing.is_empty() {
            return Err(UsageError(format!(
                "--resume continues {} with its own settings, which --preset or --config would change ({}): leave them out, or change a setting on purpose with --set KEY=VALUE",
                run_dir.display(),
                list(&differing)
            ))
            .into());
        }
    }
    let changed = differences(&recorded, &config);
    if !changed.is_empty() {
        printer.note(&format!(
            "resuming {} with --set over its settings: {}",
            run_dir.display(),
            list(&changed)
        ));
        printer.record(
            "resumed_with_changes",
            &serde_json::json!({ "run_dir": run_dir, "changed": changed }),
        );
    }
    config.resume = true;
    Ok((config, run_dir))
}

/// The command that continues a cancelled run: `--resume` finds it as the data directory's
/// latest, unless its folder was named.
fn resume_command(data_dir: &Path, run_dir: Option<&Path>) -> String {
    let mut command = format!("{} train --resume", avaprep::progress::avaprep_in(data_dir));
    if let Some(run_dir) = run_dir {
        command.push_str(&format!(
            " --run-dir {}",
            avaprep::progress::shell_word(run_dir)
        ));
    }
    command
}

fn list(differences: &[avaprep::trainer_settings::Difference]) -> String {
    let shown: Vec<String> = differences.iter().map(ToString::to_string).collect();
    shown.join(", ")
}

/// The data directory's run whose checkpoint was written last, whichever command made it.
fn latest_run(data_dir: &Path) -> anyhow::Result<PathBuf> {
    let runs = DataLayout::new(data_dir).runs();
    let checkpointed = std::fs::read_dir(&runs)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let checkpoint = entry.path().join(run_files::CHECKPOINT);
            let written = checkpoint
                .metadata()
                .and_then(|meta| meta.modified())
                .ok()?;
            Some((written, entry.path()))
        });
    match checkpointed.max() {
        Some((_, run_dir)) => Ok(run_dir),
        None => Err(UsageError(format!(
            "--resume: no run in {} has a checkpoint to continue; train without --resume to start one",
            runs.display()
        ))
        .into()),
    }
}

fn inside(path: &std::path::Path, folder: &std::path::Path) -> bool {
    match (std::path::absolute(path), std::path::absolute(folder)) {
        (Ok(path), Ok(folder)) => path.starts_with(folder),
        _ => false,
    }
}

/// Training reads the lists and the frames they name: on lists made from other annotations, or
/// after validation failed, it would learn from the wrong data for hours.
fn refuse_stale_upstream(data_dir: &std::path::Path) -> anyhow::Result<()> {
    let blockers = avaprep::stages::train::upstream_blockers(data_dir);
    if blockers.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "not training on {}: {}",
        data_dir.display(),
        blockers.join("; ")
    )
}

/// The line a person sees for an event; batches only move the progress.
fn event_text(event: &TrainEvent) -> Option<String> {
    Some(match event {
        TrainEvent::Started {
            device,
            train_clips,
            val_clips,
            resumed_from,
            videos_without_frames,
            ..
        } => format!(
            "training on {device}: {train_clips} train clips, {val_clips} val clips{}{}",
            resumed_from.map_or(String::new(), |(epoch, step)| format!(
                ", resumed at epoch {epoch} step {step}"
            )),
            TrainEvent::left_out_text(videos_without_frames),
        ),
        TrainEvent::EpochEnd {
            epoch,
            loss,
            clips_per_s,
        } => format!("epoch {epoch}: loss {loss:.4}, {clips_per_s:.1} clips/s"),
        TrainEvent::Evaluated { epoch, map, best } => format!(
            "epoch {epoch}: val mAP {}, best {}",
            map.map_or("-".into(), |map| format!("{map:.4}")),
            best.map_or("-".into(), |best| format!("{best:.4}"))
        ),
        TrainEvent::Initialised(report) => init_summary(report),
        TrainEvent::Stopped { reason } => format!("stopped: {reason}"),
        TrainEvent::Batch { .. } | TrainEvent::CheckpointSaved { .. } => return None,
    })
}

fn init_summary(report: &InitReport) -> String {
    let mut text = format!(
        "initialised from {}: {} tensors loaded, {} kept fresh, {} in the file unused",
        report.file.display(),
        report.loaded,
        report.skipped.len(),
        report.unused.len()
    );
    for skipped in &report.skipped {
        text.push_str(&format!(
            "\n  kept fresh: {} ({})",
            skipped.name, skipped.reason
        ));
    }
    for name in &report.unused {
        text.push_str(&format!("\n  unused: {name}"));
    }
    text
}

/// The JSON line of a value that names its own `type`; `None` for one that does not, so an
/// untagged value can never pass for a tagged one.
fn tagged_line<T: serde::Serialize>(value: &T) -> Option<String> {
    let value = serde_json::to_value(value).ok()?;
    value.get("type")?.as_str()?;
    Some(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::tagged_line;
    use crate::train::TrainEvent;

    /// `--json` once tagged every event `"type":"train"`, so a script could not tell a step from
    /// an evaluation: each event keeps its own type.
    #[test]
    fn json_events_keep_their_own_type() {
        let events = [
            (
                TrainEvent::Batch {
                    epoch: 0,
                    batch: 1,
                    batches: 2,
                    loss: 0.5,
                    lr: 0.1,
                },
                "batch",
            ),
            (
                TrainEvent::Evaluated {
                    epoch: 2,
                    map: Some(0.5),
                    best: Some(0.5),
                },
                "evaluated",
            ),
            (
                TrainEvent::CheckpointSaved { epoch: 2, step: 9 },
                "checkpoint_saved",
            ),
        ];
        for (event, kind) in events {
            let line = tagged_line(&event).expect("a tagged event");
            let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(parsed["type"], kind, "{line}");
        }
    }
}
