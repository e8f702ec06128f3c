//! Model tests: parameter counts, init, frame selection, autograd end to end, and equivalence with
//! pytorchvideo and torchvision (through `scripts/reference_model.py`).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use tch::nn::OptimizerConfig;
use tch::{Device, Kind, Tensor, nn};

use super::*;

fn count_parameters(cfg: &SlowFastConfig) -> i64 {
    let vs = nn::VarStore::new(Device::Cpu);
    let _model = SlowFast::new(&vs.root(), cfg);
    vs.trainable_variables()
        .iter()
        .map(Tensor::numel)
        .sum::<usize>() as i64
}

#[test]
fn r50_has_the_parameter_count_of_pytorchvideo() {
    let _rng = crate::train::torch_rng_lock();
    // pytorchvideo: create_slowfast_with_roi_head(model_num_class=80, dropout_rate=0.5).
    assert_eq!(count_parameters(&SlowFastConfig::r50_8x8_ava()), 33_828_888);
    // ... and with model_depth=18.
    assert_eq!(count_parameters(&SlowFastConfig::r18_ava()), 11_161_624);
}

#[test]
fn init_follows_pyslowfast() {
    let _rng = crate::train::torch_rng_lock();
    let vs = nn::VarStore::new(Device::Cpu);
    let _model = SlowFast::new(&vs.root(), &SlowFastConfig::r50_8x8_ava());
    let vars = vs.variables();
    let value = |name: &str| {
        vars.get(name)
            .unwrap_or_else(|| panic!("no variable {name}"))
    };
    let all_equal = |t: &Tensor, v: f64| (t - v).abs().max().double_value(&[]) == 0.0;
    assert!(all_equal(
        value("s2.pathway0_res0.branch2.a_bn.weight"),
        1.0
    ));
    assert!(all_equal(
        value("s2.pathway0_res0.branch2.c_bn.weight"),
        0.0
    ));
    assert!(all_equal(value("s1_fuse.bn.weight"), 1.0));
    assert!(all_equal(value("head.projection.bias"), 0.0));
    let std = value("head.projection.weight").std(true).double_value(&[]);
    assert!((std - 0.01).abs() < 0.001, "head std {std}");
    // Kaiming fan-out: std = sqrt(2 / (c_out * kernel volume)) = sqrt(2 / (512 * 9)).
    let conv = value("s5.pathway0_res1.branch2.b.weight");
    let std = conv.std(true).double_value(&[]);
    let expected = (2.0f64 / (512.0 * 9.0)).sqrt();
    assert!(
        (std / expected - 1.0).abs() < 0.02,
        "conv std {std} vs {expected}"
    );
    assert!(!vars.keys().any(|k| k.contains("num_batches_tracked")));
}

#[test]
fn slow_frames_follow_pyslowfast_linspace() {
    let _rng = crate::train::torch_rng_lock();
    assert_eq!(slow_frame_indices(32, 4), [0, 4, 8, 13, 17, 22, 26, 31]);
    assert_eq!(slow_frame_indices(32, 8), [0, 10, 20, 31]);
    assert_eq!(slow_frame_indices(8, 2), [0, 2, 4, 7]);
    assert_eq!(slow_frame_indices(64, 8), [0, 9, 18, 27, 36, 45, 54, 63]);
}

#[test]
fn pack_pathways_selects_along_time_with_or_without_batch() {
    let _rng = crate::train::torch_rng_lock();
    let clip = Tensor::arange(32, (Kind::Int64, Device::Cpu))
        .view([1, 32, 1, 1])
        .expand([3, 32, 2, 2], true);
    let (slow, fast) = pack_pathways(&clip, 4);
    assert_eq!(slow.size(), [3, 8, 2, 2]);
    assert_eq!(fast.size(), [3, 32, 2, 2]);
    let times = Vec::<i64>::try_from(slow.get(1).select(2, 1).select(1, 0)).unwrap();
    assert_eq!(times, [0, 4, 8, 13, 17, 22, 26, 31]);
    let (slow, _) = pack_pathways(&clip.unsqueeze(0), 4);
    assert_eq!(slow.size(), [1, 3, 8, 2, 2]);
    assert!(slow.get(0).equal(&pack_pathways(&clip, 4).0));
}

