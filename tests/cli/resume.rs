//! `avaprep train --resume` continues a run of the data directory with the run's own settings.
//! Before, it looked only in `runs/<preset>` and, finding nothing there, started a fresh R50;
//! and it resumed under the command line's preset, whose 30 epochs replaced the run's 1.

use std::fs;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::invalidation::{assert_ran, workspace};
use crate::support::{avaprep, stderr};

fn train(data: &Path, args: &[&str]) -> Output {
    avaprep(data).arg("train").args(args).output().unwrap()
}

fn refused(output: &Output, said: &str) {
    let message = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.contains(said), "{message}");
}

/// It ran, and said `text`.
fn says(output: &Output, text: &str) {
    assert_ran(output);
    assert!(stderr(output).contains(text), "{}", stderr(output));
}

fn recorded_epochs(run: &Path) -> i64 {
    let config: toml::Table = fs::read_to_string(run.join("config.toml"))
        .unwrap()
        .parse()
        .unwrap();
    config["epochs"].as_integer().unwrap()
}

#[test]
fn resume_continues_the_latest_run_with_its_own_settings_and_never_starts_afresh() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    let data = data.path();
    assert_ran(&workspace.run_until(data, "validate", &[]));

    // Nothing to resume is an error naming what to run, not a fresh start.
    refused(&train(data, &["--resume"]), "train without --resume");
    assert!(!data.join("runs").exists(), "a run was started");

    let one_epoch = ["--set", "epochs=1", "--set", "eval_every=1"];
    let tiny = ["--preset", "synthetic-tiny"];
    assert_ran(&train(data, &[&tiny[..], &one_epoch[..]].concat()));
    let run = data.join("runs/synthetic-tiny");

    // No preset named: the latest run, under its own settings.
    let resumed = train(data, &["--resume"]);
    says(&resumed, "resumed at epoch 1");
    assert_eq!(recorded_epochs(&run), 1);

    // A preset that would change the run's settings is refused, naming each change.
    refused(
        &train(data, &["--resume", "--preset", "synthetic-tiny"]),
        "epochs 1 -> 30",
    );
    assert_eq!(recorded_epochs(&run), 1);

    // A folder without a checkpoint, named: an error, and nothing written into it.
    let empty = tempfile::tempdir().unwrap();
    let named = ["--resume", "--run-dir", empty.path().to_str().unwrap()];
    refused(&train(data, &named), "holds no run to continue");
    assert_eq!(fs::read_dir(empty.path()).unwrap().count(), 0);

    // --set changes a setting on purpose, and says so.
    let longer = train(data, &["--resume", "--set", "epochs=2"]);
    says(&longer, "epochs 1 -> 2");
    assert_eq!(recorded_epochs(&run), 2);
    let summary: serde_json::Value =
        serde_json::from_slice(&fs::read(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["epochs_run"], 2, "{summary}");
    // Weights that record their network start a new run on it whatever the recipe: ava-r50's
    // R50 once matched none of the tiny network's tensors and trained from nothing.
    let weights = fs::read_dir(&run)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            path.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("model-")
        })
        .expect("the run kept its weights");
    let from_weights = data.join("runs/from-weights");
    let init = train(
        data,
        &[
            "--init",
            weights.to_str().unwrap(),
            "--run-dir",
            from_weights.to_str().unwrap(),
            "--set",
            "epochs=1",
            "--set",
            "crop_size=96",
        ],
    );
    says(&init, "building the network");
    let config: toml::Table = fs::read_to_string(from_weights.join("config.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(config["model"].as_str(), Some("tiny"), "{config}");
}

/// The lines of the run's `metrics.jsonl` of one `type`.
fn logged(run: &Path, kind: &str) -> usize {
    fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains(&format!("\"type\":\"{kind}\"")))
        .count()
}

/// `avaprep train` started in the background, once it has logged `batches` more batches.
fn training(data: &Path, run: &Path, args: &[&str], batches: usize) -> std::process::Child {
    let before = logged(run, "batch");
    let mut child = avaprep(data)
        .arg("train")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while logged(run, "batch") < before + batches {
        assert!(Instant::now() < deadline, "no training progress");
        assert!(child.try_wait().unwrap().is_none(), "training ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn interrupt(child: &std::process::Child) {
    // SAFETY: a signal to a child this test started and has not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
}

fn exit_code(mut child: std::process::Child) -> (Option<i32>, String) {
    let mut errors = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut errors).unwrap();
    (child.wait().unwrap().code(), errors)
}

/// Ctrl-C stops a training at a clean point and exits 1, as every command does (it exited 0); a
/// resume keeps every evaluation logged before the checkpoint (it dropped them all: none
/// parsed); a second Ctrl-C ends the training at once with 130 (it crashed, 139).
#[test]
fn ctrl_c_stops_training_with_1_and_a_resume_keeps_its_evaluations() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    let data = data.path();
    assert_ran(&workspace.run_until(data, "validate", &[]));
    let run = data.join("runs/synthetic-tiny");
    let tiny = ["--preset", "synthetic-tiny", "--set", "eval_every=1"];

    let first = training(data, &run, &tiny, 60);
    interrupt(&first);
    let (code, errors) = exit_code(first);
    assert_eq!(code, Some(1), "{errors}");
    assert!(errors.contains("resume to continue"), "{errors}");
    assert!(
        errors.contains(&format!(
            "to continue: `avaprep --data-dir {} train --resume`",
            data.display()
        )),
        "{errors}"
    );
    let evaluations = logged(&run, "eval");
    assert!(
        evaluations >= 1,
        "cancelled before any evaluation: {errors}"
    );

    let checkpoint: serde_json::Value =
        serde_json::from_slice(&fs::read(run.join("checkpoint.json")).unwrap()).unwrap();
    let one_more = format!("epochs={}", checkpoint["epoch"].as_u64().unwrap() + 1);
    // A script (--json) is told what changed as a person is.
    let resumed = train(data, &["--resume", "--set", &one_more, "--json"]);
    assert_ran(&resumed);
    assert_eq!(logged(&run, "eval"), evaluations + 1);
    let told = String::from_utf8_lossy(&resumed.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|record| record["type"] == "resumed_with_changes")
        .unwrap_or_else(|| panic!("no resumed_with_changes record: {}", stderr(&resumed)));
    assert_eq!(told["changed"][0]["key"], "epochs", "{told}");
    assert_eq!(
        told["changed"][0]["after"],
        one_more["epochs=".len()..],
        "{told}"
    );

    let again = training(data, &run, &["--resume", "--set", "epochs=30"], 5);
    interrupt(&again);
    std::thread::sleep(Duration::from_millis(20));
    interrupt(&again);
    let (code, errors) = exit_code(again);
    assert_eq!(code, Some(130), "{errors}");
}
