//! The trainer's settings: one serde struct, written into the run directory, with presets, the
//! LR schedule and the network's config. No libtorch: the data tool checks a pipeline's `[train]`
//! with them before any work, and the trainer builds from them.

pub mod network;
pub mod schedule;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::split::SplitName;

use network::SlowFastConfig;
use schedule::{LrSchedule, ScheduleKind};

/// The starting recipes of `avaprep train --preset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// SlowFast R50 8x8, PySlowFast's recipe for one GPU and 5 fps frames.
    AvaR50,
    /// A tiny SlowFast for the synthetic dataset; trains on a CPU.
    SyntheticTiny,
}

impl Preset {
    pub const ALL: [Preset; 2] = [Preset::AvaR50, Preset::SyntheticTiny];
    pub const NAMES: [&str; 2] = [Preset::AvaR50.name(), Preset::SyntheticTiny.name()];

    /// The preset of a name as the command line spells it (`ava-r50`).
    pub fn from_name(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|preset| preset.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|preset| preset.name()).collect();
                format!("unknown preset {name:?}: one of {}", names.join(", "))
            })
    }

    pub fn config(self) -> TrainConfig {
        match self {
            Preset::AvaR50 => TrainConfig::ava_r50(),
            Preset::SyntheticTiny => TrainConfig::synthetic_tiny(),
        }
    }

    /// The name on the command line, which is also the default run directory's name.
    pub const fn name(self) -> &'static str {
        match self {
            Preset::AvaR50 => "ava-r50",
            Preset::SyntheticTiny => "synthetic-tiny",
        }
    }
}

/// A preset, then a settings file's table over it, then `KEY=VALUE` overrides (dotted keys reach
/// nested tables: `schedule.gamma=0.5`), table into table as [`resolve_table`] merges them,
/// checked whole: an unknown key or an invalid value is an error naming it.
pub fn resolve(
    preset: Preset,
    file: Option<toml::Table>,
    overrides: &[String],
) -> Result<TrainConfig, String> {
    let mut table = toml::Table::try_from(preset.config()).expect("a preset serialises");
    let mut over = file.unwrap_or_default();
    set_all(&mut over, overrides)?;
    merge_into(&mut table, &over);
    checked(table)
}

/// A run's own settings (its `config.toml`, which holds every key) with `--set` overrides over
/// them: what a resumed run trains with.
pub fn resolve_recorded(
    mut table: toml::Table,
    overrides: &[String],
) -> Result<TrainConfig, String> {
    let mut over = toml::Table::new();
    set_all(&mut over, overrides)?;
    merge_into(&mut table, &over);
    checked(table)
}

/// The overrides gathered into one table first, so that their order does not matter when one
/// of them changes a schedule's kind.
fn set_all(table: &mut toml::Table, overrides: &[String]) -> Result<(), String> {
    for assignment in overrides {
        crate::overrides::apply_override(table, assignment).map_err(|error| error.to_string())?;
    }
    Ok(())
}

/// One setting two configs disagree on: its dotted key (`schedule.gamma`) and each value as
/// TOML writes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub key: String,
    pub before: String,
    pub after: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} -> {}", self.key, self.before, self.after)
    }
}

/// The settings where `after` differs from `before`, in key order (`resume`, a flag of the
/// command and not a setting of the run, is not compared).
pub fn differences(before: &TrainConfig, after: &TrainConfig) -> Vec<Difference> {
    let table = |config: &TrainConfig| {
        let mut table = toml::Table::try_from(config).expect("a config serialises");
        table.remove("resume");
        table
    };
    let mut found = Vec::new();
    compare("", &table(before), &table(after), &mut found);
    found
}

fn compare(prefix: &str, before: &toml::Table, after: &toml::Table, found: &mut Vec<Difference>) {
    let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let shown = |value: Option<&toml::Value>| value.map_or("(none)".into(), ToString::to_string);
    for key in keys {
        let dotted = format!("{prefix}{key}");
        match (before.get(key), after.get(key)) {
            (Some(toml::Value::Table(was)), Some(toml::Value::Table(is))) => {
                compare(&format!("{dotted}."), was, is, found)
            }
            (was, is) if was != is => found.push(Difference {
                key: dotted,
                before: shown(was),
                after: shown(is),
            }),
            _ => {}
        }
    }
}

