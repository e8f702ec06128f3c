//! End-to-end tests on the synthetic dataset (frames made by the ffmpeg CLI, see `testing`).
//! Run with `--nocapture` to see the measured numbers.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use tch::Tensor;

use super::checkpoint::{STATE_FILE, read_tensors};
use super::dataset::{Classes, Dataset};
use super::loader::{Augment, Loader, LoaderSpec, PixelFormat, load_batch, train_batches};
use super::testing::synthetic_data;
use super::*;
use avaprep::trainer_protocol::run_files;
use avaprep::trainer_settings::Precision;

/// 7 train, 3 val and 2 test videos: the demo's shape.
const VIDEOS: usize = 12;
const SEED: u64 = 11;

pub(super) fn data() -> &'static Path {
    static DATA: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DATA.get_or_init(|| synthetic_data(VIDEOS, SEED))
}

fn quiet(_: TrainEvent) {}

pub(super) fn printing(event: TrainEvent) {
    match event {
        TrainEvent::Batch { .. } => {}
        other => eprintln!("{}", serde_json::to_string(&other).unwrap()),
    }
}

pub(super) fn config() -> TrainConfig {
    TrainConfig {
        device: "cpu".into(),
        threads: 2,
        ..TrainConfig::synthetic_tiny()
    }
}

/// Mechanics tests need no accuracy: small crops keep them quick.
fn quick() -> TrainConfig {
    TrainConfig {
        crop_size: 64,
        ..config()
    }
}

