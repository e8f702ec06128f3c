//! `avaprep predict`.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use clap::Args;

use avaprep_shell::{Printer, UsageError};

use crate::settings::SettingsArgs;
use avaprep_shell::GlobalArgs;

#[derive(Debug, Args)]
pub struct PredictArgs {
    /// The weights: a run's `best-*` or `model-*` file, or any safetensors with the model's names.
    #[arg(long)]
    pub weights: PathBuf,
    /// The split whose keyframes and detector boxes to score (train, val or test).
    #[arg(long, default_value = "val")]
    pub split: avaprep::split::SplitName,
    /// The detections file to write (video_id,second,x1,y1,x2,y2,action_id,score).
    #[arg(long, value_parser = avaprep_shell::output_file)]
    pub out: PathBuf,
    #[command(flatten)]
    pub settings: SettingsArgs,
}

pub fn run(
    global: &GlobalArgs,
    args: &PredictArgs,
    printer: &Printer,
    cancel: &AtomicBool,
) -> anyhow::Result<()> {
    let (config, recorded) = args.settings.for_weights(&args.weights)?;
    check_split(&global.data_dir, &args.split, &args.weights)?;
    if let Some(recorded) = recorded {
        printer.note(&format!(
            "settings: {}, the run's own (--preset or --config to choose others)",
            recorded.display()
        ));
    }
    // The frames it reads must not change under it.
    let _held = avaprep::pipeline::lock::DataDirLock::acquire_unless_parent_holds(
        &global.data_dir,
        &avaprep_shell::command_line(),
    )?;
    let summary = crate::train::predict(
        &config,
        &global.data_dir,
        &args.weights,
        &args.split,
        &args.out,
        cancel,
    )?;
    printer.record("predict", &summary);
    printer.result(&format!(
        "{} detections of {} clips written to {}",
        summary.rows,
        summary.clips,
        summary.detections.display()
    ));
    match &summary.own_seconds {
        Some(own) => printer.result(&format!(
            "the same rows on your videos' own seconds: {}",
            own.display()
        )),
        None if summary.own_clock => printer.note(&format!(
            "note: the same rows on your videos' own seconds go beside a file --out names (NAME.own-seconds.csv); {} is none",
            summary.detections.display()
        )),
        None => {}
    }
    if let Some(report) = &summary.report {
        printer.result(&avaprep::report::ap_table(report));
    }
    if summary.ground_truth_proposals {
        printer.note(avaprep::stages::eval::GROUND_TRUTH_PROPOSALS);
    }
    Ok(())
}

/// A data directory not prepared, or not with the split, is a usage error, before the model is
/// built.
fn check_split(
    data_dir: &Path,
    split: &avaprep::split::SplitName,
    weights: &Path,
) -> anyhow::Result<()> {
    let plan_path = avaprep::layout::DataLayout::new(data_dir).video_plan();
    if !plan_path.is_file() {
        return Err(UsageError(unprepared(data_dir, weights)).into());
    }
    let plan = avaprep::records::VideoPlan::load(&plan_path)?;
    if plan.files.splits.contains_key(split.as_str()) {
        return Ok(());
    }
    let prepared: Vec<&str> = plan.files.splits.keys().map(String::as_str).collect();
    let prepared = match prepared.len() {
        1 => format!("the split {} only", prepared[0]),
        _ => format!("the splits {} only", prepared.join(", ")),
    };
    Err(UsageError(format!(
        "--split {split}: {} was prepared with {prepared}; add \"{split}\" to the pipeline's `splits` and prepare it with `avaprep --data-dir {} run PIPELINE --until validate`",
        data_dir.display(),
        avaprep_shell::shell_word(data_dir)
    ))
    .into())
}

/// "data holds no prepared dataset", with the data directory a run's weights name
/// (`DIR/runs/RUN/best-*.safetensors`): `--data-dir` is easily left out, as `./data` is its
/// default.
fn unprepared(data_dir: &Path, weights: &Path) -> String {
    let run_of = weights
        .parent()
        .and_then(Path::parent)
        .filter(|runs| runs.file_name().is_some_and(|name| name == "runs"))
        .and_then(Path::parent)
        .map(|dir| match dir.as_os_str().is_empty() {
            true => Path::new("."),
            false => dir,
        });
    // `./data` and `data` are one folder.
    let plain = |path: &Path| -> PathBuf {
        path.components()
            .filter(|part| !matches!(part, std::path::Component::CurDir))
            .collect()
    };
    let hint = match run_of {
        Some(dir) if plain(dir) != plain(data_dir) => format!(
            "; the weights are a run of {}: `avaprep --data-dir {} predict ...`",
            dir.display(),
            avaprep_shell::shell_word(dir)
        ),
        _ => "; name the data directory the run trained on with `--data-dir DIR`".to_string(),
    };
    let layout = avaprep::layout::DataLayout::new(data_dir);
    format!(
        "{} holds no prepared dataset (no {}){hint}",
        data_dir.display(),
        layout.relative(&layout.video_plan())
    )
}
