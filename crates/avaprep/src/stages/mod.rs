//! The product's pipeline stages, one module each, and [`StageId`], the one list of their names
//! and order: (import ->) fetch-annotations -> parse -> fetch-videos -> extract -> lists ->
//! validate -> train -> eval (-> report). The engine in [`crate::pipeline`] runs them without
//! knowing any of them. `import` runs first and alone where a pipeline has an `[import]` table:
//! the other stages are built from the dataset it makes. `report` runs where it has a `[report]`
//! table.
//!
//! Adding a stage touches its own module (its parameters, read from its table by its
//! `from_source`, and its `Stage` with its id and the ids it depends on) and [`StageId`] (the
//! variant, its name, command and the arm that builds it). The engine, the commands and the other
//! stages stay as they are.

pub mod eval;
#[cfg(feature = "extract")]
pub mod extract;
pub mod fetch_annotations;
pub mod fetch_videos;
#[cfg(feature = "extract")]
pub mod import;
pub mod lists;
pub mod parse;
pub mod report;
pub mod train;
pub mod validate;

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::de::DeserializeOwned;

use crate::annotations::plan::Selection;
use crate::annotations::read_video_ids;
use crate::fetch::FetchParams;
use crate::layout::DataLayout;
use crate::manifest::DatasetManifest;
use crate::pipeline::made_by;
use crate::pipeline::spec::SpecError;
use crate::pipeline::{AnyStage, PipelineSpec, StateStore, WHOLE};
use crate::split::SplitName;

/// Every stage of the product pipeline, in dependency order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StageId {
    Import,
    FetchAnnotations,
    Parse,
    FetchVideos,
    Extract,
    Lists,
    Validate,
    Train,
    Eval,
    Report,
}

impl StageId {
    pub const ALL: [StageId; 10] = [
        StageId::Import,
        StageId::FetchAnnotations,
        StageId::Parse,
        StageId::FetchVideos,
        StageId::Extract,
        StageId::Lists,
        StageId::Validate,
        StageId::Train,
        StageId::Eval,
        StageId::Report,
    ];

    /// The name in state files, `status` and reports.
    pub const fn name(self) -> &'static str {
        match self {
            StageId::Import => "import",
            StageId::FetchAnnotations => "fetch-annotations",
            StageId::Parse => "parse",
            StageId::FetchVideos => "fetch-videos",
            StageId::Extract => "extract",
            StageId::Lists => "lists",
            StageId::Validate => "validate",
            StageId::Train => "train",
            StageId::Eval => "eval",
            StageId::Report => "report",
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
            StageId::Import | StageId::Train | StageId::Eval => "avaprep run",
            StageId::Report => "avaprep report",
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

    fn from_name(name: &str) -> Option<Self> {
        StageId::from_name(name)
    }
}

/// The videos a run prepares, which the fetch and parse stages share: the dataset (its mirrors
/// applied), the videos chosen and `[fetch]`'s parameters. Commands fill it from their flags,
/// `run` from a pipeline file.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub manifest: DatasetManifest,
    pub selection: Selection,
    pub fetch: FetchParams,
}

impl Dataset {
    /// Applies the mirrors of `fetch.base_url` to the manifest and checks what only the manifest
    /// can tell: each mirror names a known source with an HTTP(S) URL, and a video start lies
    /// inside the annotated segment. Messages name the key (`base_url`, `video_start`; the flags
    /// of the same names).
    pub fn new(
        mut manifest: DatasetManifest,
        selection: Selection,
        mut fetch: FetchParams,
    ) -> Result<Self, String> {
        manifest
            .check_splits(&selection.splits)
            .map_err(|unknown| unknown.to_string())?;
        if let Some(local) = &manifest.local {
            fetch.videos.get_or_insert_with(|| local.videos.clone());
            fetch
                .annotations
                .get_or_insert_with(|| local.annotations.clone());
        }
        // Whole files of a dataset whose clock starts later (the quick miniature's, an
        // import's) begin where the dataset says; pre-cut clips say where they begin themselves.
        if fetch.videos.is_some() {
            fetch
                .video_start
                .get_or_insert(manifest.dataset.video_start);
        }
        fetch.make_absolute();
        for base_url in &fetch.base_url {
            manifest
                .apply_base_url(base_url)
                .map_err(|error| format!("base_url: {error}"))?;
        }
        let [start, end] = manifest.dataset.segment;
        if let Some(video_start) = fetch.video_start.filter(|&video_start| video_start >= end) {
            return Err(format!(
                "video_start {video_start:?}: after the annotated segment, which ends at second {end} (AVA's pre-cut clips begin at its start, {start})"
            ));
        }
        Ok(Dataset {
            manifest,
            selection,
            fetch,
        })
    }

