//! `avaprep validate`.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

use avaprep::annotations::KeyframeRange;
use avaprep::pipeline::lock::{DataDirLock, LockError, LockMode};
use avaprep::validate::{
    CheckStatus, ValidateError, ValidateOptions, ValidateRequest, ValidationReport,
    junit::{setup_error_junit, to_junit},
    validate,
};

use avaprep_shell::{ExitStatus, GlobalArgs, Printer, UsageError};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// A PySlowFast config (YAML, `_BASE_` followed) naming the folders and files to check, for a
    /// dataset avaprep did not make. Default: the data directory's own (slowfast/ava.yaml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// PySlowFast's AVA.FRAME_DIR (over the config's).
    #[arg(long)]
    pub frame_dir: Option<PathBuf>,
    /// PySlowFast's AVA.FRAME_LIST_DIR (over the config's).
    #[arg(long)]
    pub frame_list_dir: Option<PathBuf>,
    /// PySlowFast's AVA.ANNOTATION_DIR (over the config's).
    #[arg(long)]
    pub annotation_dir: Option<PathBuf>,
    /// Check every frame exists but decode only a sample (1 in 64, and each video's first and
    /// last): for a pre-commit hook. Default: decode every frame.
    #[arg(long)]
    pub quick: bool,
    /// Also write the result as JUnit XML (one test case per check) for a CI system.
    #[arg(long, value_name = "FILE", value_parser = avaprep_shell::output_file)]
    pub junit: Option<PathBuf>,
    /// The height every frame must have.
    #[arg(long)]
    pub height: Option<u32>,
    /// List rows per second the loader assumes (PySlowFast: 30). Default: what `avaprep lists`
    /// recorded, else 30.
    #[arg(long)]
    pub list_fps: Option<f64>,
    /// The second row 0 shows (AVA: 900). Default: what `avaprep lists` recorded, else 900.
    #[arg(long)]
    pub segment_start: Option<f64>,
    /// The second the segment ends (AVA: 1801). Default: recorded, else 1801.
    #[arg(long)]
    pub segment_end: Option<f64>,
    /// The dataset's keyframe seconds, FIRST-LAST. Default: recorded, else 902-1798.
    #[arg(long, value_parser = crate::eval::parse_keyframes)]
    pub keyframes: Option<KeyframeRange>,
    /// A dataset manifest: the annotation files under the data directory's annotations/ must
    /// equal its sha256.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
}