fn tiny_batch(cfg: &SlowFastConfig) -> (Tensor, Tensor, Tensor) {
    let opts = (Kind::Float, Device::Cpu);
    let fast = Tensor::randn([2, 3, cfg.num_frames, 64, 64], opts);
    let (slow, fast) = pack_pathways(&fast, cfg.alpha);
    let boxes = Tensor::from_slice2(&[
        [0.0f32, 4.0, 6.0, 40.0, 60.0],
        [0.0, 30.0, 2.0, 63.0, 30.0],
        [1.0, 0.0, 0.0, 64.0, 64.0],
        [1.0, 10.0, 20.0, 20.0, 50.0],
    ]);
    (slow, fast, boxes)
}

#[test]
fn tiny_model_trains_on_a_fixed_batch() {
    let _rng = crate::train::torch_rng_lock();
    tch::manual_seed(0);
    let cfg = SlowFastConfig::tiny(5);
    let vs = nn::VarStore::new(Device::Cpu);
    let model = SlowFast::new(&vs.root(), &cfg);
    let (slow, fast, boxes) = tiny_batch(&cfg);
    let targets = Tensor::from_slice2(&[
        [1.0f32, 0.0, 0.0, 1.0, 0.0],
        [0.0, 1.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 1.0, 0.0],
        [0.0, 0.0, 0.0, 0.0, 1.0],
    ]);
    let mut opt = nn::Sgd {
        momentum: 0.9,
        ..Default::default()
    }
    .build(&vs, 0.05)
    .unwrap();
    let mut losses = Vec::new();
    for _ in 0..8 {
        let logits = model.forward_t(&slow, &fast, &boxes, true);
        assert_eq!(logits.size(), [4, 5]);
        let loss = logits.binary_cross_entropy_with_logits::<Tensor>(
            &targets,
            None,
            None,
            tch::Reduction::Mean,
        );
        opt.backward_step(&loss);
        losses.push(loss.double_value(&[]));
    }
    println!("tiny losses: {losses:?}");
    assert!(losses.iter().all(|l| l.is_finite()));
    assert!(losses[7] < 0.8 * losses[0], "loss did not fall: {losses:?}");
    // Every parameter received a gradient, so autograd reaches the stems through RoIAlign.
    for (name, var) in vs.variables() {
        if var.requires_grad() {
            assert!(var.grad().defined(), "no gradient for {name}");
        }
    }
}

#[test]
fn eval_mode_is_deterministic_and_predict_gives_probabilities() {
    let _rng = crate::train::torch_rng_lock();
    tch::manual_seed(1);
    let cfg = SlowFastConfig::tiny(3);
    let vs = nn::VarStore::new(Device::Cpu);
    let model = SlowFast::new(&vs.root(), &cfg);
    let (slow, fast, boxes) = tiny_batch(&cfg);
    let first = model.predict(&slow, &fast, &boxes);
    let second = model.predict(&slow, &fast, &boxes);
    assert!(first.equal(&second));
    assert_eq!(first.size(), [4, 3]);
    assert!(first.min().double_value(&[]) > 0.0 && first.max().double_value(&[]) < 1.0);
}

// ---- Equivalence with the Python references ---------------------------------------------------

/// Runs `scripts/reference_model.py ARGS --out DIR`.
fn run_reference(args: &[&str], out: &Path) -> Option<()> {
    let python = crate::train::reference_python();
    let script = crate::train::testing::repo_root().join("scripts/reference_model.py");
    let status = Command::new(python)
        .arg(script)
        .args(args)
        .arg("--out")
        .arg(out)
        .status()
        .expect("run reference_model.py");
    assert!(status.success(), "reference_model.py {args:?} failed");
    Some(())
}

fn read_tensors(path: &Path) -> HashMap<String, Tensor> {
    Tensor::read_safetensors(path)
        .unwrap()
        .into_iter()
        .collect()
}

