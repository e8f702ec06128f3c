//! `fetch-videos`: one item per planned video, several at once.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Dataset, StageId};
use crate::fetch::download::{Downloader, Expected};
use crate::fetch::{FetchParams, HowFetched, fetch_file};
use crate::fsutil;
use crate::layout::DataLayout;
use crate::manifest::DatasetManifest;
use crate::pipeline::state::CountsMismatch;
use crate::pipeline::{
    Granularity, ItemError, ItemRecord, PlannedItem, Stage, StageContext, StageReport,
};
use crate::progress::Unit;
use crate::records::{VideoPlan, VideosOnDisk};

/// How each video came to be on disk; summed over the videos in the stage's report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DownloadCounts {
    pub downloaded: u64,
    pub resumed: u64,
    /// Already on disk and matching its record.
    pub verified: u64,
    /// In the folder of videos the user already had (`[fetch] videos`), never downloaded.
    pub on_disk: u64,
}

impl DownloadCounts {
    fn of(how: HowFetched) -> Self {
        let mut counts = Self::default();
        match how {
            HowFetched::Downloaded => counts.downloaded = 1,
            HowFetched::Resumed => counts.resumed = 1,
            HowFetched::Verified => counts.verified = 1,
        }
        counts
    }
}

pub struct FetchVideosStage {
    pub manifest: DatasetManifest,
    pub params: FetchParams,
}

impl FetchVideosStage {
    pub fn new(dataset: &Dataset) -> Self {
        FetchVideosStage {
            manifest: dataset.manifest.clone(),
            params: dataset.fetch.clone(),
        }
    }

    fn video_url_and_path(
        &self,
        layout: &DataLayout,
        plan: &VideoPlan,
        id: &str,
    ) -> Result<(String, PathBuf), ItemError> {
        let video = plan.video(id).ok_or_else(|| {
            ItemError::input(format!("{id}: not in {}", layout.video_plan().display()))
        })?;
        let folder = self.manifest.videos.get(&video.folder).ok_or_else(|| {
            ItemError::input(format!(
                "{id}: {} names video folder `{}`, which the manifest does not have (the plan was made from another manifest); run `avaprep fetch` with the manifest the plan came from, or delete the plan to make a new one",
                layout.video_plan().display(),
                video.folder
            ))
        })?;
        let base = &self.manifest.sources[&folder.source].url;
        let base = if base.ends_with('/') {
            base.clone()
        } else {
            format!("{base}/")
        };
        let url = format!("{base}{}{}", folder.path, video.file_name);
        let path = layout
            .videos(&video.folder)
            .join(video.file_name.to_string());
        Ok((url, path))
    }

    /// Downloads one video (or finds it in the folder of videos on disk) and checks it opens.
    fn fetch_video(&self, context: &StageContext, item: &str) -> Result<ItemRecord, ItemError> {
        let layout = DataLayout::new(context.data_dir);
        let plan = VideoPlan::load(&layout.video_plan()).map_err(ItemError::input)?;
        if let Some(on_disk) = &plan.videos_on_disk {
            return find_on_disk(&layout, &plan, on_disk, item);
        }
        let (url, path) = self.video_url_and_path(&layout, &plan, item)?;
        let downloader =
            Downloader::new(self.params.policy(), context.cancel).map_err(ItemError::input)?;
        let marker = layout.missing_videos().join(item);
        let progress = |done: u64, total: Option<u64>| {
            let total = total.unwrap_or(0);
            context
                .reporter
                .item_progress(self.id().name(), item, done, total, Unit::Bytes);
        };
        let fetched = fetch_file(
            &downloader,
            &layout,
            &[url],
            &path,
            &Expected::default(),
            &progress,
        );
        let how = match fetched {
            Err(error) if error.is_not_found() => {
                let message = format!("video {item}: {error}");
                fsutil::write_atomic(&marker, message.as_bytes()).map_err(ItemError::output)?;
                return Err(ItemError::missing(message));
            }
            other => {
                other.map_err(|error| ItemError::download(format!("video {item}: {error}")))?
            }
        };
        let _ = std::fs::remove_file(&marker);
        let _ = std::fs::remove_file(layout.deleted_videos().join(item));
        #[cfg(feature = "extract")]
        probe_video(&layout, &plan, item, &path)?;
        let size = std::fs::metadata(&path).map_or(0, |meta| meta.len());
        Ok(ItemRecord {
            files: 1,
            bytes: size,
            ..ItemRecord::default()
        }
        .with_counts(&DownloadCounts::of(how)))
    }
}

