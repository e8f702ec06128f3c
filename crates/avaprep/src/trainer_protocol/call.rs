//! The trainer's command line, rendered in one place from typed arguments.

use std::ffi::OsString;
use std::path::PathBuf;

/// One run of the trainer: always with `--json` events on stdout, on a data directory, with a
/// preset and the run's `config.toml` over it.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainerCall {
    pub data_dir: PathBuf,
    pub command: TrainerCommand,
    /// The trainer's starting recipe (`--preset`): a setting the config file omits is one TOML
    /// cannot hold (an unset option), which the preset leaves unset as well.
    pub preset: String,
    /// The run's whole configuration (`--config`), written by the train stage.
    pub config: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TrainerCommand {
    /// Train into `run_dir`, continuing from its checkpoint when it has one.
    Train { run_dir: PathBuf, resume: bool },
    /// Detections of `weights` for `split`'s keyframes, written to `out`.
    Predict {
        weights: PathBuf,
        split: crate::split::SplitName,
        out: PathBuf,
    },
}

impl TrainerCall {
    /// The arguments, in the order the trainer's command line takes them.
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--json".into(), "--data-dir".into()];
        args.push(self.data_dir.clone().into());
        match &self.command {
            TrainerCommand::Train { run_dir, resume } => {
                args.extend(["train".into(), "--run-dir".into(), run_dir.clone().into()]);
                if *resume {
                    args.push("--resume".into());
                }
            }
            TrainerCommand::Predict {
                weights,
                split,
                out,
            } => {
                args.extend(["predict".into(), "--weights".into(), weights.clone().into()]);
                args.extend([
                    "--split".into(),
                    split.as_str().into(),
                    "--out".into(),
                    out.clone().into(),
                ]);
            }
        }
        args.extend([
            "--preset".into(),
            self.preset.clone().into(),
            "--config".into(),
            self.config.clone().into(),
        ]);
        args
    }
}
