//! The `import` stage: annotation-tool exports (CVAT, VIA) and a folder of videos read into a
//! dataset definition under the data directory (`import/`), which the stages after it prepare.
//! It runs first, on its own: the other stages are built from the dataset it makes.
//!
//! A pipeline with an `[import]` table names no `dataset`; its paths are relative to the
//! pipeline file, as `dataset` is. The item's inputs are the prints of the exports and the
//! other files it reads and the listing of the videos folder, so an edited export or a video
//! added imports again, and what changed flows on to the stages after it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::StageId;
use crate::import::{
    ActionSource, Browser, ImportOptions, ImportSummary, SplitRule, TEST_SPLIT, import,
};
use crate::layout::{DataLayout, IMPORT_DIR};
use crate::pipeline::spec::SpecError;
use crate::pipeline::state::CountsMismatch;
use crate::pipeline::{
    ItemError, ItemRecord, PipelineSpec, PlannedItem, Stage, StageContext, StageReport, WHOLE,
};
use crate::progress::counted;

/// The `[import]` table: what `avaprep import` takes as flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImportParams {
    pub exports: Vec<PathBuf>,
    pub videos: PathBuf,
    /// `label`, `checkboxes` or `attribute:NAME`.
    pub action_from: String,
    pub keyframe_interval: u32,
    pub val_fraction: f64,
    pub seed: u64,
    /// The val split's videos by id, instead of a fraction.
    pub val: Vec<String>,
    pub detections: Option<PathBuf>,
    pub excluded: Option<PathBuf>,
    /// The browser VIA projects were labelled in: `chromium` or `firefox`. Left out of the
    /// stage's key when it is the default, so imports made before it existed are not redone.
    #[serde(skip_serializing_if = "is_chromium")]
    pub via_browser: Browser,
    /// Videos of the folder to predict on, by id: the test split, scored at the detector's
    /// boxes. Left out of the stage's key when empty, as `via_browser` is.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub test: BTreeSet<String>,
}

fn is_chromium(browser: &Browser) -> bool {
    *browser == Browser::Chromium
}

/// As `avaprep import`'s flags default.
impl Default for ImportParams {
    fn default() -> Self {
        ImportParams {
            exports: Vec::new(),
            videos: PathBuf::new(),
            action_from: "label".into(),
            keyframe_interval: 1,
            val_fraction: 0.2,
            seed: 0,
            val: Vec::new(),
            detections: None,
            excluded: None,
            via_browser: Browser::Chromium,
            test: BTreeSet::new(),
        }
    }
}

impl ImportParams {
    /// The import these settings ask for, writing to `out`: what `avaprep import` and the
    /// pipeline's `[import]` both run.
    pub fn options(&self, actions: ActionSource, out: PathBuf) -> ImportOptions {
        let split = match self.val.is_empty() {
            true => SplitRule::Fraction {
                val: self.val_fraction,
                seed: self.seed,
            },
            false => SplitRule::Given(self.val.iter().cloned().collect()),
        };
        ImportOptions {
            exports: self.exports.clone(),
            videos: self.videos.clone(),
            out,
            actions,
            keyframe_interval: self.keyframe_interval,
            split,
            detections: self.detections.clone(),
            excluded: self.excluded.clone(),
            via_browser: self.via_browser,
            test: self.test.clone(),
        }
    }
}

/// What the import made, for the run's summary.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ImportCounts {
    pub videos: u64,
    pub keyframes: u64,
    pub boxes: u64,
    /// Videos left out (unreadable, or annotated but not in the folder).
    pub left_out: u64,
}

pub struct ImportStage {
    pub params: ImportParams,
    pub actions: ActionSource,
}

impl ImportStage {
    /// The pipeline's `[import]` table, its paths resolved against the pipeline file's folder
    /// (absolute, so the stage's key does not depend on how the file was named), its values
    /// checked; `None` for a pipeline that names its dataset instead.
    pub fn from_spec(spec: &PipelineSpec) -> Result<Option<Self>, SpecError> {
        if !spec.imports() {
            return Ok(None);
        }
        let invalid = |message: String| SpecError::Invalid {
            path: spec.path.clone(),
            message: format!("[import] {message}"),
        };
        let mut params: ImportParams = spec.stage_params(StageId::Import.table())?;
        let actions: ActionSource = params
            .action_from
            .parse()
            .map_err(|message| invalid(format!("action_from: {message}")))?;
        let folder =
            std::path::absolute(spec.folder()).map_err(|error| invalid(error.to_string()))?;
        for export in &mut params.exports {
            *export = folder.join(&*export);
        }
        params.videos = folder.join(&params.videos);
        for file in [&mut params.detections, &mut params.excluded]
            .into_iter()
            .flatten()
        {
            *file = folder.join(&*file);
        }
        crate::import::check_options(&params.options(actions.clone(), PathBuf::new()))
            .map_err(|bad| invalid(bad.to_string()))?;
        if params.val.is_empty()
            && params.val_fraction == 0.0
            && spec.splits.iter().any(|s| s == "val")
        {
            return Err(invalid(
                "val_fraction 0 makes no val split, and the pipeline's `splits` name val: set val_fraction above 0, name val videos (`val = [...]`), or leave val out of `splits` and [eval]".into(),
            ));
        }
        if !params.test.is_empty() && !spec.splits.iter().any(|s| s == TEST_SPLIT) {
            return Err(invalid(format!(
                "test names videos to predict on, but the pipeline's `splits` do not name {TEST_SPLIT}: add it to `splits` and to [eval] `splits`"
            )));
        }
        Ok(Some(ImportStage { params, actions }))
    }

