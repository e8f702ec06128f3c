//! The command-line frame: help for every subcommand, exit codes, honest "not implemented".

use crate::support::{avaprep, stderr, stdout};

const SUBCOMMANDS: &[&str] = &[
    "fetch", "extract", "lists", "validate", "train", "predict", "eval", "run", "status", "synth",
    "serve",
];

#[test]
fn every_subcommand_has_help() {
    let dir = tempfile::tempdir().unwrap();
    for subcommand in SUBCOMMANDS {
        let output = avaprep(dir.path())
            .args([subcommand, "--help"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{subcommand} --help failed");
        // Help wraps to the terminal width: compare with whitespace collapsed.
        let text = stdout(&output)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            text.contains("--data-dir"),
            "{subcommand} help lacks global flags:\n{text}"
        );
        assert!(
            text.contains("[default: ./data]"),
            "{subcommand} help lacks the data-dir default"
        );
    }
    let run_help = stdout(
        &avaprep(dir.path())
            .args(["run", "--help"])
            .output()
            .unwrap(),
    );
    assert!(run_help.contains("--set <KEY=VALUE>") && run_help.contains("--shard <I/N>"));
}

#[test]
fn usage_error_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let output = avaprep(dir.path()).arg("frobnicate").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let output = avaprep(dir.path())
        .args(["run", "x.toml", "--shard", "5/4"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("not a shard"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn unimplemented_stage_says_so_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let output = avaprep(dir.path()).arg("lists").output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("not implemented yet"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn missing_pipeline_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let output = avaprep(dir.path())
        .args(["run", "pipelines/nope.toml"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("pipelines/nope.toml") && message.contains("cannot read"),
        "{message}"
    );
}

#[cfg(feature = "train")]
#[test]
fn train_runs_the_trainer_with_its_exit_codes_and_says_how_to_build_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let help = stdout(
        &avaprep(dir.path())
            .args(["train", "--help"])
            .output()
            .unwrap(),
    );
    assert!(
        help.contains("--preset") && help.contains("--resume") && help.contains("avaprep train"),
        "{help}"
    );
    // Settings the trainer refuses are usage errors, before any work; the exit code passes on.
    let output = avaprep(dir.path())
        .args(["train", "--set", "clip_frames=6"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("clip_frames"),
        "{}",
        stderr(&output)
    );
    let output = avaprep(dir.path())
        .args(["train", "--set", "schedule.kind=nonsense"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let output = avaprep(dir.path())
        .env("AVAPREP_TRAINER", dir.path().join("no-such-trainer"))
        .args(["train", "--preset", "synthetic-tiny"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("not installed")
            && message.contains("cargo build --release --bin avaprep-train"),
        "{message}"
    );
}

#[cfg(feature = "extract")]
#[test]
fn invalid_extract_options_are_usage_errors_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    for flags in [
        ["--fps", "0"],
        ["--fps", "nan"],
        ["--quality", "32"],
        ["--margin", "-1"],
        ["--margin", "inf"],
        ["--height", "241"],
    ] {
        let output = avaprep(dir.path())
            .arg("extract")
            .args(flags)
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{flags:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(flags[0]),
            "{flags:?}: {}",
            stderr(&output)
        );
    }
}

#[cfg(feature = "extract")]
#[test]
fn a_pipeline_file_with_an_invalid_extract_value_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = crate::support::mirror().join("manifest.toml");
    let output = avaprep(dir.path())
        .args(["run", "pipelines/demo.toml", "--set"])
        .arg(format!("dataset=\"{}\"", manifest.display()))
        .args(["--set", "extract.margin=-1"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(message.contains("[extract] --margin -1"), "{message}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}
