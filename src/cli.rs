//! The command line: flags, and the dispatch from a subcommand to the library.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};

use crate::manifest::DatasetManifest;
use crate::pipeline::status::{StageCondition, StageStatusLine};
use crate::pipeline::{
    PipelineSpec, RunReport, Runner, Shard, StageContext, StageOutcome, StateStore,
};
use crate::report::{Printer, Verbosity};
use crate::stages;

#[derive(Debug, Parser)]
#[command(
    name = "avaprep",
    version,
    about = "Prepare the AVA 2.2 action-detection dataset and train SlowFast on it",
    long_about = "Prepare the AVA 2.2 action-detection dataset: download it, extract only the \
                  annotated time ranges at a chosen frame rate and height, write the frame lists \
                  PySlowFast reads, validate the result, and train a SlowFast detector on one GPU."
)]
pub struct Cli {
    /// Where downloads, frames, lists, state and runs are kept.
    #[arg(
        long,
        global = true,
        default_value = "./data",
        env = "AVAPREP_DATA_DIR"
    )]
    pub data_dir: PathBuf,

    /// More log output (-v: debug, -vv: trace). Hides progress bars.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,

    /// Only errors on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// Machine-readable output: JSON Lines on stdout, each record with a `type` field.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Download annotations, name lists and videos (not implemented yet).
    Fetch(NotImplemented),
    /// Extract frames of the annotated time ranges (not implemented yet).
    Extract(NotImplemented),
    /// Write the frame lists PySlowFast reads (not implemented yet).
    Lists(NotImplemented),
    /// Check a prepared dataset (not implemented yet).
    Validate(NotImplemented),
    /// Train SlowFast on a prepared dataset (not implemented yet).
    Train(NotImplemented),
    /// Score detections with the AVA frame-mAP protocol (not implemented yet).
    Eval(NotImplemented),
    /// Run a pipeline file: every stage in order, skipping what is up to date.
    Run(RunArgs),
    /// Show where each stage of a pipeline stands: done, stale, pending, failed, interrupted.
    Status(StatusArgs),
}

/// A stage whose command exists in the interface but not yet in the tool.
#[derive(Debug, Args)]
pub struct NotImplemented {}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The pipeline file (for example pipelines/demo.toml).
    pub pipeline: PathBuf,

    /// Override a key of the pipeline file, as if the file said it: STAGE.KEY=VALUE or KEY=VALUE.
    /// Repeatable. Example: --set extract.fps=10
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,

    /// Do only shard I of N of the per-video work (I from 1), for running on N machines; a later
    /// run without --shard merges what the shards did and runs the whole-dataset stages.
    /// Default: all videos.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The pipeline file whose stages to show.
    #[arg(default_value = "pipelines/demo.toml")]
    pub pipeline: PathBuf,

    /// Override a key of the pipeline file, as `run --set` does (the status depends on it).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,

    /// Show the state of shard I of N instead of the unsharded run. Default: the unsharded run.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
}

/// What `main` turns into an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Success,
    /// Some items failed or the work could not be done.
    Failure,
}

pub fn verbosity(cli: &Cli) -> Verbosity {
    match (cli.quiet, cli.verbose) {
        (true, _) => Verbosity::Quiet,
        (false, 0) => Verbosity::Normal,
        (false, _) => Verbosity::Verbose,
    }
}

pub fn run(cli: Cli, cancel: &AtomicBool) -> anyhow::Result<ExitStatus> {
    let printer = Printer::new(verbosity(&cli), cli.json);
    match &cli.command {
        Command::Fetch(_) => not_implemented("fetch", 4),
        Command::Extract(_) => not_implemented("extract", 5),
        Command::Lists(_) => not_implemented("lists", 5),
        Command::Validate(_) => not_implemented("validate", 5),
        Command::Train(_) => not_implemented("train", 6),
        Command::Eval(_) => not_implemented("eval", 6),
        Command::Run(args) => run_pipeline(&cli, args, &printer, cancel),
        Command::Status(args) => show_status(&cli, args, &printer),
    }
}

fn not_implemented(command: &str, issue: u32) -> anyhow::Result<ExitStatus> {
    bail!("`avaprep {command}` is not implemented yet (tracked in issue {issue}); nothing was done")
}

/// The pipeline file, its dataset manifest, and the stages built from them.
struct Loaded {
    stages: Vec<Box<dyn crate::pipeline::Stage>>,
    unimplemented: Vec<&'static str>,
}

