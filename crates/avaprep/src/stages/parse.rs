//! `parse`: reads every annotation file of the chosen splits with the strict readers and writes
//! the video plan (`work/videos.json`) every later stage works from.

use serde::{Deserialize, Serialize};

use super::{Dataset, StageId};
use crate::annotations::plan::{Selection, build_plan, plan_inputs};
use crate::layout::DataLayout;
use crate::manifest::DatasetManifest;
use crate::pipeline::{ItemError, ItemRecord, Stage, StageContext};
use crate::records::VideosOnDisk;

/// What the plan holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanCounts {
    pub videos: u64,
    pub keyframes: u64,
}

pub struct ParseStage {
    pub manifest: DatasetManifest,
    pub selection: Selection,
    /// The videos already on disk, when they are not downloaded.
    pub on_disk: Option<VideosOnDisk>,
}

impl ParseStage {
    pub fn new(dataset: &Dataset) -> Self {
        ParseStage {
            manifest: dataset.manifest.clone(),
            selection: dataset.selection.clone(),
            on_disk: dataset.fetch.videos_on_disk(),
        }
    }
}

impl Stage for ParseStage {
    type Id = StageId;

    fn id(&self) -> StageId {
        StageId::Parse
    }

    fn depends_on(&self) -> &'static [StageId] {
        &[StageId::FetchAnnotations]
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "version": 3,
            "dataset": self.manifest.dataset,
            "splits": self.manifest.splits,
            "labels": self.manifest.labels,
            "selection": self.selection,
            "videos_on_disk": self.on_disk,
        })
    }

    fn run_item(&self, context: &StageContext, _item: &str) -> Result<ItemRecord, ItemError> {
        let layout = DataLayout::new(context.data_dir);
        let plan = build_plan(
            &self.manifest,
            &layout,
            &self.selection,
            self.on_disk.as_ref(),
        )
        .map_err(ItemError::input)?;
        plan.write(&layout.video_plan()).map_err(ItemError::input)?;
        let keyframes: usize = plan.videos.iter().map(|video| video.keyframes.len()).sum();
        let counts = PlanCounts {
            videos: plan.videos.len() as u64,
            keyframes: keyframes as u64,
        };
        let read: Vec<String> = plan_inputs(&self.manifest, &self.selection, self.on_disk.as_ref())
            .iter()
            .map(|name| layout.relative(&layout.annotations().join(name)))
            .collect();
        let read: Vec<&str> = read.iter().map(String::as_str).collect();
        let made = layout.relative(&layout.video_plan());
        let record = ItemRecord::of_files(context.data_dir, &[&made], &read)
            .map(|record| record.with_counts(&counts));
        // Which videos the folder holds is part of the plan: a video that appears there (or a
        // file renamed) plans again.
        match &self.on_disk {
            Some(on_disk) => record.and_then(|record| {
                record.with_names_input(context.data_dir, &on_disk.folder.to_string_lossy())
            }),
            None => record,
        }
        .map_err(ItemError::input)
    }
}
