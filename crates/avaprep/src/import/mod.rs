//! `avaprep import`: annotation-tool exports (CVAT for video 1.1, CVAT for images 1.1, VIA 3,
//! whole-clip CSV) in, a dataset of videos on disk out, in AVA's files and on AVA's clock.
//!
//! Every consumer (PySlowFast's `ava_helper`, pytorchvideo's `Ava`, mmaction2's `AVADataset`)
//! assumes AVA's clock: row 0 of a video's frames is second 900 and keyframes are the seconds
//! 902..1798. So the dataset is written on that clock: a file's second `s` (from its first
//! timestamp) is the dataset's `s + start`, where `start` puts the earliest annotated keyframe of
//! any video on 902. A video whose keyframes would then pass 1798 gets a clock of its own (its
//! earliest annotated keyframe on 902), and a file annotated over more than AVA's 897 keyframe
//! seconds is cut into parts, each on its own clock. Rows from 900 to the
//! file's start show its first frame, as a consumer shows the first frame for a clip that reaches
//! before a video's start. `video_spans.csv` records each video's clock and where its file ends
//! (`video_id,start,end[,file]`), so nothing past a video's end is extracted or listed, and what
//! people read (predict's, eval's and report's seconds) is said on the file's clock too.

pub mod cvat;
pub mod export;
pub mod keyframes;
pub mod resolve;
pub mod via;
pub mod whole_clip;
mod write;

pub use write::{DatasetPipeline, MANIFEST, TEST_SPLIT, write_pipeline};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::annotations::{
    DETECTION_SCORE_THRESHOLD, KeyframeRange, LabelMap, PredictedBox, ReadOptions, VideoExtension,
    VideoFileName, VideoId, read_predicted_boxes,
};
use crate::bad_setting::BadSetting;
pub use export::{ActionSource, Browser, ExportError};
use export::{Export, ExportedVideo, Track};
use resolve::{KeyframeBox, SampleCounts, VideoFacts};

/// AVA's keyframe seconds, which PySlowFast hard-codes: 902..=1798.
pub const FIRST_KEYFRAME: u32 = 902;
pub const LAST_KEYFRAME: u32 = 1798;
/// The most keyframe seconds a video can span: 897.
pub const MAX_KEYFRAMES: u32 = LAST_KEYFRAME - FIRST_KEYFRAME + 1;

/// Which videos are val (the rest are train).
#[derive(Debug, Clone, PartialEq)]
pub enum SplitRule {
    /// These video ids.
    Given(BTreeSet<String>),
    /// This share of the videos, chosen by a hash of the seed and the id (the same on every
    /// machine). A video an earlier import into the same folder placed by the same share and
    /// seed stays where it was: adding videos never moves one.
    Fraction { val: f64, seed: u64 },
}

#[derive(Debug, Clone)]
pub struct ImportOptions {
    pub exports: Vec<PathBuf>,
    /// The folder of `<id>.<ext>` videos the exports annotate.
    pub videos: PathBuf,
    /// The dataset folder written: `dataset.toml` and `annotations/`.
    pub out: PathBuf,
    pub actions: ActionSource,
    /// Seconds between keyframes (AVA: 1).
    pub keyframe_interval: u32,
    pub split: SplitRule,
    /// A person detector's boxes (AVA's detection CSV, on the videos' own seconds); without it
    /// the ground-truth boxes serve as the proposals, with score 1.0.
    pub detections: Option<PathBuf>,
    /// Keyframes not to train on or score (AVA's excluded-timestamps CSV, `video,second` on the
    /// videos' own seconds); without it none are.
    pub excluded: Option<PathBuf>,
    /// The browser VIA projects were labelled in, which says what their times are.
    pub via_browser: Browser,
    /// Videos of the folder to predict on, by id: not labelled, their keyframes the seconds the
    /// detector boxes people at, each on a clock of its own (AVA's test split).
    pub test: BTreeSet<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error("{0}")]
    Usage(String),
    /// A setting that cannot work, named as the command's flag or the pipeline's key.
    #[error(transparent)]
    Setting(crate::bad_setting::BadSetting),
    #[error("{path}: {message}")]
    Input { path: PathBuf, message: String },
    /// A table of the user's (detections, exclusions) that does not read: the error names its
    /// file and line, and `format` what the file should be.
    #[error("{source} ({format})")]
    Table {
        source: crate::annotations::AnnotationError,
        format: &'static str,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Stopped by Ctrl-C between two videos (or within one, its images discarded).
    #[error("interrupted: {0}")]
    Interrupted(String),
}

impl ImportError {
    /// A value the user gave that no import could honour (exit 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ImportError::Usage(_)
                | ImportError::Setting(_)
                | ImportError::Export(ExportError::ActionSetting { .. })
        )
    }
}

/// What an import did, printed as its summary and written to `import.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ImportSummary {
    pub manifest: PathBuf,
    /// Videos by split.
    pub splits: BTreeMap<String, Vec<String>>,
    pub keyframes: u64,
    pub boxes: u64,
    /// The test videos' keyframes: the seconds the detector boxes someone at, to predict on.
    pub test_keyframes: u64,
    /// Action ids by name (ids stay as they were in an earlier import; new names are appended).
    pub actions: BTreeMap<String, u16>,
    /// Actions labelled in the import but on no box of val: its mAP cannot score them.
    pub actions_not_in_val: Vec<String>,
    /// Actions of the label map that no box has (an earlier import's, since renamed): classes
    /// with no example.
    pub actions_without_boxes: Vec<String>,
    pub clipped_boxes: u64,
    pub boxes_outside_frame: u64,
    pub boxes_without_action: u64,
    pub shapes_off_keyframe: u64,
    /// Those four counts by video, for the videos with any: where to look in the tool.
    pub box_counts_by_video: BTreeMap<String, SampleCounts>,
    /// Detector boxes and exclusions at seconds outside the dataset's keyframes, left out.
    pub detections_off_keyframes: u64,
    /// Detector rows that repeat another as written (the same box, second, label and score):
    /// counted once, as PySlowFast reads a box, and as validate asks of the files.
    pub detections_repeated: u64,
    pub exclusions_off_keyframes: u64,
    /// Videos the detections name that are not imported (their boxes left out), and imported
    /// videos with no detector box at any keyframe (no proposal there: nobody is scored).
    pub detections_of_other_videos: Vec<String>,
    pub videos_without_detections: Vec<String>,
    /// Labelled boxes that are the whole frame (whole-clip labels, VIA temporal segments),
    /// counted where a detector's boxes are the proposals: no person box overlaps them enough
    /// to be scored against them or to take their labels.
    pub whole_frame_boxes: u64,
    /// Annotated videos the folder lacks (their boxes are left out).
    pub missing_videos: Vec<String>,
    /// Of those, the ones the folder has a file for whose name differs only in case: the file.
    pub missing_videos_other_case: BTreeMap<String, String>,
    /// Boxes with the action `person`: the label a person's box has in the labelling tool, most
    /// likely not an action.
    pub person_label_boxes: u64,
    /// New actions one slip of the keyboard from another (`stnad`, `stand`), with that one.
    pub slipped_actions: Vec<[String; 2]>,
    /// Videos left out, with why (unreadable, too long).
    pub skipped_videos: Vec<String>,
    /// Videos an earlier import into the same folder made that this one's exports do not
    /// label: gone from the dataset.
    pub gone_videos: Vec<String>,
    /// `ground truth (score 1.0)` or the detections file.
    pub proposals: String,
    /// Each dataset video's clock: the dataset second at its file's time 0.
    pub file_starts: BTreeMap<String, i64>,
    /// The files annotated over more than AVA's 897 keyframe seconds, and the parts each is cut
    /// into, each on a clock of its own.
    pub parts: BTreeMap<String, Vec<String>>,
    /// The browser VIA projects' times were read as.
    pub via_browser: Browser,
    /// VIA-labelled videos that browsers time a tenth of a second or more apart, with by how
    /// many seconds (a file that does not start at 0 s, or whose sound starts before its video):
    /// `via_browser` decided where their boxes are.
    pub browser_timed_videos: BTreeMap<String, f64>,
    /// The share and seed that chose val (`--val-fraction`, `--seed`); none where `--val`
    /// named the videos.
    pub val_share: Option<ValShare>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct ValShare {
    pub fraction: f64,
    pub seed: u64,
}