fn load(cli: &Cli, pipeline: &std::path::Path, overrides: &[String]) -> anyhow::Result<Loaded> {
    let spec = PipelineSpec::load(pipeline, overrides)?;
    let manifest = DatasetManifest::load(&spec.dataset)
        .with_context(|| format!("loading the dataset named by {}", pipeline.display()))?;
    let built = stages::build(&spec, &manifest, &cli.data_dir)?;
    Ok(Loaded {
        stages: built.stages,
        unimplemented: built.unimplemented,
    })
}

fn run_pipeline(
    cli: &Cli,
    args: &RunArgs,
    printer: &Printer,
    cancel: &AtomicBool,
) -> anyhow::Result<ExitStatus> {
    let loaded = load(cli, &args.pipeline, &args.overrides)?;
    let runner = Runner {
        stages: loaded.stages.iter().map(|stage| stage.as_ref()).collect(),
        store: StateStore::new(&cli.data_dir, args.shard),
        shard: args.shard,
        context: StageContext {
            data_dir: &cli.data_dir,
            reporter: printer,
            cancel,
        },
    };
    let report = runner.run()?;
    print_run_report(printer, &report);
    if !loaded.unimplemented.is_empty() {
        printer.note(&format!(
            "stopped after the implemented stages; not implemented yet: {}",
            loaded.unimplemented.join(", ")
        ));
    }
    Ok(if report.succeeded() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

fn print_run_report(printer: &Printer, report: &RunReport) {
    for stage in &report.stages {
        printer.record("stage", stage);
        for note in &stage.notes {
            printer.note(&format!("note: {note}"));
        }
        for failure in &stage.failures {
            eprintln!(
                "error: {}: {}: {}",
                stage.stage, failure.item, failure.message
            );
        }
        let outcome = match stage.outcome {
            StageOutcome::UpToDate => "up to date".to_string(),
            StageOutcome::Completed => format!(
                "done: {} items ({} now, {} already done)",
                stage.planned, stage.completed, stage.already_done
            ),
            StageOutcome::Failed => format!(
                "FAILED: {} of {} items failed",
                stage.failures.len(),
                stage.planned
            ),
            StageOutcome::Blocked => "not run: an earlier stage is not done".to_string(),
            StageOutcome::Interrupted => "interrupted: the next run resumes it".to_string(),
            StageOutcome::Deferred => {
                "deferred: a run without --shard combines the shards and does it".to_string()
            }
        };
        printer.result(&format!(
            "{:<18} {outcome}{}",
            stage.stage,
            figures(stage.files, stage.bytes, stage.seconds)
        ));
    }
    printer.record(
        "summary",
        &serde_json::json!({ "succeeded": report.succeeded() }),
    );
}

fn show_status(cli: &Cli, args: &StatusArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let loaded = load(cli, &args.pipeline, &args.overrides)?;
    let cancel = AtomicBool::new(false);
    let runner = Runner {
        stages: loaded.stages.iter().map(|stage| stage.as_ref()).collect(),
        store: StateStore::new(&cli.data_dir, args.shard),
        shard: args.shard,
        context: StageContext {
            data_dir: &cli.data_dir,
            reporter: printer,
            cancel: &cancel,
        },
    };
    for line in runner.status()? {
        printer.record("stage_status", &line);
        printer.result(&status_text(&line));
    }
    for stage in &loaded.unimplemented {
        printer.result(&format!("{stage:<18} not implemented yet"));
    }
    Ok(ExitStatus::Success)
}

fn status_text(line: &StageStatusLine) -> String {
    let condition = match line.condition {
        StageCondition::Done => "done",
        StageCondition::Stale => "stale",
        StageCondition::Pending => "pending",
        StageCondition::Failed => "failed",
        StageCondition::Interrupted => "interrupted",
        StageCondition::Corrupt => "corrupt state",
    };
    let mut text = format!("{:<18} {condition:<12}", line.stage);
    if line.condition != StageCondition::Pending && line.condition != StageCondition::Corrupt {
        text.push_str(&format!(
            " {}/{} items{}",
            line.items_done,
            line.items_planned,
            figures(line.files, line.bytes, line.seconds)
        ));
    }
    if let Some(detail) = &line.detail {
        text.push_str(&format!(" ({detail})"));
    }
    text
}

fn figures(files: u64, bytes: u64, seconds: f64) -> String {
    if files == 0 && bytes == 0 && seconds == 0.0 {
        return String::new();
    }
    format!(", {files} files, {}, {seconds:.1} s", human_bytes(bytes))
}

pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