/// Max absolute error, and that error relative to the largest reference magnitude.
fn errors(ours: &Tensor, reference: &Tensor) -> (f64, f64) {
    assert_eq!(ours.size(), reference.size());
    let ours = ours.to_kind(Kind::Double);
    let reference = reference.to_kind(Kind::Double);
    let abs = (&ours - &reference).abs().max().double_value(&[]);
    let scale = reference.abs().max().double_value(&[]).max(1e-12);
    (abs, abs / scale)
}

/// Loads pytorchvideo's weights (converted) into our model and compares the logits for both
/// RoIAlign alignments. Python runs before the torch RNG lock is taken, beside other tests'
/// trainings.
fn check_against_pytorchvideo(depth: &str, base: SlowFastConfig) {
    let dir = tempfile::tempdir().unwrap();
    if run_reference(&["model", "--depth", depth], dir.path()).is_none() {
        return;
    }
    let _rng = crate::train::torch_rng_lock();
    let io = read_tensors(&dir.path().join("io.safetensors"));
    let weights = dir.path().join("weights.safetensors");
    let file_names: BTreeSet<String> = read_tensors(&weights).into_keys().collect();
    for (aligned, key) in [(true, "logits_aligned"), (false, "logits_unaligned")] {
        let cfg = SlowFastConfig {
            roi_aligned: aligned,
            ..base.clone()
        };
        let mut vs = nn::VarStore::new(Device::Cpu);
        let model = SlowFast::new(&vs.root(), &cfg);
        vs.load(&weights).unwrap();
        // Same names both ways: nothing converted is left unused.
        let our_names: BTreeSet<String> = vs.variables().into_keys().collect();
        assert_eq!(file_names, our_names);

        let start = Instant::now();
        let logits =
            tch::no_grad(|| model.forward_t(&io["slow"], &io["fast"], &io["boxes"], false));
        let elapsed = start.elapsed();
        let (abs, rel) = errors(&logits, &io[key]);
        println!(
            "R{depth} vs pytorchvideo ({key}): max abs {abs:.3e}, relative {rel:.3e}, forward {elapsed:?}"
        );
        assert!(
            rel < 1e-4,
            "R{depth} logits differ from pytorchvideo: abs {abs}, rel {rel}"
        );
    }
}

#[test]
fn r50_matches_pytorchvideo() {
    check_against_pytorchvideo("50", SlowFastConfig::r50_8x8_ava());
}

#[test]
fn r18_matches_pytorchvideo() {
    check_against_pytorchvideo("18", SlowFastConfig::r18_ava());
}

#[test]
fn converter_reads_pytorchvideo_and_pyslowfast_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["model", "--depth", "18", "--save-checkpoints"];
    if run_reference(&args, dir.path()).is_none() {
        return;
    }
    let expected = read_tensors(&dir.path().join("weights.safetensors"));
    let script = crate::train::testing::repo_root().join("scripts/convert_checkpoint.py");
    let sources = ["pytorchvideo", "pyslowfast"];
    for source in sources {
        let status = Command::new(crate::train::reference_python())
            .arg(&script)
            .arg(dir.path().join(format!("{source}.pyth")))
            .arg(dir.path().join(format!("{source}.safetensors")))
            .status()
            .unwrap();
        assert!(status.success(), "convert_checkpoint.py failed on {source}");
    }
    // Models are built (drawing from libtorch's random generator) once Python is done.
    let _rng = crate::train::torch_rng_lock();
    for source in sources {
        let converted = dir.path().join(format!("{source}.safetensors"));
        let got = read_tensors(&converted);
        let got_names: BTreeSet<&String> = got.keys().collect();
        assert_eq!(got_names, expected.keys().collect(), "{source}");
        for (name, tensor) in &got {
            assert!(tensor.equal(&expected[name]), "{source}: {name} differs");
        }
        // A model built from our config accepts the file.
        let mut vs = nn::VarStore::new(Device::Cpu);
        let _model = SlowFast::new(&vs.root(), &SlowFastConfig::r18_ava());
        vs.load(&converted).unwrap();
    }
    init_skips_a_head_of_another_size(&dir.path().join("pytorchvideo.safetensors"), &expected);
}

