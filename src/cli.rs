//! The command line: flags, and the dispatch from a subcommand to the library.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};

use crate::annotations::KeyframeRange;
use crate::manifest::DatasetManifest;
use crate::pipeline::status::{StageCondition, StageStatusLine};
use crate::pipeline::{
    PipelineSpec, RunReport, Runner, Shard, StageContext, StageOutcome, StageReport, StateStore,
};
use crate::report::{Printer, Verbosity};
use crate::stages;

#[derive(Debug, Parser)]
#[command(
    name = "avaprep",
    version,
    about = "Prepare the AVA 2.2 action-detection dataset and train SlowFast on it",
    long_about = "Prepare the AVA 2.2 action-detection dataset: download it, extract only the \
                  annotated time ranges at a chosen frame rate and height, write the frame lists \
                  PySlowFast reads, validate the result, and train a SlowFast detector on one GPU."
)]
pub struct Cli {
    /// Where downloads, frames, lists, state and runs are kept.
    #[arg(
        long,
        global = true,
        default_value = "./data",
        env = "AVAPREP_DATA_DIR"
    )]
    pub data_dir: PathBuf,

    /// More log output (-v: debug, -vv: trace). Hides progress bars.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,

    /// Only errors on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// Machine-readable output: JSON Lines on stdout, each record with a `type` field.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Download annotations, name lists, person boxes and videos: concurrent, resumable, verified.
    Fetch(FetchArgs),
    /// Extract frames of the annotated time ranges at a chosen frame rate and height.
    #[cfg(feature = "extract")]
    Extract(ExtractArgs),
    /// Write the frame lists PySlowFast reads (not implemented yet).
    Lists(NotImplemented),
    /// Check a prepared dataset (not implemented yet).
    Validate(NotImplemented),
    /// Train SlowFast on the extracted frames, with evaluation and early stopping on val mAP.
    #[cfg(feature = "train")]
    Train(TrainArgs),
    /// Score detections with the AVA frame-mAP@0.5 protocol of the official evaluator.
    Eval(EvalArgs),
    /// Make a synthetic miniature of AVA: real videos, AVA-format annotations, a download mirror.
    #[cfg(feature = "extract")]
    Synth(SynthArgs),
    /// Serve a folder (a download mirror) over HTTP on this machine.
    Serve(ServeArgs),
    /// Run a pipeline file: every stage in order, skipping what is up to date.
    Run(RunArgs),
    /// Show where each stage of a pipeline stands: done, stale, pending, failed, interrupted.
    Status(StatusArgs),
    /// Measurements for scripts/bench (loader throughput, training-step time).
    #[cfg(feature = "train")]
    #[command(hide = true, subcommand)]
    Bench(BenchCommand),
}

/// A stage whose command exists in the interface but not yet in the tool.
#[derive(Debug, Args)]
pub struct NotImplemented {}

#[cfg(feature = "extract")]
#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// Frames per second of video time. Frame k shows the source frame nearest to
    /// segment_start + (k-1)/fps.
    #[arg(long, default_value_t = 5.0)]
    pub fps: f64,
    /// Output height in pixels (width keeps the aspect ratio, rounded to even); 0 keeps the
    /// native size. Smaller sources are not upscaled unless --upscale.
    #[arg(long, default_value_t = 480)]
    pub height: u32,
    /// JPEG quantiser, as ffmpeg's -q:v: 2 (best, about JPEG quality 86) to 31.
    #[arg(long, default_value_t = 2)]
    pub quality: u8,
    /// Scale sources smaller than --height up to it.
    #[arg(long)]
    pub upscale: bool,
    /// annotated: only [t - margin, t + margin] around the annotated keyframes; segment: the whole
    /// annotated segment (for PySlowFast's contiguous frame lists).
    #[arg(long, value_enum, default_value = "annotated")]
    pub ranges: crate::extract::stage::Ranges,
    /// Seconds kept on each side of a keyframe (covers AVA's +-1.5 s label context and a
    /// 16-frame clip at 5 fps).
    #[arg(long, default_value_t = crate::extract::DEFAULT_MARGIN_S)]
    pub margin: f64,
    /// Videos extracted at once, one decoder thread each. Default: the number of cores.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Delete each downloaded video once its frames are complete, to save disk.
    #[arg(long)]
    pub delete_videos_after_extract: bool,
}

