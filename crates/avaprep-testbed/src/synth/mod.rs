//! `avaprep synth`: a deterministic miniature of AVA 2.2 laid out as a download mirror.
//!
//! Real encoded videos (H.264 in mp4/mkv, VP9 in webm, mixed frame rates, one VFR file, a
//! non-zero start time) plus annotation files in the exact AVA formats, so that every pipeline
//! stage can be tested on real data without downloading AVA. Every frame carries a burned-in
//! code of its source index ([`read_frame_code`]) so extracted JPEGs can be traced back.

mod annotations;
mod code;
mod encode;
pub mod exports;
mod manifest;
mod mirror;
mod plan;
mod scene;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

pub use code::read_frame_code;
pub use manifest::{DEFAULT_BASE_URL, MANIFEST_FILE};
pub use plan::{ACTIONS, Action};

/// How the synthetic dataset is timed: `Quick` for unit tests, `AvaTimes` for AVA's own seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// 36 s videos, their seconds 5..35 annotated as AVA's 900..930 (keyframes 902..=927).
    Quick,
    /// 1802 s low-resolution videos, segment [900, 1801), keyframes 902..=1798 as AVA.
    AvaTimes,
}

impl std::fmt::Display for Profile {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            Profile::Quick => "quick",
            Profile::AvaTimes => "ava-times",
        })
    }
}

impl std::str::FromStr for Profile {
    type Err = SynthError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "quick" => Ok(Profile::Quick),
            "ava-times" => Ok(Profile::AvaTimes),
            other => Err(SynthError::Config(format!(
                "unknown profile {other:?} (expected quick or ava-times)"
            ))),
        }
    }
}

/// What to generate and where.
#[derive(Clone, Debug)]
pub struct SynthConfig {
    pub out: PathBuf,
    pub videos: usize,
    pub seed: u64,
    pub profile: Profile,
    /// Also write the ground truth as CVAT and VIA exports (`exports/`), for `avaprep import`.
    pub exports: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error("invalid synth configuration: {0}")]
    Config(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("encoding {path}: {what}: {source}")]
    Ffmpeg {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: ffmpeg_next::Error,
    },
    #[error("libav has no encoder {0:?} (FFmpeg built without it?)")]
    MissingEncoder(&'static str),
    #[error("building {path}: {source}")]
    Zip {
        path: PathBuf,
        #[source]
        source: zip::result::ZipError,
    },
    #[error("writing synth report: {0}")]
    Json(#[from] serde_json::Error),
    #[error("a video worker panicked")]
    WorkerPanic,
}

impl SynthError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        SynthError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Annotated time span, in AVA seconds (from the stream's first timestamp).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TimeRange {
    /// Start of the annotated segment, inclusive.
    pub segment_start: u32,
    /// End of the annotated segment, exclusive.
    pub segment_end: u32,
    pub first_keyframe: u32,
    pub last_keyframe: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct LabelInfo {
    pub id: u32,
    pub name: String,
    pub label_type: String,
    /// Listed in the scored-subset label map (the `_for_activitynet_2019` analogue).
    pub scored: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct VideoReport {
    pub id: String,
    pub file_name: String,
    /// "train", "val" or "test".
    pub split: String,
    /// Mirror path relative to `out`.
    pub path: String,
    /// "h264" or "vp9".
    pub codec: String,
    /// "mp4", "matroska" or "webm".
    pub container: String,
    pub width: u32,
    pub height: u32,
    /// "30/1", "30000/1001", ... or "vfr".
    pub frame_rate: String,
    pub b_frames: bool,
    pub frames: usize,
    /// Container time of the first frame (what AVA second 0 maps to).
    pub start_time_s: f64,
    /// Time from the first frame to the end of the last one.
    pub duration_s: f64,
    pub actors: usize,
    /// Annotated keyframes (inclusive); `None` for test videos (no ground truth).
    pub first_keyframe: Option<u32>,
    pub last_keyframe: Option<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct MirrorFile {
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

/// Everything an integrator needs to build a manifest; also written as `synth-report.json`.
#[derive(Clone, Debug, Serialize)]
pub struct SynthReport {
    pub profile: Profile,
    pub seed: u64,
    /// The annotated times on the dataset's clock.
    pub times: TimeRange,
    /// The dataset second at each file's time 0 (the quick profile: 895, so its files' seconds
    /// 5..35 are AVA's 900..930).
    pub video_start: u32,
    pub labels: Vec<LabelInfo>,
    pub videos: Vec<VideoReport>,
    pub files: Vec<MirrorFile>,
    /// Wall time of the run; not part of the deterministic output.
    pub elapsed_s: f64,
}

/// File name of the report inside `out`.
pub const REPORT_FILE: &str = "synth-report.json";

/// Generates the mirror under `config.out` and returns (and writes) its report.
pub fn generate(config: &SynthConfig) -> Result<SynthReport, SynthError> {
    let started = Instant::now();
    if config.videos == 0 {
        return Err(SynthError::Config("--videos must be at least 1".into()));
    }
    ffmpeg_next::init().map_err(|source| SynthError::Ffmpeg {
        path: config.out.clone(),
        what: "initialising libav",
        source,
    })?;
    let plan = plan::DatasetPlan::new(config.profile, config.videos, config.seed);
    let layout = mirror::Layout::new(&config.out);
    layout.create_dirs()?;
    encode::encode_all(&plan, &layout)?;
    let texts = annotations::AnnotationTexts::build(&plan);
    let files = mirror::write_annotations(&layout, &plan, &texts)?;
    if config.exports {
        exports::write_exports(&plan, &config.out)?;
    }
    let report = SynthReport {
        profile: config.profile,
        seed: config.seed,
        times: TimeRange {
            segment_start: plan.times.segment_start + plan.video_start,
            segment_end: plan.times.segment_end + plan.video_start,
            first_keyframe: plan.times.first_keyframe + plan.video_start,
            last_keyframe: plan.times.last_keyframe + plan.video_start,
        },
        video_start: plan.video_start,
        labels: plan::label_infos(),
        videos: plan
            .videos
            .iter()
            .map(|v| v.report(plan.video_start))
            .collect(),
        files,
        elapsed_s: started.elapsed().as_secs_f64(),
    };
    let json = serde_json::to_vec_pretty(&report)?;
    mirror::write_atomic(&config.out.join(REPORT_FILE), &json)?;
    let dataset = manifest::dataset_manifest(&report, &texts);
    let toml = toml::to_string(&dataset).expect("a manifest serialises");
    mirror::write_atomic(&config.out.join(MANIFEST_FILE), toml.as_bytes())?;
    Ok(report)
}
