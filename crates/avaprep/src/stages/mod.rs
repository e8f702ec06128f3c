//! The product's pipeline stages, one module each, and [`StageId`], the one list of their names
//! and order: fetch-annotations -> parse -> fetch-videos -> extract -> lists -> validate -> train
//! -> eval. The engine in [`crate::pipeline`] runs them without knowing any of them.
//!
//! Adding a stage touches its own module (its parameters, its `Stage` with its id and the ids it
//! depends on) and this file: its [`StageId`] (variant, name, command), its parameters in
//! [`ProductConfig`] (read from its table in [`ProductConfig::from_spec`]) and its arm in
//! [`build`]. The engine, the commands and the other stages stay as they are.

pub mod eval;
#[cfg(feature = "extract")]
pub mod extract;
pub mod fetch_annotations;
pub mod fetch_videos;
pub mod lists;
pub mod parse;
pub mod train;
pub mod validate;

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::annotations::plan::Selection;
use crate::annotations::read_video_ids;
use crate::fetch::FetchParams;
use crate::layout::DataLayout;
use crate::manifest::DatasetManifest;
use crate::pipeline::spec::SpecError;
use crate::pipeline::{AnyStage, PipelineSpec, StateStore, WHOLE};

/// Every stage of the product pipeline, in dependency order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StageId {
    FetchAnnotations,
    Parse,
    FetchVideos,
    Extract,
    Lists,
    Validate,
    Train,
    Eval,
}

impl StageId {
    pub const ALL: [StageId; 8] = [
        StageId::FetchAnnotations,
        StageId::Parse,
        StageId::FetchVideos,
        StageId::Extract,
        StageId::Lists,
        StageId::Validate,
        StageId::Train,
        StageId::Eval,
    ];

    /// The name in state files, `status` and reports.
    pub const fn name(self) -> &'static str {
        match self {
            StageId::FetchAnnotations => "fetch-annotations",
            StageId::Parse => "parse",
            StageId::FetchVideos => "fetch-videos",
            StageId::Extract => "extract",
            StageId::Lists => "lists",
            StageId::Validate => "validate",
            StageId::Train => "train",
            StageId::Eval => "eval",
        }
    }

    pub fn from_name(name: &str) -> Option<StageId> {
        Self::ALL.into_iter().find(|stage| stage.name() == name)
    }

    /// The command that runs the stage on its own (`avaprep run` runs them all). The pipeline's
    /// training and scoring record their results for each other, which `avaprep train` alone
    /// does not: they are `run`'s.
    pub const fn command(self) -> &'static str {
        match self {
            StageId::FetchAnnotations | StageId::Parse | StageId::FetchVideos => "avaprep fetch",
            StageId::Extract => "avaprep extract",
            StageId::Lists => "avaprep lists",
            StageId::Validate => "avaprep validate",
            StageId::Train | StageId::Eval => "avaprep run",
        }
    }

    /// The table of a pipeline file that holds the stage's parameters; both fetch stages share
    /// `[fetch]`, as the `fetch` command does.
    pub const fn table(self) -> &'static str {
        match self {
            StageId::FetchAnnotations | StageId::FetchVideos => "fetch",
            other => other.name(),
        }
    }

    /// The tables a pipeline file may hold.
    pub fn tables() -> Vec<&'static str> {
        let mut tables: Vec<&'static str> = Vec::new();
        for stage in Self::ALL {
            if !tables.contains(&stage.table()) {
                tables.push(stage.table());
            }
        }
        tables
    }
}

impl crate::pipeline::StageName for StageId {
    fn name(self) -> &'static str {
        StageId::name(self)
    }
}

/// Everything the product stages are built from: the dataset, the videos chosen, and each
/// stage's parameters. Typed: commands fill it from their flags, `run` from a pipeline file.
#[derive(Debug, Clone)]
pub struct ProductConfig {
    pub manifest: DatasetManifest,
    pub selection: Selection,
    pub fetch: FetchParams,
    #[cfg(feature = "extract")]
    pub extract: extract::ExtractParams,
    pub lists: lists::ListsParams,
    pub validate: validate::ValidateParams,
    pub train: train::TrainParams,
    pub eval: eval::EvalParams,
    /// The trainer executable the train and eval stages run.
    pub trainer: PathBuf,
}

/// Why a pipeline file does not make a product configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value in the pipeline file or a `--set` is invalid: the user's to fix (exit 2).
    #[error(transparent)]
    Value(#[from] SpecError),
    #[error("loading the dataset named by {path}: {source}")]
    Dataset {
        path: PathBuf,
        source: crate::manifest::ManifestError,
    },
    #[error("{0:#}")]
    VideoList(anyhow::Error),
}

impl ConfigError {
    /// An invalid value the user gave, as opposed to a file that cannot be read.
    pub fn is_usage(&self) -> bool {
        matches!(self, ConfigError::Value(error) if error.is_usage())
    }
}