    /// From a pipeline file: the manifest it names, its selection and its `[fetch]` table.
    pub fn from_spec(spec: &PipelineSpec) -> Result<Self, ConfigError> {
        let path = spec.dataset.as_deref().ok_or_else(|| SpecError::Invalid {
            path: spec.path.clone(),
            message: format!(
                "[import] has not made the dataset yet: run `avaprep run {} --until import`",
                spec.path.display()
            ),
        })?;
        let manifest = DatasetManifest::load(path).map_err(|source| ConfigError::Dataset {
            path: spec.path.clone(),
            source,
        })?;
        let video_list = match &spec.video_list {
            Some(path) => Some(read_video_list(path).map_err(ConfigError::VideoList)?),
            None => None,
        };
        let mut fetch = read_params(spec, StageId::FetchVideos, FetchParams::validate)?;
        fetch.resolve_against(spec.folder());
        if let Err(unknown) = manifest.check_splits(&spec.splits) {
            // One video, or a fraction that rounds to none, leaves an import without val.
            let unmade_val = !manifest.splits.contains_key("val")
                && spec.splits.iter().any(|split| split == "val");
            let hint = match spec.imports() && unmade_val {
                true => {
                    "; the import made no val split (one video, or too few for val_fraction): name val videos in [import] (`val = [...]`), or leave val out: `splits = [\"train\"]`, [train] `settings.val_split = \"\"` and [eval] `splits = []`"
                }
                false => "",
            };
            return Err(SpecError::Invalid {
                path: spec.path.clone(),
                message: format!("splits: {unknown}{hint}"),
            }
            .into());
        }
        let selection = Selection {
            splits: spec.splits.clone(),
            videos_per_split: spec.videos_per_split,
            video_list,
        };
        Dataset::new(manifest, selection, fetch)
            .map_err(|message| invalid(spec, StageId::FetchVideos, message).into())
    }
}

/// The name and version of the dataset the data directory's plan was made from, as `parse`
/// recorded them.
fn held_dataset(data_dir: &Path) -> Option<(String, String)> {
    let store = StateStore::new(data_dir, None);
    let crate::pipeline::state::Peeked::Valid(state) = store.peek(StageId::Parse.name()).ok()?
    else {
        return None;
    };
    let dataset = state.params.get("dataset")?;
    let text = |key: &str| Some(dataset.get(key)?.as_str()?.to_string());
    Some((text("name")?, text("version")?))
}

/// "parse failed in its last run; run `avaprep fetch` first", with `--data-dir` where the data
/// directory is not the default, and for one made from videos on disk the `extract` that made
/// it (`avaprep fetch`, and `extract --videos` with AVA's manifest, failed on an import's).
pub fn blocker_text(blocker: &crate::pipeline::Blocker<StageId>, data_dir: &Path) -> String {
    let stage = blocker.stage;
    if blocker.in_this_run {
        return format!("{} {} (above)", stage.name(), blocker.reason);
    }
    let avaprep = crate::progress::avaprep_in(data_dir);
    let (command, otherwise) = match stage {
        StageId::FetchAnnotations | StageId::Parse | StageId::FetchVideos => {
            let kept = made_by::making_run_until(data_dir, stage.name())
                .or_else(|| made_by::making_command(data_dir));
            match (kept, made_from_disk(data_dir)) {
                // As it was typed: its dataset, videos and mirror, or its pipeline's settings.
                (Some(command), _) => (command, String::new()),
                (None, Some(MadeFrom::Extract(args))) => {
                    (format!("{avaprep} extract {args}"), String::new())
                }
                (None, Some(MadeFrom::Pipeline)) => {
                    (format!("{avaprep} run PIPELINE"), String::new())
                }
                // `fetch` downloads: a data directory of videos on disk is made otherwise.
                (None, None) => (
                    format!("{avaprep} fetch"),
                    format!(
                        " (for videos already on disk `{avaprep} extract --videos DIR`; for a pipeline's data directory `{avaprep} run PIPELINE`)"
                    ),
                ),
            }
        }
        // Shards' frames are made again by the pipeline that made them: `extract` alone would
        // take every video, the other shards' not downloaded here among them.
        StageId::Extract => match made_by::making_run_until(data_dir, stage.name()) {
            Some(command) if sharded(data_dir, stage) => (command, String::new()),
            _ => (remake_command(data_dir, stage), String::new()),
        },
        other => (remake_command(data_dir, other), String::new()),
    };
    format!(
        "{} {}; run `{command}` first{otherwise}",
        stage.name(),
        blocker.reason
    )
}

