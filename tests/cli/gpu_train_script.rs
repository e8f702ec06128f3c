//! `scripts/bench/gpu-train.sh` on the CPU, so it is ready the day a GPU is lent: the tiny network
//! for two steps on the miniature's frames. Both sides must build the same model and loss from the
//! same weights and batch: avaprep's trainer and pytorchvideo's detector with the weights avaprep
//! exports agree on the first step's loss to 1e-4 (the script checks it too), and every figure the
//! GPU run reports is printed.

use std::path::Path;
use std::process::Command;

use crate::invalidation::{assert_ran, workspace};
use crate::support::{repo_root, stderr, stdout};

/// The value after `label` in `text`, up to the next comma.
fn value_after(text: &str, label: &str) -> f64 {
    let start = text
        .find(label)
        .unwrap_or_else(|| panic!("no `{label}` in:\n{text}"))
        + label.len();
    let rest = &text[start..];
    let end = rest.find(',').unwrap_or(rest.len());
    rest[..end]
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("`{label}` in:\n{text}"))
}

#[test]
fn the_gpu_training_benchmark_runs_on_the_cpu_and_both_sides_agree_on_the_first_loss() {
    let workspace = workspace();
    let data = tempfile::tempdir().unwrap();
    assert_ran(&workspace.run_until(data.path(), "lists", &[]));
    let trainer = Path::new(env!("CARGO_BIN_EXE_avaprep"))
        .parent()
        .unwrap()
        .join("avaprep-train");
    let output = Command::new(repo_root().join("scripts/bench/gpu-train.sh"))
        .arg(data.path())
        .env("TRAINER", &trainer)
        .env("NO_BUILD", "1")
        .env("DEVICE", "cpu")
        .env("PRESET", "synthetic-tiny")
        .env("STEPS", "2")
        .env("WARMUP", "1")
        .env("ROUNDS", "1")
        .output()
        .unwrap();
    let printed = stdout(&output);
    assert!(output.status.success(), "{printed}\n{}", stderr(&output));
    let losses = printed
        .lines()
        .find(|line| line.contains("first-step loss:"))
        .unwrap_or_else(|| panic!("no first-step losses in:\n{printed}"));
    let ours = value_after(losses, "first-step loss: avaprep");
    let reference = value_after(losses, ", pytorch");
    assert!(
        (ours - reference).abs() <= 1e-4 && ours > 0.0,
        "first losses {ours} and {reference}:\n{printed}"
    );
    for figure in [
        "clips/s, ratio",
        "projected at avaprep's rate",
        "loader alone",
    ] {
        assert!(printed.contains(figure), "no `{figure}` in:\n{printed}");
    }
}
