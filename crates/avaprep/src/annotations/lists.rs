//! Readers for the one-value-per-line files: included timestamps, video file
//! name lists and video id lists. All of them refuse an empty file.

use std::collections::HashMap;
use std::path::Path;

use super::error::{AnnotationError, LineError};
use super::lines::{Rows, display_name, parse_lines, parse_second, parse_video_id, read_file};
use super::types::KeyframeRange;
use super::video::{VideoFileName, VideoId};

/// Reads `ava_included_timestamps_v2.2.txt`: one second per line, strictly
/// increasing, each inside `keyframes`.
pub fn read_included_timestamps(
    path: &Path,
    keyframes: KeyframeRange,
) -> Result<Vec<u32>, AnnotationError> {
    parse_included_timestamps(&read_file(path)?, &display_name(path), keyframes)
}

/// [`read_included_timestamps`] for bytes already in memory.
pub fn parse_included_timestamps(
    bytes: &[u8],
    file: &str,
    keyframes: KeyframeRange,
) -> Result<Vec<u32>, AnnotationError> {
    let mut previous: Option<u32> = None;
    parse_lines(
        bytes,
        file,
        "included timestamps",
        Rows::Required,
        |_, line| {
            let second = parse_second(line, 1, keyframes)?;
            if let Some(previous) = previous.filter(|&p| p >= second) {
                return Err(LineError::NotIncreasing { second, previous });
            }
            previous = Some(second);
            Ok(second)
        },
    )
}

/// Reads a list of video file names (`ava_file_names_trainval_v2.1.txt`,
/// `ava_file_names_test_v2.1.txt`). Duplicates are errors.
pub fn read_video_file_names(path: &Path) -> Result<Vec<VideoFileName>, AnnotationError> {
    parse_video_file_names(&read_file(path)?, &display_name(path))
}

/// [`read_video_file_names`] for bytes already in memory.
pub fn parse_video_file_names(
    bytes: &[u8],
    file: &str,
) -> Result<Vec<VideoFileName>, AnnotationError> {
    let mut seen = HashMap::new();
    parse_lines(
        bytes,
        file,
        "video file name list",
        Rows::Required,
        |n, line| {
            let name = parse_file_name(line)?;
            check_unique(&mut seen, name.id, n, "video", line)?;
            Ok(name)
        },
    )
}

fn parse_file_name(line: &[u8]) -> Result<VideoFileName, LineError> {
    let text = std::str::from_utf8(line).map_err(|_| LineError::InvalidUtf8)?;
    text.parse().map_err(|reason| LineError::BadFileName {
        text: text.to_owned(),
        reason,
    })
}

/// Reads a list of bare video ids (`ava_test_v2.2.txt`). Duplicates are errors.
pub fn read_video_ids(path: &Path) -> Result<Vec<VideoId>, AnnotationError> {
    parse_video_ids(&read_file(path)?, &display_name(path))
}

/// [`read_video_ids`] for bytes already in memory.
pub fn parse_video_ids(bytes: &[u8], file: &str) -> Result<Vec<VideoId>, AnnotationError> {
    let mut seen = HashMap::new();
    parse_lines(bytes, file, "video id list", Rows::Required, |n, line| {
        let id = parse_video_id(line, 1)?;
        check_unique(&mut seen, id, n, "video", line)?;
        Ok(id)
    })
}

/// One video's span on the dataset's clock: the seconds its file covers, `[start, end)`, where
/// `start` is the dataset second at the file's time 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VideoSpan {
    pub video: VideoId,
    pub span: [f64; 2],
    /// The file's own id (`<file>.<ext>`) when the video is a part of a longer file, on a clock
    /// of its own.
    pub file: Option<VideoId>,
}

/// Reads a dataset's video spans (`video_id,start,end[,file]`, seconds on the dataset's clock,
/// one line a video; `start` is negative for a part that begins late in its file): `avaprep
/// import` writes one from each file's duration.
pub fn read_video_spans(path: &Path) -> Result<Vec<VideoSpan>, AnnotationError> {
    parse_video_spans(&read_file(path)?, &display_name(path))
}