#[test]
fn loader_is_deterministic_for_any_thread_count_and_fast_enough() {
    let _rng = crate::train::torch_rng_lock();
    let data = Dataset::open(data()).unwrap();
    let split = data.clips(&config(), "train", true).unwrap();
    assert_eq!(
        split.keyframes_without_frames, 0,
        "every keyframe has frames"
    );
    let clips = split.clips;
    let clips = Arc::new(clips);
    let spec = |threads| LoaderSpec {
        crop: 112,
        num_classes: data.classes.len(),
        threads,
        prefetch: 2,
        pixels: PixelFormat::Normalised,
    };
    let augment = Augment::Train {
        seed: 3,
        epoch: 1,
        hflip: true,
    };
    let batches = train_batches(clips.len(), 8, 3, 1)[..4].to_vec();
    let collect = |threads| -> Vec<loader::Batch> {
        Loader::spawn(clips.clone(), batches.clone(), augment, spec(threads))
            .map(Result::unwrap)
            .collect()
    };
    let one = collect(1);
    assert_eq!(one, collect(2));
    assert_eq!(one[0].shape, [8, 3, config().clip_frames, 112, 112]);
    let again = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let direct = again
        .install(|| load_batch(&clips, &batches[0], augment, &spec(2)))
        .unwrap();
    assert_eq!(direct, one[0]);

    let all = train_batches(clips.len(), 8, 3, 2);
    let started = Instant::now();
    let loaded: usize = Loader::spawn(
        clips.clone(),
        all,
        Augment::Train {
            seed: 3,
            epoch: 2,
            hflip: true,
        },
        spec(0),
    )
    .map(|b| b.unwrap().shape[0] as usize)
    .sum();
    let rate = loaded as f64 / started.elapsed().as_secs_f64();
    eprintln!(
        "loader alone: {loaded} clips of {} frames at 112x112 in {:.2} s = {rate:.1} clips/s",
        config().clip_frames,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(loaded, clips.len());
}

/// The clips a GPU run receives as bytes and normalises on its device are, to the bit, the ones
/// the loader normalises for a CPU run (both normalised on the CPU here).
#[test]
fn clips_normalised_on_the_device_equal_the_loaders() {
    let data = Dataset::open(data()).unwrap();
    let clips = data.clips(&config(), "train", true).unwrap().clips;
    let members: Vec<usize> = (0..4).collect();
    let train = Augment::Train {
        seed: 3,
        epoch: 1,
        hflip: true,
    };
    for augment in [train, Augment::Eval] {
        let load = |pixels| {
            let spec = LoaderSpec {
                crop: 112,
                num_classes: data.classes.len(),
                threads: 1,
                prefetch: 1,
                pixels,
            };
            load_batch(&clips, &members, augment, &spec).unwrap()
        };
        let (normalised, bytes) = (load(PixelFormat::Normalised), load(PixelFormat::Bytes));
        assert!(matches!(bytes.clips, loader::Pixels::Bytes(_)));
        assert_eq!(bytes.shape, normalised.shape);
        let on_cpu = |batch| super::net::clips_on(batch, tch::Device::Cpu);
        assert!(on_cpu(&bytes).equal(&on_cpu(&normalised)), "{augment:?}");
    }
}

fn final_weights(run: &Path) -> Vec<(String, Tensor)> {
    let state = TrainState::load(run).unwrap().unwrap();
    let mut tensors = read_tensors(&run.join(state.files.model_file.unwrap())).unwrap();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    tensors
}

fn assert_bitwise_equal(a: &[(String, Tensor)], b: &[(String, Tensor)]) {
    assert_eq!(a.len(), b.len());
    for ((na, ta), (nb, tb)) in a.iter().zip(b) {
        assert_eq!(na, nb);
        assert!(ta.equal(tb), "{na} differs");
    }
}

/// One seed gives the same weights bitwise: run twice, and run in three parts (stopped, cancelled
/// mid-epoch, resumed).
#[test]
fn repeated_and_resumed_runs_end_with_the_same_weights_bitwise() {
    // Users resume on several threads: bit-for-bit must hold there, not only on one.
    let rng = super::acceptance_tests::torch_lock_on_both_cores();
    let base = TrainConfig {
        epochs: 3,
        eval_every: 100,
        ..quick()
    };
    let straight = tempfile::tempdir().unwrap();
    let never = AtomicBool::new(false);
    train(&base, data(), straight.path(), &never, &quiet).unwrap();

    // Part one: stop after epoch 1 (max_epochs); part two: cancel in the middle of epoch 2;
    // part three: resume to the end. Each part starts from nothing but the run directory.
    let split = tempfile::tempdir().unwrap();
    let first = TrainConfig {
        max_epochs: Some(1),
        ..base.clone()
    };
    train(&first, data(), split.path(), &never, &quiet).unwrap();
    let again = tempfile::tempdir().unwrap();
    train(&first, data(), again.path(), &never, &quiet).unwrap();
    assert_bitwise_equal(&final_weights(split.path()), &final_weights(again.path()));

    // Training into a run directory that holds a run, without --resume, once replaced it.
    let before = std::fs::read(again.path().join(STATE_FILE)).unwrap();
    let error = train(&first, data(), again.path(), &never, &quiet).unwrap_err();
    assert!(matches!(error, TrainError::RunExists(_)), "{error}");
    let message = error.to_string();
    // `--resume` alone would continue the data directory's latest run, perhaps another.
    assert!(
        message.contains(&format!(
            "continue it with `--resume --run-dir {}`",
            again.path().display()
        )),
        "{message}"
    );
    assert_eq!(
        std::fs::read(again.path().join(STATE_FILE)).unwrap(),
        before
    );

    let cancel = AtomicBool::new(false);
    let resume = TrainConfig {
        resume: true,
        ..base.clone()
    };
    let cancel_mid_epoch = |event: TrainEvent| {
        if let TrainEvent::Batch {
            epoch: 1, batch: 3, ..
        } = event
        {
            cancel.store(true, Ordering::Relaxed);
        }
    };
    let summary = train(&resume, data(), split.path(), &cancel, &cancel_mid_epoch).unwrap();
    assert!(
        matches!(summary.reason, StopReason::Cancelled { epoch: 1, .. }),
        "{:?}",
        summary.reason
    );
    let summary = train(&resume, data(), split.path(), &never, &quiet).unwrap();
    assert_eq!(summary.reason, StopReason::Completed { epochs: 3 });
    assert_bitwise_equal(
        &final_weights(straight.path()),
        &final_weights(split.path()),
    );
    let straight_metrics = std::fs::read_to_string(straight.path().join("metrics.csv")).unwrap();
    let split_metrics = std::fs::read_to_string(split.path().join("metrics.csv")).unwrap();
    let losses = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("batch"))
            .map(|l| l.split(',').nth(4).unwrap().to_string())
            .collect()
    };
    assert_eq!(
        losses(&straight_metrics),
        losses(&split_metrics),
        "the same batch losses"
    );
    drop(rng);
    // The resumed run's one event file holds exactly what metrics.jsonl kept, nothing the
    // cancelled part logged after its checkpoint; that keeps the evaluation part one made when
    // it stopped (a resume once dropped every evaluation).
    let evaluations = |run: &Path| logged_scalars(run).1;
    assert_eq!(evaluations(split.path()), evaluations(straight.path()) + 1);
    for run in [straight.path(), split.path()] {
        assert_eq!(
            tensorboard_events(run)["scalars"].as_u64(),
            Some(logged_scalars(run).0)
        );
    }
}

