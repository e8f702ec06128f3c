//! The `parse` pipeline stage.

use super::plan::{Selection, build_plan, write_plan};
use crate::layout::DataLayout;
use crate::manifest::DatasetManifest;
use crate::pipeline::{Granularity, ItemError, ItemRecord, Stage, StageContext, WHOLE};

pub struct ParseStage {
    pub manifest: DatasetManifest,
    pub selection: Selection,
}

impl Stage for ParseStage {
    fn name(&self) -> &'static str {
        "parse"
    }

    fn depends_on(&self) -> &'static [&'static str] {
        &["fetch-annotations"]
    }

    fn granularity(&self) -> Granularity {
        Granularity::Whole
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "version": 1,
            "dataset": self.manifest.dataset,
            "splits": self.manifest.splits,
            "labels": self.manifest.labels,
            "selection": self.selection,
        })
    }

    fn plan(&self, _context: &StageContext) -> Result<Vec<String>, ItemError> {
        Ok(vec![WHOLE.to_string()])
    }

    fn run_item(&self, context: &StageContext, _item: &str) -> Result<ItemRecord, ItemError> {
        let layout = DataLayout::new(context.data_dir);
        let plan = build_plan(&self.manifest, &layout, &self.selection)
            .map_err(|error| ItemError::new(error.to_string()))?;
        write_plan(&plan, &layout.video_plan())
            .map_err(|error| ItemError::new(error.to_string()))?;
        let keyframes: usize = plan.videos.iter().map(|video| video.keyframes.len()).sum();
        let mut record = ItemRecord {
            files: 1,
            ..ItemRecord::default()
        };
        record
            .counts
            .insert("videos".into(), plan.videos.len() as u64);
        record.counts.insert("keyframes".into(), keyframes as u64);
        Ok(record)
    }
}