enum MadeFrom {
    /// A pipeline's import made the annotations.
    Pipeline,
    /// `extract` with these arguments: the videos, their start, and the dataset or annotations.
    Extract(String),
}

/// How a data directory of videos on disk got its annotations, from what its fetch stages
/// recorded: a pipeline's import, or `extract --videos` (with the manifest beside the folder
/// of annotation files, as `import` writes it, else AVA's with `--annotations`). None for a
/// data directory that downloads.
fn made_from_disk(data_dir: &Path) -> Option<MadeFrom> {
    let store = crate::pipeline::StateStore::new(data_dir, None);
    let params = |stage: StageId| match store.peek(stage.name()) {
        Ok(crate::pipeline::state::Peeked::Valid(state)) => Some(state.params),
        _ => None,
    };
    let annotations = params(StageId::FetchAnnotations)?;
    let folder = PathBuf::from(annotations["on_disk"]["folder"].as_str()?);
    if store.path(StageId::Import.name()).exists() {
        return Some(MadeFrom::Pipeline);
    }
    let videos = params(StageId::FetchVideos)?;
    let on_disk = &videos["videos_on_disk"];
    let mut args = format!(
        "--videos {}",
        crate::progress::shell_word(Path::new(on_disk["folder"].as_str()?))
    );
    if let Some(start) = on_disk["start_seconds"]
        .as_f64()
        .filter(|start| *start != 0.0)
    {
        args.push_str(&format!(" --video-start {start}"));
    }
    let splits: Vec<&str> = annotations["on_disk"]["selection"]["splits"]
        .as_array()?
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    if splits != ["train", "val"] {
        args.push_str(&format!(" --split {}", splits.join(",")));
    }
    let manifest = folder.parent().map(|parent| parent.join("dataset.toml"));
    match manifest.filter(|manifest| manifest.is_file()) {
        Some(manifest) => args.push_str(&format!(
            " --dataset {}",
            crate::progress::shell_word(&manifest)
        )),
        None => args.push_str(&format!(
            " --annotations {}",
            crate::progress::shell_word(&folder)
        )),
    }
    args.push_str(&recorded_flags(data_dir, StageId::Extract));
    Some(MadeFrom::Extract(args))
}

/// Keeps why `stage` failed `video` (its error, in `work/failed/<stage>/<video>`) until the stage
/// makes it: the lists and the report say it where they drop the video. A stop by Ctrl-C is no
/// failure of the video.
pub fn note_video_outcome(
    layout: &DataLayout,
    stage: StageId,
    video: &str,
    outcome: &Result<crate::pipeline::ItemRecord, crate::pipeline::ItemError>,
    cancelled: bool,
) {
    let marker = layout.failed_videos(stage.name()).join(video);
    let kept = match outcome {
        Ok(_) => match std::fs::remove_file(&marker) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        },
        Err(_) if cancelled => Ok(()),
        // A video the source does not have is said by its own marker (`work/missing`).
        Err(error) if error.kind == crate::pipeline::FailureKind::Missing => Ok(()),
        Err(error) => crate::fsutil::write_atomic(&marker, error.message.as_bytes()),
    };
    if let Err(error) = kept {
        tracing::warn!("{}: {error}", marker.display());
    }
}