/// What an earlier import into the same folder recorded of its splits (`import.json`).
#[derive(Debug, serde::Deserialize)]
struct EarlierImport {
    splits: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    parts: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    val_share: Option<ValShare>,
}

/// The split (train or val) an earlier import into `out` gave each video file, where it chose
/// by the same share and seed; empty otherwise (another rule, no earlier import, an earlier
/// version's record).
/// The videos an earlier import into `out` made that `splits` lack, other than those this
/// import names as missing or left out (said already): an export not given again takes its
/// videos out of the dataset.
fn gone_videos(
    out: &Path,
    splits: &BTreeMap<String, Vec<VideoId>>,
    summary: &ImportSummary,
) -> Vec<String> {
    let Some(earlier) = std::fs::read(out.join(write::SUMMARY))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<EarlierImport>(&bytes).ok())
    else {
        return Vec::new();
    };
    let now: BTreeSet<String> = splits.values().flatten().map(|id| id.to_string()).collect();
    let said = |id: &str| {
        summary.missing_videos.iter().any(|missing| missing == id)
            || summary
                .skipped_videos
                .iter()
                .any(|skipped| skipped.starts_with(&format!("{id}: ")))
    };
    let gone: BTreeSet<String> = earlier
        .splits
        .into_values()
        .flatten()
        .filter(|id| !now.contains(id) && !said(id))
        .collect();
    gone.into_iter().collect()
}

fn earlier_splits(out: &Path, rule: &SplitRule) -> BTreeMap<String, String> {
    let SplitRule::Fraction { val, seed } = rule else {
        return BTreeMap::new();
    };
    let Some(earlier) = std::fs::read(out.join(write::SUMMARY))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<EarlierImport>(&bytes).ok())
        .filter(|earlier| {
            earlier.val_share
                == Some(ValShare {
                    fraction: *val,
                    seed: *seed,
                })
        })
    else {
        return BTreeMap::new();
    };
    let file_of: BTreeMap<&String, &String> = earlier
        .parts
        .iter()
        .flat_map(|(file, parts)| parts.iter().map(move |part| (part, file)))
        .collect();
    earlier
        .splits
        .iter()
        .filter(|(split, _)| split.as_str() != TEST_SPLIT)
        .flat_map(|(split, ids)| {
            ids.iter().map(|id| {
                (
                    file_of.get(id).copied().unwrap_or(id).clone(),
                    split.clone(),
                )
            })
        })
        .collect()
}

impl ImportSummary {
    /// What to tell of the videos whose boxes depend on the browser VIA ran in; `setting` spells
    /// the flag or key that would choose another.
    pub fn browser_note(&self, setting: impl Fn(Browser) -> String) -> Option<String> {
        if self.browser_timed_videos.is_empty() {
            return None;
        }
        let videos: Vec<String> = self
            .browser_timed_videos
            .iter()
            .map(|(video, gap)| format!("{video} by {gap:.3} s"))
            .collect();
        let other = self.via_browser.other();
        Some(format!(
            "VIA times of videos that browsers time differently ({}) were read as labelled in {}; if the project was labelled in {}, import again with {}",
            videos.join(", "),
            self.via_browser.label(),
            other.label(),
            setting(other)
        ))
    }