/// The TensorBoard scalars `metrics.jsonl` records (three a batch, two an epoch, the mAP and
/// each AP an evaluation), and its evaluations.
fn logged_scalars(run: &Path) -> (u64, usize) {
    let text = std::fs::read_to_string(run.join(metrics::JSONL)).unwrap();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let scalars = records
        .iter()
        .map(|record| match record["type"].as_str().unwrap() {
            "batch" => 3,
            "epoch" => 2,
            _ => {
                let aps = record["ap"].as_object().unwrap().values();
                u64::from(!record["map"].is_null()) + aps.filter(|ap| !ap.is_null()).count() as u64
            }
        })
        .sum();
    let evaluations = records
        .iter()
        .filter(|record| record["type"] == "eval")
        .count();
    (scalars, evaluations)
}

#[test]
fn absurd_lr_stops_with_a_clear_error_and_keeps_the_last_checkpoint() {
    let _rng = crate::train::torch_rng_lock();
    let run = tempfile::tempdir().unwrap();
    let never = AtomicBool::new(false);
    let good = TrainConfig {
        epochs: 3,
        max_epochs: Some(1),
        eval_every: 100,
        ..quick()
    };
    train(&good, data(), run.path(), &never, &quiet).unwrap();
    let before = TrainState::load(run.path()).unwrap().unwrap();
    let absurd = TrainConfig {
        lr: 1e30,
        warmup_epochs: 0.0,
        grad_clip: None,
        max_epochs: None,
        resume: true,
        ..good
    };
    let error = train(&absurd, data(), run.path(), &never, &quiet).unwrap_err();
    eprintln!("{error}");
    assert!(
        matches!(error, TrainError::NonFiniteLoss { epoch: 2, .. }),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("checkpoint after epoch 1 is intact"),
        "{error}"
    );
    let after = TrainState::load(run.path()).unwrap().unwrap();
    assert_eq!(after.step, before.step);
    assert_eq!(
        final_weights(run.path()).len(),
        read_tensors(&run.path().join(before.files.model_file.unwrap()))
            .unwrap()
            .len()
    );
    // A run that diverges before its first checkpoint says it has none.
    let fresh = tempfile::tempdir().unwrap();
    let from_nothing = TrainConfig {
        resume: false,
        ..absurd
    };
    let error = train(&from_nothing, data(), fresh.path(), &never, &quiet).unwrap_err();
    assert!(
        error.to_string().contains("no checkpoint was written yet"),
        "{error}"
    );
}