/// A preset with a pipeline's `[train]` settings over it, table into table: a nested table
/// changes only the keys it holds (`[schedule] gamma = 0.5` keeps the preset's other schedule
/// keys), as the same keys given as dotted `--set` overrides would.
pub fn resolve_table(preset: Preset, settings: &toml::Table) -> Result<TrainConfig, String> {
    let mut table = toml::Table::try_from(preset.config()).expect("a preset serialises");
    merge_into(&mut table, settings);
    checked(table)
}

fn merge_into(base: &mut toml::Table, over: &toml::Table) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(over_inner))
                if same_kind(inner, over_inner) =>
            {
                merge_into(inner, over_inner)
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Whether `over` keeps the kind of `base` (a table with a `kind`, as the schedule has, holds
/// that kind's keys): a table naming another kind replaces the one below it, whose other keys
/// belong to the kind it had.
fn same_kind(base: &toml::Table, over: &toml::Table) -> bool {
    over.get("kind")
        .is_none_or(|kind| base.get("kind") == Some(kind))
}

fn checked(table: toml::Table) -> Result<TrainConfig, String> {
    if let Some(toml::Value::Table(schedule)) = table.get("schedule") {
        schedule::check_keys(schedule)?;
    }
    let config: TrainConfig = table
        .try_into()
        .map_err(|error: toml::de::Error| error.to_string().trim_end().to_string())?;
    config.validate()?;
    Ok(config)
}

/// Which SlowFast to build; the class count comes from the label map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelPreset {
    R50_8x8,
    R18,
    Tiny,
}

impl std::str::FromStr for Preset {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        Self::from_name(name)
    }
}

impl ModelPreset {
    const ALL: [ModelPreset; 3] = [ModelPreset::R50_8x8, ModelPreset::R18, ModelPreset::Tiny];
    /// The names the command line takes (`--model r50-8x8`), as settings files spell them.
    pub const NAMES: [&str; 3] = [
        ModelPreset::R50_8x8.name(),
        ModelPreset::R18.name(),
        ModelPreset::Tiny.name(),
    ];

    pub const fn name(self) -> &'static str {
        match self {
            ModelPreset::R50_8x8 => "r50-8x8",
            ModelPreset::R18 => "r18",
            ModelPreset::Tiny => "tiny",
        }
    }

    /// The network for `num_classes` outputs and a Fast clip of `frames`.
    pub fn build(self, num_classes: i64, frames: i64) -> SlowFastConfig {
        let cfg = match self {
            ModelPreset::R50_8x8 => SlowFastConfig {
                num_classes,
                ..SlowFastConfig::r50_8x8_ava()
            },
            ModelPreset::R18 => SlowFastConfig {
                num_classes,
                ..SlowFastConfig::r18_ava()
            },
            ModelPreset::Tiny => SlowFastConfig::tiny(num_classes),
        };
        SlowFastConfig {
            num_frames: frames,
            ..cfg
        }
    }
}

impl TrainConfig {
    /// Builds the network weights record in their header (`--init`'s, where the recipe names
    /// another): its model and clip length. `None` where no model of ours is that network (the
    /// recipe's stays, and tensors of another shape keep their fresh start).
    pub fn take_network(&mut self, network: &SlowFastConfig) -> Option<Vec<Difference>> {
        let model = ModelPreset::ALL.into_iter().find(|model| {
            let built = model.build(network.num_classes, network.num_frames);
            SlowFastConfig {
                dropout: network.dropout,
                ..built
            } == *network
        })?;
        let before = self.clone();
        self.model = model;
        self.clip_frames = network.num_frames;
        Some(differences(&before, self))
    }
}

impl std::str::FromStr for ModelPreset {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|model| model.name() == name)
            .ok_or_else(|| format!("unknown model {name:?}: one of {}", Self::NAMES.join(", ")))
    }
}

/// Arithmetic of the training step. `Auto` is fp16 autocast with the loss scaler on CUDA (every
/// CUDA GPU runs it natively) and fp32 on the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    Auto,
    Fp32,
    /// fp16 autocast with a dynamic loss scale (CUDA only).
    Fp16,
    /// bf16 autocast, no loss scale needed (CUDA only).
    Bf16,
}