impl ProductConfig {
    /// The splits `[train]` trains and validates on and `[eval]` scores, where those stages run
    /// (through `until`), are splits the pipeline fetches: a typo is found before the hours of
    /// work that come before training.
    pub fn check_splits(
        &self,
        spec: &PipelineSpec,
        until: Option<StageId>,
    ) -> Result<(), SpecError> {
        let runs = |stage: StageId| until.is_none_or(|last| stage <= last);
        let mut asked: Vec<(&str, String)> = Vec::new();
        if runs(StageId::Train) {
            let settings = self
                .train
                .train_config()
                .map_err(|message| SpecError::Invalid {
                    path: spec.path.clone(),
                    message: format!("[train] {message}"),
                })?;
            asked.push(("[train] settings.train_split", settings.train_split));
            asked.push(("[train] settings.val_split", settings.val_split));
        }
        if runs(StageId::Eval) {
            asked.extend(
                self.eval
                    .splits
                    .iter()
                    .map(|split| ("[eval] splits", split.clone())),
            );
        }
        for (key, split) in asked {
            if !spec.splits.contains(&split) {
                return Err(SpecError::Invalid {
                    path: spec.path.clone(),
                    message: format!(
                        "{key}: {split:?} is not one of the pipeline's splits ({})",
                        spec.splits.join(", ")
                    ),
                });
            }
        }
        Ok(())
    }
}

impl ProductConfig {
    /// What the `fetch` command builds its stages from: the later stages keep their defaults,
    /// which it never runs.
    pub fn for_fetch(manifest: DatasetManifest, selection: Selection, fetch: FetchParams) -> Self {
        ProductConfig {
            manifest,
            selection,
            fetch,
            #[cfg(feature = "extract")]
            extract: Default::default(),
            lists: Default::default(),
            validate: Default::default(),
            train: Default::default(),
            eval: Default::default(),
            trainer: train::trainer_path(),
        }
    }

    /// From a pipeline file: the manifest it names, its selection and its stage tables.
    pub fn from_spec(spec: &PipelineSpec) -> Result<Self, ConfigError> {
        let manifest =
            DatasetManifest::load(&spec.dataset).map_err(|source| ConfigError::Dataset {
                path: spec.path.clone(),
                source,
            })?;
        let video_list = match &spec.video_list {
            Some(path) => Some(Self::read_video_list(path).map_err(ConfigError::VideoList)?),
            None => None,
        };
        #[cfg(feature = "extract")]
        let extract: extract::ExtractParams = spec.stage_params(StageId::Extract.table())?;
        #[cfg(feature = "extract")]
        extract.validate().map_err(|message| SpecError::Invalid {
            path: spec.path.clone(),
            message: format!("[extract] {message}"),
        })?;
        let lists: lists::ListsParams = spec.stage_params(StageId::Lists.table())?;
        lists.validate().map_err(|message| SpecError::Invalid {
            path: spec.path.clone(),
            message: format!("[lists] {message}"),
        })?;
        let eval: eval::EvalParams = spec.stage_params(StageId::Eval.table())?;
        eval.validate().map_err(|message| SpecError::Invalid {
            path: spec.path.clone(),
            message: format!("[eval] {message}"),
        })?;
        let train: train::TrainParams = spec.stage_params(StageId::Train.table())?;
        train.train_config().map_err(|message| SpecError::Invalid {
            path: spec.path.clone(),
            message: format!("[train] {message}"),
        })?;
        let mut fetch: FetchParams = spec.stage_params(StageId::FetchVideos.table())?;
        fetch.validate().map_err(|message| SpecError::Invalid {
            path: spec.path.clone(),
            message: format!("[fetch] {message}"),
        })?;
        fetch.resolve_against(spec.path.parent().unwrap_or(Path::new(".")));
        let config = ProductConfig {
            manifest,
            selection: Selection {
                splits: spec.splits.clone(),
                videos_per_split: spec.videos_per_split,
                video_list,
            },
            fetch,
            #[cfg(feature = "extract")]
            extract,
            lists,
            validate: spec.stage_params(StageId::Validate.table())?,
            train,
            eval,
            trainer: train::trainer_path(),
        };
        config.check().map_err(|message| SpecError::Invalid {
            path: spec.path.clone(),
            message: format!("[fetch] {message}"),
        })?;
        Ok(config)
    }

    /// What the fetch parameters can be checked against only with the manifest: each mirror
    /// names a known source with an HTTP(S) URL, and a video start lies inside the annotated
    /// segment. Messages name the key (`base_url`, `video_start`; the flags of the same names).
    pub fn check(&self) -> Result<(), String> {
        let mut manifest = self.manifest.clone();
        for base_url in &self.fetch.base_url {
            manifest
                .apply_base_url(base_url)
                .map_err(|error| format!("base_url: {error}"))?;
        }
        let [start, end] = manifest.dataset.segment;
        if self.fetch.video_start >= end {
            return Err(format!(
                "video_start {:?}: after the annotated segment, which ends at second {end} (AVA's pre-cut clips begin at its start, {start})",
                self.fetch.video_start
            ));
        }
        Ok(())
    }

    /// Reads the video list file named by a command's `--video-list`.
    pub fn read_video_list(path: &Path) -> anyhow::Result<Vec<crate::annotations::VideoId>> {
        read_video_ids(path).with_context(|| format!("reading the video list {}", path.display()))
    }
}