#[cfg(feature = "train")]
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// The starting recipe: ava-r50 (SlowFast R50 8x8, PySlowFast's recipe for one GPU and 5 fps
    /// frames) or synthetic-tiny (a tiny SlowFast for the synthetic dataset, trains on a CPU).
    #[arg(long, default_value = "ava-r50", value_parser = ["ava-r50", "synthetic-tiny"])]
    pub preset: String,
    /// A TOML file of training settings (keys as in the run's config.toml) applied over the preset.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override one setting, e.g. --set epochs=10 --set device=\"cuda:0\". Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Where checkpoints, metrics, curves and detections go. Default: DATA_DIR/runs/<preset>.
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
    /// Continue from the run directory's last checkpoint.
    #[arg(long)]
    pub resume: bool,
    /// Start from these weights (safetensors from scripts/convert_checkpoint.py); tensors of
    /// another shape, such as a head for another class count, keep their fresh initialisation.
    #[arg(long, value_name = "FILE")]
    pub init: Option<PathBuf>,
}

#[cfg(feature = "train")]
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Clips per second of the training loader over DATA_DIR's train split.
    Loader {
        #[arg(long, default_value = "ava-r50", value_parser = ["ava-r50", "synthetic-tiny"])]
        preset: String,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Epochs over the training clips.
        #[arg(long, default_value_t = 1)]
        passes: usize,
        /// Loader threads.
        #[arg(long, default_value_t = 2)]
        threads: usize,
    },
    /// Seconds per SGD step on random clips, on the CPU.
    TrainStep {
        #[arg(long, value_enum, default_value = "r50-8x8")]
        model: crate::train::ModelPreset,
        #[arg(long, default_value_t = 16)]
        frames: i64,
        /// Side of the square input.
        #[arg(long, default_value_t = 112)]
        size: i64,
        #[arg(long, default_value_t = 2)]
        batch: i64,
        #[arg(long, default_value_t = 2)]
        boxes_per_clip: i64,
        #[arg(long, default_value_t = 5)]
        steps: usize,
        #[arg(long, default_value_t = 2)]
        warmup: usize,
        /// libtorch intra-op threads.
        #[arg(long, default_value_t = 2)]
        threads: usize,
    },
}

#[derive(Debug, Args)]
pub struct FetchArgs {
    /// The dataset manifest: URLs, sizes, checksums, splits.
    #[arg(long, default_value = "manifests/ava-v2.2.toml")]
    pub dataset: PathBuf,
    /// Splits whose videos to download, comma-separated (train, val, test).
    #[arg(long, value_delimiter = ',', default_value = "train,val")]
    pub split: Vec<String>,
    /// Download only N videos of each split, chosen deterministically (0: all). The choice is
    /// written to DATA_DIR/work/videos.json for every later stage.
    #[arg(long, default_value_t = 0, conflicts_with = "video_list")]
    pub videos: usize,
    /// Download only the videos whose ids this file lists, one per line.
    #[arg(long)]
    pub video_list: Option<PathBuf>,
    /// Download the annotations and name lists, not the videos.
    #[arg(long)]
    pub annotations_only: bool,
    /// Concurrent video downloads.
    #[arg(long, default_value_t = 4)]
    pub jobs: usize,
    /// A mirror: URL serves every source (each under its mirror_path), SOURCE=URL one source.
    /// Repeatable. Default: the manifest's URLs.
    #[arg(long, value_name = "URL")]
    pub base_url: Vec<String>,
    /// Re-hash every downloaded file first; one that no longer matches its record is downloaded again.
    #[arg(long)]
    pub verify: bool,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Detections in the official submission format: video_id,second,x1,y1,x2,y2,action_id,score.
    #[arg(long)]
    pub detections: PathBuf,
    /// Ground truth in the AVA format (ava_val_v2.2.csv).
    #[arg(long)]
    pub groundtruth: PathBuf,
    /// The classes to score (ava_action_list_v2.2_for_activitynet_2019.pbtxt: the 60 of AVA 2.2).
    #[arg(long)]
    pub labelmap: PathBuf,
    /// Keyframes removed from both ground truth and detections (ava_val_excluded_timestamps_v2.2.csv).
    /// Default: none.
    #[arg(long)]
    pub exclusions: Option<PathBuf>,
    /// The dataset's keyframe seconds, FIRST-LAST; rows outside are errors.
    #[arg(long, default_value = "902-1798", value_parser = parse_keyframes)]
    pub keyframes: KeyframeRange,
    /// Detections kept per keyframe, highest scores first, as the official evaluator does; 0 keeps
    /// all (what PySlowFast's and mmaction2's evaluators do).
    #[arg(long, default_value_t = crate::eval::OFFICIAL_DETECTIONS_PER_FRAME)]
    pub max_detections_per_frame: usize,
}

