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
    Err(UsageError(split_not_prepared(split, data_dir, &prepared)).into())
}

/// Why `--split` cannot be predicted on, with the split most likely meant, or how to prepare it.
fn split_not_prepared(split: &str, data_dir: &Path, prepared: &[&str]) -> String {
    let meant = meant_split(split, prepared);
    let listed = match prepared.len() {
        1 => format!("the split {} only", prepared[0]),
        _ => format!("the splits {} only", prepared.join(", ")),
    };
    let hint = match meant {
        Some(meant) if prepared.contains(&meant) => format!("did you mean --split {meant}?"),
        meant => format!(
            "add \"{}\" to the pipeline's `splits` and prepare it with `avaprep --data-dir {} run PIPELINE --until validate`",
            meant.unwrap_or(split),
            avaprep_shell::shell_word(data_dir)
        ),
    };
    format!(
        "--split {split}: {} was prepared with {listed}; {hint}",
        data_dir.display(),
    )
}

/// The split a mistyped `--split` most likely meant: a prepared one or AVA's, at most two
/// letters off (`vall`, `tset`).
fn meant_split<'a>(split: &str, prepared: &[&'a str]) -> Option<&'a str> {
    prepared
        .iter()
        .copied()
        .chain(["train", "val", "test"])
        .map(|known| (strsim::osa_distance(split, known), known))
        .filter(|(distance, _)| (1..=2).contains(distance))
        .min()
        .map(|(_, known)| known)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mistyped_split_is_named_with_the_one_meant() {
        let data = Path::new("data");
        let message = split_not_prepared("vall", data, &["train", "val"]);
        assert_eq!(
            message,
            "--split vall: data was prepared with the splits train, val only; did you mean --split val?"
        );
        // AVA's test split, not prepared: spelt right in how to prepare it.
        let message = split_not_prepared("tset", data, &["train", "val"]);
        assert!(
            message.ends_with("add \"test\" to the pipeline's `splits` and prepare it with `avaprep --data-dir data run PIPELINE --until validate`"),
            "{message}"
        );
        let message = split_not_prepared("holdout", data, &["train"]);
        assert!(
            message.starts_with(
                "--split holdout: data was prepared with the split train only; add \"holdout\""
            ),
            "{message}"
        );
    }
}