/// The product's stages, in order.
pub struct ProductStages {
    pub stages: Vec<(StageId, Box<dyn AnyStage>)>,
}

impl ProductStages {
    /// The stages up to and including `last`, for single-step commands such as `fetch`.
    pub fn through(mut self, last: StageId) -> Self {
        self.stages.retain(|(id, _)| *id <= last);
        self
    }

    pub fn as_refs(&self) -> Vec<&dyn AnyStage> {
        self.stages
            .iter()
            .map(|(_, stage)| stage.as_ref())
            .collect()
    }
}

/// The product's stages, built from their configuration. The mirrors of `fetch.base_url` apply
/// to the manifest here.
pub fn build(config: &ProductConfig) -> anyhow::Result<ProductStages> {
    let mut manifest = config.manifest.clone();
    for base_url in &config.fetch.base_url {
        manifest.apply_base_url(base_url)?;
    }
    let mut stages: Vec<(StageId, Box<dyn AnyStage>)> = Vec::new();
    for id in StageId::ALL {
        let stage: Box<dyn AnyStage> = match id {
            StageId::FetchAnnotations => Box::new(fetch_annotations::FetchAnnotationsStage {
                manifest: manifest.clone(),
                params: config.fetch.clone(),
                selection: config.selection.clone(),
            }),
            StageId::Parse => Box::new(parse::ParseStage {
                manifest: manifest.clone(),
                selection: config.selection.clone(),
                on_disk: config.fetch.videos_on_disk(),
            }),
            StageId::FetchVideos => Box::new(fetch_videos::FetchVideosStage {
                manifest: manifest.clone(),
                params: config.fetch.clone(),
            }),
            #[cfg(feature = "extract")]
            StageId::Extract => Box::new(extract::ExtractStage {
                params: config.extract.clone(),
            }),
            StageId::Lists => Box::new(lists::ListsStage {
                params: config.lists.clone(),
            }),
            StageId::Validate => Box::new(validate::ValidateStage {
                params: config.validate.clone(),
            }),
            StageId::Train => Box::new(train::TrainStage {
                params: config.train.clone(),
                trainer: config.trainer.clone(),
            }),
            StageId::Eval => Box::new(eval::EvalStage {
                params: config.eval.clone(),
                train: config.train.clone(),
                trainer: config.trainer.clone(),
            }),
            // Without FFmpeg there are no frames to make: `run` stops before extraction.
            #[cfg(not(feature = "extract"))]
            StageId::Extract => break,
        };
        stages.push((id, stage));
    }
    Ok(ProductStages { stages })
}

/// A download that no longer matches its record after `fetch --verify` re-hashed it.
#[derive(Debug, Clone, PartialEq)]
pub struct DamagedDownload {
    pub file: PathBuf,
    pub problem: String,
}

/// Re-hashes every recorded download; a damaged file loses its record and its stage item, so the
/// run that follows downloads it again.
pub fn verify_downloads(
    data_dir: &Path,
    store: &StateStore,
) -> anyhow::Result<Vec<DamagedDownload>> {
    let layout = DataLayout::new(data_dir);
    let mismatches = crate::fetch::verify_recorded(&layout)?;
    for (file, _) in &mismatches {
        let video = file
            .strip_prefix(data_dir.join("videos"))
            .ok()
            .and_then(|relative| relative.file_stem())
            .map(|stem| stem.to_string_lossy().into_owned());
        match video {
            Some(id) => store.forget_items(StageId::FetchVideos.name(), &[id])?,
            None => store.forget_items(StageId::FetchAnnotations.name(), &[WHOLE.to_string()])?,
        }
    }
    Ok(mismatches
        .into_iter()
        .map(|(file, problem)| DamagedDownload { file, problem })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_names_are_unique_and_tables_cover_every_stage() {
        let mut names: Vec<&str> = StageId::ALL.iter().map(|stage| stage.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), StageId::ALL.len());
        let tables = StageId::tables();
        assert!(
            StageId::ALL
                .iter()
                .all(|stage| tables.contains(&stage.table()))
        );
        assert_eq!(tables.iter().filter(|table| **table == "fetch").count(), 1);
    }

    /// Every real-data pipeline file reads into a configuration (the demo's names a mirror that
    /// `scripts/demo.sh` makes first).
    #[test]
    fn the_shipped_pipeline_files_are_valid() {
        let folder = crate::testing::repo_root().join("pipelines");
        let mut checked = 0;
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|name| name == "demo.toml") {
                continue;
            }
            let spec = PipelineSpec::load(&path, &[], &StageId::tables())
                .unwrap_or_else(|error| panic!("{error}"));
            let config = ProductConfig::from_spec(&spec)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            assert!(build(&config).unwrap().stages.len() >= 7);
            checked += 1;
        }
        assert!(checked >= 3, "{checked} pipeline files");
    }

    #[test]
    fn stages_are_listed_in_dependency_order() {
        let mut sorted = StageId::ALL;
        sorted.sort();
        assert_eq!(sorted, StageId::ALL);
    }
}