/// Everything that shapes a training run. Field names are the CLI flag names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    pub model: ModelPreset,
    /// Dropout before the classifier; `None` keeps the preset's (0.5).
    pub dropout: Option<f64>,
    /// Weights to start from (safetensors, PySlowFast key names); the head is skipped when its
    /// class count differs.
    pub init_weights: Option<PathBuf>,
    /// Fast-pathway frames per clip; a multiple of the model's alpha (4).
    pub clip_frames: i64,
    /// Distance between clip frames, in frames of the extracted rate.
    pub clip_stride: u32,
    /// Side of the square training crop; evaluation resizes the short side to it.
    pub crop_size: u32,
    /// Mirror training clips horizontally with p = 0.5 (labels unchanged). Right for AVA, whose
    /// actions look the same mirrored; wrong where a label names a direction.
    #[serde(default = "yes")]
    pub hflip: bool,
    /// Clips per forward pass.
    pub batch_size: usize,
    /// Forward passes whose gradients are summed before one optimizer update.
    pub accumulate: usize,
    pub lr: f64,
    pub warmup_epochs: f64,
    pub warmup_start_lr: f64,
    pub schedule: ScheduleKind,
    pub momentum: f64,
    /// Applied to every parameter except BatchNorm weights and biases.
    pub weight_decay: f64,
    /// Clip the global gradient norm to this; `None` disables clipping.
    pub grad_clip: Option<f64>,
    /// Length of the LR schedule, in epochs; also the last epoch unless stopped earlier.
    pub epochs: usize,
    /// Hard cap on epochs run, below `epochs` when the budget is shorter than the schedule.
    pub max_epochs: Option<usize>,
    /// Evaluate on the validation split every this many epochs (and after the last one).
    pub eval_every: usize,
    /// Evaluation rounds without an improvement of at least `min_delta` before stopping.
    pub patience: usize,
    pub min_delta: f64,
    pub seed: u64,
    /// Loader threads; 0 uses every core.
    pub threads: usize,
    /// Batches decoded ahead of the training step.
    pub prefetch: usize,
    /// Detector boxes below this score are ignored, in training and evaluation.
    #[serde(serialize_with = "crate::decimal::shortest")]
    pub box_threshold: f32,
    /// A detector box takes the labels of ground-truth boxes it overlaps by at least this IoU.
    #[serde(serialize_with = "crate::decimal::shortest")]
    pub label_iou: f32,
    pub train_split: SplitName,
    /// The split evaluated during training, for early stopping and the best weights. Empty:
    /// none (a train-only dataset); the whole schedule runs and the last weights are kept.
    #[serde(with = "crate::split::optional")]
    pub val_split: Option<SplitName>,
    /// `auto`, `cpu`, `cuda` or `cuda:N`.
    pub device: String,
    pub precision: Precision,
    /// Continue from the run directory's checkpoint when there is one.
    pub resume: bool,
    /// A control experiment: train on the boxes' label sets permuted among the boxes, which
    /// keeps the class frequencies and breaks the link to the pixels; val mAP should fall to
    /// chance. Off unless asked for.
    #[serde(default)]
    pub shuffle_labels: bool,
}

impl TrainConfig {
    /// PySlowFast's `SLOWFAST_32x2_R50_SHORT` recipe adapted to one GPU and 5 fps frames: 16
    /// frames at stride 1 span 3.2 s, AVA's 3 s annotation context around a keyframe (the
    /// recipe's 32 x 2 frames at 30 fps span only 2.1 s). Batch 8 with 8-fold accumulation keeps
    /// the recipe's batch of 64 and its LR.
    pub fn ava_r50() -> Self {
        Self {
            model: ModelPreset::R50_8x8,
            dropout: None,
            init_weights: None,
            clip_frames: crate::frame_index::DEFAULT_CLIP_FRAMES as i64,
            clip_stride: crate::frame_index::DEFAULT_CLIP_STRIDE,
            crop_size: 224,
            hflip: true,
            batch_size: 8,
            accumulate: 8,
            lr: 0.1,
            warmup_epochs: 5.0,
            warmup_start_lr: 1.25e-4,
            schedule: ScheduleKind::Steps {
                milestones: vec![10.0, 15.0],
                gamma: 0.1,
            },
            momentum: 0.9,
            weight_decay: 1e-7,
            grad_clip: None,
            epochs: 20,
            max_epochs: None,
            eval_every: 1,
            patience: 3,
            min_delta: 0.001,
            seed: 0,
            threads: 0,
            prefetch: 4,
            box_threshold: 0.8,
            label_iou: 0.9,
            train_split: "train".parse().expect("a plain name"),
            val_split: Some("val".parse().expect("a plain name")),
            device: "auto".into(),
            precision: Precision::Auto,
            resume: false,
            shuffle_labels: false,
        }
    }