#[test]
fn early_stopping_ends_a_plateaued_run() {
    let rng = crate::train::torch_rng_lock();
    let run = tempfile::tempdir().unwrap();
    let never = AtomicBool::new(false);
    let flat = TrainConfig {
        lr: 1e-7,
        warmup_start_lr: 1e-7,
        epochs: 10,
        eval_every: 1,
        patience: 2,
        min_delta: 0.01,
        ..quick()
    };
    let summary = train(&flat, data(), run.path(), &never, &printing).unwrap();
    drop(rng);
    eprintln!("plateau: {}", summary.reason);
    // BatchNorm statistics still move at this LR, so the plateau is noisy: the test checks the
    // rule, not one epoch.
    let StopReason::EarlyStopped {
        epoch,
        best_epoch,
        patience,
        ..
    } = summary.reason
    else {
        panic!("not stopped early: {:?}", summary.reason);
    };
    assert!(epoch < 10 && epoch == best_epoch + patience && patience == 2);
    assert_eq!(summary.epochs_run, epoch);
    // The best checkpoint, loaded and evaluated again at the end, gives the mAP it was kept for.
    let (best_map, best_at) = summary.best.unwrap();
    assert_eq!(best_at, best_epoch);
    let final_map = summary.best_weights_map.unwrap();
    assert!(
        (final_map - best_map).abs() < 1e-9,
        "best weights: {final_map} at the end, {best_map} at epoch {best_at}"
    );
    for file in [
        "detections.csv",
        "metrics.csv",
        "metrics.jsonl",
        "curves.png",
        "config.json",
        "eval.json",
    ] {
        assert!(run.path().join(file).exists(), "{file}");
    }
    let saved: TrainSummary =
        serde_json::from_slice(&std::fs::read(run.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(saved.epochs_run, summary.epochs_run);
    // Named in the run folder, whatever path the folder was given.
    assert_eq!(
        saved.detections.as_deref(),
        Some(Path::new("detections.csv"))
    );
    let events = tensorboard_events(run.path());
    assert!(
        events["config"].as_str().unwrap().contains("patience = 2"),
        "{events}"
    );

    // Resumed with a larger patience, it goes on, and stops by that patience (or at the end).
    let rng = crate::train::torch_rng_lock();
    let patient = TrainConfig {
        patience: 4,
        resume: true,
        ..flat
    };
    let resumed = train(&patient, data(), run.path(), &never, &printing).unwrap();
    drop(rng);
    assert!(resumed.epochs_run > epoch, "{}", resumed.reason);
    match resumed.reason {
        StopReason::EarlyStopped {
            epoch,
            best_epoch,
            patience,
            ..
        } => assert!(
            epoch == best_epoch + 4 && patience == 4,
            "{}",
            resumed.reason
        ),
        StopReason::Completed { epochs } => assert_eq!(epochs, 10),
        other => panic!("{other}"),
    }
}

/// TensorBoard's own reader on the run's event files, every scalar compared with `metrics.jsonl`
/// (`tests/support/tensorboard_events.py`); the script's summary.
fn tensorboard_events(run: &Path) -> serde_json::Value {
    let root = crate::train::testing::repo_root();
    let output = std::process::Command::new(reference_python())
        .arg(root.join("tests/support/tensorboard_events.py"))
        .arg(run)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "tensorboard_events.py: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let records = std::fs::read_to_string(run.join(metrics::JSONL)).unwrap();
    let batches = records.lines().filter(|l| l.contains("\"batch\"")).count();
    // Three scalars a batch, two an epoch, the mAP and APs an evaluation.
    assert!(
        summary["scalars"].as_u64().unwrap() as usize >= 3 * batches && batches > 0,
        "{summary}"
    );
    assert_eq!(summary["files"].as_array().unwrap().len(), 1, "{summary}");
    summary
}

/// A frame that a val clip needs, deleted after extraction, once surfaced only when evaluation
/// reached it, a whole epoch later: it stops the run before the first step, naming the video.
#[test]
fn missing_frames_stop_training_before_the_first_step() {
    let copy = tempfile::tempdir().unwrap();
    copy_tree(data(), copy.path());
    let video = first_val_video(copy.path());
    let frames = copy.path().join("frames").join(video.as_str());
    let mut names: Vec<_> = std::fs::read_dir(&frames)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    names.sort();
    for frame in &names[names.len() / 3..] {
        std::fs::remove_file(frame).unwrap();
    }
    let run = tempfile::tempdir().unwrap();
    let never = AtomicBool::new(false);
    let torch = crate::train::torch_rng_lock();
    let error = train(&quick(), copy.path(), run.path(), &never, &quiet).unwrap_err();
    drop(torch);
    let message = error.to_string();
    assert!(
        matches!(error, TrainError::FramesMissing { .. }),
        "{message}"
    );
    assert!(message.contains(video.as_str()), "{message}");
    assert!(message.contains("avaprep extract"), "{message}");
    assert!(!run.path().join(STATE_FILE).exists(), "training started");
}

/// An evaluation that fails (a val video's frames vanish during the epoch) loses no training: the
/// checkpoint before it holds the epoch, and `--resume` evaluates that epoch first instead of
/// going on to the next one without it.
#[test]
fn a_failed_evaluation_is_redone_first_on_resume() {
    let copy = tempfile::tempdir().unwrap();
    copy_tree(data(), copy.path());
    let video = first_val_video(copy.path());
    let frames = copy.path().join("frames").join(video.as_str());
    let config = TrainConfig {
        epochs: 2,
        warmup_epochs: 0.0,
        eval_every: 1,
        ..quick()
    };
    let run = tempfile::tempdir().unwrap();
    let never = AtomicBool::new(false);
    let _torch = crate::train::torch_rng_lock();
    let remove_at_epoch_end = |event: TrainEvent| {
        if let TrainEvent::EpochEnd { epoch: 1, .. } = event {
            std::fs::remove_dir_all(&frames).unwrap();
        }
    };
    let failed = train(
        &config,
        copy.path(),
        run.path(),
        &never,
        &remove_at_epoch_end,
    );
    assert!(failed.is_err(), "evaluation should fail without the frames");
    let state = checkpoint::TrainState::load(run.path()).unwrap().unwrap();
    assert_eq!((state.epoch, state.pending_evaluation), (1, true));

    copy_tree(&data().join("frames"), &copy.path().join("frames"));
    let events = std::sync::Mutex::new(Vec::new());
    let record = |event: TrainEvent| match event {
        TrainEvent::Evaluated { epoch, .. } => events.lock().unwrap().push(("evaluated", epoch)),
        TrainEvent::EpochEnd { epoch, .. } => events.lock().unwrap().push(("trained", epoch)),
        _ => {}
    };
    let resumed = TrainConfig {
        resume: true,
        ..config
    };
    train(&resumed, copy.path(), run.path(), &never, &record).unwrap();
    assert_eq!(
        *events.lock().unwrap(),
        [("evaluated", 1), ("trained", 2), ("evaluated", 2)]
    );
}

/// A resume after the label map changed its class count is refused naming both counts, and the
/// run's settings stay as they were. It once wrote the new settings into the run, then failed
/// with libtorch's shape error.
#[test]
fn a_resume_on_another_count_of_classes_is_refused_and_changes_nothing() {
    let copy = tempfile::tempdir().unwrap();
    copy_tree(data(), copy.path());
    let config = TrainConfig {
        epochs: 1,
        warmup_epochs: 0.0,
        ..quick()
    };
    let run = tempfile::tempdir().unwrap();
    let never = AtomicBool::new(false);
    let _torch = crate::train::torch_rng_lock();
    train(&config, copy.path(), run.path(), &never, &quiet).unwrap();
    let settings = std::fs::read(run.path().join(run_files::CONFIG_TOML)).unwrap();
    let plan = avaprep::records::VideoPlan::load(&copy.path().join("work/videos.json")).unwrap();
    let label_map = copy.path().join("annotations").join(&plan.files.label_map);
    let classes = Classes::read(copy.path(), &plan.files).unwrap().len();
    let mut text = std::fs::read_to_string(&label_map).unwrap();
    text.push_str("label {\n  name: \"jump\"\n  label_id: 99\n  label_type: PERSON_MOVEMENT\n}\n");
    std::fs::write(&label_map, text).unwrap();
    let longer = TrainConfig {
        epochs: 2,
        resume: true,
        ..config
    };
    let error = train(&longer, copy.path(), run.path(), &never, &quiet).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "the run's checkpoint scores {classes} classes, and this dataset's label map now has {}",
            classes + 1
        )),
        "{message}"
    );
    assert!(std::fs::read(run.path().join(run_files::CONFIG_TOML)).unwrap() == settings);
}