    /// What the import reads, as prints: each file's bytes, and the videos folder's names and
    /// sizes (a video is read for its length, which its size stands for here).
    fn read_prints(&self) -> Result<serde_json::Value, ItemError> {
        let files = self
            .params
            .exports
            .iter()
            .chain(&self.params.detections)
            .chain(&self.params.excluded);
        let mut prints = serde_json::Map::new();
        for file in files {
            let bytes = std::fs::read(file)
                .map_err(|error| ItemError::input(format!("{}: {error}", file.display())))?;
            let digest = hex::encode(Sha256::digest(&bytes));
            prints.insert(file.to_string_lossy().into_owned(), digest.into());
        }
        let folder = &self.params.videos;
        let entries = std::fs::read_dir(folder)
            .map_err(|error| ItemError::input(format!("{}: {error}", folder.display())))?;
        let mut videos: Vec<(String, u64)> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let size = entry.metadata().ok().filter(|m| m.is_file())?.len();
                Some((entry.file_name().to_string_lossy().into_owned(), size))
            })
            .collect();
        videos.sort();
        Ok(serde_json::json!({ "files": prints, "videos": videos }))
    }
}

impl Stage for ImportStage {
    type Id = StageId;

    fn id(&self) -> StageId {
        StageId::Import
    }

    fn depends_on(&self) -> &'static [StageId] {
        &[]
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "version": 1, "params": self.params })
    }

    fn plan(&self, _context: &StageContext) -> Result<Vec<PlannedItem>, ItemError> {
        Ok(vec![PlannedItem::new(WHOLE, self.read_prints()?)])
    }

    fn run_item(&self, context: &StageContext, _item: &str) -> Result<ItemRecord, ItemError> {
        let options = self
            .params
            .options(self.actions.clone(), context.data_dir.join(IMPORT_DIR));
        let summary = import(&options).map_err(|error| match error.is_usage() {
            true => ItemError::usage(format!("[import] {error}")),
            false => ItemError::input(error),
        })?;
        for problem in &summary.skipped_videos {
            context
                .reporter
                .stage_note(self.id().name(), &format!("left out: {problem}"));
        }
        for line in summary.box_lines() {
            context.reporter.stage_note(self.id().name(), &line);
        }
        for note in summary.missing_video_notes(&options.videos) {
            context.reporter.stage_note(self.id().name(), &note);
        }
        if let Some(note) = summary.gone_video_note(&options.out) {
            context.reporter.stage_note(self.id().name(), &note);
        }
        let notes =
            summary
                .detection_notes()
                .into_iter()
                .chain(summary.browser_note(|browser| {
                    format!("via_browser = \"{}\" in [import]", browser.name())
                }));
        let import_dir = context.data_dir.join(IMPORT_DIR);
        let afresh = format!(
            "remove {} (the next run imports anew)",
            import_dir.display()
        );
        let notes = notes
            .chain(summary.action_note(|source| {
                format!("action_from = \"{source}\" in [import], after removing {} (its label map keeps `person` as an action)", import_dir.display())
            }))
            .chain(summary.val_note("`val = [...]` in [import]"))
            .chain(summary.slipped_action_note(&afresh))
            .chain(summary.unboxed_action_note(&afresh));
        for note in notes {
            context.reporter.stage_note(self.id().name(), &note);
        }
        let layout = DataLayout::new(context.data_dir);
        let made = layout.relative(&context.data_dir.join(IMPORT_DIR));
        let record = ItemRecord::of_files(context.data_dir, &[made.as_str()], &[])
            .map_err(ItemError::input)?;
        Ok(record.with_counts(&counts(&summary)))
    }

    fn summary(&self, report: &StageReport<StageId>) -> Result<Vec<String>, CountsMismatch> {
        let counts: ImportCounts = report.counts_as()?;
        if counts.videos == 0 {
            return Ok(Vec::new());
        }
        let mut line = format!(
            "{}, {}, {}",
            counted(counts.videos, "video", "videos"),
            counted(counts.keyframes, "keyframe", "keyframes"),
            counted(counts.boxes, "box", "boxes")
        );
        if counts.left_out > 0 {
            line.push_str(&format!(
                "; {} left out (named in {IMPORT_DIR}/import.json)",
                counted(counts.left_out, "video", "videos")
            ));
        }
        Ok(vec![line])
    }

    fn edits_belong(&self, data_dir: &Path) -> Option<String> {
        let annotations = data_dir.join(IMPORT_DIR).join("annotations");
        crate::layout::imported_edits_belong(&annotations, data_dir)
    }
}

fn counts(summary: &ImportSummary) -> ImportCounts {
    ImportCounts {
        videos: summary.splits.values().map(Vec::len).sum::<usize>() as u64,
        keyframes: summary.keyframes,
        boxes: summary.boxes,
        left_out: (summary.skipped_videos.len() + summary.missing_videos.len()) as u64,
    }
}
