//! The gallery: for each shown keyframe, the extracted frame nearest it with the ground-truth
//! boxes and their action names drawn, the first and last frame of the clip the trainer builds
//! around it, and (with a run) the run's detections on the same frame.

use std::path::Path;

use image::RgbImage;

use super::dataset::DatasetStats;
use super::draw::{self, PixelRect, TRUTH};
use super::run::{RunStats, SCORED_SPLIT};
use super::{ReportError, page};
use crate::annotations::{FrameKey, GroundTruthBox, NormBox};
use crate::layout::DataLayout;

/// One extracted frame the page shows.
#[derive(Debug, Clone)]
pub struct ShownFrame {
    pub number: u32,
    /// The instant it shows (dataset seconds).
    pub seconds: f64,
    /// Its file beside the page, relative to the page.
    pub image: String,
}

#[derive(Debug, Clone)]
pub struct GalleryEntry {
    pub key: FrameKey,
    pub split: String,
    pub keyframe: ShownFrame,
    pub first: ShownFrame,
    pub last: ShownFrame,
    /// The actions of each ground-truth box.
    pub truth: Vec<Vec<String>>,
    /// The frame with the run's detections, and how many boxes it shows.
    pub detections: Option<(String, usize)>,
}

impl GalleryEntry {
    pub fn image_count(&self) -> usize {
        3 + usize::from(self.detections.is_some())
    }
}

/// `count` keyframes with ground truth and an extracted frame, evenly spaced over those of the
/// split the run has detections for (every split without a run), in video and time order.
pub fn choose_keyframes(
    stats: &DatasetStats,
    run: Option<&RunStats>,
    count: usize,
) -> Vec<FrameKey> {
    let detected_split = run
        .filter(|run| run.detected_splits.contains(SCORED_SPLIT))
        .map(|_| SCORED_SPLIT);
    let in_split = |key: &FrameKey| {
        detected_split.is_none_or(|split| stats.split_of(&key.video) == Some(split))
    };
    let has_frame = |key: &FrameKey| {
        stats
            .indexes
            .get(&key.video)
            .is_some_and(|index| index.covers(f64::from(key.second)))
    };
    let shown: Vec<FrameKey> = stats.truth.keys().copied().filter(has_frame).collect();
    let mut keys: Vec<FrameKey> = shown.iter().copied().filter(in_split).collect();
    if keys.is_empty() {
        keys = shown;
    }
    if keys.len() <= count {
        return keys;
    }
    (0..count)
        .map(|i| keys[(2 * i + 1) * keys.len() / (2 * count)])
        .collect()
}

pub fn draw_entry(
    layout: &DataLayout,
    stats: &DatasetStats,
    run: Option<&RunStats>,
    key: FrameKey,
    (clip_frames, clip_stride): (usize, u32),
    images: &Path,
) -> Result<GalleryEntry, ReportError> {
    let fail = |message: String| ReportError::Keyframe { key, message };
    let split = stats
        .split_of(&key.video)
        .ok_or_else(|| fail("the video is not in the plan (work/videos.json)".into()))?;
    let index = stats.indexes.get(&key.video).ok_or_else(|| {
        fail("the video has no extracted frames: run `avaprep extract` first".into())
    })?;
    let centre = f64::from(key.second);
    if !index.covers(centre) {
        // A video on a clock of its own: the second given may be the file's.
        let file_start = stats
            .plan
            .videos
            .iter()
            .find(|video| video.id == key.video)
            .and_then(|video| video.span)
            .map(|[start, _]| start);
        let hint = match file_start {
            Some(start) if start != 0.0 && index.covers(centre + start) => format!(
                "; keyframes are the dataset's seconds, the file's second {} is {},{:04}",
                key.second,
                key.video,
                f64::from(key.second) + start
            ),
            _ => String::new(),
        };
        return Err(fail(format!(
            "no extracted frame within half a frame period of second {} (frames cover {:.1}-{:.1} s){hint}",
            key.second,
            index.times.first().unwrap_or(&0.0),
            index.times.last().unwrap_or(&0.0)
        )));
    }
    let stem = image_stem(key);
    let shown = |number: u32, suffix: &str| ShownFrame {
        number,
        seconds: time_of(index, number),
        image: format!("{}/{stem}_{suffix}", page::IMAGES),
    };
    let nearest = index.nearest(centre);
    let frame_path = layout.frame(&key.video, nearest);
    let frame = image::open(&frame_path)
        .map_err(|source| ReportError::Image {
            path: frame_path.clone(),
            source,
        })?
        .into_rgb8();
    let truth = truth_boxes(stats, key, &frame);
    let mut truth_frame = frame.clone();
    for (rect, names) in &truth {
        draw::outline(&mut truth_frame, *rect, 2, TRUTH);
        draw::tag(&mut truth_frame, *rect, names, TRUTH);
    }
    let keyframe = shown(nearest, "truth.png");
    save_png(&truth_frame, &images.join(file_name(&keyframe.image)))?;

    let clip = index.clip(centre, clip_frames, clip_stride);
    let first = shown(clip[0], "first.jpg");
    let last = shown(clip[clip.len() - 1], "last.jpg");
    for frame in [&first, &last] {
        copy(
            &layout.frame(&key.video, frame.number),
            &images.join(file_name(&frame.image)),
        )?;
    }

    let detections = match run {
        Some(run) if run.detected_splits.contains(split) => {
            let name = format!("{}/{stem}_detections.png", page::IMAGES);
            let count = draw_detections(stats, run, key, frame, &images.join(file_name(&name)))?;
            Some((name, count))
        }
        _ => None,
    };
    Ok(GalleryEntry {
        key,
        split: split.to_string(),
        keyframe,
        first,
        last,
        truth: truth.into_iter().map(|(_, names)| names).collect(),
        detections,
    })
}

