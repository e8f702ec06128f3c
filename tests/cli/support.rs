//! Shared helpers: the real `avaprep` binary with a clean environment, and temporary folders.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