    /// The tiny SlowFast on the synthetic dataset, sized for a CPU: 4 frames (0.8 s centred on
    /// the keyframe, so the clip stays inside the label's segment: keyframes lie >= 0.5 s from a
    /// change), 112-pixel crops, no mirroring (the labels say left and right), no dropout, batch 4
    /// for more updates per epoch, a high LR and a cosine schedule.
    pub fn synthetic_tiny() -> Self {
        Self {
            model: ModelPreset::Tiny,
            dropout: Some(0.0),
            clip_frames: 4,
            crop_size: 112,
            hflip: false,
            batch_size: 4,
            accumulate: 1,
            lr: 0.8,
            warmup_epochs: 1.0,
            warmup_start_lr: 0.01,
            schedule: ScheduleKind::Cosine { end_lr: 0.0 },
            weight_decay: 1e-4,
            grad_clip: Some(5.0),
            epochs: 30,
            eval_every: 2,
            patience: 3,
            min_delta: 0.005,
            box_threshold: 0.5,
            ..Self::ava_r50()
        }
    }

    /// The LR as a function of training progress.
    pub fn lr_schedule(&self) -> LrSchedule {
        LrSchedule {
            base_lr: self.lr,
            warmup_epochs: self.warmup_epochs,
            warmup_start_lr: self.warmup_start_lr,
            total_epochs: self.epochs as f64,
            kind: self.schedule.clone(),
        }
    }

    /// Whether the run evaluates on a val split (and so may stop early).
    pub fn validates(&self) -> bool {
        self.val_split.is_some()
    }

    /// The last epoch (exclusive) the run may reach.
    pub fn last_epoch(&self) -> usize {
        self.max_epochs
            .map_or(self.epochs, |cap| cap.min(self.epochs))
    }

    /// Rejects settings that would fail later or silently do nothing.
    pub fn validate(&self) -> Result<(), String> {
        let checks: [(bool, &str); 11] = [
            (
                spells_a_device(&self.device),
                "device must be auto, cpu, cuda or cuda:N",
            ),
            (
                self.clip_frames >= 4 && self.clip_frames % 4 == 0,
                "clip_frames must be a positive multiple of 4 (alpha)",
            ),
            (self.clip_stride >= 1, "clip_stride must be at least 1"),
            (
                self.crop_size >= 32 && self.crop_size.is_multiple_of(16),
                "crop_size must be a multiple of 16, at least 32",
            ),
            (
                self.batch_size >= 1 && self.accumulate >= 1,
                "batch_size and accumulate must be at least 1",
            ),
            (self.lr > 0.0 && self.lr.is_finite(), "lr must be positive"),
            (
                self.epochs >= 1 && self.eval_every >= 1,
                "epochs and eval_every must be at least 1",
            ),
            (self.max_epochs != Some(0), "max_epochs must be at least 1"),
            (
                (0.0..=1.0).contains(&self.box_threshold),
                "box_threshold must lie in [0, 1]",
            ),
            (
                (0.0..=1.0).contains(&self.label_iou),
                "label_iou must lie in [0, 1]",
            ),
            (self.prefetch >= 1, "prefetch must be at least 1"),
        ];
        match checks.iter().find(|(ok, _)| !ok) {
            Some((_, message)) => Err((*message).to_string()),
            None => self.lr_schedule().validate(),
        }
    }
}

fn yes() -> bool {
    true
}

