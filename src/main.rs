//! `avaprep`: the data tool. Every command that needs libtorch (`train`, `predict`) runs the
//! trainer executable, `avaprep-train`, so this one links no libtorch and starts in milliseconds.

mod eval;
#[cfg(feature = "extract")]
mod extract;
mod fetch;
#[cfg(feature = "extract")]
mod import;
#[cfg(feature = "extract")]
mod keyframes;
mod lists;
mod pipeline;
mod render;
mod report;
mod serve;
#[cfg(feature = "extract")]
mod synth;
mod trainer;
mod validate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use avaprep_shell::GlobalArgs;

#[derive(Debug, Parser)]
#[command(
    name = "avaprep",
    version,
    about = "Prepare the AVA 2.2 action-detection dataset and train SlowFast on it",
    long_about = "Prepare the AVA 2.2 action-detection dataset: download it, extract only the \
                  annotated time ranges at a chosen frame rate and height, write the frame lists \
                  PySlowFast reads, validate the result, and train a SlowFast detector on one GPU."
)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Download annotations, name lists, person boxes and videos: concurrent, resumable, verified.
    Fetch(fetch::FetchArgs),
    /// Extract frames of the annotated time ranges at a chosen frame rate and height.
    #[cfg(feature = "extract")]
    Extract(extract::ExtractArgs),
    /// Turn annotation-tool exports (CVAT, VIA, whole-clip CSV) of your own videos into a
    /// dataset every stage and consumer reads.
    #[cfg(feature = "extract")]
    Import(import::ImportArgs),
    /// Write your videos' keyframe images and a CVAT task over them, a detector's person boxes
    /// drawn and a checkbox per action, to label for `import`.
    #[cfg(feature = "extract")]
    Keyframes(keyframes::KeyframesArgs),
    /// Write the frame lists, filtered annotations and config that PySlowFast reads unchanged.
    Lists(lists::ListsArgs),
    /// Check a prepared dataset in PySlowFast's layout: named checks, a summary, --json,
    /// --junit; exit 0 only if every check passes.
    Validate(validate::ValidateArgs),
    /// Train SlowFast on the extracted frames, with evaluation and early stopping on val mAP
    /// (runs avaprep-train).
    #[command(disable_help_flag = true)]
    Train(trainer::Passthrough),
    /// Detections of trained weights for a split, in the official submission format (runs
    /// avaprep-train).
    #[command(disable_help_flag = true)]
    Predict(trainer::Passthrough),
    /// Score detections with the AVA frame-mAP@0.5 protocol of the official evaluator.
    Eval(eval::EvalArgs),
    /// Write an HTML page (images beside it, opens from disk) showing the prepared dataset and
    /// the training run: counts, boxes per class, validation, keyframes with their boxes drawn.
    Report(report::ReportArgs),
    /// Make a synthetic miniature of AVA: real videos, AVA-format annotations, a download mirror.
    #[cfg(feature = "extract")]
    Synth(synth::SynthArgs),
    /// Serve a folder (a download mirror) over HTTP on this machine.
    Serve(serve::ServeArgs),
    /// Run a pipeline file: every stage in order, skipping what is up to date.
    Run(pipeline::RunArgs),
    /// Show where each stage of a pipeline stands: done, stale, pending, failed, running, interrupted.
    Status(pipeline::StatusArgs),
}

fn main() -> ExitCode {
    let cli: Cli = avaprep_shell::parse();
    let printer = cli.global.printer();
    if let Command::Train(_) | Command::Predict(_) = &cli.command {
        // The trainer parses its own arguments, prints and exits as this process would.
        return avaprep_shell::finish(trainer::exec_trainer(), &printer);
    }
    avaprep_shell::start(&cli.global);
    #[cfg(feature = "extract")]
    quiet_libav(cli.global.verbosity());
    let cancel = &avaprep_shell::CANCEL;
    let global = &cli.global;
    let result = match &cli.command {
        Command::Fetch(args) => fetch::run(global, args, &printer, cancel),
        #[cfg(feature = "extract")]
        Command::Extract(args) => extract::run(global, args, &printer, cancel),
        #[cfg(feature = "extract")]
        Command::Import(args) => import::run(args, &printer),
        #[cfg(feature = "extract")]
        Command::Keyframes(args) => keyframes::run(args, &printer),
        Command::Lists(args) => lists::run(global, args, &printer, cancel),
        Command::Validate(args) => validate::run(global, args, &printer, cancel),
        Command::Train(_) | Command::Predict(_) => unreachable!("handled above"),
        Command::Eval(args) => eval::run(args, &printer),
        Command::Report(args) => report::run(global, args, &printer, cancel),
        #[cfg(feature = "extract")]
        Command::Synth(args) => synth::run(args, &printer),
        Command::Serve(args) => serve::run(args, &printer),
        Command::Run(args) => pipeline::run(global, args, &printer, cancel),
        Command::Status(args) => pipeline::status(global, args, &printer),
    };
    avaprep_shell::finish(result, &printer)
}

/// libav prints to stderr on its own; its messages are noise unless asked for, because every
/// failure that matters comes back to avaprep as an error and is reported once, with the file.
#[cfg(feature = "extract")]
fn quiet_libav(verbosity: avaprep_shell::Verbosity) {
    use avaprep_shell::Verbosity;
    let level = match verbosity {
        Verbosity::Verbose | Verbosity::Trace => ffmpeg_next::util::log::Level::Warning,
        _ => ffmpeg_next::util::log::Level::Fatal,
    };
    ffmpeg_next::util::log::set_level(level);
}
