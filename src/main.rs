use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;

use avaprep::cli::{self, Cli, ExitStatus};
use avaprep::report::Verbosity;

static CANCEL: AtomicBool = AtomicBool::new(false);

fn main() -> ExitCode {
    // clap exits with 2 on a usage error and 0 for --help / --version.
    let cli = Cli::parse();
    init_logging(cli::verbosity(&cli));
    // The first Ctrl-C asks stages to stop at a clean point; a second one ends the process.
    let _ = ctrlc::set_handler(|| {
        if CANCEL.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("interrupted: finishing the items in progress (Ctrl-C again to stop at once)");
    });
    match cli::run(cli, &CANCEL) {
        Ok(ExitStatus::Success) => ExitCode::SUCCESS,
        Ok(ExitStatus::Failure) => ExitCode::from(1),
        Err(error) => {
            if is_broken_pipe(&error) {
                return ExitCode::SUCCESS;
            }
            // libtorch appends its C++ stack to its messages; the first lines say what is wrong.
            let message = format!("{error:#}");
            let message = message
                .split("\nException raised from")
                .next()
                .unwrap_or(&message);
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

fn init_logging(verbosity: Verbosity) {
    let default = match verbosity {
        Verbosity::Quiet => "error",
        Verbosity::Normal => "warn",
        Verbosity::Verbose => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("AVAPREP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .with_target(false)
        .init();
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