/// Why a planned video has no frames: the server or folder does not have it, or the stage that
/// last failed it said why, or it is not extracted yet.
pub fn no_frames_reason(layout: &DataLayout, video: &str) -> String {
    let read = |path: PathBuf| std::fs::read_to_string(path).ok();
    if let Some(reason) = read(layout.missing_videos().join(video)) {
        return format!("missing: {}", reason.trim());
    }
    for stage in [StageId::FetchVideos, StageId::Extract] {
        if let Some(reason) = read(layout.failed_videos(stage.name()).join(video)) {
            let reason = reason.trim();
            let reason = reason
                .strip_prefix(&format!("video {video}: "))
                .unwrap_or(reason);
            return format!("{} failed: {reason}", stage.name());
        }
    }
    "no frames: not extracted yet, or its extraction was stopped".to_string()
}

/// The command that downloads this data directory's videos as it was made: the kept `fetch`,
/// or the kept pipeline's run until its downloads; else `fetch` at its defaults.
pub fn download_command(data_dir: &Path) -> String {
    made_by::making_run_until(data_dir, StageId::FetchVideos.name())
        .or_else(|| made_by::making_command(data_dir))
        .unwrap_or_else(|| format!("{} fetch", crate::progress::avaprep_in(data_dir)))
}

/// The command that asks again for the videos a download found missing: [`download_command`]
/// with `--retry-missing`.
pub fn retry_missing_command(data_dir: &Path) -> String {
    format!("{} --retry-missing", download_command(data_dir))
}

/// Whether shards of a sharded run have done some of the stage's work.
fn sharded(data_dir: &Path, stage: StageId) -> bool {
    !StateStore::new(data_dir, None)
        .peek_shards(stage.name())
        .is_empty()
}

/// The command that makes `stage` where it is not made yet: the pipeline run that made the data
/// directory, until `stage` (the stage's own command refuses where the pipeline's earlier stages
/// did not finish, or a shard has not run), else [`remake_command`].
pub fn make_command(data_dir: &Path, stage: StageId) -> String {
    made_by::making_run_until(data_dir, stage.name())
        .unwrap_or_else(|| remake_command(data_dir, stage))
}

/// The command that makes `stage` again as it was last made: `extract` and `lists` with the
/// flags whose recorded values are not their defaults (without them it would make every video
/// again at the defaults, or drop the loader views), the others as they are.
pub fn remake_command(data_dir: &Path, stage: StageId) -> String {
    let avaprep = crate::progress::avaprep_in(data_dir);
    let command = stage.command().trim_start_matches("avaprep ");
    format!("{avaprep} {command}{}", recorded_flags(data_dir, stage))
}

fn recorded_flags(data_dir: &Path, stage: StageId) -> String {
    let store = crate::pipeline::StateStore::new(data_dir, None);
    let Ok(crate::pipeline::state::Peeked::Valid(state)) = store.peek(stage.name()) else {
        return String::new();
    };
    let (recorded, defaults, keys): (&serde_json::Value, serde_json::Value, &[&str]) = match stage {
        #[cfg(feature = "extract")]
        StageId::Extract => (
            &state.params,
            serde_json::to_value(extract::ExtractParams::default()).expect("params serialise"),
            &["fps", "height", "quality", "margin", "ranges", "upscale"],
        ),
        StageId::Lists => (
            &state.params["params"],
            serde_json::to_value(lists::ListsParams::default()).expect("params serialise"),
            &[
                "list_fps",
                "num_frames",
                "sampling_rate",
                "pytorchvideo",
                "mmaction2",
            ],
        ),
        _ => return String::new(),
    };
    let mut flags = String::new();
    for key in keys {
        let value = &recorded[key];
        if value.is_null() || *value == defaults[key] {
            continue;
        }
        let flag = key.replace('_', "-");
        match value {
            serde_json::Value::Bool(true) => flags.push_str(&format!(" --{flag}")),
            serde_json::Value::Bool(false) => {}
            serde_json::Value::String(text) => flags.push_str(&format!(" --{flag} {text}")),
            other => flags.push_str(&format!(" --{flag} {other}")),
        }
    }
    flags
}

