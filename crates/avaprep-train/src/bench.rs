//! `avaprep-train bench`: the measurements behind `scripts/bench/loader.sh`,
//! `scripts/bench/train-step.sh` and `scripts/bench/gpu-train.sh`.

use clap::Subcommand;

use avaprep_shell::Printer;

use crate::settings::SettingsArgs;
use crate::train::bench::{
    StepShape, ThroughputRun, loader_throughput, train_step_times, train_throughput,
};
use crate::train::{ModelPreset, Preset};
use avaprep_shell::GlobalArgs;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Clips per second of the training loader over DATA_DIR's train split.
    Loader {
        #[arg(long, value_parser = avaprep_shell::one_of::<Preset>(&Preset::NAMES), default_value = "ava-r50")]
        preset: Preset,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Epochs over the training clips.
        #[arg(long, default_value_t = 1)]
        passes: usize,
        /// Loader threads.
        #[arg(long, default_value_t = 2)]
        threads: usize,
    },
    /// Training steps per second on DATA_DIR's train split, each as the trainer takes it, on the
    /// settings' device and precision (bf16 or fp32); --dump writes what the PyTorch side needs
    /// there: the initial weights, the first two batches, the first logits, the optimizer.
    Train {
        #[arg(long, value_parser = avaprep_shell::one_of::<Preset>(&Preset::NAMES), default_value = "ava-r50")]
        preset: Preset,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Timed steps.
        #[arg(long, default_value_t = 300)]
        steps: usize,
        /// Untimed steps before them (at least 2), the first two's losses reported.
        #[arg(long, default_value_t = 20)]
        warmup: usize,
        #[arg(long)]
        dump: Option<std::path::PathBuf>,
    },
    /// Seconds per SGD step on random clips, on the CPU.
    TrainStep {
        #[arg(long, value_parser = avaprep_shell::one_of::<ModelPreset>(&ModelPreset::NAMES), default_value = "r50-8x8")]
        model: ModelPreset,
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

pub fn run(global: &GlobalArgs, command: &BenchCommand, printer: &Printer) -> anyhow::Result<()> {
    match command {
        BenchCommand::Loader {
            preset,
            overrides,
            passes,
            threads,
        } => {
            let settings = SettingsArgs {
                preset: Some(*preset),
                config: None,
                overrides: overrides.clone(),
            };
            let mut config = settings.train_config()?;
            config.threads = *threads;
            let measured = loader_throughput(&global.data_dir, &config, *passes)?;
            printer.record("bench_loader", &measured);
            printer.result(&format!(
                "{} clips of {} frames at {} px in {:.2} s: {:.1} clips/s on {} threads, for {}",
                measured.clips,
                measured.frames_per_clip,
                measured.crop,
                measured.seconds,
                measured.clips_per_second,
                measured.threads,
                measured.device
            ));
        }
        BenchCommand::Train {
            preset,
            overrides,
            steps,
            warmup,
            dump,
        } => {
            let settings = SettingsArgs {
                preset: Some(*preset),
                config: None,
                overrides: overrides.clone(),
            };
            let config = settings.train_config()?;
            let measured = train_throughput(ThroughputRun {
                data_dir: &global.data_dir,
                config: &config,
                steps: *steps,
                warmup: *warmup,
                dump: dump.as_deref(),
            })?;
            printer.record("bench_train", &measured);
            printer.result(&format!(
                "{} steps of {} clips on {} in {:?}: {:.2} steps/s, {:.1} clips/s, {:.0}% of the \
                 time waiting for the loader; first losses {:.6}, {:.6}",
                measured.steps,
                measured.batch,
                measured.device,
                measured.precision,
                measured.steps_per_second,
                measured.clips_per_second,
                100.0 * measured.loader_wait_share,
                measured.first_losses[0],
                measured.first_losses[1]
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
    Ok(())
}
