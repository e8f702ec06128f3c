//! Whole-clip labels: a CSV of `video,start_frame,label` rows, as PySlowFast's custom-dataset
//! guides write them. A row says that from `start_frame` on the whole frame shows `label`, until
//! the video's next greater start frame or its end; rows of one video with the same start frame
//! are one multi-label instant. Read into one `Held` track per video (person 1, whole frame).

use std::collections::BTreeMap;
use std::path::Path;

use super::export::{At, Export, ExportError, ExportedVideo, Motion, Origin, Rect, Shape, Track};

const EXPECTED: &str = "expected video,start_frame,label (start_frame a whole number)";
const HEADER: [&str; 3] = ["video", "start_frame", "label"];
const VIA_CSV: &str = "this is VIA's CSV export, which import does not read: save the VIA project instead (Project > Save, a .json file) and import that";

/// VIA 3's CSV export opens with a comment naming VIA; VIA 2's with its own column names.
fn is_via_csv(first_line: &str) -> bool {
    first_line.starts_with("# Exported using VGG Image Annotator")
        || (first_line.starts_with("filename,") && first_line.contains("region_shape_attributes"))
}

/// Reads a whole-clip CSV: an optional header row `video,start_frame,label`, then one row per
/// label; fields are trimmed and may be wrapped in double quotes; blank lines are skipped.
pub fn read_whole_clip(path: &Path) -> Result<Export, ExportError> {
    let bytes = std::fs::read(path).map_err(|source| ExportError::Read {
        file: path.to_path_buf(),
        source,
    })?;
    let text = utf8(path, &bytes)?;
    let mut videos: Vec<Video> = Vec::new();
    let mut first_row = true;
    for (index, raw) in text.lines().enumerate() {
        // Spreadsheets save UTF-8 CSV with a byte-order mark before the first field.
        let raw = raw.trim_start_matches('\u{feff}').trim();
        if raw.is_empty() {
            continue;
        }
        let origin = line_origin(path, index + 1);
        if first_row && is_via_csv(raw) {
            return Err(malformed(&origin, VIA_CSV.into()));
        }
        let fields = split_fields(raw).map_err(|message| malformed(&origin, message))?;
        if std::mem::take(&mut first_row) && fields == HEADER {
            continue;
        }
        let row = parse_row(&fields).map_err(|message| malformed(&origin, message))?;
        add_row(&mut videos, row, origin);
    }
    Ok(Export {
        videos: videos.into_iter().map(Video::into_exported).collect(),
    })
}

/// The rows of one video so far, by start frame.
struct Video {
    name: String,
    origin: Origin,
    labels_from: BTreeMap<u64, Vec<String>>,
}

impl Video {
    fn into_exported(self) -> ExportedVideo {
        let shapes = self
            .labels_from
            .into_iter()
            .map(|(frame, actions)| Shape {
                at: At::Frame(frame),
                rect: Rect::WholeFrame,
                outside: false,
                actions,
            })
            .collect();
        ExportedVideo {
            name: self.name,
            origin: self.origin.clone(),
            frame_size: None,
            last_frame: None,
            tracks: vec![Track {
                person: 1,
                motion: Motion::Held,
                shapes,
                origin: self.origin,
            }],
        }
    }
}

struct Row {
    video: String,
    start_frame: u64,
    label: String,
}

/// Adds a row to its video (in the order the file first names each video); a label repeated at
/// the same start frame counts once.
fn add_row(videos: &mut Vec<Video>, row: Row, origin: Origin) {
    let index = match videos.iter().position(|video| video.name == row.video) {
        Some(index) => index,
        None => {
            videos.push(Video {
                name: row.video,
                origin,
                labels_from: BTreeMap::new(),
            });
            videos.len() - 1
        }
    };
    let labels = videos[index]
        .labels_from
        .entry(row.start_frame)
        .or_default();
    if !labels.contains(&row.label) {
        labels.push(row.label);
    }
}