/// The weights avaprep writes leave for PySlowFast, pytorchvideo and TorchScript through
/// `scripts/export_checkpoint.py`: both checkpoints come back through `convert_checkpoint.py`
/// bit for bit, and pytorchvideo's model with the exported state dict and the TorchScript module
/// give avaprep's probabilities on the same clip and boxes.
#[test]
fn exported_weights_come_back_and_give_avaprep_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    if run_reference(&["model", "--depth", "18"], dir).is_none() {
        return;
    }
    // The lock covers building the model (libtorch's random generator), not the Python runs.
    let rng = crate::train::torch_rng_lock();
    let io = read_tensors(&dir.join("io.safetensors"));
    // avaprep's network with non-trivial weights (the reference's calibrated BatchNorms),
    // written as the trainer writes its weights: the file records the network.
    let config = SlowFastConfig::r18_ava();
    let mut vs = nn::VarStore::new(Device::Cpu);
    let model = SlowFast::new(&vs.root(), &config);
    vs.load(dir.join("weights.safetensors")).unwrap();
    crate::train::checkpoint::write_weights(dir, "avaprep.safetensors", &vs, &config, None)
        .unwrap();
    let weights = dir.join("avaprep.safetensors");
    let ours = tch::no_grad(|| {
        model
            .forward_t(&io["slow"], &io["fast"], &io["boxes"], false)
            .sigmoid()
    });
    drop(rng);

    let python = crate::train::reference_python();
    let scripts = crate::train::testing::repo_root().join("scripts");
    let exported = |to: &str| {
        let out = dir.join(format!("exported.{to}"));
        let status = Command::new(&python)
            .arg(scripts.join("export_checkpoint.py"))
            .arg(&weights)
            .arg(&out)
            .args(["--to", to])
            .status()
            .unwrap();
        assert!(status.success(), "export_checkpoint.py --to {to} failed");
        out
    };
    let saved = read_tensors(&weights);
    for to in ["pyslowfast", "pytorchvideo"] {
        let back = dir.join(format!("back-{to}.safetensors"));
        let status = Command::new(&python)
            .arg(scripts.join("convert_checkpoint.py"))
            .arg(exported(to))
            .arg(&back)
            .status()
            .unwrap();
        assert!(
            status.success(),
            "convert_checkpoint.py failed on the {to} export"
        );
        let back = read_tensors(&back);
        let names: BTreeSet<&String> = back.keys().collect();
        assert_eq!(names, saved.keys().collect(), "{to}");
        for (name, tensor) in &back {
            assert!(tensor.equal(&saved[name]), "{to}: {name} differs");
        }
    }

    let (pytorchvideo, torchscript) = (exported("pytorchvideo"), exported("torchscript"));
    let status = Command::new(&python)
        .arg(scripts.join("reference_model.py"))
        .arg("exported")
        .arg("--io")
        .arg(dir.join("io.safetensors"))
        .arg("--weights")
        .arg(&weights)
        .arg("--pytorchvideo")
        .arg(pytorchvideo)
        .arg("--torchscript")
        .arg(torchscript)
        .arg("--out")
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success(), "reference_model.py exported failed");
    let theirs = read_tensors(&dir.join("exported.safetensors"));
    for key in ["pytorchvideo", "torchscript"] {
        let (abs, rel) = errors(&ours, &theirs[key]);
        println!("export to {key}: max abs {abs:.3e}, relative {rel:.3e}");
        assert!(
            rel < 1e-5,
            "{key} differs from avaprep: abs {abs}, rel {rel}"
        );
    }
}

/// The networks `export_checkpoint.py --depth` assumes for weights that record none are the ones
/// the trainer builds.
#[test]
fn exporter_fallback_networks_are_the_trainers() {
    use avaprep::trainer_settings::ModelPreset;
    let scripts = crate::train::testing::repo_root().join("scripts");
    let output = Command::new(crate::train::reference_python())
        .arg("-c")
        .arg(
            "import json, sys; sys.path.insert(0, sys.argv[1]); import export_checkpoint as e; \
             print(json.dumps({str(k): v for k, v in e.PRESETS.items()}))",
        )
        .arg(&scripts)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let theirs: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let frames = avaprep::frame_index::DEFAULT_CLIP_FRAMES as i64;
    for (depth, preset) in [("50", ModelPreset::R50_8x8), ("18", ModelPreset::R18)] {
        let ours = serde_json::to_value(preset.build(80, frames)).unwrap();
        assert_eq!(theirs[depth], ours, "--depth {depth}");
    }
}

