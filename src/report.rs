//! `avaprep report`.

use std::path::PathBuf;

use clap::Args;

use avaprep::annotations::{FrameKey, VideoId};
use avaprep::layout::DataLayout;
use avaprep::pipeline::lock::{DataDirLock, LockMode};
use avaprep::records::TrainedRun;
use avaprep::report::{ReportError, ReportRequest, write_report};
use avaprep::stages::report::{DEFAULT_MIN_SCORE, DEFAULT_SAMPLE, check_min_score};

use avaprep_shell::{ExitStatus, GlobalArgs, Printer, UsageError};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A training run's folder to show (curves, per-class AP, detections). Default: the run the
    /// pipeline's train stage made (work/train.json), if any.
    #[arg(long, conflicts_with = "no_run")]
    pub run: Option<PathBuf>,
    /// Show the dataset only, even when the pipeline trained a run.
    #[arg(long)]
    pub no_run: bool,
    /// Where to write index.html and its images/ folder. Default: DATA_DIR/report.
    #[arg(long, value_parser = avaprep_shell::output_folder)]
    pub out: Option<PathBuf>,
    /// A keyframe to show, VIDEO_ID,SECOND (repeat for more). Default: a sample.
    #[arg(long = "keyframe", value_parser = parse_keyframe, allow_hyphen_values = true)]
    pub keyframes: Vec<FrameKey>,
    /// How many keyframes to sample when none is named (from the run's evaluated split when there
    /// is a run).
    #[arg(long, default_value_t = DEFAULT_SAMPLE)]
    pub sample: usize,
    /// Detections scoring below this are not drawn (a score from 0 to 1).
    #[arg(long, default_value_t = DEFAULT_MIN_SCORE, value_parser = parse_score)]
    pub min_score: f32,
}

fn parse_score(text: &str) -> Result<f32, String> {
    let score: f32 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}`: a score from 0 to 1"))?;
    check_min_score(score).map_err(|bad| bad.problem)?;
    Ok(score)
}

fn parse_keyframe(text: &str) -> Result<FrameKey, String> {
    let (video, second) = text
        .split_once(',')
        .ok_or_else(|| format!("`{text}`: expected VIDEO_ID,SECOND"))?;
    let video: VideoId = video
        .parse()
        .map_err(|error| format!("`{video}`: {error}"))?;
    let second = second
        .trim()
        .parse()
        .map_err(|_| format!("`{second}`: not a whole second"))?;
    Ok(FrameKey { video, second })
}

pub fn run(
    global: &GlobalArgs,
    args: &ReportArgs,
    printer: &Printer,
    cancel: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<ExitStatus> {
    // The page goes into the data directory unless another folder is named: it writes there.
    let _lock = match &args.out {
        None => Some(DataDirLock::acquire(
            &global.data_dir,
            LockMode::Exclusive,
            &avaprep_shell::command_line(),
        )?),
        Some(_) => None,
    };
    let layout = DataLayout::new(&global.data_dir);
    let run = match (&args.run, args.no_run) {
        (Some(dir), _) => Some(dir.clone()),
        (None, true) => None,
        (None, false) => TrainedRun::load(&layout)
            .ok()
            .map(|trained| layout.root().join(trained.run_dir)),
    };
    let request = ReportRequest {
        data_dir: global.data_dir.clone(),
        run,
        out: args
            .out
            .clone()
            .unwrap_or_else(|| global.data_dir.join("report")),
        keyframes: args.keyframes.clone(),
        sample: args.sample,
        min_score: args.min_score,
    };
    let summary = write_report(&request, cancel).map_err(|error| match error {
        ReportError::OutFolder { .. } => anyhow::Error::new(UsageError(error.to_string())),
        // A keyframe the user named that the data does not have: the flag was wrong.
        ReportError::Keyframe { .. } if !args.keyframes.is_empty() => {
            anyhow::Error::new(UsageError(format!("--keyframe: {error}")))
        }
        error => anyhow::Error::new(error),
    })?;
    printer.record("report", &summary);
    printer.result(&format!(
        "report: {} ({} keyframes, {} images{})",
        summary.page.display(),
        summary.keyframes,
        summary.images,
        if summary.with_run {
            ", with the training run"
        } else {
            ""
        }
    ));
    Ok(ExitStatus::Success)
}
