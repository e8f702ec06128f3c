//! `avaprep run` and `avaprep status`.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use clap::Args;

use avaprep::layout::imported_manifest;
use avaprep::pipeline::prints::Scrutiny;
use avaprep::pipeline::status::{StageCondition, StageStatusLine};
use avaprep::pipeline::{
    AnyStage, Closing, PipelineSpec, RunReport, Runner, Shard, StageContext, StageOutcome,
    StateStore,
};
use avaprep::stages::{ProductStages, StageId};
use avaprep_shell::Printer;

use crate::render::{MakingCommand, RunHow, arguments, figures, finish_unless, lock, run_stages};
use avaprep_shell::{ExitStatus, GlobalArgs, UsageError};

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

    /// Re-hash every output each stage recorded, byte for byte, not only names, sizes and
    /// modification times; what changed is made again.
    #[arg(long)]
    pub verify: bool,

    /// Stop after this stage (for example `validate`: the data only, no training).
    #[arg(long, value_name = "STAGE", value_parser = parse_stage)]
    pub until: Option<StageId>,

    /// Ask again for the videos an earlier run found missing (the server had none): they are
    /// otherwise left out of every later run.
    #[arg(long)]
    pub retry_missing: bool,
}

fn parse_stage(name: &str) -> Result<StageId, String> {
    StageId::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = StageId::ALL.iter().map(|stage| stage.name()).collect();
        format!("`{name}` is not a stage (stages: {})", names.join(", "))
    })
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The pipeline file whose stages to show. Default: pipelines/demo.toml, where it is.
    pub pipeline: Option<PathBuf>,

    /// Override a key of the pipeline file, as `run --set` does (the status depends on it).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,

    /// Show the state of shard I of N instead of the unsharded run. Default: the unsharded run.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,

    /// The stages `run --until STAGE` runs, only: the splits of the stages after it are not
    /// checked, as `run --until STAGE` does not check them.
    #[arg(long, value_name = "STAGE", value_parser = parse_stage)]
    pub until: Option<StageId>,
}

/// A pipeline file with its `--set` overrides applied; an invalid value in it is a usage error
/// (exit 2).
fn load_spec(pipeline: &Path, overrides: &[String]) -> anyhow::Result<PipelineSpec> {
    PipelineSpec::load(pipeline, overrides, &StageId::tables())
        .map_err(|error| usage_if(error.is_usage(), error))
}

/// `error` as a usage error (exit 2) where it is one.
fn usage_if<E: std::error::Error + Send + Sync + 'static>(usage: bool, error: E) -> anyhow::Error {
    match usage {
        true => anyhow::Error::new(UsageError(error.to_string())),
        false => anyhow::Error::new(error),
    }
}

/// The stages a pipeline file describes. `until`: the last stage that will run; the splits of
/// the stages after it are not checked.
fn build(spec: &PipelineSpec, until: Option<StageId>) -> anyhow::Result<ProductStages> {
    let mut built =
        ProductStages::from_spec(spec, until).map_err(|error| usage_if(error.is_usage(), error))?;
    if let Some(last) = until {
        built = built.through(last);
    }
    Ok(built)
}

/// A pipeline that imports its dataset, on the dataset its import made in the data directory.
fn on_imported(global: &GlobalArgs, spec: PipelineSpec) -> PipelineSpec {
    match spec.imports() {
        true => spec.with_dataset(imported_manifest(&global.data_dir)),
        false => spec,
    }
}