/// Whether `device` names a device the trainer knows, whether or not this machine has it (that
/// is the trainer's to find).
fn spells_a_device(device: &str) -> bool {
    match device {
        "auto" | "cpu" | "cuda" => true,
        other => other
            .strip_prefix("cuda:")
            .is_some_and(|index| index.parse::<usize>().is_ok()),
    }
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self::ava_r50()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weights that record their network build it whatever the recipe (a tiny network's weights
    /// under ava-r50 once matched no tensor and trained from nothing); an unknown one changes
    /// nothing.
    #[test]
    fn weights_recording_their_network_build_it_over_the_recipe() {
        let mut config = Preset::AvaR50.config();
        let tiny = ModelPreset::Tiny.build(7, 8);
        let changed = config.take_network(&tiny).unwrap();
        assert_eq!((config.model, config.clip_frames), (ModelPreset::Tiny, 8));
        let keys: Vec<&str> = changed.iter().map(|change| change.key.as_str()).collect();
        assert_eq!(keys, ["clip_frames", "model"]);
        let again = config.clone().take_network(&tiny).unwrap();
        assert!(again.is_empty());
        let unknown = SlowFastConfig {
            alpha: tiny.alpha + 1,
            ..tiny
        };
        let before = config.clone();
        assert!(config.take_network(&unknown).is_none());
        assert_eq!(config, before);
    }

    /// What a resume would change is named key by key, nested keys dotted; the command's own
    /// `resume` flag is no difference.
    #[test]
    fn differences_name_each_changed_setting() {
        let run = Preset::SyntheticTiny.config();
        let same = TrainConfig {
            resume: !run.resume,
            ..run.clone()
        };
        assert_eq!(differences(&run, &same), []);
        let asked = resolve(
            Preset::SyntheticTiny,
            None,
            &["epochs=3".into(), "schedule.end_lr=0.001".into()],
        )
        .unwrap();
        let found: Vec<String> = differences(&run, &asked)
            .iter()
            .map(ToString::to_string)
            .collect();
        let epochs = format!("epochs {} -> 3", run.epochs);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.contains(&epochs), "{found:?}");
        assert!(
            found
                .iter()
                .any(|line| line.starts_with("schedule.end_lr ") && line.ends_with("-> 0.001")),
            "{found:?}"
        );
    }

    /// A run's config.toml with --set over it is the run's settings but the key set.
    #[test]
    fn a_recorded_run_resolves_to_itself_with_overrides_over_it() {
        let run = Preset::SyntheticTiny.config();
        let table = toml::Table::try_from(&run).unwrap();
        assert_eq!(resolve_recorded(table.clone(), &[]).unwrap(), run);
        let longer = resolve_recorded(table, &["epochs=40".into()]).unwrap();
        assert_eq!(longer.epochs, 40);
        assert_eq!(differences(&run, &longer).len(), 1);
    }

    /// A device the trainer cannot know is a bad setting, refused before anything is written
    /// (`gpu` once failed only when training began, leaving a run folder behind).
    #[test]
    fn a_device_is_spelt_as_the_trainer_knows_devices() {
        let with = |device: &str| TrainConfig {
            device: device.into(),
            ..TrainConfig::synthetic_tiny()
        };
        for known in ["auto", "cpu", "cuda", "cuda:1"] {
            assert_eq!(with(known).validate(), Ok(()), "{known}");
        }
        for unknown in ["gpu", "cuda:", "cuda:x", "CPU"] {
            let error = with(unknown).validate().unwrap_err();
            assert!(
                error.contains("auto, cpu, cuda or cuda:N"),
                "{unknown}: {error}"
            );
        }
    }

    /// `--model` and a settings file's `model` spell each network the same way.
    #[test]
    fn model_names_are_the_settings_files_and_parse_back() {
        for model in ModelPreset::ALL {
            assert_eq!(serde_json::to_value(model).unwrap(), model.name());
            assert_eq!(model.name().parse::<ModelPreset>(), Ok(model));
        }
        assert!(
            "r50"
                .parse::<ModelPreset>()
                .unwrap_err()
                .contains("r50-8x8")
        );
    }

    #[test]
    fn presets_are_valid_and_round_trip_through_toml() {
        for config in [TrainConfig::ava_r50(), TrainConfig::synthetic_tiny()] {
            config.validate().unwrap();
            let text = toml::to_string(&config).unwrap();
            assert_eq!(toml::from_str::<TrainConfig>(&text).unwrap(), config);
        }
        // As a person wrote them, in a run's config.toml and in what changed between runs.
        let written = toml::to_string(&TrainConfig::ava_r50()).unwrap();
        for line in ["\nbox_threshold = 0.8\n", "\nlabel_iou = 0.9\n"] {
            assert!(written.contains(line), "{written}");
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        let json = serde_json::to_string(&TrainConfig::ava_r50()).unwrap();
        let bad = json.replacen('{', "{\"learning_rate\":1,", 1);
        assert!(serde_json::from_str::<TrainConfig>(&bad).is_err());
        let odd = TrainConfig {
            clip_frames: 6,
            ..TrainConfig::ava_r50()
        };
        assert!(odd.validate().unwrap_err().contains("clip_frames"));
    }

    #[test]
    fn a_pipelines_nested_settings_change_only_their_keys_as_dotted_overrides_do() {
        let settings: toml::Table = "max_epochs = 3\n[schedule]\ngamma = 0.5\n".parse().unwrap();
        let from_table = resolve_table(Preset::AvaR50, &settings).unwrap();
        let overrides = ["max_epochs=3".to_string(), "schedule.gamma=0.5".to_string()];
        assert_eq!(
            from_table,
            resolve(Preset::AvaR50, None, &overrides).unwrap()
        );
        let ScheduleKind::Steps { milestones, gamma } = &from_table.schedule else {
            panic!(
                "the preset's step schedule is kept: {:?}",
                from_table.schedule
            );
        };
        assert_eq!(*gamma, 0.5);
        assert_eq!(milestones, &[10.0, 15.0]);
        let misspelt: toml::Table = "max_epoch = 3\n".parse().unwrap();
        assert!(
            resolve_table(Preset::AvaR50, &misspelt)
                .unwrap_err()
                .contains("max_epoch")
        );
    }

    #[test]
    fn a_settings_file_changes_only_its_keys_and_a_schedule_of_another_kind_replaces_the_presets() {
        let gamma_only: toml::Table = "[schedule]\ngamma = 0.5\n".parse().unwrap();
        let from_file = resolve(Preset::AvaR50, Some(gamma_only.clone()), &[]).unwrap();
        assert_eq!(
            from_file,
            resolve_table(Preset::AvaR50, &gamma_only).unwrap()
        );
        assert!(matches!(
            &from_file.schedule,
            ScheduleKind::Steps { milestones, gamma } if milestones == &[10.0, 15.0] && *gamma == 0.5
        ));
        let steps = ScheduleKind::Steps {
            milestones: vec![10.0],
            gamma: 0.5,
        };
        // The kind last, as a user may type it: the tiny preset's cosine keys do not stay.
        let typed = [
            "schedule.milestones=[10.0]".to_string(),
            "schedule.gamma=0.5".to_string(),
            "schedule.kind=steps".to_string(),
        ];
        let switched = resolve(Preset::SyntheticTiny, None, &typed).unwrap();
        assert_eq!(switched.schedule, steps);
        let recorded = toml::Table::try_from(TrainConfig::synthetic_tiny()).unwrap();
        assert_eq!(resolve_recorded(recorded, &typed).unwrap().schedule, steps);
        let as_file: toml::Table =
            "[schedule]\nkind = \"steps\"\nmilestones = [10.0]\ngamma = 0.5\n"
                .parse()
                .unwrap();
        assert_eq!(
            resolve_table(Preset::SyntheticTiny, &as_file)
                .unwrap()
                .schedule,
            steps
        );
        let cosine: toml::Table = "[schedule]\nkind = \"cosine\"\nend_lr = 0.0\n"
            .parse()
            .unwrap();
        assert_eq!(
            resolve(Preset::AvaR50, Some(cosine), &[]).unwrap().schedule,
            ScheduleKind::Cosine { end_lr: 0.0 }
        );
        let gamma_on_cosine = ["schedule.gamma=0.5".to_string()];
        let message = resolve(Preset::SyntheticTiny, None, &gamma_on_cosine).unwrap_err();
        assert!(
            message.contains("a cosine schedule takes end_lr; gamma belongs to the steps schedule"),
            "{message}"
        );
        let half_switched = ["schedule.kind=steps".to_string()];
        let message = resolve(Preset::SyntheticTiny, None, &half_switched).unwrap_err();
        assert!(message.contains("missing field `milestones`"), "{message}");
    }

    #[test]
    fn max_epochs_caps_the_schedule() {
        let mut config = TrainConfig::ava_r50();
        assert_eq!(config.last_epoch(), 20);
        config.max_epochs = Some(12);
        assert_eq!(config.last_epoch(), 12);
        config.max_epochs = Some(40);
        assert_eq!(config.last_epoch(), 20);
    }
}