    /// Warnings about the detector's boxes: videos it names that are not imported, and imported
    /// videos it has no box for.
    pub fn detection_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if !self.detections_of_other_videos.is_empty() {
            notes.push(format!(
                "the detections name videos that are not imported, their boxes left out: {}",
                crate::progress::first_named(&self.detections_of_other_videos, 10)
            ));
        }
        if self.whole_frame_boxes > 0 {
            notes.push(format!(
                "{} the whole frame (whole-clip labels or VIA temporal segments): a detector's person box overlaps such a box by far less than the IoU of 0.5 that scoring needs (and training's `label_iou`), so their actions score about 0; import whole-frame labels without --detections, where the labels' own boxes are the proposals (videos to predict on need a detector, and labels with person boxes)",
                crate::progress::counted(self.whole_frame_boxes, "labelled box is", "labelled boxes are")
            ));
        }
        if !self.videos_without_detections.is_empty() {
            notes.push(format!(
                "the detections have no box at any keyframe of {}: no person there is a proposal, so nobody is scored there",
                self.videos_without_detections.join(", ")
            ));
        }
        notes
    }

    /// Actions the val mAP will not score, as no val box has them, with how to have them
    /// scored; `setting` spells the flag or key that names val videos.
    pub fn val_note(&self, setting: &str) -> Option<String> {
        if self.actions_not_in_val.is_empty() {
            return None;
        }
        Some(format!(
            "no val box has {}: the val mAP scores only the other actions; to have them scored, put videos labelled with them in val ({setting})",
            self.actions_not_in_val.join(", ")
        ))
    }

    /// When the label map keeps actions no box has: they are still classes, trained and scored
    /// with no example (an action renamed in the tool kept its old name as a class); `afresh`
    /// says how to number the actions anew.
    pub fn unboxed_action_note(&self, afresh: &str) -> Option<String> {
        if self.actions_without_boxes.is_empty() {
            return None;
        }
        let actions: Vec<String> = self
            .actions_without_boxes
            .iter()
            .map(|name| format!("`{name}`"))
            .collect();
        Some(format!(
            "no box has {} of the label map (kept from an earlier import, as an action keeps its id): each is still a class, trained and scored with no example; where one was renamed or is no action, {afresh}, which numbers the actions anew",
            actions.join(", ")
        ))
    }

    /// When a new action looks like a misspelt other: both would be classes of their own;
    /// `afresh` says how to import anew, as the label map keeps every action it has.
    pub fn slipped_action_note(&self, afresh: &str) -> Option<String> {
        let pairs: Vec<String> = self
            .slipped_actions
            .iter()
            .map(|[new, like]| format!("`{new}` (like `{like}`)"))
            .collect();
        (!pairs.is_empty()).then(|| {
            format!(
                "new actions one slip of the keyboard from another: {}; each is a class of its own: if one is misspelt, correct it in the labelling tool, export again, and {afresh} (the label map keeps every action it has)",
                pairs.join(", ")
            )
        })
    }

    /// When boxes have the action `person`, the label every box of a person has: their actions
    /// are most likely elsewhere in the boxes; `setting` spells the flag or key that reads them.
    /// It once spoke only where every box was `person`, not of one export among several.
    pub fn action_note(&self, setting: impl Fn(&str) -> String) -> Option<String> {
        let boxes = match self.person_label_boxes {
            0 => return None,
            1 => "1 box's action is".to_string(),
            n => format!("{n} boxes' action is"),
        };
        Some(format!(
            "{boxes} `person`, a person's label: where the actions are checkboxes or an attribute of the boxes (as in the task `keyframes` writes), import again with {} or {}",
            setting("checkboxes"),
            setting("attribute:NAME")
        ))
    }

    /// A line for each kind of box the import cut or left out, with the videos it is in
    /// ("2 boxes without an action, left out (clip_a 1, clip_b 1)").
    pub fn box_lines(&self) -> Vec<String> {
        type Kind = (fn(&SampleCounts) -> u64, [&'static str; 2], &'static str);
        let kinds: [Kind; 4] = [
            (|c| c.clipped, ["box", "boxes"], "clipped to the frame"),
            (
                |c| c.outside_frame,
                ["box", "boxes"],
                "outside the frame, left out",
            ),
            (
                |c| c.without_action,
                ["box", "boxes"],
                "without an action, left out",
            ),
            (
                |c| c.off_keyframe,
                ["shape", "shapes"],
                "far from any keyframe, left out",
            ),
        ];
        kinds
            .into_iter()
            .filter_map(|(count_of, [one, many], what)| {
                let videos: Vec<String> = self
                    .box_counts_by_video
                    .iter()
                    .filter(|(_, counts)| count_of(counts) > 0)
                    .map(|(video, counts)| format!("{video} {}", count_of(counts)))
                    .collect();
                let total: u64 = self.box_counts_by_video.values().map(count_of).sum();
                (total > 0).then(|| {
                    format!(
                        "{} {what} ({})",
                        crate::progress::counted(total, one, many),
                        crate::progress::first_named(&videos, 5)
                    )
                })
            })
            .collect()
    }

    /// The videos an earlier import into the folder made that this one does not label.
    pub fn gone_video_note(&self, out: &Path) -> Option<String> {
        if self.gone_videos.is_empty() {
            return None;
        }
        Some(format!(
            "{} of the earlier import into {} no export given now labels, and the dataset no longer holds: {} (an import makes the dataset of the exports it is given: give every export to keep them)",
            crate::progress::counted(self.gone_videos.len() as u64, "video", "videos"),
            out.display(),
            crate::progress::first_named(&self.gone_videos, 5)
        ))
    }

    /// A line per annotated video the folder lacks, naming a file there whose name differs only
    /// in case.
    pub fn missing_video_notes(&self, folder: &Path) -> Vec<String> {
        self.missing_videos
            .iter()
            .map(|video| {
                let other_case = match self.missing_videos_other_case.get(video) {
                    Some(file) => format!(
                        " ({file} there differs only in case: rename the file, or the video in the export)"
                    ),
                    None => String::new(),
                };
                format!(
                    "video {video} is annotated but not in {}; its boxes are left out{other_case}",
                    folder.display()
                )
            })
            .collect()
    }
}

/// A file's keyframes and boxes there, on its own clock.
struct SampledVideo {
    id: VideoId,
    facts: VideoFacts,
    /// The file's seconds that are keyframes of the dataset: those with a labelled box, or for
    /// a test video those the detector boxes someone at.
    keyframes: BTreeSet<u32>,
    boxes: Vec<KeyframeBox>,
}

impl SampledVideo {
    fn labelled(id: VideoId, facts: VideoFacts, boxes: Vec<KeyframeBox>) -> Self {
        let keyframes = boxes.iter().map(|b| b.second).collect();
        SampledVideo {
            id,
            facts,
            keyframes,
            boxes,
        }
    }
}

/// One video of the dataset: a file, or a part of a long one, with its boxes on the file's
/// clock and the dataset second of the file's time 0.
struct ImportedVideo {
    id: VideoId,
    /// The file it is read from (its own id for a whole file).
    file: VideoId,
    duration: f64,
    /// The file's last instant a keyframe may be at (`VideoFacts::last_instant`).
    last_instant: f64,
    /// Its keyframes on the file's clock (a part's: those in its window).
    keyframes: BTreeSet<u32>,
    boxes: Vec<KeyframeBox>,
    /// The dataset second at the file's time 0: the first annotated keyframe lands on 902.
    file_start: i64,
}

impl ImportedVideo {
    /// The file's second `own` on the dataset's clock.
    fn dataset_second(&self, own: u32) -> i64 {
        i64::from(own) + self.file_start
    }

    /// Whether the file's second `own` is one of this video's keyframes: in the file (a
    /// detector's box at its very end has no frames around it) and in a part's window.
    fn holds(&self, file: VideoId, own: u32) -> bool {
        let second = self.dataset_second(own);
        file == self.file
            && f64::from(own) <= self.last_instant
            && (i64::from(FIRST_KEYFRAME)..=i64::from(LAST_KEYFRAME)).contains(&second)
    }
}

/// The dataset's video holding the file's second `own`, and that second on the dataset's clock.
fn place(videos: &[ImportedVideo], file: VideoId, own: u32) -> Option<(&ImportedVideo, u32)> {
    let video = videos.iter().find(|video| video.holds(file, own))?;
    Some((video, video.dataset_second(own) as u32))
}

/// The dataset second at each file's time 0 where the files share a clock: the earliest annotated
/// keyframe of any video lands on AVA's first, 902.
fn shared_start(videos: &[SampledVideo]) -> i64 {
    let earliest = videos
        .iter()
        .filter_map(|video| video.keyframes.first().copied())
        .min()
        .unwrap_or(0);
    i64::from(FIRST_KEYFRAME) - i64::from(earliest)
}

