//! The command-line frame both executables share: the global flags, logging, Ctrl-C, and the
//! mapping from a command's result to the exit code (0 ok, 1 failure, 2 usage error).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use clap::builder::TypedValueParser as _;

pub mod printer;

pub use printer::{Printer, Verbosity};

/// Flags every command takes, before or after its name.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Where downloads, frames, lists, state and runs are kept.
    #[arg(
        long,
        global = true,
        default_value = "./data",
        env = "AVAPREP_DATA_DIR",
        value_parser = clap::builder::OsStringValueParser::new().try_map(data_dir)
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
}

impl GlobalArgs {
    pub fn verbosity(&self) -> Verbosity {
        match (self.quiet, self.verbose) {
            (true, _) => Verbosity::Quiet,
            (false, 0) => Verbosity::Normal,
            (false, 1) => Verbosity::Verbose,
            (false, _) => Verbosity::Trace,
        }
    }

    pub fn printer(&self) -> Printer {
        Printer::new(self.verbosity(), self.json)
    }
}

/// What a command hands back for the exit code; errors are reported by [`finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Success,
    /// Some items failed or the work could not be done. (The trainer's commands fail only
    /// with errors.)
    #[allow(dead_code, reason = "used by the data tool only")]
    Failure,
}

/// A command's error that is the user's to fix in the command line or a configuration value.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The data directory, as UTF-8 text: the configs written there name it for PySlowFast and
/// mmaction2, which read UTF-8. A path of other bytes is refused while the arguments are read,
/// before any work (exit 2).
fn data_dir(text: std::ffi::OsString) -> Result<PathBuf, String> {
    text.into_string().map(PathBuf::from).map_err(|text| {
        format!(
            "{} is not UTF-8 text, which the configs written there must name it in: rename the folder or name another",
            text.to_string_lossy()
        )
    })
}

/// A file the user names for output (`--junit`, `predict --out`): anything but a directory,
/// refused while the arguments are read, before any work (exit 2).
pub fn output_file(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    let shown = if text.is_empty() { "\"\"" } else { text };
    avaprep::fsutil::check_output_file(&path).map_err(|error| format!("{shown} {error}"))?;
    Ok(path)
}

/// A folder the user names for output (`report --out`): absent, or a folder.
#[allow(dead_code, reason = "used by the data tool only")]
pub fn output_folder(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    match std::fs::metadata(&path) {
        Ok(meta) if !meta.is_dir() => Err(format!("{text} is not a folder: name a folder")),
        _ => Ok(path),
    }
}

/// A path as one word of a shell command (quoted where it holds a space or another character
/// the shell reads), for the commands a hint names.
pub fn shell_word(path: &std::path::Path) -> String {
    avaprep::progress::shell_word(path)
}

/// This command as its user typed it, for the note of who holds a data directory.
pub fn command_line() -> String {
    let mut words: Vec<String> = std::env::args_os()
        .map(|word| word.to_string_lossy().into_owned())
        .collect();
    if let Some(program) = words.first_mut() {
        *program = "avaprep".to_string();
    }
    words.join(" ")
}

/// Set by the first Ctrl-C: long work stops at a clean point.
pub static CANCEL: AtomicBool = AtomicBool::new(false);

/// Logging at the level of `-v`/`-q`, and the Ctrl-C handler: the first asks the work to stop at
/// a clean point, a second one ends the process. SIGTERM (a scheduler's time limit) and SIGHUP
/// (a closed terminal) are taken as Ctrl-C, unless the process was started ignoring them
/// (`nohup`; a trainer, which stops at its parent's one SIGINT).
pub fn start(global: &GlobalArgs) {
    init_logging(global.verbosity());
    let ignored_at_start: Vec<libc::c_int> = [libc::SIGTERM, libc::SIGHUP]
        .into_iter()
        .filter(|&signal| ignored(signal))
        .collect();
    let _ = ctrlc::set_handler(|| {
        if CANCEL.swap(true, Ordering::SeqCst) {
            // At once, running no exit handlers: libtorch's, run while its threads still work,
            // crashed the trainer (exit 139 rather than 130).
            // SAFETY: _exit only ends the process.
            unsafe { libc::_exit(130) };
        }
        // Not eprintln: after a hangup stderr may be a closed terminal, and a panic here would
        // leave later signals unheard.
        let _ = writeln!(
            std::io::stderr(),
            "interrupted: stopping at the next clean point, what is done kept (Ctrl-C again to stop at once)"
        );
    });
    for signal in ignored_at_start {
        // SAFETY: sets the disposition of one signal back to what the process was started with.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
}

/// Whether the process was started ignoring `signal` (as `nohup` starts it ignoring SIGHUP).
fn ignored(signal: libc::c_int) -> bool {
    // SAFETY: a null new action only reads the current one into `current`.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

/// The command line, parsed; clap reports a usage error and exits 2 (0 for `--help` and
/// `--version`). With `--json` a usage error is also an `error` record on stdout, as every other
/// error is: a script reading the records learns why there are none.
pub fn parse<C: clap::Parser>() -> C {
    C::try_parse().unwrap_or_else(|error| {
        if error.use_stderr() && asks_for_json(std::env::args_os().skip(1)) {
            let message = usage_error_text(&error.to_string());
            Printer::new(Verbosity::Quiet, true).record(
                "error",
                &serde_json::json!({ "message": message, "hint": null, "exit_code": 2 }),
            );
        }
        error.exit()
    })
}

/// Whether `--json` is among the words before `--` (after it, words are a value or the
/// trainer's).
fn asks_for_json(words: impl Iterator<Item = std::ffi::OsString>) -> bool {
    words
        .take_while(|word| word != "--")
        .any(|word| word == "--json")
}

/// clap's message without its `error: ` label, its usage lines and its `--help` pointer.
fn usage_error_text(rendered: &str) -> String {
    let first_paragraph = rendered.split("\n\n").next().unwrap_or(rendered);
    first_paragraph
        .trim()
        .trim_start_matches("error: ")
        .to_string()
}

/// The exit code of a command's result; an error is printed once, on stderr, and with `--json`
/// as an `error` record on stdout too: a script reading the records learns why there are no
/// others.
pub fn finish(result: anyhow::Result<ExitStatus>, printer: &Printer) -> ExitCode {
    match result {
        Ok(ExitStatus::Success) => ExitCode::SUCCESS,
        Ok(ExitStatus::Failure) => ExitCode::from(1),
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            // libtorch appends its C++ stack to its messages; the first lines say what is wrong.
            let message = error_text(&error);
            let message = message
                .split("\nException raised from")
                .next()
                .unwrap_or(&message);
            eprintln!("error: {message}");
            // The message holds each cause's words, an io::Error's among them.
            let hint = says_disk_full(message).then_some(DISK_FULL_HINT);
            if let Some(hint) = hint {
                eprintln!("hint: {hint}");
            }
            let exit_code: u8 = match error.downcast_ref::<UsageError>() {
                Some(_) => 2,
                None => 1,
            };
            printer.record(
                "error",
                &serde_json::json!({ "message": message, "hint": hint, "exit_code": exit_code }),
            );
            ExitCode::from(exit_code)
        }
    }
}

/// The error and its causes, each cause once: most of our errors already say their cause in
/// their own message (`{path}: {source}`), which `{:#}` would repeat.
pub fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
    }
    text
}

