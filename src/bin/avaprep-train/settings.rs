//! Training settings from a preset, a settings file and `--set` overrides.

use std::path::Path;

use anyhow::Context as _;

use crate::frame::UsageError;
use crate::train::{Preset, TrainConfig};

/// A preset, then a settings file over it, then `--set` overrides (dotted keys reach nested
/// tables: `schedule.kind=step`). Every invalid value is a usage error, found before any work.
pub fn train_config(
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
