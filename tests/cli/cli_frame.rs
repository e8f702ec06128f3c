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
    // A script asking for JSON gets the usage error as a record too, whoever finds it: clap
    // (an unknown flag, here the trainer's) or the command.
    for words in [
        &["--json", "fetch", "--bogus"][..],
        &["--json", "train", "--bogus"],
        &["--json", "run", "x.toml", "--shard", "5/4"],
    ] {
        let output = avaprep(dir.path()).args(words).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{words:?}");
        let record: serde_json::Value = serde_json::from_str(stdout(&output).trim())
            .unwrap_or_else(|_| panic!("{words:?}: one JSON record, not {}", stdout(&output)));
        assert_eq!(record["type"], "error", "{record}");
        assert_eq!(record["exit_code"], 2, "{record}");
        let message = record["message"].as_str().unwrap();
        assert!(
            message.contains("--bogus") || message.contains("not a shard"),
            "{message}"
        );
    }
}

/// A data directory whose path is not UTF-8 cannot be written into PySlowFast's and mmaction2's
/// configs: refused before any work (exit 2), from the flag or the environment. Before, `run`
/// and `lists` panicked (exit 101) and configs got a U+FFFD-mangled path.
#[test]
fn a_data_directory_path_that_is_not_utf8_is_refused() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = tempfile::tempdir().unwrap();
    let strange = dir.path().join(std::ffi::OsStr::from_bytes(b"data-\xff"));
    for command in [&["lists"][..], &["run", "pipelines/demo.toml"][..]] {
        let output = avaprep(&strange).args(command).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{command:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains("--data-dir") && stderr(&output).contains("not UTF-8"),
            "{}",
            stderr(&output)
        );
    }
    let mut from_environment = std::process::Command::new(env!("CARGO_BIN_EXE_avaprep"));
    from_environment
        .env("AVAPREP_DATA_DIR", &strange)
        .arg("lists")
        .current_dir(dir.path());
    let output = from_environment.output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("UTF-8"), "{}", stderr(&output));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing made"
    );
}

#[test]
fn validate_before_lists_says_what_to_run() {
    let dir = tempfile::tempdir().unwrap();
    let output = avaprep(dir.path()).arg("validate").output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(&format!(
            "run `avaprep --data-dir {} lists`",
            dir.path().display()
        )),
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
            && message.contains("cargo build --release -p avaprep-train"),
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
        // The extractor's own limit, refused by the command before any work.
        ["--fps", "2000"],
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
    // A configuration value is a usage error, as the same value given as a flag is.
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("[extract] margin -1"), "{message}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

/// `[train]` and `[eval]` are checked whole when the pipeline file is read, by `run` and
/// `status` alike: a typo in a key, a value of the wrong type or range, an unknown preset or a
/// split the pipeline does not fetch is a usage error naming it, before anything is written
/// (it used to surface when the train stage started, after the downloads and the extraction).
#[test]
fn a_train_or_eval_typo_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = crate::support::mirror().join("manifest.toml");
    let cases = [
        (
            "train.settings.epochz=3",
            "[train] settings: unknown field `epochz`",
        ),
        ("train.settings.epochs=-3", "`epochs`"),
        ("train.settings.epochs=\"two\"", "`epochs`"),
        (
            "train.settings.crop_size=100",
            "crop_size must be a multiple of 16",
        ),
        (
            "train.preset=\"synthetic-tinyy\"",
            "unknown preset \"synthetic-tinyy\"",
        ),
        (
            "eval.splits=[\"vall\"]",
            "[eval] splits: \"vall\" is not a split of the dataset",
        ),
        (
            "train.settings.val_split=\"vall\"",
            "settings.val_split: \"vall\"",
        ),
        (
            "splits=[\"train\", \"vall\"]",
            "splits: \"vall\" is not a split of the dataset (it has: test, train, val)",
        ),
        // A split name becomes a file name: one that is not plain is refused where it is read.
        ("splits=[\"../val\"]", "`../val` is not a split name"),
        ("eval.splits=[\"a/b\"]", "`a/b` is not a split name"),
        (
            "train.settings.train_split=\"t v\"",
            "`t v` is not a split name",
        ),
    ];
    for command in ["run", "status"] {
        for (assignment, said) in cases {
            let output = avaprep(dir.path())
                .args([command, "pipelines/demo.toml", "--set"])
                .arg(format!("dataset=\"{}\"", manifest.display()))
                .args(["--set", assignment])
                .output()
                .unwrap();
            let message = stderr(&output);
            assert_eq!(
                output.status.code(),
                Some(2),
                "{command} {assignment}: {message}"
            );
            assert!(
                message.contains(said) && message.contains("demo.toml"),
                "{command} {assignment}: {message}"
            );
        }
    }
    // A run that stops before training still has its whole file checked.
    let output = avaprep(dir.path())
        .args(["run", "pipelines/demo.toml", "--until", "lists", "--set"])
        .arg(format!("dataset=\"{}\"", manifest.display()))
        .args(["--set", "train.settings.epochz=3"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("unknown field `epochz`"));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

/// Mirrors that are not HTTP(S) URLs, and a video start past the segment, are usage errors
/// naming the key, before anything is downloaded or written.
#[test]
fn bad_mirrors_and_video_starts_are_usage_errors_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    for base_url in [
        "not a url",
        "file:///srv/ava",
        "ftp://mirror.example/ava",
        "ava=file:///x",
    ] {
        let output = avaprep(dir.path())
            .args(["fetch", "--annotations-only", "--base-url", base_url])
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{base_url}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains("--base-url"),
            "{}",
            stderr(&output)
        );
    }
    let output = avaprep(dir.path())
        .args(["run", "pipelines/ava22-on-disk.toml"])
        .args(["--set", "fetch.video_start=1e300"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("[fetch] video_start 1e300"), "{message}");
    let output = avaprep(dir.path())
        .args([
            "run",
            "pipelines/ava22-subset20.toml",
            "--set",
            "fetch.base_url=[\"file:///x\"]",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

/// A split the dataset does not have is a usage error before the model is built, and a
/// directory named for the detections is refused before any work.
#[cfg(feature = "extract")]
#[test]
fn predict_refuses_an_unknown_split_and_a_directory_as_usage_errors() {
    let data = crate::extract::fetched_data();
    let out = data.path().join("detections.csv");
    let predict = |split: &str, out: &std::path::Path| {
        avaprep(data.path())
            .args([
                "predict",
                "--weights",
                "none.safetensors",
                "--split",
                split,
                "--out",
            ])
            .arg(out)
            .output()
            .unwrap()
    };
    let output = predict("vall", &out);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("--split vall") && message.contains("train, val"),
        "{message}"
    );
    let output = predict("val", data.path());
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("is a directory"),
        "{}",
        stderr(&output)
    );
    // A known split gets as far as the weights, which are named.
    let output = predict("val", &out);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("none.safetensors: no such file"),
        "{}",
        stderr(&output)
    );
    assert!(!out.exists());
}

fn eval_with(detections: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d.csv");
    std::fs::write(&file, detections).unwrap();
    let ava = crate::support::repo_root().join("tests/data/ava");
    avaprep(dir.path())
        .arg("eval")
        .arg("--detections")
        .arg(&file)
        .arg("--groundtruth")
        .arg(ava.join("ava_val_v2.2.first50.csv"))
        .arg("--labelmap")
        .arg(ava.join("ava_action_list_v2.2_for_activitynet_2019.pbtxt"))
        .output()
        .unwrap()
}

/// An eval error once read `d.csv:1: ...: d.csv:1: ...`.
#[test]
fn an_error_says_its_cause_once() {
    let output = eval_with("not a detection\n");
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert_eq!(message.matches("d.csv:1").count(), 1, "{message}");
}

/// An empty detections file once scored 0.00 without a word.
#[test]
fn eval_says_when_there_is_no_detection_to_score() {
    let output = eval_with("");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("has no detection of a scored class"),
        "{}",
        stderr(&output)
    );
}