fn parse_keyframes(text: &str) -> Result<KeyframeRange, String> {
    let usage = || format!("`{text}` is not a keyframe range: expected FIRST-LAST, e.g. 902-1798");
    let (first, last) = text.split_once('-').ok_or_else(usage)?;
    let first = first.trim().parse().map_err(|_| usage())?;
    let last = last.trim().parse().map_err(|_| usage())?;
    KeyframeRange::new(first, last).ok_or_else(usage)
}

#[cfg(feature = "extract")]
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// The folder to write the mirror tree, its manifest.toml and synth-report.json into.
    #[arg(long)]
    pub out: PathBuf,
    /// How many videos to make; kinds (containers, codecs, frame rates, sizes) cycle through the
    /// first six, test-split videos appear from 6.
    #[arg(long, default_value_t = 6)]
    pub videos: usize,
    /// Seed of everything random: the same seed gives the same files.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// quick: 36 s videos, segment [5, 35) s, keyframes 7..=32. ava-times: 1802 s low-resolution
    /// videos with AVA's segment [900, 1801) s and keyframes 902..=1798.
    #[arg(long, default_value = "quick")]
    pub profile: crate::synth::Profile,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The folder to serve (for example the --out of `avaprep synth`).
    pub dir: PathBuf,
    /// TCP port; 0 picks a free one (printed on stderr).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Address to listen on. Only this machine can connect to the default.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// Serve JSON statistics (bytes sent per path) at /__avaprep/stats.
    #[arg(long)]
    pub stats: bool,
    /// For tests: misbehave as the JSON fault plan named by AVAPREP_TEST_FAULT_PLAN says.
    #[arg(long, hide = true)]
    pub inject_faults: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The pipeline file (for example pipelines/demo.toml).
    pub pipeline: PathBuf,

    /// Override a key of the pipeline file, as if the file said it: STAGE.KEY=VALUE or KEY=VALUE.
    /// Repeatable. Example: --set extract.fps=10
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,

    /// Do only shard I of N of the per-video work (I from 1), for running on N machines; a later
    /// run without --shard merges what the shards did and runs the whole-dataset stages.
    /// Default: all videos.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The pipeline file whose stages to show.
    #[arg(default_value = "pipelines/demo.toml")]
    pub pipeline: PathBuf,

    /// Override a key of the pipeline file, as `run --set` does (the status depends on it).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,

    /// Show the state of shard I of N instead of the unsharded run. Default: the unsharded run.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
}

/// What `main` turns into an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Success,
    /// Some items failed or the work could not be done.
    Failure,
}

pub fn verbosity(cli: &Cli) -> Verbosity {
    match (cli.quiet, cli.verbose) {
        (true, _) => Verbosity::Quiet,
        (false, 0) => Verbosity::Normal,
        (false, _) => Verbosity::Verbose,
    }
}