pub fn run(
    global: &GlobalArgs,
    args: &RunArgs,
    printer: &Printer,
    cancel: &AtomicBool,
) -> anyhow::Result<ExitStatus> {
    if args.retry_missing && args.shard.is_some() {
        return Err(UsageError(
            "--retry-missing asks again for the missing videos of every shard, which the other shards may be at: ask on the run without --shard".to_string(),
        )
        .into());
    }
    let spec = load_spec(&args.pipeline, &args.overrides)?;
    #[cfg(feature = "extract")]
    let deletes_downloads = deletes_videos_after_extract(&spec);
    let scrutiny = Scrutiny::verify(args.verify);
    let import = import_stage(&spec)?;
    refuse_until_import_without_one(import.is_some(), args.until)?;
    // Every table is checked before anything is written: a pipeline that imports has had its
    // tables checked with its import; the others are built now.
    let named_dataset = match import {
        None => Some(build(&spec, args.until)?),
        Some(_) => None,
    };
    let lock = lock(global, args.shard)?;
    let mut left_out = None;
    if let Some(built) = &named_dataset {
        built
            .refuse_another_held(&global.data_dir)
            .map_err(UsageError)?;
    }
    if args.retry_missing {
        crate::fetch::ask_again_for_missing(global, printer)?;
    }
    if let Some(import) = import {
        if args.shard.is_some() && !imported_manifest(&global.data_dir).is_file() {
            return Err(UsageError(format!(
                "a shard prepares the dataset an unsharded run imported: run `{}` first",
                avaprep::pipeline::made_by::this_run_until(
                    &global.data_dir,
                    &arguments(),
                    StageId::Import.name()
                )
                .unwrap_or_else(|| format!(
                    "avaprep run {} --until import",
                    args.pipeline.display()
                ))
            ))
            .into());
        }
        if args.shard.is_none() {
            let how = RunHow {
                shard: None,
                scrutiny,
                making: MakingCommand::Keep,
            };
            let report = run_stages(global, &lock, vec![import.as_ref()], how, printer, cancel)?;
            left_out = import_left_out(&report);
            if !report.succeeded() || args.until == Some(StageId::Import) {
                return Ok(finish_unless(&report, printer, left_out));
            }
        }
    }
    let built = match named_dataset {
        Some(built) => built,
        None => build(&on_imported(global, spec), args.until)?,
    };
    // Downloads record no prints of their own: their sha256 is in the download records.
    let downloads = built
        .as_refs()
        .iter()
        .any(|stage| matches!(stage.id(), StageId::FetchAnnotations | StageId::FetchVideos));
    match (args.verify && downloads, args.shard) {
        (true, None) => crate::fetch::forget_damaged_downloads(global, printer)?,
        // Every download of the data directory, with the other shards at work: not a shard's job.
        (true, Some(_)) => printer.note(
            "--verify with --shard re-hashes this shard's frames; the downloads are re-hashed by `avaprep fetch --verify` or a run without --shard",
        ),
        (false, _) => {}
    }
    let how = RunHow {
        shard: args.shard,
        scrutiny,
        making: MakingCommand::Keep,
    };
    let report = run_stages(global, &lock, built.as_refs(), how, printer, cancel)?;
    #[cfg(feature = "extract")]
    if deletes_downloads && args.shard.is_none() && extraction_done(&report) {
        crate::extract::delete_earlier_downloads(global, printer)?;
    }
    if report.succeeded() {
        print_closings(global, &built, &report, printer);
    }
    Ok(finish_unless(&report, printer, left_out))
}

/// `[extract] delete_videos_after_extract`, set in the file or by `--set`: also asked of the
/// videos an earlier run extracted, once the extraction is done.
#[cfg(feature = "extract")]
fn deletes_videos_after_extract(spec: &PipelineSpec) -> bool {
    spec.stage_params::<avaprep::stages::extract::ExtractParams>(StageId::Extract.name())
        .is_ok_and(|params| params.delete_videos_after_extract)
}

/// Whether the run left every video of the plan extracted.
#[cfg(feature = "extract")]
fn extraction_done(report: &RunReport<StageId>) -> bool {
    report.stages.iter().any(|stage| {
        stage.stage == StageId::Extract
            && matches!(
                stage.outcome,
                StageOutcome::Completed | StageOutcome::UpToDate
            )
    })
}

/// Videos this run's import left out (unreadable, or not in the folder), as a failure: the rest
/// are prepared, and the run fails, as `avaprep import` does and a run that finds a download
/// missing does. The next run, with nothing new to import, does not fail again.
#[cfg(feature = "extract")]
fn import_left_out(report: &avaprep::pipeline::RunReport<StageId>) -> Option<String> {
    let left_out: u64 = report
        .stages
        .iter()
        .filter(|stage| stage.stage == StageId::Import)
        .filter(|stage| stage.outcome == avaprep::pipeline::StageOutcome::Completed)
        .filter_map(|stage| {
            stage
                .counts_as::<avaprep::stages::import::ImportCounts>()
                .ok()
        })
        .map(|counts| counts.left_out)
        .sum();
    (left_out > 0).then(|| {
        format!(
            "import left out {} (above); the others are prepared",
            avaprep::progress::counted(left_out, "video", "videos")
        )
    })
}

#[cfg(not(feature = "extract"))]
fn import_left_out(_report: &avaprep::pipeline::RunReport<StageId>) -> Option<String> {
    None
}