/// A file's keyframes on the dataset's clock: the files' shared one (`shared_start`) where its
/// keyframes fit in AVA's 902..1798 on it, else a clock of its own, its earliest keyframe on 902.
/// A file whose keyframes span more than AVA's 897 seconds is cut into parts, `<file>_partN`,
/// each on its own clock from its first keyframe, so no consumer drops a keyframe.
fn on_clocks(
    sampled: SampledVideo,
    shared_start: i64,
    videos: &Path,
) -> Result<Vec<ImportedVideo>, ImportError> {
    let last = sampled.keyframes.last().copied().unwrap_or(0);
    if i64::from(last) + shared_start <= i64::from(LAST_KEYFRAME) {
        return Ok(vec![ImportedVideo {
            id: sampled.id,
            file: sampled.id,
            duration: sampled.facts.duration,
            last_instant: sampled.facts.last_instant(),
            keyframes: sampled.keyframes,
            boxes: sampled.boxes,
            file_start: shared_start,
        }]);
    }
    let mut windows: Vec<BTreeSet<u32>> = Vec::new();
    for second in sampled.keyframes {
        match windows.last_mut() {
            Some(window)
                if window
                    .first()
                    .is_some_and(|&first| second < first + MAX_KEYFRAMES) =>
            {
                window.insert(second);
            }
            _ => windows.push(BTreeSet::from([second])),
        }
    }
    let mut boxes = sampled.boxes;
    let count = windows.len();
    let mut parts = Vec::new();
    for (n, keyframes) in windows.into_iter().enumerate() {
        let id = match count {
            1 => sampled.id,
            _ => part_id(sampled.id, n + 1, videos)?,
        };
        let bound = |second: Option<&u32>| *second.expect("a window holds a keyframe");
        let window = bound(keyframes.first())..=bound(keyframes.last());
        let (inside, rest) = boxes
            .into_iter()
            .partition(|b: &KeyframeBox| window.contains(&b.second));
        boxes = rest;
        parts.push(ImportedVideo {
            id,
            file: sampled.id,
            duration: sampled.facts.duration,
            last_instant: sampled.facts.last_instant(),
            file_start: i64::from(FIRST_KEYFRAME) - i64::from(*window.start()),
            keyframes,
            boxes: inside,
        });
    }
    Ok(parts)
}

fn part_id(file: VideoId, n: usize, videos: &Path) -> Result<VideoId, ImportError> {
    let id = format!("{file}_part{n}");
    id.parse().map_err(|reason| ImportError::Input {
        path: videos.to_path_buf(),
        message: format!(
            "video {file}: annotated over more than {MAX_KEYFRAMES} keyframe seconds, so cut into parts on clocks of their own, but its part's id {id:?} is not a video id ({reason}); give the file a shorter name"
        ),
    })
}

/// Reads the exports, matches their videos to the folder, samples every track at the keyframes
/// and writes the dataset. Videos the folder lacks are listed, not fatal; an unreadable or too
/// long video is left out and listed, and the rest are written.
pub fn import(options: &ImportOptions) -> Result<ImportSummary, ImportError> {
    check_options(options).map_err(ImportError::Setting)?;
    let exported = read_exports(options)?;
    let on_disk = videos_in_folder(&options.videos)?;
    let misnamed = misnamed_videos(&options.videos);
    let test_files = test_files(options, &exported, &on_disk)?;
    let detections = options
        .detections
        .as_deref()
        .map(read_own_clock_detections)
        .transpose()?;
    let mut summary = ImportSummary {
        via_browser: options.via_browser,
        ..ImportSummary::default()
    };
    let mut counts = SampleCounts::default();
    let mut sampled = Vec::new();
    for video in &exported {
        let id = video_id(video)?;
        if test_files.iter().any(|file| file.id == id) {
            continue;
        }
        let Some(file) = on_disk.get(&id) else {
            if let Some(misnamed) = misnamed.iter().find(|file| file.id == id.as_str()) {
                summary.skipped_videos.push(format!(
                    "{id}: {misnamed} in {}, and import again (the export may keep its name)",
                    options.videos.display()
                ));
                continue;
            }
            summary.missing_videos.push(id.to_string());
            if let Some(file) = on_disk
                .iter()
                .find(|(there, _)| there.as_str().eq_ignore_ascii_case(id.as_str()))
                .map(|(_, file)| file)
            {
                summary
                    .missing_videos_other_case
                    .insert(id.to_string(), file.to_string());
            }
            continue;
        };
        let probed = probe(&options.videos.join(file.to_string())).and_then(|facts| {
            match frames_past_the_file(video, &facts, file) {
                Some(problem) => Err(problem),
                None => Ok(facts),
            }
        });
        match probed {
            Ok(facts) => {
                let gap = (facts.player_start(Browser::Chromium)
                    - facts.player_start(Browser::Firefox))
                .abs();
                if gap > BROWSERS_AGREE && on_browser_timeline(video) {
                    summary.browser_timed_videos.insert(id.to_string(), gap);
                }
                let keyframes =
                    resolve::keyframe_seconds(facts.last_instant(), options.keyframe_interval);
                let mut video_counts = SampleCounts::default();
                let boxes = resolve::sample(
                    video,
                    &facts,
                    &keyframes,
                    options.keyframe_interval,
                    &mut video_counts,
                );
                counts.add(&video_counts);
                if !video_counts.is_empty() {
                    summary
                        .box_counts_by_video
                        .insert(id.to_string(), video_counts);
                }
                sampled.push(SampledVideo::labelled(id, facts, boxes));
            }
            Err(message) => summary.skipped_videos.push(format!("{id}: {message}")),
        }
    }
    let read = sampled.len();
    sampled.retain(|video| !video.boxes.is_empty());
    if sampled.is_empty() {
        let shapes = exported
            .iter()
            .flat_map(|video| &video.tracks)
            .map(|track| track.shapes.len())
            .sum();
        let found = Found { read, shapes };
        return Err(ImportError::Usage(nothing_to_import(
            options, &summary, found, &counts,
        )));
    }
    // By file: the parts of a long video stay in its split.
    let earlier = earlier_splits(&options.out, &options.split);
    let mut file_splits = split_videos(&sampled, &options.split, &earlier)?;
    if let SplitRule::Fraction { val, seed } = options.split {
        summary.val_share = Some(ValShare {
            fraction: val,
            seed,
        });
    }
    let labelled_start = shared_start(&sampled);
    let mut videos = Vec::new();
    for video in sampled {
        videos.extend(on_clocks(video, labelled_start, &options.videos)?);
    }
    let detections = detections.unwrap_or_default();
    let test = sample_test_videos(options, &test_files, &detections, &mut summary);
    if !options.test.is_empty() && test.is_empty() {
        return Err(ImportError::Usage(format!(
            "no test video could be used: {}",
            summary.skipped_videos.join("; ")
        )));
    }
    if !test.is_empty() {
        file_splits.insert(
            TEST_SPLIT.into(),
            test.iter().map(|video| video.id).collect(),
        );
    }
    for video in test {
        // Each on a clock of its own: videos to predict on never move the labelled ones'.
        let own_start = shared_start(std::slice::from_ref(&video));
        videos.extend(on_clocks(video, own_start, &options.videos)?);
    }
    check_unique_ids(&videos)?;
    let splits = file_splits
        .into_iter()
        .map(|(split, files)| {
            let ids = videos
                .iter()
                .filter(|video| files.contains(&video.file))
                .map(|video| video.id)
                .collect();
            (split, ids)
        })
        .collect();
    summary.gone_videos = gone_videos(&options.out, &splits, &summary);
    summary.clipped_boxes = counts.clipped;
    summary.boxes_outside_frame = counts.outside_frame;
    summary.boxes_without_action = counts.without_action;
    summary.shapes_off_keyframe = counts.off_keyframe;
    write::write_dataset(options, &videos, &splits, &detections, &mut summary)?;
    Ok(summary)
}

