//! `avaprep predict`.

use std::path::PathBuf;
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
    let config = args.settings.train_config()?;
    check_split(&global.data_dir, &args.split)?;
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
    if let Some(own) = &summary.own_seconds {
        printer.result(&format!(
            "the same rows on your videos' own seconds: {}",
            own.display()
        ));
    }
    if let Some(report) = &summary.report {
        printer.result(&avaprep::report::ap_table(report));
    }
    if summary.ground_truth_proposals {
        printer.note(avaprep::stages::eval::GROUND_TRUTH_PROPOSALS);
    }
    Ok(())
}

/// A split the dataset does not have is a usage error, before the model is built.
fn check_split(
    data_dir: &std::path::Path,
    split: &avaprep::split::SplitName,
) -> anyhow::Result<()> {
    let plan = avaprep::records::VideoPlan::load(
        &avaprep::layout::DataLayout::new(data_dir).video_plan(),
    )?;
    if plan.files.splits.contains_key(split.as_str()) {
        return Ok(());
    }
    let unknown = avaprep::split::UnknownSplit {
        split: split.clone(),
        known: plan.files.splits.keys().cloned().collect(),
    };
    Err(UsageError(format!("--split {split}: {unknown}")).into())
}