pub fn run(cli: Cli, cancel: &AtomicBool) -> anyhow::Result<ExitStatus> {
    let printer = Printer::new(verbosity(&cli), cli.json);
    #[cfg(feature = "extract")]
    quiet_libav(verbosity(&cli));
    match &cli.command {
        Command::Fetch(args) => fetch(&cli, args, &printer, cancel),
        #[cfg(feature = "extract")]
        Command::Extract(args) => extract(&cli, args, &printer, cancel),
        Command::Lists(_) => not_implemented("lists", 5),
        Command::Validate(_) => not_implemented("validate", 5),
        #[cfg(feature = "train")]
        Command::Train(args) => train(&cli, args, &printer, cancel),
        Command::Eval(args) => evaluate(args, &printer),
        #[cfg(feature = "extract")]
        Command::Synth(args) => synthesize(args, &printer),
        Command::Serve(args) => serve(args, &printer),
        Command::Run(args) => run_pipeline(&cli, args, &printer, cancel),
        Command::Status(args) => show_status(&cli, args, &printer),
        #[cfg(feature = "train")]
        Command::Bench(command) => bench(&cli, command, &printer),
    }
}

fn fetch(
    cli: &Cli,
    args: &FetchArgs,
    printer: &Printer,
    cancel: &AtomicBool,
) -> anyhow::Result<ExitStatus> {
    let mut fetch_table = toml::Table::new();
    fetch_table.insert("jobs".into(), toml::Value::Integer(args.jobs as i64));
    let base_urls = args
        .base_url
        .iter()
        .cloned()
        .map(toml::Value::String)
        .collect();
    fetch_table.insert("base_url".into(), toml::Value::Array(base_urls));
    let spec = PipelineSpec {
        path: PathBuf::from("the command line"),
        dataset: args.dataset.clone(),
        splits: args.split.clone(),
        videos_per_split: args.videos,
        video_list: args.video_list.clone(),
        stage_tables: toml::Table::from_iter([(
            "fetch".to_string(),
            toml::Value::Table(fetch_table),
        )]),
    };
    let manifest = DatasetManifest::load(&spec.dataset)?;
    let last = if args.annotations_only {
        "parse"
    } else {
        "fetch-videos"
    };
    let built = stages::build(&spec, &manifest, &cli.data_dir)?.through(last);
    let store = StateStore::new(&cli.data_dir, None);
    if args.verify {
        verify_downloads(&cli.data_dir, &store, printer)?;
    }
    let stages = built.stages.iter().map(|stage| stage.as_ref()).collect();
    let report = run_stages(cli, stages, None, printer, cancel)?;
    Ok(exit_status(&report))
}

#[cfg(feature = "extract")]
fn extract(
    cli: &Cli,
    args: &ExtractArgs,
    printer: &Printer,
    cancel: &AtomicBool,
) -> anyhow::Result<ExitStatus> {
    let mut params = crate::extract::stage::ExtractParams {
        fps: args.fps,
        height: args.height,
        quality: args.quality,
        upscale: args.upscale,
        ranges: args.ranges,
        margin: args.margin,
        delete_videos_after_extract: args.delete_videos_after_extract,
        ..Default::default()
    };
    if let Some(jobs) = args.jobs {
        params.jobs = jobs;
    }
    let stage = crate::extract::stage::ExtractStage { params };
    let report = run_stages(cli, vec![&stage], None, printer, cancel)?;
    Ok(exit_status(&report))
}

