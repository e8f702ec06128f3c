//! TensorBoard event files in the run folder, written as training goes, so `tensorboard --logdir
//! runs/` shows a run (or several side by side) with no conversion.
//!
//! An event file is a sequence of records: the length (u64, little-endian), its masked CRC-32C,
//! an `Event` protobuf, and that message's masked CRC-32C. The messages below are the part of
//! TensorBoard's `event.proto` and `summary.proto` that scalars and text use, with their field
//! numbers; anything else a reader expects has its protobuf default.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use prost::Message;

/// What TensorBoard looks for in a file name.
pub const FILE_MARKER: &str = "events.out.tfevents.";
/// The end of the event files this writer makes (TensorBoard's `.<host>` place).
const OWN_SUFFIX: &str = ".avaprep";

#[derive(Clone, PartialEq, Message)]
struct Event {
    #[prost(double, tag = "1")]
    wall_time: f64,
    #[prost(int64, tag = "2")]
    step: i64,
    #[prost(oneof = "What", tags = "3, 5, 7")]
    what: Option<What>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum What {
    #[prost(string, tag = "3")]
    FileVersion(String),
    #[prost(message, tag = "5")]
    Summary(Summary),
    #[prost(message, tag = "7")]
    SessionLog(SessionLog),
}

#[derive(Clone, PartialEq, Message)]
struct Summary {
    #[prost(message, repeated, tag = "1")]
    value: Vec<Value>,
}

#[derive(Clone, PartialEq, Message)]
struct Value {
    #[prost(string, tag = "1")]
    tag: String,
    #[prost(message, optional, tag = "9")]
    metadata: Option<SummaryMetadata>,
    #[prost(oneof = "Payload", tags = "2, 8")]
    payload: Option<Payload>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Payload {
    #[prost(float, tag = "2")]
    SimpleValue(f32),
    #[prost(message, tag = "8")]
    Tensor(TensorProto),
}

#[derive(Clone, PartialEq, Message)]
struct SummaryMetadata {
    #[prost(message, optional, tag = "1")]
    plugin_data: Option<PluginData>,
}

#[derive(Clone, PartialEq, Message)]
struct PluginData {
    #[prost(string, tag = "1")]
    plugin_name: String,
}

#[derive(Clone, PartialEq, Message)]
struct TensorProto {
    #[prost(int32, tag = "1")]
    dtype: i32,
    #[prost(bytes = "vec", repeated, tag = "8")]
    string_val: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
struct SessionLog {
    #[prost(int32, tag = "1")]
    status: i32,
}

/// `tensorflow.DataType.DT_STRING`.
const DT_STRING: i32 = 7;
/// `SessionLog.SessionStatus.START`: readers drop what earlier files hold from its step on.
const SESSION_START: i32 = 1;

/// One run's event file, appended to record by record.
#[derive(Debug)]
pub struct EventWriter {
    path: PathBuf,
    file: File,
}

impl EventWriter {
    /// Starts a new event file in `run_dir`, replacing the run's earlier ones: the caller writes
    /// everything the run has logged so far into it, so the new file alone is the run's record.
    /// After a resume it opens with a session start, so a TensorBoard that was watching drops what
    /// it had read from the replaced files, as `metrics.jsonl` drops what a killed run logged after
    /// its last checkpoint.
    pub fn create(run_dir: &Path, resumed: bool) -> std::io::Result<Self> {
        // The new file's name sorts after every file it replaces (TensorBoard reads a folder's
        // files in name order and follows only the last), even within the same second.
        let mut stamp = wall_time() as u64;
        for entry in std::fs::read_dir(run_dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(rest) = name.strip_prefix(FILE_MARKER) {
                if let Some(seconds) = rest.split('.').next().and_then(|s| s.parse::<u64>().ok()) {
                    stamp = stamp.max(seconds + 1);
                }
                // Another writer's event files in the folder are not ours to remove.
                if name.ends_with(OWN_SUFFIX) {
                    std::fs::remove_file(entry.path())?;
                }
            }
        }
        let name = format!("{FILE_MARKER}{stamp:010}{OWN_SUFFIX}");
        let path = run_dir.join(name);
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)?;
        let mut writer = Self { path, file };
        writer.write(0, What::FileVersion("brain.Event:2".into()))?;
        if resumed {
            writer.write(
                0,
                What::SessionLog(SessionLog {
                    status: SESSION_START,
                }),
            )?;
        }
        Ok(writer)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Scalars at one step, as one event.
    pub fn scalars(&mut self, step: u64, values: &[(String, f64)]) -> std::io::Result<()> {
        let value = values
            .iter()
            .map(|(tag, value)| Value {
                tag: tag.clone(),
                metadata: None,
                // TensorBoard's scalars are 32-bit floats.
                payload: Some(Payload::SimpleValue(*value as f32)),
            })
            .collect();
        self.write(step, What::Summary(Summary { value }))
    }

    /// Markdown for TensorBoard's text tab.
    pub fn text(&mut self, step: u64, tag: &str, markdown: &str) -> std::io::Result<()> {
        let value = Value {
            tag: tag.to_string(),
            metadata: Some(SummaryMetadata {
                plugin_data: Some(PluginData {
                    plugin_name: "text".into(),
                }),
            }),
            payload: Some(Payload::Tensor(TensorProto {
                dtype: DT_STRING,
                string_val: vec![markdown.as_bytes().to_vec()],
            })),
        };
        self.write(step, What::Summary(Summary { value: vec![value] }))
    }

    fn write(&mut self, step: u64, what: What) -> std::io::Result<()> {
        let event = Event {
            wall_time: wall_time(),
            step: step as i64,
            what: Some(what),
        };
        self.file.write_all(&record(&event.encode_to_vec()))
    }
}

/// One record of the file: a reader checks both CRCs, so a record cut short by a kill is
/// recognised as unfinished, not read as data.
fn record(data: &[u8]) -> Vec<u8> {
    let length = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&length);
    out.extend_from_slice(&masked_crc(&length).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
    out
}

/// TFRecord's masked CRC-32C: rotated and offset, so a CRC of data that holds CRCs stays strong.
fn masked_crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
        .rotate_right(15)
        .wrapping_add(0xa282_ead8)
}

fn wall_time() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |elapsed| elapsed.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CRC-32C (Castagnoli), not the zlib CRC-32: its standard check value.
    #[test]
    fn the_checksum_is_crc32c() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn a_record_frames_its_data_with_both_crcs() {
        let framed = record(b"abc");
        assert_eq!(framed.len(), 8 + 4 + 3 + 4);
        assert_eq!(&framed[..8], &3u64.to_le_bytes());
        assert_eq!(&framed[12..15], b"abc");
        assert_eq!(&framed[15..], &masked_crc(b"abc").to_le_bytes());
    }
}