/// `--init` with pytorchvideo's 80-class weights into a 5-class model: all but the head loads.
fn init_skips_a_head_of_another_size(file: &Path, expected: &HashMap<String, Tensor>) {
    use crate::train::checkpoint::load_initial;
    let five_classes = SlowFastConfig {
        num_classes: 5,
        ..SlowFastConfig::r18_ava()
    };
    let vs = nn::VarStore::new(Device::Cpu);
    let _model = SlowFast::new(&vs.root(), &five_classes);
    let report = load_initial(&vs, file).unwrap();
    let head = ["head.projection.bias", "head.projection.weight"];
    let skipped: Vec<&str> = report.skipped.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(skipped, head);
    let width = expected["head.projection.weight"].size()[1];
    assert_eq!(
        report.skipped[1].reason,
        format!("shape [80, {width}] in the file, [5, {width}] in the model")
    );
    assert!(report.unused.is_empty(), "{:?}", report.unused);
    assert_eq!(report.loaded, vs.variables().len() - 2);
    println!(
        "init: {} loaded, skipped {:?}",
        report.loaded, report.skipped
    );
    let variables = vs.variables();
    for (name, source) in expected
        .iter()
        .filter(|(name, _)| !head.contains(&name.as_str()))
    {
        assert!(variables[name].equal(source), "{name} was not loaded");
    }
    let fresh = &variables["head.projection.weight"];
    assert!(fresh.abs().sum(Kind::Float).double_value(&[]) > 0.0);

    // Weights for another network are refused, not silently ignored.
    let tiny = nn::VarStore::new(Device::Cpu);
    let _model = SlowFast::new(&tiny.root(), &SlowFastConfig::tiny(5));
    let error = load_initial(&tiny, file).unwrap_err().to_string();
    assert!(error.contains("none of its tensors fits"), "{error}");
}

#[test]
fn roi_align_matches_torchvision_forward_and_backward() {
    let dir = tempfile::tempdir().unwrap();
    if run_reference(&["roi-align"], dir.path()).is_none() {
        return;
    }
    let _rng = crate::train::torch_rng_lock();
    let cases = read_tensors(&dir.path().join("roi_align.safetensors"));
    let count = cases.keys().filter(|k| k.ends_with(".params")).count();
    assert!(count >= 5);
    for n in 0..count {
        let get = |name: &str| cases[&format!("case{n}.{name}")].shallow_clone();
        let params = Vec::<f64>::try_from(get("params")).unwrap();
        let spec = RoiAlignSpec {
            output_size: (params[3] as i64, params[4] as i64),
            spatial_scale: params[0],
            sampling_ratio: params[1] as i64,
            aligned: params[2] != 0.0,
        };
        let input = get("input").set_requires_grad(true);
        let output = roi_align(&input, &get("boxes"), spec);
        (&output * get("grad_output")).sum(output.kind()).backward();
        let (abs, rel) = errors(&output, &get("output"));
        let (gabs, grel) = errors(&input.grad(), &get("grad_input"));
        println!(
            "roi_align case {n} ({:?}, {spec:?}): output max abs {abs:.2e} rel {rel:.2e}; grad max abs {gabs:.2e} rel {grel:.2e}",
            input.kind()
        );
        assert!(
            abs < 1e-5 && gabs < 1e-5,
            "roi_align case {n} differs from torchvision"
        );
    }
}

// ---- Timing (run with --ignored --nocapture in release) ---------------------------------------