#[cfg(feature = "train")]
fn train(
    cli: &Cli,
    args: &TrainArgs,
    printer: &Printer,
    cancel: &AtomicBool,
) -> anyhow::Result<ExitStatus> {
    use crate::train::TrainEvent;
    let mut config = train_config(&args.preset, args.config.as_deref(), &args.overrides)?;
    config.resume |= args.resume;
    if let Some(init) = &args.init {
        config.init_weights = Some(init.clone());
    }
    let run_dir = args
        .run_dir
        .clone()
        .unwrap_or_else(|| cli.data_dir.join("runs").join(&args.preset));
    let progress = |event: TrainEvent| {
        printer.record("train", &event);
        match &event {
            TrainEvent::Started {
                device,
                train_clips,
                val_clips,
                resumed_from,
                ..
            } => printer.note(&format!(
                "training on {device}: {train_clips} train clips, {val_clips} val clips{}",
                resumed_from.map_or(String::new(), |(epoch, step)| format!(
                    ", resumed at epoch {epoch} step {step}"
                ))
            )),
            TrainEvent::EpochEnd {
                epoch,
                loss,
                clips_per_s,
            } => printer.note(&format!(
                "epoch {epoch}: loss {loss:.4}, {clips_per_s:.1} clips/s"
            )),
            TrainEvent::Evaluated { epoch, map, best } => printer.note(&format!(
                "epoch {epoch}: val mAP {}, best {}",
                map.map_or("-".into(), |map| format!("{map:.4}")),
                best.map_or("-".into(), |best| format!("{best:.4}"))
            )),
            TrainEvent::Initialised(report) => printer.note(&init_summary(report)),
            TrainEvent::Stopped { reason } => printer.note(&format!("stopped: {reason}")),
            _ => {}
        }
    };
    let summary = crate::train::train(&config, &cli.data_dir, &run_dir, cancel, &progress)?;
    printer.record("train_summary", &summary);
    printer.result(&format!(
        "{}; {} epochs, {} steps; best val mAP {}; run: {}",
        summary.reason,
        summary.epochs_run,
        summary.steps,
        summary.best.map_or("-".into(), |(map, epoch)| format!(
            "{map:.4} (epoch {epoch})"
        )),
        run_dir.display()
    ));
    Ok(ExitStatus::Success)
}

#[cfg(feature = "train")]
fn init_summary(report: &crate::train::InitReport) -> String {
    let mut text = format!(
        "initialised from {}: {} tensors loaded, {} kept fresh, {} in the file unused",
        report.file.display(),
        report.loaded,
        report.skipped.len(),
        report.unused.len()
    );
    for skipped in &report.skipped {
        text.push_str(&format!(
            "\n  kept fresh: {} ({})",
            skipped.name, skipped.reason
        ));
    }
    for name in &report.unused {
        text.push_str(&format!("\n  unused: {name}"));
    }
    text
}

/// A preset, then a settings file over it, then `--set` overrides.
#[cfg(feature = "train")]
fn train_config(
    preset: &str,
    file: Option<&std::path::Path>,
    overrides: &[String],
) -> anyhow::Result<crate::train::TrainConfig> {
    use crate::train::TrainConfig;
    let preset = match preset {
        "synthetic-tiny" => TrainConfig::synthetic_tiny(),
        _ => TrainConfig::ava_r50(),
    };
    let mut table: toml::Table = toml::Table::try_from(&preset)?;
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading training settings {}", path.display()))?;
        let file: toml::Table = text
            .parse()
            .with_context(|| format!("{} is not valid TOML", path.display()))?;
        table.extend(file);
    }
    for assignment in overrides {
        let (key, value) = assignment
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--set {assignment}: expected KEY=VALUE"))?;
        let value = format!("value = {value}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut parsed| parsed.remove("value"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        table.insert(key.trim().to_string(), value);
    }
    table.try_into().context("training settings")
}