/// The pipeline `status` shows: the one named, else the demo's where this folder has it (the
/// user named none, so an error must not name the demo's file as theirs).
fn status_pipeline(named: Option<&std::path::Path>) -> anyhow::Result<PathBuf> {
    const DEMO: &str = "pipelines/demo.toml";
    match named {
        Some(path) => Ok(path.to_path_buf()),
        None if std::path::Path::new(DEMO).is_file() => Ok(PathBuf::from(DEMO)),
        None => Err(UsageError(format!(
            "name the pipeline file whose stages to show, as `avaprep run` was given it: `avaprep status PIPELINE` (no {DEMO} here to show)"
        ))
        .into()),
    }
}

pub fn status(
    global: &GlobalArgs,
    args: &StatusArgs,
    printer: &Printer,
) -> anyhow::Result<ExitStatus> {
    let spec = load_spec(&status_pipeline(args.pipeline.as_deref())?, &args.overrides)?;
    let import = import_stage(&spec)?;
    refuse_until_import_without_one(import.is_some(), args.until)?;
    let cancel = AtomicBool::new(false);
    let runner = |stages| Runner {
        stages,
        store: StateStore::new(&global.data_dir, args.shard),
        shard: args.shard,
        context: StageContext {
            data_dir: &global.data_dir,
            reporter: printer,
            cancel: &cancel,
            fingerprint: "",
            not_started: 0,
        },
        scrutiny: Scrutiny::Listing,
        before_per_video: None,
    };
    let mut lines = Vec::new();
    if let Some(import) = &import {
        lines.extend(runner(vec![import.as_ref()]).status()?);
        if lines
            .iter()
            .any(|line| line.condition != StageCondition::Done)
        {
            printer.note("the stages after import are shown on the dataset it made last: the next run imports first");
        }
        if !imported_manifest(&global.data_dir).is_file() || args.until == Some(StageId::Import) {
            print_status(&lines, printer);
            return Ok(ExitStatus::Success);
        }
    }
    let built = build(&on_imported(global, spec), args.until)?;
    lines.extend(runner(built.as_refs()).status()?);
    print_status(&lines, printer);
    Ok(ExitStatus::Success)
}

fn print_status(lines: &[StageStatusLine<StageId>], printer: &Printer) {
    for line in lines {
        printer.record("stage_status", line);
        printer.result(&status_text(line));
    }
}

/// `--until import` names a stage the pipeline must have.
fn refuse_until_import_without_one(imports: bool, until: Option<StageId>) -> anyhow::Result<()> {
    match (imports, until) {
        (false, Some(StageId::Import)) => Err(UsageError(
            "--until import: this pipeline names its dataset; it has no [import] table".into(),
        )
        .into()),
        _ => Ok(()),
    }
}

/// The pipeline's import, where it has an `[import]` table.
fn import_stage(spec: &PipelineSpec) -> anyhow::Result<Option<Box<dyn AnyStage<StageId>>>> {
    avaprep::stages::import_stage(spec).map_err(|error| usage_if(true, error))
}

/// What the stages that made results hand the user (where the model and the detections are, the
/// scores with their per-class tables, why training stopped), after their lines in the run's
/// report. Only stages this run completed or found up to date speak: a stage deferred to a run
/// without `--shard` has nothing current to show.
fn print_closings(
    global: &GlobalArgs,
    built: &ProductStages,
    report: &RunReport<StageId>,
    printer: &Printer,
) {
    let current = |id: StageId| {
        report.stages.iter().any(|stage| {
            stage.stage == id
                && matches!(
                    stage.outcome,
                    StageOutcome::Completed | StageOutcome::UpToDate
                )
        })
    };
    let closings: Vec<Closing> = built
        .as_refs()
        .into_iter()
        .filter(|stage| current(stage.id()))
        .filter_map(|stage| stage.closing(&global.data_dir))
        .collect();
    if closings.is_empty() {
        return;
    }
    printer.result("");
    for closing in closings {
        printer.record(closing.record_type, &closing.record);
        for line in &closing.lines {
            printer.result(line);
        }
    }
}

fn status_text(line: &StageStatusLine<StageId>) -> String {
    let condition = match line.condition {
        StageCondition::Done => "done",
        StageCondition::Stale => "stale",
        StageCondition::Pending => "pending",
        StageCondition::Failed => "failed",
        StageCondition::Running => "running",
        StageCondition::Interrupted => "interrupted",
        StageCondition::Corrupt => "corrupt state",
    };
    let mut text = format!("{:<18} {condition:<12}", line.stage.name());
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
