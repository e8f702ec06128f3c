//! `avaprep predict`.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use clap::Args;

use crate::frame::Printer;

use crate::frame::GlobalArgs;
use crate::settings::SettingsArgs;

#[derive(Debug, Args)]
pub struct PredictArgs {
    /// The weights: a run's `best-*` or `model-*` file, or any safetensors with the model's names.
    #[arg(long)]
    pub weights: PathBuf,
    /// The split whose keyframes and detector boxes to score (train, val or test).
    #[arg(long, default_value = "val")]
    pub split: String,
    /// The detections file to write (video_id,second,x1,y1,x2,y2,action_id,score).
    #[arg(long)]
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
    if let Some(report) = &summary.report {
        printer.result(&avaprep::eval::render_table(report));
    }
    Ok(())
}
