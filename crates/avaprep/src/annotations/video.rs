//! Video identifiers and video file names.
//!
//! A [`VideoId`] is AVA's 11-character YouTube id or any other safe file stem
//! (`cam3_2024-05-01_1200`, `IMG_0042`, `clip25`): 1 to 64 characters of
//! `A-Z a-z 0-9 - _`. It is stored inline: it is `Copy`, costs no allocation per
//! parsed row, and its charset makes it impossible to spell a path separator, `.`,
//! `..`, a hidden name, an extension, whitespace or the comma of a CSV row with it,
//! so it is safe to join onto a directory and to write into any list. (A file
//! name given where an id belongs, `clip.mp4`, is refused, not taken as an id.)

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// The longest video id: room for a camera and a timestamp, and far below a file name's 255
/// bytes once the frame number, the extension and a staging suffix are added.
pub const VIDEO_ID_MAX_LEN: usize = 64;

/// A validated video id, e.g. AVA's `-5KQ66BBWC4` or a file stem of one's own.
///
/// Ids may begin with `-` or `_`; callers passing them to command-line tools
/// must not let them be read as flags.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VideoId {
    /// The id's bytes, then zeros: zeros sort before every allowed byte, so the derived order
    /// is the strings' order.
    bytes: [u8; VIDEO_ID_MAX_LEN],
    len: u8,
}

/// Why a text is not a [`VideoId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VideoIdError {
    #[error("character {position} is {found:?}; allowed are A-Z, a-z, 0-9, '-' and '_'")]
    BadChar { position: usize, found: char },
    #[error("must be 1 to 64 characters long, found {found}")]
    Length { found: usize },
}

impl VideoId {
    /// Validates raw bytes, the form the CSV readers see.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, VideoIdError> {
        // Characters are checked before length so that `a/b` or `..` is
        // reported for what makes it dangerous, not merely for its length.
        if let Some(i) = bytes.iter().position(|&b| !is_id_byte(b)) {
            return Err(VideoIdError::BadChar {
                position: char_count(&bytes[..i]) + 1,
                found: first_char(&bytes[i..]),
            });
        }
        if bytes.is_empty() || bytes.len() > VIDEO_ID_MAX_LEN {
            return Err(VideoIdError::Length { found: bytes.len() });
        }
        let mut id = Self {
            bytes: [0; VIDEO_ID_MAX_LEN],
            len: bytes.len() as u8,
        };
        id.bytes[..bytes.len()].copy_from_slice(bytes);
        Ok(id)
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII bytes are ever stored, so this cannot fail.
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

fn is_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

fn char_count(bytes: &[u8]) -> usize {
    String::from_utf8_lossy(bytes).chars().count()
}

fn first_char(bytes: &[u8]) -> char {
    String::from_utf8_lossy(bytes)
        .chars()
        .next()
        .unwrap_or(char::REPLACEMENT_CHARACTER)
}

impl FromStr for VideoId {
    type Err = VideoIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match Self::from_bytes(s.as_bytes()) {
            // Report characters, not bytes, for non-ASCII input.
            Err(VideoIdError::Length { .. }) => Err(VideoIdError::Length {
                found: s.chars().count(),
            }),
            other => other,
        }
    }
}

impl fmt::Display for VideoId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for VideoId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VideoId({:?})", self.as_str())
    }
}

impl Serialize for VideoId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for VideoId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(ParsingVisitor::<VideoId>::new(
            "a video id (1 to 64 of A-Z a-z 0-9 - _)",
        ))
    }
}

/// Deserialises any `FromStr` type from a string, so validation is the same as
/// for parsing.
struct ParsingVisitor<T> {
    expecting: &'static str,
    _marker: std::marker::PhantomData<T>,
}

impl<T> ParsingVisitor<T> {
    fn new(expecting: &'static str) -> Self {
        Self {
            expecting,
            _marker: std::marker::PhantomData,
        }
    }
}