fn image_stem(key: FrameKey) -> String {
    format!("{}_{:04}", key.video, key.second)
}

/// Every picture a keyframe's entry may write, by its name in the images folder.
pub fn image_names(key: FrameKey) -> Vec<String> {
    let stem = image_stem(key);
    ["truth.png", "first.jpg", "last.jpg", "detections.png"]
        .iter()
        .map(|suffix| format!("{stem}_{suffix}"))
        .collect()
}

fn time_of(index: &crate::frame_index::FrameIndex, number: u32) -> f64 {
    let i = index.frames.binary_search(&number).unwrap_or(0);
    index.times[i]
}

fn file_name(relative: &str) -> &str {
    relative.rsplit('/').next().unwrap_or(relative)
}

/// The keyframe's boxes, one per person box with every action given to it.
fn truth_boxes(
    stats: &DatasetStats,
    key: FrameKey,
    frame: &RgbImage,
) -> Vec<(PixelRect, Vec<String>)> {
    let no_boxes = Vec::new();
    let rows: &Vec<GroundTruthBox> = stats.truth.get(&key).unwrap_or(&no_boxes);
    let mut boxes: Vec<(NormBox, Vec<String>)> = Vec::new();
    for row in rows {
        let name = stats
            .labels
            .name(row.action)
            .map_or_else(|| format!("action {}", row.action), str::to_string);
        match boxes.iter_mut().find(|(bbox, _)| *bbox == row.bbox) {
            Some((_, names)) => names.push(name),
            None => boxes.push((row.bbox, vec![name])),
        }
    }
    boxes
        .into_iter()
        .map(|(bbox, names)| (PixelRect::of(&bbox, frame.width(), frame.height()), names))
        .collect()
}

/// The run's boxes on the frame, coloured by their best class; the count drawn.
fn draw_detections(
    stats: &DatasetStats,
    run: &RunStats,
    key: FrameKey,
    mut frame: RgbImage,
    path: &Path,
) -> Result<usize, ReportError> {
    let boxes = run.detections.get(&key).map_or(&[][..], Vec::as_slice);
    for detected in boxes {
        let rect = PixelRect::of(&detected.bbox, frame.width(), frame.height());
        let colour = draw::class_colour(detected.classes[0].0.0);
        let lines: Vec<String> = detected
            .classes
            .iter()
            .map(|(action, score)| {
                let name = stats.labels.name(*action).unwrap_or("?");
                format!("{name} {score:.2}")
            })
            .collect();
        draw::outline(&mut frame, rect, 2, colour);
        draw::tag(&mut frame, rect, &lines, colour);
    }
    save_png(&frame, path)?;
    Ok(boxes.len())
}

fn save_png(image: &RgbImage, path: &Path) -> Result<(), ReportError> {
    let mut bytes = std::io::Cursor::new(Vec::new());
    image
        .write_to(&mut bytes, image::ImageFormat::Png)
        .map_err(|source| ReportError::Image {
            path: path.to_path_buf(),
            source,
        })?;
    crate::fsutil::write_atomic(path, bytes.get_ref()).map_err(|e| ReportError::io(path, e))
}

fn copy(from: &Path, to: &Path) -> Result<(), ReportError> {
    let bytes = std::fs::read(from).map_err(|e| ReportError::io(from, e))?;
    crate::fsutil::write_atomic(to, &bytes).map_err(|e| ReportError::io(to, e))
}