/// The pipeline's import, where it has an `[import]` table, as the runner holds a stage; an
/// error where this build cannot import (it has no FFmpeg, which reads the videos' lengths).
pub fn import_stage(spec: &PipelineSpec) -> Result<Option<Box<dyn AnyStage<StageId>>>, SpecError> {
    #[cfg(feature = "extract")]
    {
        let Some(stage) = import::ImportStage::from_spec(spec)? else {
            return Ok(None);
        };
        check_tables(spec)?;
        Ok(Some(Box::new(stage)))
    }
    #[cfg(not(feature = "extract"))]
    match spec.imports() {
        true => Err(SpecError::Invalid {
            path: spec.path.clone(),
            message: "[import] needs FFmpeg, which this build of avaprep leaves out".into(),
        }),
        false => Ok(None),
    }
}

/// The stage tables of a pipeline that imports, checked before its import runs: their values,
/// not the splits (which only the imported dataset can tell), so a misspelt key stops the run
/// before any video is read.
#[cfg(feature = "extract")]
fn check_tables(spec: &PipelineSpec) -> Result<(), SpecError> {
    read_params::<FetchParams, _>(spec, StageId::FetchVideos, FetchParams::validate)?;
    read_params::<extract::ExtractParams, _>(spec, StageId::Extract, |params| {
        params.check().map(drop)
    })?;
    read_params::<lists::ListsParams, _>(spec, StageId::Lists, |params| params.validate())?;
    spec.stage_params::<validate::ValidateParams>(StageId::Validate.table())?;
    let train: train::TrainParams = spec.stage_params(StageId::Train.table())?;
    train
        .resolve()
        .map_err(|message| invalid(spec, StageId::Train, message))?;
    spec.stage_params::<eval::EvalParams>(StageId::Eval.table())?;
    read_params::<report::ReportParams, _>(spec, StageId::Report, |params| params.validate())?;
    Ok(())
}

/// Reads the video list file named by a command's `--video-list`.
pub fn read_video_list(path: &Path) -> anyhow::Result<Vec<crate::annotations::VideoId>> {
    read_video_ids(path).with_context(|| format!("reading the video list {}", path.display()))
}

/// Why a pipeline file does not make the product's stages.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value in the pipeline file or a `--set` is invalid: the user's to fix (exit 2).
    #[error(transparent)]
    Value(#[from] SpecError),
    #[error(
        "loading the dataset named by {path} (its `dataset` is relative to that file's folder; `--set dataset=PATH` names another): {source}"
    )]
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

/// What a stage is built from: its table in the pipeline file (none for a command, which runs a
/// stage with the defaults of the tables it has no flags for), the dataset, and whether the stage
/// runs this time.
pub struct StageSource<'a> {
    spec: Option<&'a PipelineSpec>,
    pub dataset: &'a Dataset,
    runs: bool,
}