/// The files of the videos to predict on (`test`), checked before any video is read: each in
/// the folder, labelled in no export, and only with a detector's boxes to score. A test video's
/// boxes in an export with no action (a keyframes task over the whole folder, nobody ticked
/// there) are no labels, and are left as they are.
fn test_files(
    options: &ImportOptions,
    exported: &[ExportedVideo],
    on_disk: &BTreeMap<VideoId, VideoFileName>,
) -> Result<Vec<VideoFileName>, ImportError> {
    let mut files = Vec::new();
    for name in &options.test {
        let id: VideoId = name.parse().map_err(|reason| {
            ImportError::Usage(format!(
                "test video {name:?}: not a video id ({reason}); rename the file and its detector rows"
            ))
        })?;
        let labelled = exported
            .iter()
            .filter(|video| video_id(video).is_ok_and(|labelled| labelled == id))
            .flat_map(|video| &video.tracks)
            .find(|track| labels_an_action(track));
        if let Some(track) = labelled {
            // Read by label, every box of a keyframes task has the action `person`.
            let by_label = track
                .shapes
                .iter()
                .all(|shape| shape.actions.iter().all(|action| action == "person"));
            let hint = match by_label {
                true => {
                    "; its boxes' only action is `person`, their label: if the actions are checkboxes, as in the task `keyframes` writes, import with --action-from checkboxes (`action_from = \"checkboxes\"` in a pipeline)"
                }
                false => " (a labelled video to score goes in val)",
            };
            return Err(ImportError::Usage(format!(
                "test video {name} is labelled in {}: test videos are the ones to predict on, without labels{hint}",
                track.origin
            )));
        }
        let Some(file) = on_disk.get(&id) else {
            return Err(ImportError::Usage(format!(
                "test video {name} is not in {} (a test video is `<id>.mp4`, `.mkv` or `.webm` there; {})",
                options.videos.display(),
                unlabelled_there(exported, on_disk)
            )));
        };
        files.push(*file);
    }
    Ok(files)
}

/// A track with an action on some box (a box drawn and nothing ticked labels nothing).
fn labels_an_action(track: &Track) -> bool {
    track.shapes.iter().any(|shape| !shape.actions.is_empty())
}

/// "the videos there no export labels: a, b and 3 more", for a test video not found.
fn unlabelled_there(
    exported: &[ExportedVideo],
    on_disk: &BTreeMap<VideoId, VideoFileName>,
) -> String {
    let labelled: BTreeSet<VideoId> = exported
        .iter()
        .filter(|video| video.tracks.iter().any(labels_an_action))
        .filter_map(|video| video_id(video).ok())
        .collect();
    let unlabelled: Vec<String> = on_disk
        .keys()
        .filter(|id| !labelled.contains(id))
        .map(ToString::to_string)
        .collect();
    match unlabelled.is_empty() {
        true => "every video there is labelled".to_string(),
        false => format!(
            "the videos there no export labels: {}",
            crate::progress::first_named(&unlabelled, 10)
        ),
    }
}

/// Each video to predict on, its keyframes the seconds the detector boxes someone at; one that
/// cannot be read, or that the detector boxes nobody in, is left out and named.
fn sample_test_videos(
    options: &ImportOptions,
    files: &[VideoFileName],
    detections: &[PredictedBox],
    summary: &mut ImportSummary,
) -> Vec<SampledVideo> {
    // The seconds a consumer takes a keyframe from: a box scoring PySlowFast's threshold.
    let mut detected: BTreeMap<VideoId, BTreeSet<u32>> = BTreeMap::new();
    for row in detections {
        if row.score >= DETECTION_SCORE_THRESHOLD {
            detected
                .entry(row.key.video)
                .or_default()
                .insert(row.key.second);
        }
    }
    let mut sampled = Vec::new();
    for file in files {
        let facts = match probe(&options.videos.join(file.to_string())) {
            Ok(facts) => facts,
            Err(message) => {
                summary
                    .skipped_videos
                    .push(format!("{}: {message}", file.id));
                continue;
            }
        };
        let detected = detected.remove(&file.id).unwrap_or_default();
        let keyframes: BTreeSet<u32> =
            resolve::keyframe_seconds(facts.last_instant(), options.keyframe_interval)
                .into_iter()
                .filter(|second| detected.contains(second))
                .collect();
        if keyframes.is_empty() {
            summary.skipped_videos.push(unboxed_test_video(
                file.id,
                &detected,
                &facts,
                options.keyframe_interval,
            ));
            continue;
        }
        sampled.push(SampledVideo {
            id: file.id,
            facts,
            keyframes,
            boxes: Vec::new(),
        });
    }
    sampled
}

/// Why a test video has nothing to predict on: no box scoring the threshold, or none at a
/// keyframe within the file (seconds from its start, on the keyframe interval).
fn unboxed_test_video(
    id: VideoId,
    detected: &BTreeSet<u32>,
    facts: &VideoFacts,
    interval: u32,
) -> String {
    let threshold = DETECTION_SCORE_THRESHOLD;
    let why = match detected.is_empty() {
        true => format!("the detections have no box of it scoring {threshold} or more"),
        false => {
            let seconds: Vec<String> = detected.iter().map(u32::to_string).collect();
            let every = match interval {
                1 => String::new(),
                _ => format!(", every {interval} s"),
            };
            format!(
                "its boxes scoring {threshold} or more are at seconds {}, none a keyframe within the file (0 to {:.1} s from its start{every})",
                seconds.join(", "),
                facts.last_instant()
            )
        }
    };
    format!("{id}: a test video, but {why}: nothing to predict on")
}

