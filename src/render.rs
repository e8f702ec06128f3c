//! What the data commands print about a run of stages: the per-stage lines and summaries.

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::anyhow;
use avaprep::pipeline::lock::{DataDirLock, LockMode};
use avaprep::pipeline::made_by;
use avaprep::pipeline::prints::Scrutiny;
use avaprep::pipeline::{
    AnyStage, Blocker, RunReport, Runner, Shard, StageContext, StageOutcome, StageReport,
    StateStore, WHOLE,
};
use avaprep::progress::{counted, human_bytes};
use avaprep::stages::lists::relocate_configs;
use avaprep::stages::{StageId, blocker_text};

use avaprep_shell::{ExitStatus, GlobalArgs, Printer};

/// Runs stages through the pipeline runner (with the state under the data directory) and prints
/// the report: what `run`, `fetch` and `extract` share.
/// The data directory, held by this command while it writes there (see [`DataDirLock`]).
pub fn lock(global: &GlobalArgs, shard: Option<Shard>) -> anyhow::Result<DataDirLock> {
    let mode = match shard {
        Some(shard) => LockMode::Shard(shard),
        None => LockMode::Exclusive,
    };
    Ok(DataDirLock::acquire(
        &global.data_dir,
        mode,
        &avaprep_shell::command_line(),
    )?)
}

/// What a run of stages does with the kept command that made the data directory's dataset (see
/// [`made_by`]), once its whole-dataset stages made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MakingCommand {
    /// This command (`fetch`, `run`): a later hint names it word for word.
    Keep,
    /// `extract --videos`: a later hint is made from what its stages recorded.
    #[cfg(feature = "extract")]
    Forget,
    /// A command that makes no dataset.
    Untouched,
}

/// How [`run_stages`] runs them.
pub struct RunHow {
    pub shard: Option<Shard>,
    pub scrutiny: Scrutiny,
    pub making: MakingCommand,
}

impl RunHow {
    /// One process's run of stages that make no dataset, at `scrutiny`.
    pub fn single(scrutiny: Scrutiny) -> Self {
        RunHow {
            shard: None,
            scrutiny,
            making: MakingCommand::Untouched,
        }
    }
}

/// `_lock`: this command holds the data directory ([`lock`]), from before anything it writes.
/// The making command is recorded as soon as the whole-dataset stages made the dataset, before
/// the videos' work: a fetch killed while downloading leaves hints that name it.
pub fn run_stages(
    global: &GlobalArgs,
    _lock: &DataDirLock,
    stages: Vec<&dyn AnyStage<StageId>>,
    how: RunHow,
    printer: &Printer,
    cancel: &AtomicBool,
) -> anyhow::Result<RunReport<StageId>> {
    let RunHow {
        shard,
        scrutiny,
        making,
    } = how;
    // A shard waits for its turn at the whole-dataset work and hands it on before its videos.
    let turn = match shard {
        Some(_) => {
            Some(DataDirLock::setup_turn(&global.data_dir, &|| {
                printer.note("waiting for another shard to finish the whole-dataset work (annotations, plan)");
            })?)
        }
        None => None,
    };
    let turn = std::sync::Mutex::new(turn);
    if let Some(old) = relocate_configs(&global.data_dir).map_err(|error| anyhow!(error.message))? {
        printer.note(&format!(
            "the data directory was moved or copied from {}: its PySlowFast configs now name this one",
            old.display()
        ));
    }
    let recorded = AtomicBool::new(false);
    let record_making = |reports: &[&StageReport<StageId>]| {
        if made_the_dataset(reports) && !recorded.swap(true, Ordering::Relaxed) {
            record_making_command(global, making, printer);
        }
    };
    let end_turn = || {
        if let Some(turn) = turn.lock().expect("turn lock").take() {
            turn.end();
        }
    };
    let hand_on = |whole: &[&StageReport<StageId>]| {
        end_turn();
        record_making(whole);
    };
    let runner = Runner {
        stages: stages.clone(),
        store: StateStore::new(&global.data_dir, shard),
        shard,
        context: StageContext {
            data_dir: &global.data_dir,
            reporter: printer,
            cancel,
            fingerprint: "",
            not_started: 0,
        },
        scrutiny,
        before_per_video: Some(&hand_on),
    };
    let report = runner.run()?;
    end_turn();
    record_making(&report.stages.iter().collect::<Vec<_>>());
    print_run_report(printer, &report, &stages, &global.data_dir);
    Ok(report)
}

/// Whether the run made the dataset: its import, annotations or plan.
fn made_the_dataset(reports: &[&StageReport<StageId>]) -> bool {
    reports.iter().any(|stage| {
        matches!(
            stage.stage,
            StageId::Import | StageId::FetchAnnotations | StageId::Parse
        ) && stage.outcome == StageOutcome::Completed
    })
}

/// This process's arguments after the program name.
pub fn arguments() -> Vec<String> {
    std::env::args_os()
        .skip(1)
        .map(|word| word.to_string_lossy().into_owned())
        .collect()
}