#[cfg(feature = "train")]
fn bench(cli: &Cli, command: &BenchCommand, printer: &Printer) -> anyhow::Result<ExitStatus> {
    use crate::train::bench::{StepShape, loader_throughput, train_step_times};
    match command {
        BenchCommand::Loader {
            preset,
            overrides,
            passes,
            threads,
        } => {
            let mut config = train_config(preset, None, overrides)?;
            config.threads = *threads;
            let measured = loader_throughput(&cli.data_dir, &config, *passes)?;
            printer.record("bench_loader", &measured);
            printer.result(&format!(
                "{} clips of {} frames at {} px in {:.2} s: {:.1} clips/s on {} threads",
                measured.clips,
                measured.frames_per_clip,
                measured.crop,
                measured.seconds,
                measured.clips_per_second,
                measured.threads
            ));
        }
        BenchCommand::TrainStep {
            model,
            frames,
            size,
            batch,
            boxes_per_clip,
            steps,
            warmup,
            threads,
        } => {
            let shape = StepShape {
                model: *model,
                frames: *frames,
                size: *size,
                batch: *batch,
                boxes_per_clip: *boxes_per_clip,
            };
            let measured = train_step_times(shape, *steps, *warmup, *threads)?;
            printer.record("bench_train_step", &measured);
            printer.result(&format!(
                "{model:?} {size}x{size}x{frames}, batch {batch}: median {:.3} s per step on {threads} threads",
                measured.median_step_seconds
            ));
        }
    }
    Ok(ExitStatus::Success)
}

/// Re-hashes the downloads; damaged files lose their record and their stage item, so the run that
/// follows downloads them again.
fn verify_downloads(
    data_dir: &std::path::Path,
    store: &StateStore,
    printer: &Printer,
) -> anyhow::Result<()> {
    let layout = crate::layout::DataLayout::new(data_dir);
    let mismatches = crate::fetch::verify_recorded(&layout)?;
    printer.note(&format!("verify: {} damaged file(s)", mismatches.len()));
    for (file, problem) in &mismatches {
        eprintln!("error: {}: {problem}; downloading it again", file.display());
        let video = file
            .strip_prefix(data_dir.join("videos"))
            .ok()
            .and_then(|relative| relative.file_stem())
            .map(|stem| stem.to_string_lossy().into_owned());
        match video {
            Some(id) => store.forget_items("fetch-videos", &[id])?,
            None => {
                store.forget_items("fetch-annotations", &[crate::pipeline::WHOLE.to_string()])?
            }
        }
    }
    Ok(())
}

fn evaluate(args: &EvalArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let options = crate::eval::EvalOptions {
        max_detections_per_frame: (args.max_detections_per_frame > 0)
            .then_some(args.max_detections_per_frame),
        ..crate::eval::EvalOptions::OFFICIAL
    };
    let report = crate::eval::evaluate_files_with(
        &args.groundtruth,
        &args.detections,
        &args.labelmap,
        args.exclusions.as_deref(),
        args.keyframes,
        &options,
    )?;
    printer.record("eval", &report);
    printer.result(&crate::eval::render_table(&report));
    Ok(ExitStatus::Success)
}

#[cfg(feature = "extract")]
fn synthesize(args: &SynthArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let config = crate::synth::SynthConfig {
        out: args.out.clone(),
        videos: args.videos,
        seed: args.seed,
        profile: args.profile,
    };
    let report = crate::synth::generate(&config)?;
    printer.record("synth", &report);
    let bytes: u64 = report.files.iter().map(|file| file.size).sum();
    printer.result(&format!(
        "synthetic AVA ({:?}, seed {}): {} videos, {} files, {} in {:.1} s\nmirror: {}\nmanifest: {}",
        report.profile,
        report.seed,
        report.videos.len(),
        report.files.len(),
        human_bytes(bytes),
        report.elapsed_s,
        args.out.display(),
        args.out.join(crate::synth::MANIFEST_FILE).display(),
    ));
    Ok(ExitStatus::Success)
}

fn serve(args: &ServeArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let config = crate::serve::ServeConfig {
        root: args.dir.clone(),
        addr: std::net::SocketAddr::new(args.bind, args.port),
        faults: crate::serve::FaultPlan::from_test_env(args.inject_faults)?,
        expose_stats: args.stats,
    };
    let handle = crate::serve::start(config)?;
    printer.record(
        "serving",
        &serde_json::json!({ "url": handle.url(), "dir": args.dir }),
    );
    printer.note(&format!(
        "serving {} at {}",
        args.dir.display(),
        handle.url()
    ));
    handle.wait_forever();
    Ok(ExitStatus::Success)
}

