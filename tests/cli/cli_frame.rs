//! The command-line frame: help for every subcommand, exit codes, honest "not implemented".

use crate::support::{avaprep, stderr, stdout};

const SUBCOMMANDS: &[&str] = &[
    "fetch", "extract", "lists", "validate", "train", "eval", "run", "status", "synth", "serve",
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