impl Stage for FetchVideosStage {
    type Id = StageId;

    fn id(&self) -> StageId {
        StageId::FetchVideos
    }

    fn depends_on(&self) -> &'static [StageId] {
        &[StageId::Parse]
    }

    fn granularity(&self) -> Granularity {
        Granularity::PerVideo
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "version": 1,
            "videos": self.manifest.videos,
            "videos_on_disk": self.params.videos_on_disk(),
        })
    }

    /// A video's item depends on its file; for a video already on disk, also on the file's
    /// print (size and time) as it is now, so a video that appears in the folder, is replaced or
    /// is deleted is checked again.
    fn plan(&self, context: &StageContext) -> Result<Vec<PlannedItem>, ItemError> {
        let layout = DataLayout::new(context.data_dir);
        let plan = VideoPlan::load(&layout.video_plan()).map_err(ItemError::input)?;
        // A video that was missing and is there now is looked at again. Its size, not its time:
        // a touched or copied video is the same one (its bytes are compared where it was read).
        let source_size = |video: &crate::records::PlannedVideo| {
            let on_disk = plan.videos_on_disk.as_ref()?;
            let path = on_disk.folder.join(video.file_name.to_string());
            std::fs::metadata(path).ok().map(|meta| meta.len())
        };
        Ok(plan
            .videos
            .iter()
            .map(|video| {
                let mut identity = serde_json::json!({
                    "file": video.file_name,
                    "folder": video.folder,
                    "source_size": source_size(video),
                });
                // Only where extraction asked: the keys of every other video stay as they were.
                let asked = times_asked_again(&layout, video.id.as_str());
                if asked > 0 {
                    identity["asked_again"] = asked.into();
                }
                PlannedItem::new(video.id.to_string(), identity)
            })
            .collect())
    }

    fn concurrency(&self) -> usize {
        self.params.jobs.max(1)
    }

    fn run_item(&self, context: &StageContext, item: &str) -> Result<ItemRecord, ItemError> {
        let outcome = self.fetch_video(context, item);
        let layout = DataLayout::new(context.data_dir);
        super::note_video_outcome(&layout, self.id(), item, &outcome, context.cancelled());
        outcome
    }

    fn summary(&self, report: &StageReport<StageId>) -> Result<Vec<String>, CountsMismatch> {
        let counts: DownloadCounts = report.counts_as()?;
        if counts.on_disk > 0 {
            return Ok(vec![format!(
                "{} videos already on disk (nothing downloaded), {} missing, {} failed",
                counts.on_disk,
                report.missing,
                report.failures.len()
            )]);
        }
        let total = counts.downloaded + counts.resumed + counts.verified;
        if total == 0 && report.missing == 0 {
            return Ok(Vec::new());
        }
        // The counts are the videos' records, most from earlier runs: a run with nothing to do
        // once said "4 downloaded".
        if report.completed == 0 && report.failures.is_empty() {
            return Ok(vec![format!(
                "nothing to download: {} videos downloaded before, {} missing",
                report.already_done, report.missing,
            )]);
        }
        // How each video came, this run's and earlier runs' alike: say which are this run's.
        Ok(vec![format!(
            "{} videos, {} of them fetched by this run; over all runs {} downloaded, {} resumed, {} already on disk and verified; {} missing, {} failed",
            report.planned,
            report.completed,
            counts.downloaded,
            counts.resumed,
            counts.verified,
            report.missing,
            report.failures.len(),
        )])
    }
}

