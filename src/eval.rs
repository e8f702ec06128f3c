//! `avaprep eval`.

use std::path::PathBuf;

use clap::Args;

use avaprep::annotations::KeyframeRange;
use avaprep::eval::{EvalOptions, OFFICIAL_DETECTIONS_PER_FRAME, evaluate_files_with};
use avaprep_shell::Printer;

use avaprep_shell::ExitStatus;

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Detections in the official submission format: video_id,second,x1,y1,x2,y2,action_id,score.
    #[arg(long)]
    pub detections: PathBuf,
    /// Ground truth in the AVA format (ava_val_v2.2.csv).
    #[arg(long)]
    pub groundtruth: PathBuf,
    /// The classes to score (ava_action_list_v2.2_for_activitynet_2019.pbtxt: the 60 of AVA 2.2).
    #[arg(long)]
    pub labelmap: PathBuf,
    /// Keyframes removed from both ground truth and detections (ava_val_excluded_timestamps_v2.2.csv).
    /// Default: none.
    #[arg(long)]
    pub exclusions: Option<PathBuf>,
    /// The dataset's keyframe seconds, FIRST-LAST; rows outside are errors.
    #[arg(long, default_value = "902-1798", value_parser = parse_keyframes)]
    pub keyframes: KeyframeRange,
    /// Detections kept per keyframe, highest scores first, as the official evaluator does; 0 keeps
    /// all (what PySlowFast's and mmaction2's evaluators do).
    #[arg(long, default_value_t = OFFICIAL_DETECTIONS_PER_FRAME)]
    pub max_detections_per_frame: usize,
}

pub fn parse_keyframes(text: &str) -> Result<KeyframeRange, String> {
    let usage = || format!("`{text}` is not a keyframe range: expected FIRST-LAST, e.g. 902-1798");
    let (first, last) = text.split_once('-').ok_or_else(usage)?;
    let first = first.trim().parse().map_err(|_| usage())?;
    let last = last.trim().parse().map_err(|_| usage())?;
    KeyframeRange::new(first, last).ok_or_else(usage)
}

pub fn run(args: &EvalArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let options = EvalOptions {
        max_detections_per_frame: (args.max_detections_per_frame > 0)
            .then_some(args.max_detections_per_frame),
        ..EvalOptions::OFFICIAL
    };
    let report = evaluate_files_with(
        &args.groundtruth,
        &args.detections,
        &args.labelmap,
        args.exclusions.as_deref(),
        args.keyframes,
        &options,
    )?;
    printer.record("eval", &report);
    if report.frames.with_detections == 0 {
        printer.note(&format!(
            "warning: {} has no detection of a scored class: every class scores 0",
            args.detections.display()
        ));
    }
    printer.result(&avaprep::report::ap_table(&report));
    Ok(ExitStatus::Success)
}