/// [`read_video_spans`] for bytes already in memory.
pub fn parse_video_spans(bytes: &[u8], file: &str) -> Result<Vec<VideoSpan>, AnnotationError> {
    let mut seen = HashMap::new();
    parse_lines(bytes, file, "video spans", Rows::Required, |n, line| {
        let text = std::str::from_utf8(line).map_err(|_| LineError::InvalidUtf8)?;
        let fields: Vec<&str> = text.split(',').collect();
        let (id, start, end, file) = match fields[..] {
            [id, start, end] => (id, start, end, None),
            [id, start, end, file] => (id, start, end, Some(parse_video_id(file.as_bytes(), 4)?)),
            _ => {
                return Err(LineError::FieldCount {
                    found: fields.len(),
                    expected: "3 or 4 (video_id,start,end[,file])",
                });
            }
        };
        let video = parse_video_id(id.as_bytes(), 1)?;
        let seconds = |column: usize, name: &'static str, text: &str| {
            text.parse::<f64>()
                .ok()
                .filter(|value| value.is_finite())
                .ok_or_else(|| LineError::BadNumber {
                    column,
                    name,
                    text: text.to_string(),
                    expected: "a number of seconds",
                })
        };
        let start = seconds(2, "start", start)?;
        let end = seconds(3, "end", end)?;
        if end <= start {
            return Err(LineError::BadNumber {
                column: 3,
                name: "end",
                text: end.to_string(),
                expected: "after the start",
            });
        }
        check_unique(&mut seen, video, n, "video", id.as_bytes())?;
        Ok(VideoSpan {
            video,
            span: [start, end],
            file,
        })
    })
}

/// Two entries for one video (even with different extensions) would make the
/// downloader fetch or extract it twice, so they are refused.
fn check_unique(
    seen: &mut HashMap<VideoId, usize>,
    id: VideoId,
    line_no: usize,
    what: &'static str,
    line: &[u8],
) -> Result<(), LineError> {
    match seen.insert(id, line_no) {
        Some(first_line) => Err(LineError::Duplicate {
            what,
            text: String::from_utf8_lossy(line).into_owned(),
            first_line,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AVA: KeyframeRange = KeyframeRange::AVA;

    #[test]
    fn included_timestamps() {
        assert_eq!(
            parse_included_timestamps(b"0902\n0903\r\n0904", "inc.txt", AVA).unwrap(),
            [902, 903, 904]
        );
        assert_eq!(
            parse_included_timestamps(b"0902\n0902\n", "inc.txt", AVA)
                .unwrap_err()
                .to_string(),
            "inc.txt:2: second 902 does not come after 902; seconds must be strictly increasing"
        );
        assert_eq!(
            parse_included_timestamps(b"0902\n1799\n", "inc.txt", AVA)
                .unwrap_err()
                .to_string(),
            "inc.txt:2: second 1799 is outside the keyframe range 902..=1798"
        );
        assert_eq!(
            parse_included_timestamps(b"timestamp\n0902\n", "inc.txt", AVA)
                .unwrap_err()
                .to_string(),
            "inc.txt:1: the first line looks like a header row (\"timestamp\"); AVA annotation files have no header"
        );
        assert_eq!(
            parse_included_timestamps(b"0902\n0903,1\n", "inc.txt", AVA)
                .unwrap_err()
                .to_string(),
            "inc.txt:2: column 1 (timestamp): \"0903,1\" is not a whole number of seconds (digits only)"
        );
    }

    #[test]
    fn file_names() {
        let names = parse_video_file_names(b"-5KQ66BBWC4.mkv\n_dBTTYDRdRQ.webm", "n.txt").unwrap();
        assert_eq!(names.len(), 2);
        assert_eq!(names[1].to_string(), "_dBTTYDRdRQ.webm");
        assert_eq!(
            parse_video_file_names(b"-5KQ66BBWC4.mkv\n../5KQ66BBWC4.mkv\n", "n.txt")
                .unwrap_err()
                .to_string(),
            "n.txt:2: invalid video file name \"../5KQ66BBWC4.mkv\": not a plain file name (contains a path separator)"
        );
        assert_eq!(
            parse_video_file_names(b"-5KQ66BBWC4.mkv\n-5KQ66BBWC4.mp4\n", "n.txt")
                .unwrap_err()
                .to_string(),
            "n.txt:2: duplicate video \"-5KQ66BBWC4.mp4\" (first on line 1)"
        );
        assert_eq!(
            parse_video_file_names(b"file_name\n-5KQ66BBWC4.mkv\n", "n.txt")
                .unwrap_err()
                .to_string(),
            "n.txt:1: the first line looks like a header row (\"file_name\"); AVA annotation files have no header"
        );
        assert_eq!(
            parse_video_file_names(b"", "n.txt")
                .unwrap_err()
                .to_string(),
            "n.txt: the video file name list file has no rows; an empty file here usually means a truncated or wrong download"
        );
    }

    #[test]
    fn video_ids() {
        let ids = parse_video_ids(b"--205wugM18\n-APF0-L14kw\n", "ids.txt").unwrap();
        assert_eq!(ids[0].as_str(), "--205wugM18");
        assert_eq!(
            parse_video_ids(b"--205wugM18\n-APF0-L14kw.mkv\n", "ids.txt")
                .unwrap_err()
                .to_string(),
            "ids.txt:2: column 1 (video_id): invalid video id \"-APF0-L14kw.mkv\": character 12 is '.'; allowed are A-Z, a-z, 0-9, '-' and '_'"
        );
    }
}