impl<T> Visitor<'_> for ParsingVisitor<T>
where
    T: FromStr,
    T::Err: fmt::Display,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        v.parse().map_err(|e| E::custom(format!("{v:?}: {e}")))
    }
}

/// Container formats of the AVA trainval/test videos.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VideoExtension {
    Mkv,
    Mp4,
    Webm,
}

impl VideoExtension {
    pub const ALL: [VideoExtension; 3] = [Self::Mkv, Self::Mp4, Self::Webm];

    /// The extension without the dot.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mkv => "mkv",
            Self::Mp4 => "mp4",
            Self::Webm => "webm",
        }
    }
}

impl fmt::Display for VideoExtension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A plain video file name such as `-5KQ66BBWC4.mkv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VideoFileName {
    pub id: VideoId,
    pub extension: VideoExtension,
}

/// Why a text is not a [`VideoFileName`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VideoFileNameError {
    #[error("not a plain file name (contains a path separator)")]
    NotPlain,
    #[error("has no extension; expected .mkv, .mp4 or .webm")]
    NoExtension,
    #[error("extension {0:?} is not one of mkv, mp4, webm")]
    BadExtension(String),
    #[error("video id: {0}")]
    Id(VideoIdError),
}

impl FromStr for VideoFileName {
    type Err = VideoFileNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.contains(['/', '\\']) {
            return Err(VideoFileNameError::NotPlain);
        }
        let (stem, ext) = s.rsplit_once('.').ok_or(VideoFileNameError::NoExtension)?;
        // Case-sensitive on purpose: the official lists are lower case and
        // the download URLs are case-sensitive.
        let extension = VideoExtension::ALL
            .into_iter()
            .find(|e| e.as_str() == ext)
            .ok_or_else(|| VideoFileNameError::BadExtension(ext.to_owned()))?;
        let id = stem.parse().map_err(VideoFileNameError::Id)?;
        Ok(Self { id, extension })
    }
}

impl fmt::Display for VideoFileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.id, self.extension)
    }
}

impl Serialize for VideoFileName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for VideoFileName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(ParsingVisitor::<VideoFileName>::new(
            "a video file name such as -5KQ66BBWC4.mkv",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::IntoDeserializer;
    use serde::de::value::{Error as DeError, StrDeserializer};

    fn de_id(s: &str) -> Result<VideoId, DeError> {
        let d: StrDeserializer<DeError> = s.into_deserializer();
        VideoId::deserialize(d)
    }

    #[test]
    fn accepts_real_ids_including_leading_dash_and_underscore() {
        for s in ["-5KQ66BBWC4", "_-Z6wFjXtGQ", "1j20qq1JyX4", "--205wugM18"] {
            let id: VideoId = s.parse().unwrap();
            assert_eq!(id.as_str(), s);
            assert_eq!(id.to_string(), s);
        }
    }

    /// Ids of one's own videos: file stems of any length up to the bound.
    #[test]
    fn accepts_file_stems_of_ones_own_videos() {
        let longest = "a".repeat(VIDEO_ID_MAX_LEN);
        for s in ["clip25", "cam3_2024-05-01_1200", "IMG_0042", "x", &longest] {
            let id: VideoId = s.parse().unwrap();
            assert_eq!(id.as_str(), s);
            assert_eq!(de_id(s).unwrap(), id);
        }
    }

    #[test]
    fn rejects_anything_that_could_escape_a_directory() {
        let bad_char = |position, found| VideoIdError::BadChar { position, found };
        let cases: [(&str, VideoIdError); 12] = [
            ("../etc/passwd", bad_char(1, '.')),
            ("a/b", bad_char(2, '/')),
            (".", bad_char(1, '.')),
            ("..", bad_char(1, '.')),
            ("clip.mp4", bad_char(5, '.')),
            ("abcde\u{7}ghijk", bad_char(6, '\u{7}')),
            ("abcde\nghijk", bad_char(6, '\n')),
            ("cam 3", bad_char(4, ' ')),
            ("cam,3", bad_char(4, ',')),
            ("abcdéfghijk", bad_char(5, 'é')),
            ("", VideoIdError::Length { found: 0 }),
            (
                &"a".repeat(VIDEO_ID_MAX_LEN + 1),
                VideoIdError::Length { found: 65 },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<VideoId>(), Err(want), "{text:?}");
        }
        assert!("abcdefghi\\k".parse::<VideoId>().is_err());
        assert!("abcdefghi\tk".parse::<VideoId>().is_err());
    }

    #[test]
    fn error_messages_say_why() {
        let e = "a/b".parse::<VideoId>().unwrap_err().to_string();
        assert_eq!(
            e,
            "character 2 is '/'; allowed are A-Z, a-z, 0-9, '-' and '_'"
        );
        let e = "a".repeat(70).parse::<VideoId>().unwrap_err().to_string();
        assert_eq!(e, "must be 1 to 64 characters long, found 70");
    }

    #[test]
    fn ordering_is_string_ordering() {
        let mut ids: Vec<VideoId> = [
            "b0000000000",
            "-0000000000",
            "A0000000000",
            "_0000000000",
            "A",
            "A00000000000",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        ids.sort();
        let got: Vec<&str> = ids.iter().map(|i| i.as_str()).collect();
        assert_eq!(
            got,
            [
                "-0000000000",
                "A",
                "A0000000000",
                "A00000000000",
                "_0000000000",
                "b0000000000"
            ]
        );
    }

    #[test]
    fn serde_round_trip_validates() {
        assert_eq!(de_id("-5KQ66BBWC4").unwrap().as_str(), "-5KQ66BBWC4");
        let err = de_id("../etc/pass").unwrap_err().to_string();
        assert!(err.contains("character 1 is '.'"), "{err}");
        assert!(de_id("a bc").is_err());
        let d: StrDeserializer<DeError> = "x.y.mkv".into_deserializer();
        assert!(VideoFileName::deserialize(d).is_err());
        let d: StrDeserializer<DeError> = "IMG_0042.mp4".into_deserializer();
        assert_eq!(
            VideoFileName::deserialize(d).unwrap().id.as_str(),
            "IMG_0042"
        );
        let d: StrDeserializer<DeError> = "-5KQ66BBWC4.webm".into_deserializer();
        let name = VideoFileName::deserialize(d).unwrap();
        assert_eq!(name.extension, VideoExtension::Webm);
    }

    #[test]
    fn file_names() {
        let n: VideoFileName = "-5KQ66BBWC4.mkv".parse().unwrap();
        assert_eq!(n.id.as_str(), "-5KQ66BBWC4");
        assert_eq!(n.extension, VideoExtension::Mkv);
        assert_eq!(n.to_string(), "-5KQ66BBWC4.mkv");
        let bad = [
            ("dir/-5KQ66BBWC4.mkv", VideoFileNameError::NotPlain),
            ("..\\5KQ66BBWC4.mkv", VideoFileNameError::NotPlain),
            ("-5KQ66BBWC4", VideoFileNameError::NoExtension),
            (
                "-5KQ66BBWC4.MKV",
                VideoFileNameError::BadExtension("MKV".into()),
            ),
            (
                "-5KQ66BBWC4.avi",
                VideoFileNameError::BadExtension("avi".into()),
            ),
            (
                "-5KQ66BBWC4.mkv.mkv",
                VideoFileNameError::Id(VideoIdError::BadChar {
                    position: 12,
                    found: '.',
                }),
            ),
            (
                ".mkv",
                VideoFileNameError::Id(VideoIdError::Length { found: 0 }),
            ),
        ];
        for (text, want) in bad {
            assert_eq!(text.parse::<VideoFileName>(), Err(want), "{text:?}");
        }
    }
}