fn first_val_video(data: &Path) -> avaprep::annotations::VideoId {
    let plan = avaprep::records::VideoPlan::load(&data.join("work/videos.json")).unwrap();
    plan.videos
        .iter()
        .find(|video| video.split == "val")
        .unwrap()
        .id
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn mixed_precision_needs_cuda_and_auto_is_fp32_on_the_cpu() {
    use super::device::resolve_device;
    let on_cpu = |precision| TrainConfig {
        device: "cpu".into(),
        precision,
        ..TrainConfig::synthetic_tiny()
    };
    for (precision, name) in [(Precision::Fp16, "fp16"), (Precision::Bf16, "bf16")] {
        let error = resolve_device(&on_cpu(precision)).unwrap_err().to_string();
        assert!(
            error.contains(&format!("{name} autocast needs CUDA")),
            "{error}"
        );
    }
    let (device, precision) = resolve_device(&on_cpu(Precision::Auto)).unwrap();
    assert_eq!((device, precision), (tch::Device::Cpu, Precision::Fp32));
}

/// Weights record the action of each output: predicting on a dataset whose label map has as
/// many actions, named otherwise, is refused naming both (its scores would be named wrong), and
/// on the dataset they were trained on it goes on.
#[test]
fn weights_of_other_actions_of_the_same_count_are_refused_by_name() {
    let _rng = crate::train::torch_rng_lock();
    let config = quick();
    let dir = tempfile::tempdir().unwrap();
    let classes = Dataset::open(data()).unwrap().classes;
    let net = super::net::Net::new(&config, classes.len(), tch::Device::Cpu);
    let mut renamed = checkpoint::output_actions(&classes.full);
    renamed[0].1 = "juggle".into();
    let write = |name: &str, actions: &checkpoint::OutputActions| {
        checkpoint::write_weights(dir.path(), name, &net.vs, &net.config, Some(actions)).unwrap();
        dir.path().join(name)
    };
    let cancel = AtomicBool::new(false);
    let out = dir.path().join("val.csv");
    let same = write(
        "same.safetensors",
        &checkpoint::output_actions(&classes.full),
    );
    assert!(predict(&config, data(), &same, "val", &out, &cancel).is_ok());

    let other = write("other.safetensors", &renamed);
    let error = predict(&config, data(), &other, "val", &out, &cancel)
        .unwrap_err()
        .to_string();
    let first = &classes.full.labels()[0];
    let (id, name) = (first.id.0, &first.name);
    assert!(
        error.contains(&format!("trained on the actions {id} juggle"))
            && error.contains(&format!("this dataset's label map has {id} {name}")),
        "{error}"
    );
}

/// `predict --out` names a file the user chose: a link is written through to its target, a
/// character device or FIFO in place, never replaced by a regular file.
#[test]
fn predictions_are_written_through_links_devices_and_fifos() {
    use std::os::unix::fs::FileTypeExt;
    let _rng = crate::train::torch_rng_lock();
    let config = quick();
    let dir = tempfile::tempdir().unwrap();
    let classes = Dataset::open(data()).unwrap().classes.len();
    let net = super::net::Net::new(&config, classes, tch::Device::Cpu);
    let weights = "initial.safetensors";
    checkpoint::write_weights(dir.path(), weights, &net.vs, &net.config, None).unwrap();
    let weights = dir.path().join(weights);
    let cancel = AtomicBool::new(false);
    let run = |out: &Path| predict(&config, data(), &weights, "val", out, &cancel).unwrap();

    let plain = dir.path().join("val.csv");
    let summary = run(&plain);
    let expected = std::fs::read(&plain).unwrap();
    assert_eq!(
        expected.iter().filter(|&&b| b == b'\n').count(),
        summary.rows
    );

    let results = dir.path().join("results");
    std::fs::create_dir(&results).unwrap();
    let link = dir.path().join("latest.csv");
    std::os::unix::fs::symlink("results/val.csv", &link).unwrap();
    run(&link);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(results.join("val.csv")).unwrap(), expected);

    let fifo = dir.path().join("pipe");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    run(&fifo);
    assert_eq!(reader.join().unwrap(), expected);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());

    // The null device's numbers in a folder of our own (root, as CI runs); else /dev/null.
    let device = dir.path().join("device");
    let c_path = std::ffi::CString::new(device.as_os_str().as_encoded_bytes()).unwrap();
    let made = unsafe { libc::mknod(c_path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    let device = if made == 0 {
        device
    } else {
        Path::new("/dev/null").to_path_buf()
    };
    run(&device);
    assert!(
        std::fs::metadata(&device)
            .unwrap()
            .file_type()
            .is_char_device()
    );
}
