//! Wires the product's stages into the pipeline, in the order
//! fetch-annotations -> parse -> fetch-videos -> extract -> lists -> validate -> train.

use std::path::Path;

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

pub fn build(
    _spec: &PipelineSpec,
    _manifest: &DatasetManifest,
    _data_dir: &Path,
) -> anyhow::Result<ProductStages> {
    Ok(ProductStages {
        stages: Vec::new(),
        unimplemented: PIPELINE_ORDER.to_vec(),
    })
}