fn parse_row(fields: &[String]) -> Result<Row, String> {
    let [video, start_frame, label] = fields else {
        let count = match fields.len() {
            1 => "1 field".to_string(),
            n => format!("{n} fields"),
        };
        return Err(format!("{count}; {EXPECTED}"));
    };
    if video.is_empty() {
        return Err(format!("the video is empty; {EXPECTED}"));
    }
    let start_frame = start_frame.parse::<u64>().map_err(|_| {
        format!(
            "start_frame \"{start_frame}\" is not a whole number; {EXPECTED} (a header row \
             must read exactly video,start_frame,label)"
        )
    })?;
    if label.is_empty() {
        return Err(format!("the label is empty; {EXPECTED}"));
    }
    Ok(Row {
        video: video.clone(),
        start_frame,
        label: label.clone(),
    })
}

/// Splits one line at commas; a field wrapped in double quotes may hold commas, and `""` in it
/// stands for one quote. Fields are trimmed outside the quotes.
fn split_fields(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut rest = line;
    loop {
        let trimmed = rest.trim_start();
        let (field, after) = match trimmed.strip_prefix('"') {
            Some(quoted) => quoted_field(quoted)?,
            None => match trimmed.find(',') {
                Some(comma) => (trimmed[..comma].trim_end().to_string(), &trimmed[comma..]),
                None => (trimmed.trim_end().to_string(), ""),
            },
        };
        fields.push(field);
        match after.strip_prefix(',') {
            Some(next) => rest = next,
            None => return Ok(fields),
        }
    }
}

/// The rest of a quoted field after its opening quote: the field, and what follows its closing
/// quote (nothing, or a comma and the next fields).
fn quoted_field(text: &str) -> Result<(String, &str), String> {
    let mut field = String::new();
    let mut rest = text;
    loop {
        let Some(quote) = rest.find('"') else {
            return Err(format!("a quote is not closed; {EXPECTED}"));
        };
        field.push_str(&rest[..quote]);
        rest = &rest[quote + 1..];
        if let Some(after) = rest.strip_prefix('"') {
            field.push('"');
            rest = after;
            continue;
        }
        let after = rest.trim_start();
        if after.is_empty() || after.starts_with(',') {
            return Ok((field, after));
        }
        return Err(format!("text after a closing quote; {EXPECTED}"));
    }
}

/// The file as text, or an error naming the line of its first byte that is not UTF-8.
fn utf8<'a>(path: &Path, bytes: &'a [u8]) -> Result<&'a str, ExportError> {
    std::str::from_utf8(bytes).map_err(|error| {
        let valid = &bytes[..error.valid_up_to()];
        let line = 1 + valid.iter().filter(|&&byte| byte == b'\n').count();
        malformed(
            &line_origin(path, line),
            "not UTF-8 text; expected a CSV saved as UTF-8".to_string(),
        )
    })
}

fn line_origin(path: &Path, line: usize) -> Origin {
    Origin {
        file: path.to_path_buf(),
        place: format!("line {line}"),
    }
}