#[cfg(feature = "extract")]
/// With no plan, `extract` once said `work/videos.json: No such file or directory`.
#[test]
fn extract_without_a_plan_names_the_command_to_run_first() {
    let dir = tempfile::tempdir().unwrap();
    let output = avaprep(dir.path())
        .args(["extract", "--fps", "5"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output) + &stdout(&output);
    assert!(text.contains("run `avaprep fetch` first"), "{text}");
    // The stage failed before it had items: it once said "1 of 0 items failed".
    assert!(!text.contains("of 0 items"), "{text}");
}

#[cfg(feature = "extract")]
/// A damaged state file once drew the same warning twice.
#[test]
fn a_damaged_state_file_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join(".avaprep/state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("extract.json"), b"{ not json").unwrap();
    let output = avaprep(dir.path())
        .args(["extract", "--fps", "5"])
        .output()
        .unwrap();
    let text = stderr(&output) + &stdout(&output);
    assert_eq!(text.matches("moved it to").count(), 1, "{text}");
}

/// A split the dataset does not have is a usage error naming the ones it has, and a name that is
/// not plain one naming it, before anything is fetched.
#[test]
fn an_unknown_split_is_a_usage_error_naming_the_dataset_s_splits() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = crate::support::mirror().join("manifest.toml");
    let cases = [
        (
            "foo",
            "\"foo\" is not a split of the dataset (it has: test, train, val)",
        ),
        ("train,../val", "`../val` is not a split name"),
    ];
    for (splits, said) in cases {
        let output = avaprep(dir.path())
            .args(["fetch", "--split", splits, "--dataset"])
            .arg(&manifest)
            .output()
            .unwrap();
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{message}");
        assert!(message.contains(said), "{message}");
        assert!(!dir.path().join("annotations").exists());
    }
}

/// `status` with no pipeline named, where the demo's is not: it named pipelines/demo.toml as if
/// the user had given it.
#[test]
fn status_without_a_pipeline_asks_for_one_where_the_demo_s_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let output = avaprep(dir.path())
        .current_dir(dir.path())
        .arg("status")
        .output()
        .unwrap();
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(
        message.contains("`avaprep status PIPELINE`") && !message.contains("cannot read"),
        "{message}"
    );
}