impl StageSource<'_> {
    /// `stage`'s table read into its parameters and checked by `check` (values no video could
    /// honour); an error names the table, the key and the file.
    pub fn params<P: DeserializeOwned + Default, E: std::fmt::Display>(
        &self,
        stage: StageId,
        check: impl Fn(&P) -> Result<(), E>,
    ) -> Result<P, SpecError> {
        match self.spec {
            Some(spec) => read_params(spec, stage, check),
            None => Ok(P::default()),
        }
    }

    /// `stage`'s table read into its parameters, where their types are all there is to check.
    pub fn typed_params<P: DeserializeOwned + Default>(
        &self,
        stage: StageId,
    ) -> Result<P, SpecError> {
        self.params(stage, |_: &P| Ok::<(), std::convert::Infallible>(()))
    }

    /// Whether the pipeline file has `stage`'s table (a command's stages have none).
    pub fn has_table(&self, stage: StageId) -> bool {
        self.spec
            .is_some_and(|spec| spec.stage_tables.contains_key(stage.table()))
    }

    /// An invalid value in `stage`'s table.
    pub fn invalid(&self, stage: StageId, message: String) -> SpecError {
        match self.spec {
            Some(spec) => invalid(spec, stage, message),
            None => SpecError::Invalid {
                path: PathBuf::new(),
                message: format!("[{}] {message}", stage.table()),
            },
        }
    }

    /// Whether the run fetches `split`.
    pub fn fetches(&self, split: &SplitName) -> bool {
        self.dataset.selection.splits.contains(split)
    }

    /// A split a stage uses where the run fetches it and skips where it does not (a val split of
    /// a train-only run) is still one the dataset has: a misspelt name is an error.
    pub fn check_known_split(
        &self,
        stage: StageId,
        key: &str,
        split: &SplitName,
    ) -> Result<(), SpecError> {
        match self.runs {
            true => self
                .dataset
                .manifest
                .split(split)
                .map(drop)
                .map_err(|unknown| self.invalid(stage, format!("{key}: {unknown}"))),
            false => Ok(()),
        }
    }

    /// A split the stage trains on or scores is one the run fetches. Checked only where the
    /// stage runs (a run `--until` an earlier stage may fetch fewer splits), so a typo is found
    /// before the hours of work that come before training.
    pub fn check_split(
        &self,
        stage: StageId,
        key: &str,
        split: &SplitName,
    ) -> Result<(), SpecError> {
        if !self.runs || self.fetches(split) {
            return Ok(());
        }
        let splits = &self.dataset.selection.splits;
        Err(self.invalid(
            stage,
            format!(
                "{key}: {split:?} is not one of the pipeline's splits ({})",
                splits
                    .iter()
                    .map(SplitName::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))
    }
}

fn read_params<P: DeserializeOwned + Default, E: std::fmt::Display>(
    spec: &PipelineSpec,
    stage: StageId,
    check: impl Fn(&P) -> Result<(), E>,
) -> Result<P, SpecError> {
    let params = spec.stage_params(stage.table())?;
    check(&params).map_err(|problem| invalid(spec, stage, problem.to_string()))?;
    Ok(params)
}

fn invalid(spec: &PipelineSpec, stage: StageId, message: String) -> SpecError {
    spec.invalid(stage.table(), format!("[{}] {message}", stage.table()))
}

impl StageId {
    /// Builds the stage from its source; `None` for a stage this build cannot run, nor any stage
    /// after it, and for the optional last stage (`report`) where the pipeline has no table
    /// for it.
    fn build(self, source: &StageSource) -> Result<Option<Box<dyn AnyStage<StageId>>>, SpecError> {
        let stage: Box<dyn AnyStage<StageId>> = match self {
            StageId::FetchAnnotations => Box::new(fetch_annotations::FetchAnnotationsStage::new(
                source.dataset,
            )),
            StageId::Parse => Box::new(parse::ParseStage::new(source.dataset)),
            StageId::FetchVideos => Box::new(fetch_videos::FetchVideosStage::new(source.dataset)),
            #[cfg(feature = "extract")]
            StageId::Extract => Box::new(extract::ExtractStage::from_source(source)?),
            // Without FFmpeg there are no frames to make: `run` stops before extraction.
            #[cfg(not(feature = "extract"))]
            StageId::Extract => return Ok(None),
            StageId::Lists => Box::new(lists::ListsStage::from_source(source)?),
            StageId::Validate => Box::new(validate::ValidateStage::from_source(source)?),
            StageId::Train => Box::new(train::TrainStage::from_source(source)?),
            StageId::Eval => Box::new(eval::EvalStage::from_source(source)?),
            StageId::Report => match report::ReportStage::from_source(source)? {
                Some(stage) => Box::new(stage),
                None => return Ok(None),
            },
            // Built before the others, from the pipeline file alone (`import::ImportStage`).
            StageId::Import => return Ok(None),
        };
        Ok(Some(stage))
    }
}

/// The product's stages, in order, and the dataset they prepare.
pub struct ProductStages {
    pub stages: Vec<(StageId, Box<dyn AnyStage<StageId>>)>,
    pub dataset: crate::manifest::DatasetInfo,
    /// Whether its annotations are downloaded (not copied from a folder on disk).
    pub downloads_annotations: bool,
}

impl ProductStages {
    /// A data directory holds one downloaded dataset. Another's manifest lists other sizes and
    /// checksums: the annotations downloaded there would be refused and their archive removed
    /// from the downloads. So a command that downloads another dataset than the one planned
    /// there is refused before any work. A new version of the same dataset is welcome, as is a
    /// dataset of files on disk (an import's, made again from other exports): the stages redo
    /// what it changed, and nothing there is removed.
    pub fn refuse_another_held(&self, data_dir: &Path) -> Result<(), String> {
        if !self.downloads_annotations {
            return Ok(());
        }
        let Some((name, version)) = held_dataset(data_dir) else {
            return Ok(());
        };
        let named = &self.dataset;
        if name == named.name {
            return Ok(());
        }
        let made_by = match made_by::making_command(data_dir) {
            Some(command) => format!(", made by `{command}`"),
            None => String::new(),
        };
        Err(format!(
            "{} holds the dataset `{name}` {version}{made_by}; this command names `{}` {}. A data directory holds one dataset: give `{}` another `--data-dir`",
            data_dir.display(),
            named.name,
            named.version,
            named.name
        ))
    }

    /// Every stage a pipeline file describes, each built from its table, so that every table is
    /// read and checked before anything runs. `until`: the last stage that will run; the splits
    /// of the stages after it are not checked.
    pub fn from_spec(spec: &PipelineSpec, until: Option<StageId>) -> Result<Self, ConfigError> {
        let dataset = Dataset::from_spec(spec)?;
        Ok(Self::build(Some(spec), &dataset, until)?)
    }

    /// The stages up to and including `last` for a command that runs them from its flags: the
    /// dataset they prepare, and every stage table's defaults.
    pub fn for_command(dataset: &Dataset, last: StageId) -> Result<Self, SpecError> {
        Ok(Self::build(None, dataset, Some(last))?.through(last))
    }

    fn build(
        spec: Option<&PipelineSpec>,
        dataset: &Dataset,
        until: Option<StageId>,
    ) -> Result<Self, SpecError> {
        let mut stages = Vec::new();
        for id in StageId::ALL.into_iter().filter(|id| *id != StageId::Import) {
            let source = StageSource {
                spec,
                dataset,
                runs: until.is_none_or(|last| id <= last),
            };
            match id.build(&source)? {
                Some(stage) => stages.push((id, stage)),
                None => break,
            }
        }
        Ok(ProductStages {
            stages,
            dataset: dataset.manifest.dataset.clone(),
            downloads_annotations: !dataset.fetch.annotations_on_disk(),
        })
    }

    /// The stages up to and including `last`.
    pub fn through(mut self, last: StageId) -> Self {
        self.stages.retain(|(id, _)| *id <= last);
        self
    }

    pub fn as_refs(&self) -> Vec<&dyn AnyStage<StageId>> {
        self.stages
            .iter()
            .map(|(_, stage)| stage.as_ref())
            .collect()
    }
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
    let gone_on_purpose = |file: &Path| fetch_videos::deleted_on_purpose(&layout, file);
    let mismatches = crate::fetch::verify_recorded(&layout, &gone_on_purpose)?;
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

    /// A failed video's reason is its stage's error until the stage makes it; a stop by Ctrl-C
    /// leaves the reason as it was.
    #[test]
    fn a_video_without_frames_is_said_failed_in_its_stage_s_words_until_made() {
        use crate::pipeline::{ItemError, ItemRecord};
        let data = tempfile::tempdir().unwrap();
        let layout = DataLayout::new(data.path());
        let video = "-G0kWU7ulls";
        let generic = no_frames_reason(&layout, video);
        assert!(generic.contains("not extracted yet"), "{generic}");
        let failed: Result<ItemRecord, ItemError> = Err(ItemError::input(format!(
            "video {video}: the video ends at 20.9 s"
        )));
        note_video_outcome(&layout, StageId::Extract, video, &failed, false);
        let said = no_frames_reason(&layout, video);
        assert_eq!(said, "extract failed: the video ends at 20.9 s");
        let stopped: Result<ItemRecord, ItemError> = Err(ItemError::input("interrupted"));
        note_video_outcome(&layout, StageId::Extract, video, &stopped, true);
        assert_eq!(no_frames_reason(&layout, video), said);
        note_video_outcome(
            &layout,
            StageId::Extract,
            video,
            &Ok(ItemRecord::default()),
            false,
        );
        assert_eq!(no_frames_reason(&layout, video), generic);
    }

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
    /// `scripts/demo.sh` makes first, own-dataset's the dataset `avaprep import` writes, and
    /// own-videos' imports its own: the CLI tests run them; own-videos' import table is checked
    /// here).
    #[test]
    fn the_shipped_pipeline_files_are_valid() {
        let folder = crate::testing::repo_root().join("pipelines");
        let mut checked = 0;
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path
                .file_name()
                .is_some_and(|name| name == "demo.toml" || name == "own-dataset.toml")
            {
                continue;
            }
            if path
                .file_name()
                .is_some_and(|name| name == "own-videos.toml")
            {
                // Its videos folder is the user's to name: any folder will do here.
                let videos = ["import.videos=\".\"".to_string()];
                let spec = PipelineSpec::load(&path, &videos, &StageId::tables()).unwrap();
                assert!(import_stage(&spec).unwrap().is_some());
                continue;
            }
            let spec = PipelineSpec::load(&path, &[], &StageId::tables())
                .unwrap_or_else(|error| panic!("{error}"));
            let built = ProductStages::from_spec(&spec, None)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            assert!(built.stages.len() >= 7);
            checked += 1;
        }
        assert!(checked >= 3, "{checked} pipeline files");
    }

    /// A stage `fetch` makes names `fetch`, and the commands that make it for videos on disk
    /// and for a pipeline (a walk followed `run avaprep fetch first` on a data directory of
    /// videos on disk and `fetch` tried to download them); other stages name their own, with
    /// the data directory where it is not the default.
    #[test]
    fn a_blocker_names_every_command_that_makes_it() {
        let text = |stage, data_dir: &str| {
            blocker_text(
                &crate::pipeline::Blocker {
                    stage,
                    reason: "failed in its last run".into(),
                    in_this_run: false,
                },
                Path::new(data_dir),
            )
        };
        let parse = text(StageId::Parse, "./data");
        assert!(
            parse.starts_with("parse failed in its last run; run `avaprep fetch` first")
                && parse.contains("`avaprep extract --videos DIR`")
                && parse.contains("`avaprep run PIPELINE`"),
            "{parse}"
        );
        assert_eq!(
            text(StageId::Extract, "data"),
            "extract failed in its last run; run `avaprep extract` first"
        );
        assert_eq!(
            text(StageId::Lists, "/lab/my ava"),
            "lists failed in its last run; run `avaprep --data-dir '/lab/my ava' lists` first"
        );
        // A stage that failed in this very run: its error is above, and running it first is
        // what the user just did (a walk was told `run avaprep fetch first` after a fetch).
        let this_run = blocker_text(
            &crate::pipeline::Blocker {
                stage: StageId::FetchAnnotations,
                reason: "failed".into(),
                in_this_run: true,
            },
            Path::new("./data"),
        );
        assert_eq!(this_run, "fetch-annotations failed (above)");
    }

    /// Videos on disk begin at the manifest's `video_start` unless one is given, 0 included (a
    /// walk found `--video-start 0` taken for unset, the files then read 895 s late).
    #[test]
    fn a_video_start_given_is_kept_even_when_it_is_0() {
        let path = crate::testing::repo_root().join("manifests/ava-v2.2.toml");
        let mut manifest = DatasetManifest::load(&path).unwrap();
        manifest.dataset.video_start = 895.0;
        let start = |given: Option<f64>| {
            let fetch = FetchParams {
                videos: Some("videos".into()),
                video_start: given,
                ..FetchParams::default()
            };
            let dataset = Dataset::new(manifest.clone(), Selection::default(), fetch).unwrap();
            dataset.fetch.videos_on_disk().unwrap().start_seconds
        };
        assert_eq!(start(None), 895.0);
        assert_eq!(start(Some(0.0)), 0.0);
        assert_eq!(start(Some(900.0)), 900.0);
    }

    #[test]
    fn stages_are_listed_in_dependency_order() {
        let mut sorted = StageId::ALL;
        sorted.sort();
        assert_eq!(sorted, StageId::ALL);
    }
}