pub fn run(
    global: &GlobalArgs,
    args: &ValidateArgs,
    printer: &Printer,
    cancel: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<ExitStatus> {
    let (report, keeper) = match checked(global, args, printer, cancel) {
        Ok(checked) => checked,
        Err(error) => {
            write_setup_error(args, &error);
            return Err(error);
        }
    };
    if keeper.is_some() {
        let layout = avaprep::layout::DataLayout::new(&global.data_dir);
        avaprep::stages::validate::keep_findings(&layout, &report).with_context(|| {
            format!(
                "writing {}",
                avaprep::stages::validate::validation_file(&layout).display()
            )
        })?;
    }
    if let Some(path) = &args.junit {
        avaprep::fsutil::write_output(path, to_junit(&report).as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    printer.record("validation", &report.to_json());
    printer.result(&summary(&report, args.junit.as_deref()));
    Ok(if report.passed {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

/// The checks' report, and the data directory's lock where the findings are to be kept.
fn checked(
    global: &GlobalArgs,
    args: &ValidateArgs,
    printer: &Printer,
    cancel: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<(ValidationReport, Option<DataDirLock>)> {
    if let Some(config) = args.config.as_ref().filter(|config| !config.exists()) {
        return Err(UsageError(format!("--config {}: no such file", config.display())).into());
    }
    let request =
        ValidateRequest::from_options(&global.data_dir, &options(args)).map_err(reported)?;
    // A config may name any folders (a copy's may still name the original's): say which.
    printer.note(&format!(
        "checking the frames in {}, the lists {} in {}, the annotations in {}",
        request.frame_dir.display(),
        request.list_names().join(", "),
        request.frame_list_dir.display(),
        request.annotation_dir.display()
    ));
    let keeper = match options(args).checks_the_data_dir_as_made() {
        true => keeper(global, printer),
        false => None,
    };
    let report = validate(&request, printer, cancel).map_err(reported)?;
    Ok((report, keeper))
}

/// `--junit`'s file for an error that stopped the checks (no lists yet, a config that cannot be
/// read): one test case in error saying why, so the CI system shows it where it shows the
/// checks. An interruption writes nothing, as it says.
fn write_setup_error(args: &ValidateArgs, error: &anyhow::Error) {
    let Some(path) = &args.junit else {
        return;
    };
    if matches!(
        error.downcast_ref::<ValidateError>(),
        Some(ValidateError::Interrupted)
    ) {
        return;
    }
    let xml = setup_error_junit(&avaprep_shell::error_text(error));
    if let Err(written) = avaprep::fsutil::write_output(path, xml.as_bytes()) {
        eprintln!("warning: {} not written: {written}", path.display());
    }
}

/// The data directory's lock, held while the findings are kept as its validation (training
/// goes by them): None, with a note, where another command writes there or the folder cannot
/// be written. The checks still run: they only read.
fn keeper(global: &GlobalArgs, printer: &Printer) -> Option<DataDirLock> {
    match DataDirLock::acquire(
        &global.data_dir,
        LockMode::Exclusive,
        &avaprep_shell::command_line(),
    ) {
        Ok(lock) => Some(lock),
        Err(error) => {
            let why = match error {
                LockError::Held { holders, .. } | LockError::LockFileReplaced { holders, .. } => {
                    format!("{} is in use by {holders}", global.data_dir.display())
                }
                other => other.to_string(),
            };
            printer.note(&format!(
                "{why}: checking, without keeping the findings as its validation (run this again once it is free to keep them)"
            ));
            None
        }
    }
}

/// A usage error exits 2 (a setting named as its flag); the rest are failures.
fn reported(error: ValidateError) -> anyhow::Error {
    match error {
        ValidateError::Setting(bad) => anyhow::Error::new(UsageError(bad.as_flags())),
        error if error.is_usage() => anyhow::Error::new(UsageError(error.to_string())),
        error => anyhow::Error::new(error),
    }
}

fn options(args: &ValidateArgs) -> ValidateOptions {
    ValidateOptions {
        config: args.config.clone(),
        frame_dir: args.frame_dir.clone(),
        frame_list_dir: args.frame_list_dir.clone(),
        annotation_dir: args.annotation_dir.clone(),
        quick: args.quick,
        height: args.height,
        list_fps: args.list_fps,
        segment_start: args.segment_start,
        segment_end: args.segment_end,
        keyframes: args.keyframes,
        manifest: args.manifest.clone(),
    }
}

/// One line per check, the examples of each failure under it, and a verdict.
fn summary(report: &ValidationReport, junit: Option<&std::path::Path>) -> String {
    let mut lines = Vec::new();
    for check in &report.checks {
        let (mark, detail) = match check.status() {
            CheckStatus::Passed => ("ok  ", format!("{} checked", check.checked)),
            CheckStatus::Skipped => ("skip", check.skipped.clone().unwrap_or_default()),
            CheckStatus::Failed => (
                "FAIL",
                format!(
                    "{} of {} failed: {}",
                    check.failed,
                    check.checked,
                    check.id.rule()
                ),
            ),
        };
        lines.push(format!("{mark} {:<18} {detail}", check.id.name()));
        for example in &check.examples {
            lines.push(format!("       {example}"));
        }
        if check.failed > check.examples.len() as u64 {
            lines.push(format!(
                "       ... and {} more (--json lists the first {})",
                check.failed - check.examples.len() as u64,
                check.examples.len()
            ));
        }
    }
    let frames = format!(
        "{} frames ({} decoded) in {:.1} s",
        report.frames_listed, report.frames_decoded, report.seconds
    );
    let failed: Vec<&str> = report
        .failed_checks()
        .map(|check| check.id.name())
        .collect();
    let skipped = report.skipped_checks().count();
    if failed.is_empty() {
        // Counted as the pipeline's validate stage counts them.
        lines.push(format!(
            "validation passed: {} checks ({skipped} skipped), {frames}",
            report.checks.len() - skipped
        ));
    } else {
        lines.push(format!(
            "validation FAILED: {} of {} checks ({}), {skipped} skipped; {frames}",
            failed.len(),
            report.checks.len() - skipped,
            failed.join(", ")
        ));
    }
    if let Some(path) = junit {
        lines.push(format!("JUnit report: {}", path.display()));
    }
    lines.join("\n")
}