fn time_step(cfg: &SlowFastConfig, batch: i64, size: i64, boxes_per_clip: i64) {
    tch::manual_seed(0);
    let vs = nn::VarStore::new(Device::Cpu);
    let model = SlowFast::new(&vs.root(), cfg);
    let opts = (Kind::Float, Device::Cpu);
    let fast = Tensor::randn([batch, 3, cfg.num_frames, size, size], opts);
    let (slow, fast) = pack_pathways(&fast, cfg.alpha);
    let k = batch * boxes_per_clip;
    let index = Tensor::arange(k, (Kind::Int64, Device::Cpu))
        .remainder(batch)
        .to_kind(Kind::Float);
    let corners = Tensor::rand([k, 2], opts) * (size as f64 / 2.0);
    let boxes = Tensor::cat(
        &[
            index.unsqueeze(1),
            corners.shallow_clone(),
            corners + size as f64 / 2.0,
        ],
        1,
    );
    for round in 0..2 {
        let start = Instant::now();
        let logits = model.forward_t(&slow, &fast, &boxes, true);
        logits.sum(Kind::Float).backward();
        println!(
            "round {round}: forward+backward, batch {batch}, {}x{size}x{size} fast frames, {k} boxes: {:?}",
            cfg.num_frames,
            start.elapsed()
        );
    }
}

fn time_roi_align(boxes: i64, images: i64, channels: i64) {
    let input = Tensor::randn([images, channels, 14, 14], (Kind::Float, Device::Cpu))
        .set_requires_grad(true);
    let index = Tensor::arange(boxes, (Kind::Int64, Device::Cpu)).remainder(images);
    let corners = Tensor::rand([boxes, 2], (Kind::Float, Device::Cpu)) * 112.0;
    let boxes_t = Tensor::cat(
        &[
            index.to_kind(Kind::Float).unsqueeze(1),
            corners.shallow_clone(),
            corners + 100.0,
        ],
        1,
    );
    let spec = RoiAlignSpec {
        output_size: (7, 7),
        spatial_scale: 1.0 / 16.0,
        sampling_ratio: 0,
        aligned: true,
    };
    for round in 0..2 {
        let start = Instant::now();
        roi_align(&input, &boxes_t, spec)
            .sum(Kind::Float)
            .backward();
        println!(
            "round {round}: roi_align forward+backward, {boxes} boxes on [{images}, {channels}, 14, 14]: {:?}",
            start.elapsed()
        );
    }
}