/// Browsers' times of a video less than this (a tenth of a second) apart agree for a box: within
/// what Firefox was measured to run late anyway, far from the half keyframe interval that decides
/// a box's keyframe. An MP4 whose sound starts 23 ms before its picture (AAC's priming) is not
/// worth a note.
const BROWSERS_AGREE: f64 = 0.1;

/// Whether an export's times of the video are a browser's (VIA's).
fn on_browser_timeline(video: &ExportedVideo) -> bool {
    video
        .tracks
        .iter()
        .flat_map(|track| &track.shapes)
        .any(|shape| matches!(shape.at, export::At::PlayerSeconds(..)))
}

/// A person detector's boxes on the videos' own seconds (AVA's detection CSV, any second).
fn read_own_clock_detections(path: &Path) -> Result<Vec<PredictedBox>, ImportError> {
    let every_second = KeyframeRange::new(0, u32::MAX).expect("a range");
    read_predicted_boxes(path, &ReadOptions::new(every_second, None::<&LabelMap>)).map_err(
        |source| ImportError::Table {
            source,
            format: "detections are AVA's detection CSV on the videos' own seconds",
        },
    )
}

/// A part's id that another video of the import already has is refused, naming both.
fn check_unique_ids(videos: &[ImportedVideo]) -> Result<(), ImportError> {
    let mut seen: BTreeMap<VideoId, VideoId> = BTreeMap::new();
    for video in videos {
        if let Some(other) = seen.insert(video.id, video.file) {
            let cut = if video.file != video.id {
                video.file
            } else {
                other
            };
            return Err(ImportError::Usage(format!(
                "video {}: the id of a part of the long video {cut} and of another video's file; rename one of the files",
                video.id
            )));
        }
    }
    Ok(())
}

/// What an import that wrote nothing found: the exports' shapes, and the videos read.
struct Found {
    shapes: usize,
    read: usize,
}

/// Why an import found no box to write: exports with no box at all, no video of the exports in
/// the folder, or videos whose boxes were all left out (and why).
fn nothing_to_import(
    options: &ImportOptions,
    summary: &ImportSummary,
    Found { shapes, read }: Found,
    counts: &SampleCounts,
) -> String {
    let folder = options.videos.display();
    if shapes == 0 {
        return "the exports have no box: draw the people's boxes (or let `keyframes --detections` draw them) and label their actions, then export again".to_string();
    }
    if read == 0 {
        return format!(
            "no annotated video of the exports is in {folder} (missing: {}; left out: {})",
            list_or_none(&summary.missing_videos),
            list_or_none(&summary.skipped_videos)
        );
    }
    let left_out = [
        (counts.without_action, "have no action"),
        (
            counts.off_keyframe,
            "are further than half a keyframe interval from any keyframe",
        ),
        (counts.outside_frame, "are outside the frame"),
    ];
    let why: Vec<String> = left_out
        .iter()
        .filter(|(count, _)| *count > 0)
        .map(|(count, what)| format!("{count} {what}"))
        .collect();
    match why.is_empty() {
        true => {
            format!("no box of the exports' {read} videos in {folder} is inside its video's time")
        }
        false => format!(
            "no box of the exports' {read} videos in {folder} has an action at a keyframe: {}{}",
            why.join(", "),
            match counts.without_action > 0 {
                true =>
                    " (tick or set each box's actions before exporting, and say where they are: label, checkboxes or attribute:NAME, as --action-from or [import] action_from)",
                false => "",
            }
        ),
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join("; ")
    }
}

/// Settings no export could honour, checked before anything is read: by `import` and when a
/// pipeline's `[import]` is read.
pub fn check_options(options: &ImportOptions) -> Result<(), BadSetting> {
    if options.exports.is_empty() {
        return Err(BadSetting::new(
            "exports",
            "[]",
            "name at least one export to import",
        ));
    }
    if options.keyframe_interval == 0 {
        return Err(BadSetting::new(
            "keyframe_interval",
            0,
            "keyframes are whole seconds apart, 1 or more",
        ));
    }
    if let SplitRule::Fraction { val, .. } = options.split
        && !(0.0..1.0).contains(&val)
    {
        return Err(BadSetting::new(
            "val_fraction",
            val,
            "must be at least 0 and less than 1",
        ));
    }
    if !options.test.is_empty() && options.detections.is_none() {
        return Err(BadSetting::new(
            "test",
            options.test.iter().cloned().collect::<Vec<_>>().join(","),
            "a test video is predicted on at the people a person detector found in it, and no detections are given",
        ));
    }
    if !options.videos.is_dir() {
        return Err(BadSetting::new(
            "videos",
            options.videos.display(),
            "not a folder",
        ));
    }
    Ok(())
}

/// Every export read by its format (from the file's extension), its videos in order. A video
/// in two exports is an error: its person ids would collide.
fn read_exports(options: &ImportOptions) -> Result<Vec<ExportedVideo>, ImportError> {
    let mut videos: Vec<ExportedVideo> = Vec::new();
    for path in &options.exports {
        let export = read_export(path, options)?;
        for video in export.videos {
            let id = usable_stem(stem(&video.name));
            if let Some(first) = videos
                .iter()
                .find(|seen| usable_stem(stem(&seen.name)) == id)
            {
                let names = match first.name == video.name {
                    true => String::new(),
                    false => format!(" (as {:?} and {:?})", video.name, first.name),
                };
                return Err(ImportError::Input {
                    path: path.clone(),
                    message: format!(
                        "video {id} is annotated here and in {}{names}; merge them in the tool, or import one",
                        first.origin
                    ),
                });
            }
            videos.push(video);
        }
    }
    Ok(videos)
}

fn read_export(path: &Path, options: &ImportOptions) -> Result<Export, ImportError> {
    let actions = &options.actions;
    let extension = path
        .extension()
        .and_then(|extension| extension.to_str())
        .map(str::to_ascii_lowercase);
    match extension.as_deref() {
        Some("xml" | "zip") => Ok(cvat::read_cvat(path, actions)?),
        Some("json") => Ok(via::read_via3(path, actions, options.via_browser)?),
        Some("csv") => Ok(whole_clip::read_whole_clip(path)?),
        _ => Err(ImportError::Usage(format!(
            "{}: not an export avaprep reads; it reads CVAT for video or images 1.1 (.xml, or CVAT's .zip), VIA 3 projects (.json) and whole-clip labels (.csv: video,start_frame,label)",
            path.display()
        ))),
    }
}

