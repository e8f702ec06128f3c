//! `avaprep train` and `avaprep predict`: both run the trainer executable, which holds everything
//! that needs libtorch, with this process's arguments. The trainer replaces this process (exec),
//! so its output, exit code and Ctrl-C handling are exactly those of the command.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;

use anyhow::anyhow;
use clap::Args;

use avaprep::stages::train::{missing_trainer, trainer_path};
use avaprep_shell::ExitStatus;

/// The trainer's own flags, passed on unread (`avaprep train --help` shows them).
#[derive(Debug, Args)]
pub struct Passthrough {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub args: Vec<OsString>,
}

/// Replaces this process with the trainer, given this process's arguments; returns only when the
/// trainer cannot be started.
pub fn exec_trainer() -> anyhow::Result<ExitStatus> {
    let trainer = trainer_path();
    if !trainer.is_file() {
        return Err(anyhow!(missing_trainer(&trainer)));
    }
    let error = std::process::Command::new(&trainer)
        .arg0("avaprep")
        .args(std::env::args_os().skip(1))
        .exec();
    Err(anyhow!(
        "starting the trainer {}: {error}",
        trainer.display()
    ))
}