/// libav prints to stderr on its own; its messages are noise unless asked for, because every
/// failure that matters comes back to avaprep as an error and is reported once, with the file.
#[cfg(feature = "extract")]
fn quiet_libav(verbosity: Verbosity) {
    let level = match verbosity {
        Verbosity::Verbose => ffmpeg_next::util::log::Level::Warning,
        _ => ffmpeg_next::util::log::Level::Fatal,
    };
    ffmpeg_next::util::log::set_level(level);
}

fn not_implemented(command: &str, issue: u32) -> anyhow::Result<ExitStatus> {
    bail!("`avaprep {command}` is not implemented yet (tracked in issue {issue}); nothing was done")
}

/// The pipeline file, its dataset manifest, and the stages built from them.
struct Loaded {
    stages: Vec<Box<dyn crate::pipeline::Stage>>,
    unimplemented: Vec<&'static str>,
}

fn load(cli: &Cli, pipeline: &std::path::Path, overrides: &[String]) -> anyhow::Result<Loaded> {
    let spec = PipelineSpec::load(pipeline, overrides)?;
    let manifest = DatasetManifest::load(&spec.dataset)
        .with_context(|| format!("loading the dataset named by {}", pipeline.display()))?;
    let built = stages::build(&spec, &manifest, &cli.data_dir)?;
    Ok(Loaded {
        stages: built.stages,
        unimplemented: built.unimplemented,
    })
}

fn run_pipeline(
    cli: &Cli,
    args: &RunArgs,
    printer: &Printer,
    cancel: &AtomicBool,
) -> anyhow::Result<ExitStatus> {
    let loaded = load(cli, &args.pipeline, &args.overrides)?;
    let stages = loaded.stages.iter().map(|stage| stage.as_ref()).collect();
    let report = run_stages(cli, stages, args.shard, printer, cancel)?;
    if !loaded.unimplemented.is_empty() {
        printer.note(&format!(
            "stopped after the implemented stages; not implemented yet: {}",
            loaded.unimplemented.join(", ")
        ));
    }
    Ok(exit_status(&report))
}

/// Runs stages through the pipeline runner (with the state under the data directory) and prints
/// the report: what `run`, `fetch` and `extract` share.
fn run_stages(
    cli: &Cli,
    stages: Vec<&dyn crate::pipeline::Stage>,
    shard: Option<Shard>,
    printer: &Printer,
    cancel: &AtomicBool,
) -> anyhow::Result<RunReport> {
    let runner = Runner {
        stages,
        store: StateStore::new(&cli.data_dir, shard),
        shard,
        context: StageContext {
            data_dir: &cli.data_dir,
            reporter: printer,
            cancel,
        },
    };
    let report = runner.run()?;
    print_run_report(printer, &report);
    Ok(report)
}

fn exit_status(report: &RunReport) -> ExitStatus {
    if report.succeeded() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    }
}

fn print_run_report(printer: &Printer, report: &RunReport) {
    for stage in &report.stages {
        printer.record("stage", stage);
        for note in &stage.notes {
            printer.note(&format!("note: {note}"));
        }
        for failure in stage.failures.iter().chain(&stage.newly_missing) {
            eprintln!(
                "error: {}: {}: {}",
                stage.stage, failure.item, failure.message
            );
        }
        let outcome = match stage.outcome {
            StageOutcome::UpToDate => "up to date".to_string(),
            StageOutcome::Completed if stage.missing > 0 => format!(
                "done: {} items ({} now, {} already done, {} missing)",
                stage.planned, stage.completed, stage.already_done, stage.missing
            ),
            StageOutcome::Completed => format!(
                "done: {} items ({} now, {} already done)",
                stage.planned, stage.completed, stage.already_done
            ),
            StageOutcome::Failed => format!(
                "FAILED: {} of {} items failed",
                stage.failures.len(),
                stage.planned
            ),
            StageOutcome::Blocked => "not run: an earlier stage is not done".to_string(),
            StageOutcome::Interrupted => "interrupted: the next run resumes it".to_string(),
            StageOutcome::Deferred => {
                "deferred: a run without --shard combines the shards and does it".to_string()
            }
        };
        printer.result(&format!(
            "{:<18} {outcome}{}",
            stage.stage,
            figures(stage.files, stage.bytes, stage.seconds)
        ));
        for detail in [reduction(stage), download_summary(stage)]
            .into_iter()
            .flatten()
        {
            printer.result(&format!("{:<18} {detail}", ""));
        }
    }
    printer.record(
        "summary",
        &serde_json::json!({ "succeeded": report.succeeded() }),
    );
}