/// How to ask again for the downloads a server once found missing (each is otherwise left out
/// of every later run): the command that made the data directory, with `--retry-missing`. None
/// where nothing is missing, or the videos are read from a folder (a file put there is found
/// by the next run).
pub fn retry_missing_hint(layout: &DataLayout, report: &StageReport<StageId>) -> Option<String> {
    if report.stage != StageId::FetchVideos || report.missing == 0 {
        return None;
    }
    let plan = VideoPlan::load(&layout.video_plan()).ok()?;
    if plan.videos_on_disk.is_some() {
        return None;
    }
    Some(format!(
        "ask for the {} missing again (a mirror may have them now): `{}`",
        report.missing,
        super::retry_missing_command(layout.root())
    ))
}

/// A video that cannot be used now (gone, renamed, unopenable) leaves every table the lists
/// stage writes: its frame index goes, so its frames (kept on disk) are no longer taken for
/// complete, and the lists, annotations and proposals drop it, saying why.
fn forget_frames(
    layout: &DataLayout,
    video: &crate::records::PlannedVideo,
) -> Result<(), ItemError> {
    fsutil::remove_if_present(&layout.frame_index(&video.id)).map_err(ItemError::output)
}

/// A video the user already has, found where the plan says; one that is not there is reported
/// missing and dropped everywhere, as a video the server does not have.
fn find_on_disk(
    layout: &DataLayout,
    plan: &VideoPlan,
    on_disk: &VideosOnDisk,
    item: &str,
) -> Result<ItemRecord, ItemError> {
    let video = plan.video(item).ok_or_else(|| {
        ItemError::input(format!("{item}: not in {}", layout.video_plan().display()))
    })?;
    // The file name is a checked `<id>.<ext>`, so the path stays in the folder.
    let path = on_disk.folder.join(video.file_name.to_string());
    let marker = layout.missing_videos().join(item);
    let Ok(meta) = std::fs::metadata(&path) else {
        let file = video.file_name.id;
        let message = format!(
            "video {item}: no {file}.mkv, {file}.mp4 or {file}.webm in {}{}",
            on_disk.folder.display(),
            misspelt_extension(&on_disk.folder, &file.to_string())
        );
        fsutil::write_atomic(&marker, message.as_bytes()).map_err(ItemError::output)?;
        forget_frames(layout, video)?;
        return Err(ItemError::missing(message));
    };
    let _ = std::fs::remove_file(&marker);
    #[cfg(feature = "extract")]
    if let Err(problem) = check_video(plan, item, &path, video.file_start(on_disk.start_seconds)) {
        forget_frames(layout, video)?;
        return Err(ItemError::input(format!(
            "video {item}: {}: {problem}; the file is left as it is",
            path.display()
        )));
    }
    // Its print, by content: a replaced file is checked and extracted again, a touched or
    // copied one is the same video.
    ItemRecord {
        files: 1,
        bytes: meta.len(),
        ..ItemRecord::default()
    }
    .with_counts(&DownloadCounts {
        on_disk: 1,
        ..DownloadCounts::default()
    })
    .with_files(layout.root(), &[], &[&path.to_string_lossy()])
    .map_err(ItemError::input)
}

