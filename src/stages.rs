//! Wires the product's stages into the pipeline, in the order
//! fetch-annotations -> parse -> fetch-videos -> extract -> lists -> validate -> train.

use std::path::Path;

use anyhow::Context as _;

use crate::annotations::plan::Selection;
use crate::annotations::read_video_ids;
use crate::annotations::stage::ParseStage;
#[cfg(feature = "extract")]
use crate::extract::stage::{ExtractParams, ExtractStage};
use crate::fetch::{FetchAnnotationsStage, FetchParams, FetchVideosStage};
use crate::manifest::DatasetManifest;
use crate::pipeline::{PipelineSpec, Stage};

/// Every stage of the product pipeline, in dependency order.
pub const PIPELINE_ORDER: &[&str] = &[
    "fetch-annotations",
    "parse",
    "fetch-videos",
    "extract",
    "lists",
    "validate",
    "train",
];

/// The stages that exist so far, built from a pipeline file and its dataset. A run stops after the
/// last of them; `unimplemented` names the rest so `run` and `status` can say so plainly.
pub struct ProductStages {
    pub stages: Vec<Box<dyn Stage>>,
    pub unimplemented: Vec<&'static str>,
}

impl ProductStages {
    /// The stages up to and including `last`, for single-step commands such as `fetch`.
    pub fn through(mut self, last: &str) -> Self {
        if let Some(position) = self.stages.iter().position(|stage| stage.name() == last) {
            self.stages.truncate(position + 1);
        }
        self.unimplemented.clear();
        self
    }

    /// Only the stage named `name`; the stages before it count with what they recorded.
    pub fn only(mut self, name: &str) -> Self {
        self.stages.retain(|stage| stage.name() == name);
        self.unimplemented.clear();
        self
    }
}

pub fn build(
    spec: &PipelineSpec,
    manifest: &DatasetManifest,
    _data_dir: &Path,
) -> anyhow::Result<ProductStages> {
    let fetch: FetchParams = spec.stage_params("fetch")?;
    let mut manifest = manifest.clone();
    for base_url in &fetch.base_url {
        manifest.apply_base_url(base_url)?;
    }
    let video_list =
        match &spec.video_list {
            Some(path) => Some(read_video_ids(path).with_context(|| {
                format!("reading the video list named by {}", spec.path.display())
            })?),
            None => None,
        };
    let selection = Selection {
        splits: spec.splits.clone(),
        videos_per_split: spec.videos_per_split,
        video_list,
    };
    #[cfg_attr(not(feature = "extract"), allow(unused_mut))]
    let mut stages: Vec<Box<dyn Stage>> = vec![
        Box::new(FetchAnnotationsStage {
            manifest: manifest.clone(),
            params: fetch.clone(),
        }),
        Box::new(ParseStage {
            manifest: manifest.clone(),
            selection,
        }),
        Box::new(FetchVideosStage {
            manifest,
            params: fetch,
        }),
    ];
    #[cfg(feature = "extract")]
    {
        let params: ExtractParams = spec.stage_params("extract")?;
        stages.push(Box::new(ExtractStage { params }));
    }
    let unimplemented = PIPELINE_ORDER[stages.len()..].to_vec();
    Ok(ProductStages {
        stages,
        unimplemented,
    })
}