/// For downloads: how each file came to be on disk (counted over every recorded video).
fn download_summary(stage: &StageReport) -> Option<String> {
    let counts = &stage.counts;
    let count = |name: &str| counts.get(name).copied().unwrap_or(0);
    let total = count("downloaded") + count("resumed") + count("verified");
    (total > 0 || stage.missing > 0).then(|| {
        format!(
            "{} downloaded, {} resumed, {} already on disk and verified, {} missing, {} failed",
            count("downloaded"),
            count("resumed"),
            count("verified"),
            stage.missing,
            stage.failures.len()
        )
    })
}

/// For extraction: how much smaller the result is than every source frame of the segment at native
/// resolution (what the reference pipelines write), from the counts the extractor measured.
fn reduction(stage: &StageReport) -> Option<String> {
    let counts = &stage.counts;
    let segment_frames = *counts.get("segment_source_frames")?;
    let decoded = counts.get("source_frames_decoded").copied().unwrap_or(0);
    let source_pixels = *counts.get("segment_source_pixels")? as f64;
    let pixels = (*counts.get("pixels_written")?).max(1) as f64;
    Some(format!(
        "{} of {segment_frames} source frames kept ({:.1}x fewer), {:.1}x fewer pixels; {decoded} source frames decoded",
        stage.files,
        segment_frames as f64 / stage.files.max(1) as f64,
        source_pixels / pixels,
    ))
}

fn show_status(cli: &Cli, args: &StatusArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let loaded = load(cli, &args.pipeline, &args.overrides)?;
    let cancel = AtomicBool::new(false);
    let runner = Runner {
        stages: loaded.stages.iter().map(|stage| stage.as_ref()).collect(),
        store: StateStore::new(&cli.data_dir, args.shard),
        shard: args.shard,
        context: StageContext {
            data_dir: &cli.data_dir,
            reporter: printer,
            cancel: &cancel,
        },
    };
    for line in runner.status()? {
        printer.record("stage_status", &line);
        printer.result(&status_text(&line));
    }
    for stage in &loaded.unimplemented {
        printer.result(&format!("{stage:<18} not implemented yet"));
    }
    Ok(ExitStatus::Success)
}

fn status_text(line: &StageStatusLine) -> String {
    let condition = match line.condition {
        StageCondition::Done => "done",
        StageCondition::Stale => "stale",
        StageCondition::Pending => "pending",
        StageCondition::Failed => "failed",
        StageCondition::Interrupted => "interrupted",
        StageCondition::Corrupt => "corrupt state",
    };
    let mut text = format!("{:<18} {condition:<12}", line.stage);
    if line.condition != StageCondition::Pending && line.condition != StageCondition::Corrupt {
        text.push_str(&format!(
            " {}/{} items{}",
            line.items_done,
            line.items_planned,
            figures(line.files, line.bytes, line.seconds)
        ));
    }
    if let Some(detail) = &line.detail {
        text.push_str(&format!(" ({detail})"));
    }
    text
}

fn figures(files: u64, bytes: u64, seconds: f64) -> String {
    if files == 0 && bytes == 0 && seconds == 0.0 {
        return String::new();
    }
    format!(", {files} files, {}, {seconds:.1} s", human_bytes(bytes))
}

pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