#[test]
#[ignore = "timing, run explicitly"]
fn timing_forward_backward_cpu() {
    let _rng = crate::train::torch_rng_lock();
    tch::set_num_threads(2);
    time_roi_align(64, 8, 2304);
    time_step(&SlowFastConfig::tiny(80), 2, 64, 4);
    let r50_8x8 = SlowFastConfig::r50_8x8_ava();
    time_step(&r50_8x8, 1, 112, 4);
}
/// `scripts/export_checkpoint.py` refuses what it cannot export in one line that names the file and
/// the problem, with no traceback and nothing written: an OUT that is WEIGHTS (by another spelling,
/// a symbolic or a hard link; or whose OUT.partial is WEIGHTS) or a folder (usage errors, exit 2;
/// WEIGHTS left as it was), and weights whose `avaprep.model` header is malformed or whose tensors
/// are not avaprep's network, or a file that is not safetensors at all (exit 1).
#[test]
fn exporter_refuses_in_one_line_and_writes_nothing() {
    fn listing(dir: &Path) -> BTreeSet<std::path::PathBuf> {
        let mut found = BTreeSet::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && !path.is_symlink() {
                found.extend(listing(&path));
            }
            found.insert(path);
        }
        found
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let python = crate::train::reference_python();
    let script = crate::train::testing::repo_root().join("scripts/export_checkpoint.py");

    // The header the trainer writes, on files that are not its network or whose header is broken.
    let network = serde_json::to_string(&SlowFastConfig::r18_ava()).unwrap();
    let output = Command::new(&python)
        .arg("-c")
        .arg(
            "import json, sys, torch\n\
             from safetensors.torch import save_file\n\
             out, network = sys.argv[1], json.loads(sys.argv[2])\n\
             x = {'x': torch.zeros(2)}\n\
             headers = {\n\
             'not-json': '{\"stage_depths\": [1, 1',\n\
             'array': json.dumps([1, 2]),\n\
             'no-alpha': json.dumps({k: v for k, v in network.items() if k != 'alpha'}),\n\
             'text-alpha': json.dumps(dict(network, alpha='4')),\n\
             'short-depths': json.dumps(dict(network, stage_depths=[1, 1])),\n\
             'one-tensor': json.dumps(network),\n\
             }\n\
             for name, header in headers.items(): save_file(x, f'{out}/{name}.safetensors', metadata={'avaprep.model': header})\n\
             save_file(x, f'{out}/no-header.safetensors')\n",
        )
        .arg(dir)
        .arg(&network)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::write(dir.join("notes.txt"), "not a weights file\n").unwrap();
    let weights = dir.join("one-tensor.safetensors");
    std::fs::create_dir(dir.join("folder")).unwrap();
    std::os::unix::fs::symlink(&weights, dir.join("symlink.pyth")).unwrap();
    std::fs::hard_link(&weights, dir.join("hardlink.pyth")).unwrap();
    std::fs::copy(&weights, dir.join("w.pyth.partial")).unwrap();
    let saved = std::fs::read(&weights).unwrap();

    let refuses =
        |weights: &Path, out: &Path, to: &str, extra: &[&str], code: i32, problem: &str| {
            let before = listing(dir);
            let output = Command::new(&python)
                .arg(&script)
                .arg(weights)
                .arg(out)
                .args(["--to", to])
                .args(extra)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            let what = format!(
                "{} -> {} --to {to} {extra:?}: exit {:?}, stderr {stderr:?}",
                weights.display(),
                out.display(),
                output.status.code()
            );
            assert_eq!(output.status.code(), Some(code), "{what}");
            assert!(!stderr.contains("Traceback"), "{what}");
            assert_eq!(stderr.trim_end().lines().count(), 1, "{what}");
            // The file at fault: OUT for a usage error, WEIGHTS otherwise.
            let culprit = if code == 2 { out } else { weights };
            let name = culprit.file_name().unwrap().to_string_lossy();
            assert!(stderr.contains(&*name), "{what}: does not name {name}");
            assert!(stderr.contains(problem), "{what}: does not say {problem:?}");
            assert_eq!(listing(dir), before, "{what}: left or removed files");
        };

    // OUT is WEIGHTS: the same path, another spelling, links, or OUT.partial; then a folder.
    let same = [
        weights.clone(),
        dir.join(".").join("one-tensor.safetensors"),
        dir.join("symlink.pyth"),
        dir.join("hardlink.pyth"),
    ];
    for out in &same {
        refuses(&weights, out, "pyslowfast", &[], 2, "WEIGHTS");
        assert!(
            std::fs::read(&weights).unwrap() == saved,
            "{} was overwritten",
            weights.display()
        );
    }
    let partial = dir.join("w.pyth.partial");
    let kept = std::fs::read(&partial).unwrap();
    refuses(
        &partial,
        &dir.join("w.pyth"),
        "pyslowfast",
        &[],
        2,
        "WEIGHTS",
    );
    assert!(
        std::fs::read(&partial).unwrap() == kept,
        "{} was overwritten",
        partial.display()
    );
    refuses(
        &weights,
        &dir.join("folder"),
        "pytorchvideo",
        &[],
        2,
        "directory",
    );

    // Weights that are not avaprep's: a broken header, a file of one tensor, not safetensors.
    let out = dir.join("exported.pyth");
    let bad: [(&str, &[&str], &str); 8] = [
        ("not-json.safetensors", &[], "JSON"),
        ("array.safetensors", &[], "avaprep.model"),
        ("no-alpha.safetensors", &[], "alpha"),
        ("text-alpha.safetensors", &[], "alpha"),
        ("short-depths.safetensors", &[], "stage_depths"),
        (
            "one-tensor.safetensors",
            &[],
            "s1.pathway0_stem.conv.weight",
        ),
        (
            "no-header.safetensors",
            &["--depth", "18"],
            "head.projection.weight",
        ),
        ("notes.txt", &[], "not a safetensors"),
    ];
    for (file, extra, problem) in bad {
        refuses(&dir.join(file), &out, "pyslowfast", extra, 1, problem);
    }
    // Checked before pytorchvideo builds the network, as for PySlowFast.
    refuses(
        &weights,
        &out,
        "torchscript",
        &[],
        1,
        "s1.pathway0_stem.conv.weight",
    );
}
