//! Training settings from a preset, a settings file and `--set` overrides.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use avaprep::trainer_protocol::run_files;

use crate::train::{Preset, TrainConfig};
use avaprep_shell::UsageError;

/// The flags that choose the training settings, shared by `train` and `predict`.
#[derive(Debug, Args)]
pub struct SettingsArgs {
    /// The starting recipe [default: ava-r50] (for predict: the one the weights were trained
    /// with, where their header records no network).
    #[arg(long, value_parser = avaprep_shell::one_of::<Preset>(&Preset::NAMES))]
    pub preset: Option<Preset>,
    /// A TOML file of training settings (keys as in the run's config.toml) applied over the preset.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override one setting, e.g. --set epochs=10 --set device=\"cuda:0\" --set
    /// schedule.gamma=0.5. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

impl SettingsArgs {
    pub fn train_config(&self) -> anyhow::Result<TrainConfig> {
        train_config(self.preset(), self.config.as_deref(), &self.overrides)
    }

    /// The recipe named, or the default one.
    pub fn preset(&self) -> Preset {
        self.preset.unwrap_or(Preset::AvaR50)
    }

    /// Whether a recipe or a settings file is named (`--set` aside).
    pub fn names_a_recipe(&self) -> bool {
        self.preset.is_some() || self.config.is_some()
    }

    /// Predict's settings: those named; else, for weights in a run's folder, the run's own
    /// `config.toml` (the crop, clip and thresholds they were trained and scored with; the
    /// default recipe's would score them on other inputs), returned with its path.
    pub fn for_weights(&self, weights: &Path) -> anyhow::Result<(TrainConfig, Option<PathBuf>)> {
        let run_dir = weights.parent().unwrap_or(Path::new("."));
        let recorded = run_dir.join(run_files::CONFIG_TOML);
        // A run's folder, not any folder with a config.toml of something else.
        let a_run = [run_files::SUMMARY, run_files::CHECKPOINT]
            .iter()
            .any(|name| run_dir.join(name).is_file());
        if self.names_a_recipe() || !a_run || !recorded.is_file() {
            return Ok((self.train_config()?, None));
        }
        let config = avaprep::trainer_settings::resolve_recorded(
            toml::Table::try_from(read_run_config(run_dir)?).expect("a config serialises"),
            &self.overrides,
        )
        .map_err(|message| UsageError(format!("training settings: {message}")))?;
        Ok((config, Some(recorded)))
    }
}

/// The settings a run recorded in its folder.
pub fn read_run_config(run_dir: &Path) -> anyhow::Result<TrainConfig> {
    let path = run_dir.join(run_files::CONFIG_TOML);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("{}: the run's settings", path.display()))?;
    toml::from_str(&text).with_context(|| format!("{}: the run's settings", path.display()))
}

/// A preset, then a settings file over it, then `--set` overrides (dotted keys reach nested
/// tables: `schedule.kind=step`). Every invalid value is a usage error, found before any work.
fn train_config(
    preset: Preset,
    file: Option<&Path>,
    overrides: &[String],
) -> anyhow::Result<TrainConfig> {
    let file = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading training settings {}", path.display()))?;
            Some(text.parse::<toml::Table>().map_err(|error| {
                UsageError(format!("{}: not valid TOML: {error}", path.display()))
            })?)
        }
        None => None,
    };
    avaprep::trainer_settings::resolve(preset, file, overrides)
        .map_err(|message| UsageError(format!("training settings: {message}")).into())
}