/// The file stem an export names a video by: `clips/clip25.mp4` -> `clip25`.
fn stem(name: &str) -> &str {
    let file = name.rsplit(['/', '\\']).next().unwrap_or(name);
    match file.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem,
        _ => file,
    }
}

/// The id an export's video is imported as: its file stem, each character an id cannot hold
/// made `_` (`my clip.mp4` -> `my_clip`), so a file renamed as `import` and `keyframes` say
/// is found without labelling it again.
fn video_id(video: &ExportedVideo) -> Result<VideoId, ImportError> {
    let stem = stem(&video.name);
    usable_stem(stem).parse().map_err(|reason| ImportError::Input {
        path: video.origin.file.clone(),
        message: format!(
            "{}: video {:?}: its file stem {stem:?} is not a video id avaprep takes ({reason}); rename the file and the task",
            video.origin.place, video.name
        ),
    })
}

/// The videos of a folder by id (`<id>.mkv`, `.mp4`, `.webm`); other files are not videos.
fn videos_in_folder(folder: &Path) -> Result<BTreeMap<VideoId, VideoFileName>, ImportError> {
    let entries = std::fs::read_dir(folder).map_err(|error| ImportError::Input {
        path: folder.to_path_buf(),
        message: error.to_string(),
    })?;
    let mut names: BTreeMap<VideoId, VideoFileName> = BTreeMap::new();
    let mut found: Vec<VideoFileName> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<VideoFileName>().ok())
        .collect();
    found.sort_by_key(ToString::to_string);
    for name in found {
        if let Some(first) = names.insert(name.id, name) {
            return Err(ImportError::Input {
                path: folder.to_path_buf(),
                message: format!(
                    "video {} is there twice ({first} and {name}); keep one",
                    name.id
                ),
            });
        }
    }
    Ok(names)
}

/// A file of the videos' folder named as a video but not usable as named: why, and the name
/// that makes it one (`my clip.MP4` -> `my_clip.mp4`).
pub(crate) struct MisnamedVideo {
    name: String,
    problems: Vec<String>,
    id: String,
    extension: &'static str,
}

impl std::fmt::Display for MisnamedVideo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}; rename it `{}.{}`",
            self.name,
            self.problems.join(", and "),
            self.id,
            self.extension
        )
    }
}

/// The files of `folder` named as videos but not usable as named, each with why and what to do:
/// a stem that is no video id, or a video extension spelt otherwise (`.MP4`, `.mov`). Hidden
/// files (macOS writes `._clip.mp4` beside `clip.mp4` on some drives) are no videos.
fn misnamed_videos(folder: &Path) -> Vec<MisnamedVideo> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut misnamed: Vec<MisnamedVideo> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let (stem, ext) = name.rsplit_once('.')?;
            if stem.is_empty() || name.starts_with('.') {
                return None;
            }
            let lower = ext.to_ascii_lowercase();
            let read = VideoExtension::ALL
                .into_iter()
                .find(|e| e.as_str() == lower);
            let wanted = match (read, lower.as_str()) {
                (Some(extension), _) => extension.as_str(),
                // QuickTime's containers, which libav reads as MP4.
                (None, "mov" | "m4v") => VideoExtension::Mp4.as_str(),
                _ => return None,
            };
            let id = stem.parse::<VideoId>().err();
            if id.is_none() && ext == wanted {
                return None;
            }
            let mut problems = Vec::new();
            if let Some(reason) = id {
                problems.push(format!("its name is not a video id ({reason})"));
            }
            if ext != wanted {
                problems.push(format!("the extension must be .{wanted}"));
            }
            Some(MisnamedVideo {
                id: usable_stem(stem),
                name,
                problems,
                extension: wanted,
            })
        })
        .collect();
    misnamed.sort_by(|a, b| a.name.cmp(&b.name));
    misnamed
}

/// A video id close to `stem`: each character an id cannot hold becomes `_`, cut to an id's
/// length (`my clip` -> `my_clip`, `take.2` -> `take_2`).
fn usable_stem(stem: &str) -> String {
    let usable: String = stem
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                true => c,
                false => '_',
            },
        )
        .take(crate::annotations::VIDEO_ID_MAX_LEN)
        .collect();
    debug_assert!(stem.is_empty() || usable.parse::<crate::annotations::VideoId>().is_ok());
    usable
}

/// Frames the export numbers that the file lacks: it is not the video the task was made from
/// (another cut, or a lower frame rate), and every frame number would be timed by the wrong
/// frames. Two frames of slack: decoders may count a stream's last frames differently.
fn frames_past_the_file(
    video: &ExportedVideo,
    facts: &VideoFacts,
    file: &impl std::fmt::Display,
) -> Option<String> {
    const SLACK: u64 = 2;
    let frames = facts.frame_times.len() as u64;
    let last = video.last_frame_named()?;
    (last >= frames + SLACK).then(|| {
        format!(
            "{file} has {frames} frames, and the export ({}) numbers frames up to {last}: not the video file the task was made from (another cut, or another frame rate); import the export with that file",
            video.origin
        )
    })
}

fn probe(path: &Path) -> Result<VideoFacts, String> {
    let info = crate::media::probe(path).map_err(|error| error.to_string())?;
    let shown = crate::media::frame_times(path).map_err(|error| error.to_string())?;
    let frame_times = shown.times;
    let Some(&last) = frame_times.last() else {
        return Err(format!("{}: libav finds no frames in it", path.display()));
    };
    // The video's own end, where extraction finds it: the container's duration may be an
    // audio track's, longer. A single frame without a duration is shown for a 30 fps period.
    let duration = match shown.end > last {
        true => shown.end,
        false => last + 1.0 / 30.0,
    };
    Ok(VideoFacts {
        frame_times,
        first_timestamp: shown.first_timestamp,
        iso_media: shown.iso_media,
        duration,
        size: export::FrameSize {
            width: info.width,
            height: info.height,
        },
    })
}