/// `; X.MP4 is there: rename it X.mp4` where the folder holds the video under an extension of
/// other case (a camera's), which is not read as it is.
fn misspelt_extension(folder: &Path, id: &str) -> String {
    let wanted = ["mkv", "mp4", "webm"].map(|extension| format!("{id}.{extension}"));
    let Ok(entries) = std::fs::read_dir(folder) else {
        return String::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .find_map(|name| {
            let lower = format!(
                "{id}.{}",
                name.strip_prefix(&format!("{id}."))?.to_lowercase()
            );
            (wanted.contains(&lower) && lower != name)
                .then(|| format!("; {name} is there: rename it {lower}"))
        })
        .unwrap_or_default()
}

/// libav must open the video, find a video stream, and its duration must reach the video's last
/// annotated keyframe, on the dataset's clock (the file's time 0 is dataset second `start`).
#[cfg(feature = "extract")]
fn check_video(
    plan: &VideoPlan,
    item: &str,
    path: &std::path::Path,
    start: f64,
) -> Result<(), String> {
    let video = plan.video(item).expect("checked by the caller");
    // A keyframe's second must be in the file; a video whose span the dataset records (its own
    // length) may end within its last keyframe's second.
    let past_last = if video.span.is_some() { 1e-3 } else { 1.0 };
    let needed = video
        .keyframes
        .last()
        .map_or(plan.segment[0], |&last| f64::from(last) + past_last);
    match crate::media::probe(path) {
        Ok(info) if info.end_seconds() + start >= needed => Ok(()),
        Ok(info) if start != 0.0 => Err(format!(
            "it ends at {:.1} s (dataset second {:.1}: its time 0 is second {start}) but is annotated up to {needed:.1} s",
            info.end_seconds(),
            info.end_seconds() + start
        )),
        Ok(info) => Err(format!(
            "it ends at {:.1} s but is annotated up to {needed:.1} s",
            info.end_seconds()
        )),
        // The caller names the file: the problem alone, and what to do.
        Err(crate::media::MediaError::Open { source, .. }) => Err(format!(
            "libav cannot open it ({source}): a truncated copy or not a video; replace it with a whole copy"
        )),
        Err(crate::media::MediaError::NoVideo { .. }) => {
            Err("it has no video stream; replace it with the video".into())
        }
        Err(crate::media::MediaError::Codec { source, .. }) => Err(format!(
            "libav cannot read its video stream ({source}); replace it with a whole copy"
        )),
    }
}

/// A truncated or broken download is caught here, before extraction, and removed.
#[cfg(feature = "extract")]
fn probe_video(
    layout: &DataLayout,
    plan: &VideoPlan,
    item: &str,
    path: &std::path::Path,
) -> Result<(), ItemError> {
    let video = plan.video(item).expect("checked by the caller");
    let problem = match check_video(plan, item, path, video.file_start(plan.video_start)) {
        Ok(()) => return Ok(()),
        Err(problem) => problem,
    };
    // Not kept: the next run downloads it again instead of trusting a broken file.
    let _ = std::fs::remove_file(layout.download_record(path));
    let _ = std::fs::remove_file(path);
    Err(ItemError::download(format!(
        "video {item}: downloaded {} but {problem}",
        path.display()
    )))
}

/// Marks a downloaded video as deleted on purpose once its frames were made
/// (`delete_videos_after_extract`): `fetch --verify` does not take its absence for damage, which
/// would download every such video again.
pub fn mark_deleted(layout: &DataLayout, video: &str) -> std::io::Result<()> {
    fsutil::write_atomic(
        &layout.deleted_videos().join(video),
        b"deleted after extraction\n",
    )
}

/// Whether the download `file` (a video's path) is gone because extraction deleted it.
pub fn deleted_on_purpose(layout: &DataLayout, file: &Path) -> bool {
    let Some(video) = file.file_stem() else {
        return false;
    };
    !file.exists() && layout.deleted_videos().join(video).is_file()
}

/// Extraction needs this downloaded video again and its file is gone (deleted after an earlier
/// extraction, or by hand). The count goes into the video's fetch item, so the next fetch or
/// run downloads it again, once, and no other video.
pub fn ask_again(layout: &DataLayout, video: &str) -> std::io::Result<()> {
    let count = times_asked_again(layout, video) + 1;
    fsutil::write_atomic(
        &layout.videos_asked_again().join(video),
        format!("{count}\n").as_bytes(),
    )?;
    fsutil::remove_if_present(&layout.deleted_videos().join(video))
}

/// Asks again for every video of the plan a download found missing (the server answered 404):
/// each is otherwise left out for good, and a mirror may have it later. Returns those asked for.
pub fn ask_again_for_missing(layout: &DataLayout) -> std::io::Result<Vec<String>> {
    let Ok(plan) = VideoPlan::load(&layout.video_plan()) else {
        return Ok(Vec::new());
    };
    let mut asked = Vec::new();
    for video in &plan.videos {
        let video = video.id.as_str();
        if layout.missing_videos().join(video).is_file() {
            ask_again(layout, video)?;
            asked.push(video.to_string());
        }
    }
    Ok(asked)
}

fn times_asked_again(layout: &DataLayout, video: &str) -> u64 {
    std::fs::read_to_string(layout.videos_asked_again().join(video))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}