fn malformed(origin: &Origin, message: String) -> ExportError {
    ExportError::Malformed {
        origin: origin.clone(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::testdata;

    fn read_text(text: &str) -> Result<Export, ExportError> {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        read_whole_clip(file.path())
    }

    fn error_text(text: &str) -> String {
        read_text(text).unwrap_err().to_string()
    }

    fn shape(frame: u64, actions: &[&str]) -> Shape {
        Shape {
            at: At::Frame(frame),
            rect: Rect::WholeFrame,
            outside: false,
            actions: actions.iter().map(|action| action.to_string()).collect(),
        }
    }

    #[test]
    fn header_multi_label_and_videos_in_file_order() {
        let path = testdata("whole_clip.csv");
        let export = read_whole_clip(&path).unwrap();
        let names: Vec<&str> = export.videos.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["clip25", "kitchen 2"]);

        let clip25 = &export.videos[0];
        assert_eq!(clip25.frame_size, None);
        assert_eq!(clip25.origin.place, "line 2");
        let [track] = clip25.tracks.as_slice() else {
            panic!("one track: {:?}", clip25.tracks);
        };
        assert_eq!(track.person, 1);
        assert_eq!(track.motion, Motion::Held);
        // Sorted by start frame; the two rows at 120 are one multi-label shape.
        assert_eq!(
            track.shapes,
            [
                shape(0, &["stand"]),
                shape(120, &["sit", "talk to, a person"]),
                shape(300, &["walk"]),
            ]
        );

        let kitchen = &export.videos[1];
        assert_eq!(kitchen.tracks[0].shapes, [shape(15, &["cook"])]);
        assert_eq!(kitchen.origin.place, "line 5");
    }

    /// VIA's own CSV exports (3 and 2) are named as such, with what to import instead; they
    /// were read as whole-clip rows ("1 fields; expected video,start_frame,label").
    #[test]
    fn via_s_csv_exports_are_named_with_what_to_import_instead() {
        for text in [
            "# Exported using VGG Image Annotator (http://www.robots.ox.ac.uk/~vgg/software/via)\n# CSV_HEADER = metadata_id,file_list,flags,temporal_coordinates,spatial_coordinates,metadata\n",
            "filename,file_size,file_attributes,region_count,region_id,region_shape_attributes,region_attributes\n",
        ] {
            let message = error_text(text);
            assert!(message.contains(": line 1: "), "{message}");
            assert!(
                message.contains("VIA's CSV export") && message.contains(".json"),
                "{message}"
            );
        }
        assert!(error_text("clip25\n").contains("line 1: 1 field; expected"));
    }

    #[test]
    fn rows_without_a_header_are_all_read() {
        let export = read_text("a,5,run\r\na,5,run\r\n\r\nb,0,jump\r\n").unwrap();
        assert_eq!(export.videos.len(), 2);
        // The repeated row counts once.
        assert_eq!(export.videos[0].tracks[0].shapes, [shape(5, &["run"])]);
        assert_eq!(export.videos[1].tracks[0].shapes, [shape(0, &["jump"])]);
    }

    #[test]
    fn a_start_frame_that_is_not_a_whole_number_names_file_and_line() {
        let message = error_text("video,start_frame,label\nclip25,0,stand\nclip25,12.5,sit\n");
        assert!(message.contains(": line 3: "), "{message}");
        assert!(message.contains("start_frame \"12.5\""), "{message}");
        assert!(message.contains("video,start_frame,label"), "{message}");
    }

    #[test]
    fn a_header_with_other_names_is_a_row_with_a_bad_start_frame() {
        let message = error_text("video,frame,label\nclip25,0,stand\n");
        assert!(message.contains(": line 1: "), "{message}");
        assert!(message.contains("header row"), "{message}");
    }

    #[test]
    fn empty_labels_wrong_field_counts_and_open_quotes_are_errors() {
        for (text, place, what) in [
            ("clip25,0,\n", "line 1", "label is empty"),
            ("clip25,0,stand\nclip25,5\n", "line 2", "2 fields"),
            ("clip25,0,stand,x\n", "line 1", "4 fields"),
            (",0,stand\n", "line 1", "video is empty"),
            ("clip25,0,\"stand\n", "line 1", "quote is not closed"),
            ("clip25,0,\"stand\"x\n", "line 1", "after a closing quote"),
        ] {
            let message = error_text(text);
            assert!(
                message.contains(&format!(": {place}: ")),
                "{text:?}: {message}"
            );
            assert!(message.contains(what), "{text:?}: {message}");
        }
    }

    #[test]
    fn text_that_is_not_utf8_names_its_line() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), b"clip25,0,stand\nclip25,4,s\xffit\n").unwrap();
        let message = read_whole_clip(file.path()).unwrap_err().to_string();
        assert!(message.contains(": line 2: not UTF-8"), "{message}");
    }

    #[test]
    fn a_missing_file_is_a_read_error() {
        let error = read_whole_clip(Path::new("/nonexistent/labels.csv")).unwrap_err();
        assert!(matches!(error, ExportError::Read { .. }), "{error}");
    }
}