/// Video ids by split (`train`, `val`), each sorted.
fn split_videos(
    videos: &[SampledVideo],
    rule: &SplitRule,
    earlier: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, Vec<VideoId>>, ImportError> {
    let ids: Vec<VideoId> = videos.iter().map(|video| video.id).collect();
    let val: BTreeSet<VideoId> = match rule {
        SplitRule::Given(named) => {
            let known: BTreeSet<String> = ids.iter().map(ToString::to_string).collect();
            if let Some(unknown) = named.iter().find(|name| !known.contains(*name)) {
                return Err(ImportError::Usage(format!(
                    "--val {unknown}: not an imported video (they are: {})",
                    known.into_iter().collect::<Vec<_>>().join(", ")
                )));
            }
            ids.iter()
                .copied()
                .filter(|id| named.contains(id.as_str()))
                .collect()
        }
        SplitRule::Fraction { val, seed } => val_share(&ids, *val, *seed, earlier),
    };
    let train: Vec<VideoId> = ids.iter().copied().filter(|id| !val.contains(id)).collect();
    if train.is_empty() {
        return Err(ImportError::Usage(
            "every video is in val: leave at least one to train on".into(),
        ));
    }
    let mut splits = BTreeMap::from([("train".to_string(), train)]);
    if !val.is_empty() {
        splits.insert("val".to_string(), val.into_iter().collect());
    }
    for ids in splits.values_mut() {
        ids.sort();
    }
    Ok(splits)
}

/// `fraction` of `ids` for val, first those an earlier import put there (`earlier`: file id to
/// split), then new videos in the order of a hash of the seed and the id. A video never moves:
/// the share drifts from `fraction` as videos come and go, unless that would leave val or train
/// empty, when the hash order chooses afresh.
fn val_share(
    ids: &[VideoId],
    fraction: f64,
    seed: u64,
    earlier: &BTreeMap<String, String>,
) -> BTreeSet<VideoId> {
    let mut ranked = ids.to_vec();
    ranked.sort_by_key(|id| {
        let mut hash = Sha256::new();
        hash.update(seed.to_le_bytes());
        hash.update(id.as_bytes());
        hash.finalize()
    });
    let wanted = (fraction * ids.len() as f64).round() as usize;
    // A fraction above 0 asks for a val split: one video at least, and one left to train.
    let count = match fraction > 0.0 && ids.len() >= 2 {
        true => wanted.clamp(1, ids.len() - 1),
        false => 0,
    };
    let placed = |id: &VideoId| earlier.get(id.as_str()).map(String::as_str);
    let kept: BTreeSet<VideoId> = ids
        .iter()
        .copied()
        .filter(|id| placed(id) == Some("val"))
        .collect();
    let new = ranked.iter().copied().filter(|id| placed(id).is_none());
    let val: BTreeSet<VideoId> = kept
        .iter()
        .copied()
        .chain(new.take(count.saturating_sub(kept.len())))
        .collect();
    match count > 0 && (val.is_empty() || val.len() == ids.len()) {
        true => ranked.into_iter().take(count).collect(),
        false => val,
    }
}

/// A sample export under `src/import/testdata/`.
#[cfg(test)]
fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/import/testdata")
        .join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_lines_name_the_videos_each_kind_of_box_is_in() {
        let counts = |clipped, without_action| SampleCounts {
            clipped,
            without_action,
            ..SampleCounts::default()
        };
        let mut summary = ImportSummary::default();
        summary.box_counts_by_video.insert("a".into(), counts(2, 0));
        summary.box_counts_by_video.insert("b".into(), counts(1, 1));
        assert_eq!(
            summary.box_lines(),
            [
                "3 boxes clipped to the frame (a 2, b 1)",
                "1 box without an action, left out (b 1)"
            ]
        );
        for n in 0..6 {
            summary
                .box_counts_by_video
                .insert(format!("c{n}"), counts(0, 1));
        }
        assert_eq!(
            summary.box_lines()[1],
            "7 boxes without an action, left out (b 1, c0 1, c1 1, c2 1, c3 1 and 2 more)"
        );
    }

    /// Boxes labelled `person` among real actions (one export read by its label, the others by
    /// checkbox) are named too; the note once spoke only where every box was `person`.
    #[test]
    fn the_person_label_note_speaks_of_any_box_labelled_person() {
        let mut summary = ImportSummary {
            actions: BTreeMap::from([("walk".into(), 1), ("person".into(), 2)]),
            ..ImportSummary::default()
        };
        let setting = |source: &str| format!("--action-from {source}");
        assert_eq!(summary.action_note(setting), None);
        summary.person_label_boxes = 3;
        let note = summary.action_note(setting).unwrap();
        assert!(note.starts_with("3 boxes' action is `person`"), "{note}");
    }

    /// The note on a likely misspelling says how to import anew where the import was made: a
    /// pipeline's note once told its user to import into an empty folder.
    #[test]
    fn the_misspelling_note_names_how_to_import_anew() {
        let mut summary = ImportSummary::default();
        let afresh = "remove data/import (the next run imports anew)";
        assert_eq!(summary.slipped_action_note(afresh), None);
        summary.slipped_actions = vec![["stnad".into(), "stand".into()]];
        let note = summary.slipped_action_note(afresh).unwrap();
        assert!(
            note.starts_with(
                "new actions one slip of the keyboard from another: `stnad` (like `stand`);"
            ),
            "{note}"
        );
        assert!(
            note.contains(&format!("export again, and {afresh} (")),
            "{note}"
        );
    }

    /// Importing again with more videos keeps every video where the earlier import put it; a
    /// walk found a fifth video taking the only val place from the one that had it.
    #[test]
    fn adding_videos_never_moves_one_between_train_and_val() {
        let ids = |names: &[String]| -> Vec<VideoId> {
            names.iter().map(|name| name.parse().unwrap()).collect()
        };
        let four = ids(&["walk_01", "hall_2997", "kitchen-cam_B", "Yard03"].map(String::from));
        let first = val_share(&four, 0.2, 0, &BTreeMap::new());
        assert_eq!(first.len(), 1);
        let placed: BTreeMap<String, String> = four
            .iter()
            .map(|id| {
                let split = if first.contains(id) { "val" } else { "train" };
                (id.to_string(), split.to_string())
            })
            .collect();
        let mut fresh_moves = 0;
        for n in 0..20 {
            let five = [four.clone(), ids(&[format!("new{n}")])].concat();
            assert_eq!(val_share(&five, 0.2, 0, &placed), first, "new{n}");
            fresh_moves += usize::from(val_share(&five, 0.2, 0, &BTreeMap::new()) != first);
        }
        assert!(
            fresh_moves > 0,
            "no new video would have taken the val place"
        );
        // Ten videos at 0.2: the earlier val video stays, and one new video joins it.
        let names: Vec<String> = (0..6).map(|n| format!("more{n}")).collect();
        let ten = [four.clone(), ids(&names)].concat();
        let val = val_share(&ten, 0.2, 0, &placed);
        assert_eq!(val.len(), 2);
        assert!(first.is_subset(&val));
        // Every earlier video in val would leave none to train on: chosen afresh.
        let all_val = four
            .iter()
            .map(|id| (id.to_string(), "val".to_string()))
            .collect();
        assert_eq!(val_share(&four, 0.2, 0, &all_val), first);
    }

    #[test]
    fn export_names_match_files_by_stem() {
        assert_eq!(stem("clips/clip25.mp4"), "clip25");
        assert_eq!(stem("C:\\data\\IMG_0042.MOV"), "IMG_0042");
        assert_eq!(stem("cam3_2024-05-01_1200"), "cam3_2024-05-01_1200");
    }
}
