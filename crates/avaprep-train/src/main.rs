//! `avaprep-train`: everything that needs libtorch (training, inference, the model and loader
//! benchmarks) in its own executable, so the data tool `avaprep` links no libtorch. `avaprep
//! train` and `avaprep predict` run this program with the same arguments.

mod bench;
mod predict;
mod settings;
mod train;
mod train_command;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use avaprep_shell::{ExitStatus, GlobalArgs};

#[derive(Debug, Parser)]
#[command(
    name = "avaprep-train",
    version,
    about = "Train SlowFast on frames prepared by avaprep, and score detections with it"
)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Train SlowFast on the extracted frames, with evaluation and early stopping on val mAP.
    Train(train_command::TrainArgs),
    /// Detections of trained weights for a split's keyframes and detector boxes, in the official
    /// submission format; scored when the split has ground truth.
    Predict(predict::PredictArgs),
    /// Measurements for scripts/bench (loader throughput, training-step time).
    #[command(hide = true, subcommand)]
    Bench(bench::BenchCommand),
}

fn main() -> ExitCode {
    let cli: Cli = avaprep_shell::parse();
    avaprep_shell::start(&cli.global);
    let printer = cli.global.printer();
    let result = match &cli.command {
        Command::Train(args) => {
            train_command::run(&cli.global, args, &printer, &avaprep_shell::CANCEL)
        }
        Command::Predict(args) => predict::run(&cli.global, args, &printer, &avaprep_shell::CANCEL)
            .map(|()| ExitStatus::Success),
        Command::Bench(command) => {
            bench::run(&cli.global, command, &printer).map(|()| ExitStatus::Success)
        }
    };
    avaprep_shell::finish(result, &printer)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use avaprep::trainer_protocol::{TrainerCall, TrainerCommand};
    use avaprep::trainer_settings::Preset;

    use super::*;

    fn parsed(call: &TrainerCall) -> Cli {
        let program = std::iter::once("avaprep-train".into());
        Cli::try_parse_from(program.chain(call.args())).expect("the trainer takes the call")
    }

    /// The data tool renders its calls through the protocol; the trainer's own command line must
    /// read each argument as what it was meant to be.
    #[test]
    fn the_data_tools_calls_parse_into_the_trainers_arguments() {
        let train = TrainerCall {
            data_dir: "/data dir".into(),
            command: TrainerCommand::Train {
                run_dir: "/data dir/runs/pipeline-1".into(),
                resume: true,
            },
            preset: "synthetic-tiny".into(),
            config: "/data dir/runs/pipeline-1/config.toml".into(),
        };
        let cli = parsed(&train);
        assert!(cli.global.json);
        assert_eq!(cli.global.data_dir, Path::new("/data dir"));
        let Command::Train(args) = cli.command else {
            panic!("a train call is the train command");
        };
        assert_eq!(
            args.run_dir.as_deref(),
            Some(Path::new("/data dir/runs/pipeline-1"))
        );
        assert!(args.resume);
        assert_eq!(args.settings.preset, Some(Preset::SyntheticTiny));
        assert_eq!(
            args.settings.config.as_deref(),
            Some(Path::new("/data dir/runs/pipeline-1/config.toml"))
        );

        let predict = TrainerCall {
            command: TrainerCommand::Predict {
                weights: "/w/best-s9.safetensors".into(),
                split: "test".parse().unwrap(),
                out: "/out/test_detections.csv".into(),
            },
            preset: "ava-r50".into(),
            ..train
        };
        let Command::Predict(args) = parsed(&predict).command else {
            panic!("a predict call is the predict command");
        };
        assert_eq!(args.weights, Path::new("/w/best-s9.safetensors"));
        assert_eq!(args.split, "test");
        assert_eq!(args.out, Path::new("/out/test_detections.csv"));
        assert_eq!(args.settings.preset, Some(Preset::AvaR50));
    }
}
