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
    // clap exits with 2 on a usage error and 0 for --help / --version.
    let cli = Cli::parse();
    avaprep_shell::start(&cli.global);
    let printer = cli.global.printer();
    let result = match &cli.command {
        Command::Train(args) => {
            train_command::run(&cli.global, args, &printer, &avaprep_shell::CANCEL)
        }
        Command::Predict(args) => predict::run(&cli.global, args, &printer, &avaprep_shell::CANCEL),
        Command::Bench(command) => bench::run(&cli.global, command, &printer),
    };
    avaprep_shell::finish(result.map(|()| ExitStatus::Success))
}
