//! Shared helpers: the real `avaprep` binary with a clean environment, and temporary folders.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use avaprep_testbed::scratch;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The built binary, with every `AVAPREP_*` variable removed so the caller's shell cannot leak in.
pub fn avaprep(data_dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_avaprep"));
    for (key, _) in std::env::vars() {
        if key.starts_with("AVAPREP_") {
            command.env_remove(key);
        }
    }
    command
        .arg("--data-dir")
        .arg(data_dir)
        .current_dir(repo_root());
    command
}

/// The command a message names in "run `COMMAND` first".
pub fn named_command(message: &str) -> String {
    message
        .split("run `")
        .skip(1)
        .find_map(|rest| rest.split_once("` first"))
        .map(|(command, _)| command.to_string())
        .unwrap_or_else(|| panic!("no command named in: {message}"))
}

/// The shell a reader types into, in `folder`, with both executables and `.venv/bin` on the path
/// (as `eval "$(scripts/setup.sh)"` and `cargo install` put them), running `command`.
pub fn user_shell(folder: &Path, command: &str) -> Command {
    let binaries = Path::new(env!("CARGO_BIN_EXE_avaprep")).parent().unwrap();
    let path = std::env::join_paths(
        [binaries.to_path_buf(), repo_root().join(".venv/bin")]
            .into_iter()
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let mut shell = Command::new("bash");
    for (key, _) in std::env::vars() {
        if key.starts_with("AVAPREP_") {
            shell.env_remove(key);
        }
    }
    shell
        .args(["-c", command])
        .current_dir(folder)
        .env("PATH", path);
    shell
}

/// Runs a command a hint names as a user pastes it into a shell, in the folder the tests'
/// commands run in.
/// The first command `message` names between backticks (a hint's), to run as printed.
pub fn first_named(message: &str) -> &str {
    message
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no command: {message}"))
}

pub fn run_named(command: &str) -> std::process::Output {
    user_shell(&repo_root(), command).output().unwrap()
}

/// `--json run pipelines/demo.toml` on the test mirror at 240p: the pipeline the pipeline tests
/// run, before each adds its own `--set`s (a later one wins).
pub fn demo_run(data_dir: &Path) -> Command {
    let mut command = demo_run_for_people(data_dir);
    command.arg("--json");
    command
}

/// [`demo_run`] printing for people (its closing lines) rather than JSON.
pub fn demo_run_for_people(data_dir: &Path) -> Command {
    let mut command = avaprep(data_dir);
    command
        .args(["run", "pipelines/demo.toml"])
        .arg("--set")
        .arg(format!(
            "dataset=\"{}\"",
            mirror().join("manifest.toml").display()
        ))
        .args(["--set", "extract.height=240"]);
    command
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// One synthetic mirror (quick profile, 6 videos: every kind, and a test split, with its ground
/// truth exported as CVAT and VIA would) shared by every test in this binary; the tests only
/// read it.
pub fn mirror() -> &'static Path {
    static MIRROR: OnceLock<PathBuf> = OnceLock::new();
    MIRROR.get_or_init(|| {
        let dir = scratch::process_folder("mirror").unwrap();
        let output = avaprep(&dir)
            .args([
                "synth",
                "--video-count",
                "6",
                "--seed",
                "7",
                "--exports",
                "--out",
            ])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(output.status.success(), "synth failed: {}", stderr(&output));
        dir
    })
}

/// ffmpeg's options for H.264 that keeps every pixel and has no B-frames: a cut's frames are its
/// source's, with their burned-in codes.
pub const LOSSLESS_H264: [&str; 8] = [
    "-c:v", "libx264", "-qp", "0", "-bf", "0", "-pix_fmt", "yuv420p",
];

/// The ffmpeg CLI with `args`, quiet and overwriting, which must succeed.
pub fn ffmpeg(args: &[&str]) {
    let status = Command::new("ffmpeg")
        .args(["-y", "-loglevel", "error"])
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "ffmpeg {args:?}");
}

/// `source` from `seconds` on, encoded with `encoding` (ffmpeg's video options) into `out`, whose
/// time 0 is that instant: a pre-cut clip such as PySlowFast's `videos_15min/`.
pub fn cut_video(source: &Path, seconds: f64, encoding: &[&str], out: &Path) {
    let start = seconds.to_string();
    let (source, out) = (source.to_str().unwrap(), out.to_str().unwrap());
    ffmpeg(&[&["-ss", &start, "-i", source], encoding, &["-an", out]].concat());
}

/// Writes `path` back edited by `edit`, with its modification time as it was: a change only a
/// byte-for-byte check can see. Returns the bytes before the edit.
pub fn rewrite_keeping_time(path: &Path, edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let modified = std::fs::metadata(path).unwrap().modified().unwrap();
    let original = std::fs::read(path).unwrap();
    let mut bytes = original.clone();
    edit(&mut bytes);
    std::fs::write(path, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    original
}
