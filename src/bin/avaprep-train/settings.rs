//! Training settings from a preset, a settings file and `--set` overrides.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use crate::frame::UsageError;
use crate::train::{Preset, TrainConfig};

/// The flags that choose the training settings, shared by `train` and `predict`.
#[derive(Debug, Args)]
pub struct SettingsArgs {
    /// The starting recipe (for predict: the one the weights were trained with).
    #[arg(long, value_enum, default_value = "ava-r50")]
    pub preset: Preset,
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
        train_config(self.preset, self.config.as_deref(), &self.overrides)
    }
}

/// A preset, then a settings file over it, then `--set` overrides (dotted keys reach nested
/// tables: `schedule.kind=step`). Every invalid value is a usage error, found before any work.
fn train_config(
    preset: Preset,
    file: Option<&Path>,
    overrides: &[String],
) -> anyhow::Result<TrainConfig> {
    let mut table: toml::Table = toml::Table::try_from(preset.config())?;
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading training settings {}", path.display()))?;
        let file: toml::Table = text
            .parse()
            .map_err(|error| UsageError(format!("{}: not valid TOML: {error}", path.display())))?;
        table.extend(file);
    }
    for assignment in overrides {
        avaprep::overrides::apply_override(&mut table, assignment)
            .map_err(|error| UsageError(error.to_string()))?;
    }
    let config: TrainConfig = table.try_into().map_err(|error: toml::de::Error| {
        UsageError(format!(
            "training settings: {}",
            error.to_string().trim_end()
        ))
    })?;
    config
        .validate()
        .map_err(|message| UsageError(format!("training settings: {message}")))?;
    Ok(config)
}