/// Where this run made the dataset: `fetch` and `run` keep their command as the one a later hint
/// names to make it again; `extract --videos` forgets the kept one, and a hint names the
/// `extract` its stages recorded (with the frame settings of a later `extract`).
fn record_making_command(global: &GlobalArgs, making: MakingCommand, printer: &Printer) {
    let recorded = match making {
        MakingCommand::Keep => {
            // `--annotations-only` would leave the videos a hint may be about undone.
            let arguments: Vec<String> = arguments()
                .into_iter()
                .filter(|word| word != "--annotations-only")
                .collect();
            std::env::current_dir().and_then(|folder| {
                made_by::keep_making_command(&global.data_dir, &arguments, &folder)
            })
        }
        #[cfg(feature = "extract")]
        MakingCommand::Forget => made_by::forget_making_command(&global.data_dir),
        MakingCommand::Untouched => return,
    };
    if let Err(error) = recorded {
        printer.note(&format!(
            "warning: the command that made the dataset is not recorded for later hints: {error}"
        ));
    }
}

/// The command's last record, once whatever number of runs it made, and its exit status.
pub fn finish(report: &RunReport<StageId>, printer: &Printer) -> ExitStatus {
    finish_unless(report, printer, None)
}

/// [`finish`], failed for `failure` too: work left undone that the stages' outcomes do not show.
pub fn finish_unless(
    report: &RunReport<StageId>,
    printer: &Printer,
    failure: Option<String>,
) -> ExitStatus {
    let succeeded = report.succeeded() && failure.is_none();
    // Errors show under -q and --json too.
    if let Some(failure) = &failure {
        eprintln!("error: {failure}");
    }
    let failures = report.stages.iter().flat_map(|stage| &stage.failures);
    if failures
        .map(|failure| failure.message.as_str())
        .any(avaprep_shell::says_disk_full)
    {
        eprintln!("hint: {}", avaprep_shell::DISK_FULL_HINT);
    }
    printer.record(
        "summary",
        &serde_json::json!({ "succeeded": succeeded, "error": failure }),
    );
    match succeeded {
        true => ExitStatus::Success,
        false => ExitStatus::Failure,
    }
}

fn print_run_report(
    printer: &Printer,
    report: &RunReport<StageId>,
    stages: &[&dyn AnyStage<StageId>],
    data_dir: &std::path::Path,
) {
    for stage in &report.stages {
        printer.record("stage", stage);
        for note in &stage.notes {
            printer.note(&format!("note: {}: {note}", stage.stage.name()));
        }
        for failure in stage.failures.iter().chain(&stage.newly_missing) {
            // A whole-dataset stage's one item is named by the stage alone.
            match failure.item == WHOLE {
                true => eprintln!("error: {}: {}", stage.stage.name(), failure.message),
                false => eprintln!(
                    "error: {}: {}: {}",
                    stage.stage.name(),
                    failure.item,
                    failure.message
                ),
            }
        }
        let outcome = match stage.outcome {
            StageOutcome::UpToDate => "up to date".to_string(),
            StageOutcome::Completed if stage.missing > 0 => format!(
                "done: {} items ({} now, {} already done, {} missing)",
                stage.planned, stage.completed, stage.already_done, stage.missing
            ),
            StageOutcome::Completed => format!(
                "done: {} items ({} now, {} already done)",
                stage.planned, stage.completed, stage.already_done
            ),
            StageOutcome::Failed if stage.planned == 0 => "FAILED".to_string(),
            StageOutcome::Failed => format!(
                "FAILED: {} of {} items failed",
                stage.failures.len(),
                stage.planned
            ),
            StageOutcome::Blocked => blocked_text(&stage.blocked_by, data_dir),
            StageOutcome::Interrupted => "interrupted: the next run resumes it".to_string(),
            StageOutcome::NotStarted => "not started: the run stopped before it".to_string(),
            StageOutcome::Deferred => {
                "deferred: a run without --shard combines the shards and does it".to_string()
            }
        };
        printer.result(&format!(
            "{:<18} {outcome}{}",
            stage.stage.name(),
            figures(stage.files, stage.bytes, stage.seconds)
        ));
        let summary = match stages
            .iter()
            .find(|candidate| candidate.id() == stage.stage)
        {
            Some(candidate) => candidate.summary(stage),
            None => Ok(Vec::new()),
        };
        let summary = summary.unwrap_or_else(|mismatch| {
            eprintln!("error: {mismatch}");
            Vec::new()
        });
        for detail in summary {
            printer.result(&format!("{:<18} {detail}", ""));
        }
        let layout = avaprep::layout::DataLayout::new(data_dir);
        if let Some(hint) = avaprep::stages::fetch_videos::retry_missing_hint(&layout, stage) {
            printer.result(&format!("{:<18} {hint}", ""));
        }
    }
}

/// "not run: parse failed in its last run; run `avaprep fetch` first".
fn blocked_text(blockers: &[Blocker<StageId>], data_dir: &std::path::Path) -> String {
    if blockers.is_empty() {
        return "not run: an earlier stage is not done".to_string();
    }
    let reasons: Vec<String> = blockers
        .iter()
        .map(|blocker| blocker_text(blocker, data_dir))
        .collect();
    format!("not run: {}", reasons.join("; "))
}

pub fn figures(files: u64, bytes: u64, seconds: f64) -> String {
    if files == 0 && bytes == 0 && seconds == 0.0 {
        return String::new();
    }
    format!(
        ", {}, {}, {seconds:.1} s",
        counted(files, "file", "files"),
        human_bytes(bytes)
    )
}