fn init_logging(verbosity: Verbosity) {
    let default = match verbosity {
        Verbosity::Quiet => "error",
        Verbosity::Normal => "warn",
        Verbosity::Verbose => "debug",
        Verbosity::Trace => "trace",
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

/// What to do when a disk filled: the work's own messages name only the file that could not be
/// written.
pub const DISK_FULL_HINT: &str = "the disk (or your quota on it) is full: free space on it (`df -h` shows each disk's free space), or move the data directory to a larger disk and name it with --data-dir; then run the same command again: what was done is kept";

/// Whether a failure's text says a disk, or the user's quota on it, is full: the failures of a
/// run's items reach its summary as text, in the system's own words (as Rust, libav and a
/// trainer's libtorch say them: the text of `strerror`).
pub fn says_disk_full(text: &str) -> bool {
    [libc::ENOSPC, libc::EDQUOT].into_iter().any(|code| {
        let words = std::io::Error::from_raw_os_error(code).to_string();
        let words = words.split(" (os error").next().unwrap_or(&words);
        text.contains(words)
    })
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The value parser of a flag that takes one of a library type's names (`--preset ava-r50`):
/// clap lists the names in help and in its errors, and the type's `FromStr` makes the value.
pub fn one_of<T>(names: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
{
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(names).map(|name| match name.parse::<T>() {
        Ok(value) => value,
        Err(_) => unreachable!("{name:?} is one of the type's own names"),
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        global: GlobalArgs,
    }

    fn verbosity(args: &[&str]) -> Verbosity {
        let argv = std::iter::once("avaprep").chain(args.iter().copied());
        Flags::parse_from(argv).global.verbosity()
    }

    /// A usage error's record holds clap's one-line reason, not its usage lines; `--json`
    /// after `--` is the trainer's word, not ours.
    #[test]
    fn a_usage_error_is_said_in_one_line_and_json_is_asked_before_the_separator() {
        let error = Flags::try_parse_from(["avaprep", "--json", "--bogus"]).unwrap_err();
        assert!(error.use_stderr());
        let text = usage_error_text(&error.to_string());
        assert!(text.contains("'--bogus'"), "{text}");
        assert!(
            !text.starts_with("error:") && !text.contains("Usage:"),
            "{text}"
        );
        let words = |line: &str| {
            line.split(' ')
                .map(std::ffi::OsString::from)
                .collect::<Vec<_>>()
        };
        assert!(asks_for_json(words("train --json --epochs 2").into_iter()));
        assert!(!asks_for_json(words("train -- --json").into_iter()));
        assert!(!asks_for_json(words("train --jsonl").into_iter()));
    }

    /// In Rust's words (with the code), libav's and libtorch's (without), a full disk or quota
    /// is recognised; other failures to write are not.
    #[test]
    fn a_full_disk_is_recognised_in_each_writer_s_words() {
        let full = [
            "frames/.a.partial/a_000461.jpg: No space left on device (os error 28)",
            "video a: writing a packet: No space left on device",
            "runs/x/checkpoint.pt: Disk quota exceeded",
        ];
        for text in full {
            assert!(says_disk_full(text), "{text}");
        }
        let other = [
            "state.json: Permission denied (os error 13)",
            "video a: no a.mkv in /videos",
            "the space left on the device is unknown",
        ];
        for text in other {
            assert!(!says_disk_full(text), "{text}");
        }
    }

    #[test]
    fn each_v_raises_the_log_level_as_the_help_says() {
        assert_eq!(verbosity(&[]), Verbosity::Normal);
        assert_eq!(verbosity(&["-q"]), Verbosity::Quiet);
        assert_eq!(verbosity(&["-v"]), Verbosity::Verbose);
        assert_eq!(verbosity(&["-vv"]), Verbosity::Trace);
        assert_eq!(verbosity(&["-v", "-v", "-v"]), Verbosity::Trace);
    }
}
