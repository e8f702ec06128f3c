//! `scripts/bench/gpu-train.sh` on the CPU, so it is ready the day a GPU is lent: the tiny network
//! for a few steps on the miniature's frames. Both sides must build the same model, loss and
//! optimizer from the same weights and batches: avaprep's trainer and pytorchvideo's detector with
//! the weights avaprep exports agree on the first step's logits and the first two steps' losses
//! (the second after an update) to 1e-4 (the script checks it too), and the figures a CPU run
//! reports (speed, ratio, projection, loader) are printed. The data is the miniature's taken twice
//! (`COPIES=2`, as a GPU run takes the demo's 12 times): the trainer must find twice its clips.
//!
//! It runs as on a GPU machine with neither Rust nor pytorchvideo: from the folder
//! `scripts/bench/gpu-bundle.sh` makes (the trainer, the PyTorch side's packages, the dataset),
//! with a Python that has torch and torchvision only.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::invalidation::{assert_ran, workspace};
use crate::support::{repo_root, stderr, stdout};

/// The numbers of a line, in order, punctuation around them dropped.
fn numbers(line: &str) -> Vec<f64> {
    line.split_whitespace()
        .filter_map(|word| word.trim_matches(|c| ",;()".contains(c)).parse().ok())
        .collect()
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
    let once = Command::new(&trainer)
        .arg("--data-dir")
        .arg(data.path())
        .args(["--json", "bench", "train", "--preset", "synthetic-tiny"])
        .args(["--steps", "1", "--warmup", "2"])
        .output()
        .unwrap();
    assert_ran(&once);
    let clips_once = stdout(&once)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|record| record["type"] == "bench_train")
        .and_then(|record| record["train_clips"].as_f64())
        .unwrap_or_else(|| panic!("no bench_train record in {}", stdout(&once)));

    let scratch = tempfile::tempdir().unwrap();
    let bundle = scratch.path().join("bundle");
    let bundled = Command::new(repo_root().join("scripts/bench/gpu-bundle.sh"))
        .arg(data.path())
        .arg(&bundle)
        .env("TRAINER", &trainer)
        .env("NO_BUILD", "1")
        .output()
        .unwrap();
    assert_ran(&bundled);
    let python = python_with_torch_only(scratch.path());
    let output = Command::new(repo_root().join("scripts/bench/gpu-train.sh"))
        .arg(bundle.join("data"))
        .env("COPIES", "2")
        .env("TRAINER", bundle.join("avaprep-train"))
        .env("PY", &python)
        .env("PYTHONPATH", bundle.join("python"))
        .env("NO_BUILD", "1")
        .env("DEVICE", "cpu")
        .env("PRESET", "synthetic-tiny")
        .env("STEPS", "2")
        .env("WARMUP", "2")
        .env("ROUNDS", "1")
        .output()
        .unwrap();
    let printed = stdout(&output);
    assert!(output.status.success(), "{printed}\n{}", stderr(&output));
    let first_steps = printed
        .lines()
        .find(|line| line.contains("first steps: losses avaprep"))
        .unwrap_or_else(|| panic!("no first steps in:\n{printed}"));
    let [ours_1, ours_2, reference_1, reference_2, logits, ..] = numbers(first_steps)[..] else {
        panic!("{first_steps}");
    };
    for (ours, reference) in [(ours_1, reference_1), (ours_2, reference_2)] {
        assert!(
            (ours - reference).abs() <= 1e-4 && ours > 0.0,
            "losses {ours} and {reference}:\n{printed}"
        );
    }
    assert!(logits <= 1e-4, "{first_steps}");
    let speeds = printed
        .lines()
        .find(|line| line.contains("train clips: avaprep"))
        .unwrap_or_else(|| panic!("no speeds in:\n{printed}"));
    let clips_twice = numbers(speeds)[1];
    assert_eq!(clips_twice, 2.0 * clips_once, "{speeds}");
    for figure in [
        "clips/s, ratio",
        "projected at avaprep's rate",
        "loader alone",
    ] {
        assert!(printed.contains(figure), "no `{figure}` in:\n{printed}");
    }
}

/// The Python of a machine where only torch and torchvision were installed: .venv's interpreter
/// without its site machinery, on a folder of links to those two and what they require.
fn python_with_torch_only(scratch: &Path) -> PathBuf {
    let venv_python = repo_root().join(".venv/bin/python");
    let site = scratch.join("torch-only-site");
    let linked = Command::new(&venv_python)
        .arg(repo_root().join("scripts/bench/reference_packages.py"))
        .arg("torch-only")
        .arg(&site)
        .output()
        .unwrap();
    assert_ran(&linked);
    let python = scratch.join("python-with-torch-only");
    let script = format!(
        "#!/bin/sh\nPYTHONPATH='{}'${{PYTHONPATH:+:$PYTHONPATH}} exec '{}' -S \"$@\"\n",
        site.display(),
        venv_python.display()
    );
    std::fs::write(&python, script).unwrap();
    std::fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // What the bundle must bring is not there (the stand-in and the bundle's exclusions come from
    // the same list of torch's requirements, so it is checked here by name).
    let modules = [
        ("torchvision", true),
        ("pytorchvideo", false),
        ("fvcore", false),
        ("safetensors", false),
        ("tqdm", false),
    ];
    for (module, found) in modules {
        let imported = Command::new(&python)
            .args(["-c", &format!("import {module}")])
            .output()
            .unwrap();
        assert_eq!(
            imported.status.success(),
            found,
            "import {module}: {}",
            stderr(&imported)
        );
    }
    python
}
