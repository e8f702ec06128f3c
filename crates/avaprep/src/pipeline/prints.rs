//! Prints of the files an item made or read: cheap to take (names, sizes and modification times,
//! no reading of contents), so every run and `status` can check that a finished item's outputs are
//! still the ones it made, and that its inputs have not changed since.

use std::path::Path;
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One file or folder (everything under it), by its path relative to the data directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilePrint {
    pub path: String,
    pub files: u64,
    pub bytes: u64,
    /// sha256 over every file's relative name, size and modification time, in name order.
    pub digest: String,
    /// sha256 over every file's relative name and bytes, in name order: what `--verify` checks,
    /// as sizes and times cannot tell a flipped bit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The digest is over the files' names only: which files a folder holds (the videos a plan
    /// is made from, whose bytes are checked where each is read).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub names_only: bool,
}

/// How closely recorded prints are compared with the files now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scrutiny {
    /// Names, sizes and modification times: a directory listing, cheap on any dataset.
    #[default]
    Listing,
    /// Also every byte, against the recorded content hash (`--verify`).
    Contents,
}

impl Scrutiny {
    /// What a command's `--verify` flag asks for.
    pub fn verify(verify: bool) -> Self {
        if verify {
            Scrutiny::Contents
        } else {
            Scrutiny::Listing
        }
    }
}

impl FilePrint {
    /// The print of `relative` under `data_dir` as it is now; a path that does not exist has no
    /// files and the digest of nothing.
    pub fn take(data_dir: &Path, relative: &str) -> std::io::Result<FilePrint> {
        Ok(FilePrint::of(relative, &listing(&data_dir.join(relative))?))
    }

    /// The print of which files are under `relative`, by name only (see `names_only`).
    pub fn take_names(data_dir: &Path, relative: &str) -> std::io::Result<FilePrint> {
        Ok(FilePrint::of_names(
            relative,
            &listing(&data_dir.join(relative))?,
        ))
    }

    fn of_names(relative: &str, entries: &[Entry]) -> FilePrint {
        let mut hasher = Sha256::new();
        for (name, _, _) in entries {
            hasher.update(name.as_bytes());
            hasher.update([0]);
        }
        FilePrint {
            path: relative.to_string(),
            files: entries.len() as u64,
            bytes: 0,
            digest: hex::encode(hasher.finalize()),
            content: None,
            names_only: true,
        }
    }

    fn of(relative: &str, entries: &[Entry]) -> FilePrint {
        let mut hasher = Sha256::new();
        let mut bytes = 0;
        for (name, size, modified) in entries {
            hasher.update(name.as_bytes());
            hasher.update([0]);
            hasher.update(size.to_le_bytes());
            hasher.update(modified.to_le_bytes());
            bytes += size;
        }
        FilePrint {
            path: relative.to_string(),
            files: entries.len() as u64,
            bytes,
            digest: hex::encode(hasher.finalize()),
            content: None,
            names_only: false,
        }
    }

    /// The print with the content hash: what a stage records of what it made.
    pub fn take_with_content(data_dir: &Path, relative: &str) -> std::io::Result<FilePrint> {
        let path = data_dir.join(relative);
        let entries = listing(&path)?;
        let mut print = FilePrint::of(relative, &entries);
        print.content = Some(hash_contents(&path, &entries)?);
        Ok(print)
    }

    /// What differs between this recorded print and the file as it is now, in words; `None` when
    /// nothing does (see [`Self::compare`]).
    pub fn changed(&self, data_dir: &Path, scrutiny: Scrutiny) -> Option<String> {
        match self.compare(data_dir, scrutiny) {
            Comparison::Changed(change) => Some(change),
            Comparison::Same | Comparison::Retimed(_) => None,
        }
    }

    /// How the file is now against this recorded print. A print is its content: where the
    /// listing differs but the names and sizes do not (a `touch`, a copy that did not keep
    /// times) and a content hash was recorded, the bytes are hashed and, if the same, the file
    /// is unchanged, with the print to record in its place so the next look is a listing again.
    /// With [`Scrutiny::Contents`] the bytes are hashed in any case, where a hash was recorded.
    pub fn compare(&self, data_dir: &Path, scrutiny: Scrutiny) -> Comparison {
        let path = data_dir.join(&self.path);
        let unreadable = |error: std::io::Error| {
            Comparison::Changed(format!("{}: cannot be read ({error})", self.path))
        };
        let entries = match listing(&path) {
            Ok(entries) => entries,
            Err(error) => return unreadable(error),
        };
        let now = match self.names_only {
            true => FilePrint::of_names(&self.path, &entries),
            false => FilePrint::of(&self.path, &entries),
        };
        let listed_same = now.digest == self.digest;
        let same_shape = now.files == self.files && now.bytes == self.bytes;
        let hash_now = match (&self.content, listed_same, scrutiny) {
            (Some(recorded), true, Scrutiny::Contents) | (Some(recorded), false, _)
                if same_shape =>
            {
                Some((recorded, hash_contents(&path, &entries)))
            }
            _ => None,
        };
        match hash_now {
            None if listed_same => Comparison::Same,
            None => Comparison::Changed(self.listing_change(&now)),
            Some((_, Err(error))) => unreadable(error),
            Some((recorded, Ok(hash))) if &hash == recorded => match listed_same {
                true => Comparison::Same,
                false => Comparison::Retimed(FilePrint {
                    digest: now.digest,
                    ..self.clone()
                }),
            },
            Some(_) => Comparison::Changed(match listed_same {
                true => format!(
                    "{}: its bytes differ from what was made (same names, sizes and times)",
                    self.path
                ),
                false => format!("{} was modified after it was made", self.path),
            }),
        }
    }

    fn listing_change(&self, now: &FilePrint) -> String {
        if now.files == 0 {
            format!("{} is gone", self.path)
        } else if now.files != self.files {
            format!(
                "{} has {} files, made with {}",
                self.path, now.files, self.files
            )
        } else if now.bytes != self.bytes {
            format!(
                "{} has {} bytes, made with {}",
                self.path, now.bytes, self.bytes
            )
        } else {
            format!("{} was modified after it was made", self.path)
        }
    }
}

/// A recorded print against the file now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparison {
    Same,
    /// The same bytes under other modification times: the print to record instead.
    Retimed(FilePrint),
    /// What changed, in words.
    Changed(String),
}

/// The first recorded print that no longer holds, described.
pub fn first_change(prints: &[FilePrint], data_dir: &Path, scrutiny: Scrutiny) -> Option<String> {
    prints
        .iter()
        .find_map(|print| print.changed(data_dir, scrutiny))
}

/// A file's name below the printed path (empty for the path itself, else starting with `/`),
/// size and modification time in nanoseconds.
type Entry = (String, u64, u128);

/// Every file under `path`, in name order.
fn listing(path: &Path) -> std::io::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    collect(path, "", &mut entries)?;
    entries.sort();
    Ok(entries)
}

/// sha256 over the relative name and the bytes of every listed file, in name order.
fn hash_contents(path: &Path, entries: &[Entry]) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    for (name, _, _) in entries {
        // Names below a folder start with `/`; a file's own name is empty (and joining an empty
        // name would add a trailing `/`).
        let file = match name.trim_start_matches('/') {
            "" => path.to_path_buf(),
            relative => path.join(relative),
        };
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(file_digest(&file)?);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// sha256 of a file's bytes, read as it goes: a video on disk may be gigabytes.
fn file_digest(path: &Path) -> std::io::Result<[u8; 32]> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buffer)? {
            0 => return Ok(hasher.finalize().into()),
            read => hasher.update(&buffer[..read]),
        }
    }
}

/// One digest over several prints (the outputs of a whole-dataset stage), for the fingerprints of
/// the stages that read them: by content where it was recorded, so a file made again with the same
/// bytes (a deleted report validated again) leaves the stages after it up to date.
pub fn combined_digest(prints: &[FilePrint]) -> String {
    let mut hasher = Sha256::new();
    for print in prints {
        hasher.update(print.path.as_bytes());
        hasher.update([0]);
        hasher.update(print.content.as_ref().unwrap_or(&print.digest).as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// One digest of a stage's completed items and the prints of what each made.
pub fn items_digest(
    items: &std::collections::BTreeMap<String, super::state::ItemRecord>,
) -> String {
    let mut hasher = Sha256::new();
    for (item, record) in items {
        hasher.update(item.as_bytes());
        hasher.update([0]);
        hasher.update(combined_digest(&record.outputs).as_bytes());
        hasher.update([0]);
    }
    hex::encode(hasher.finalize())
}

fn collect(path: &Path, name: &str, out: &mut Vec<Entry>) -> std::io::Result<()> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    if metadata.is_dir() {
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            let child = format!("{name}/{}", entry.file_name().to_string_lossy());
            collect(&entry.path(), &child, out)?;
        }
        return Ok(());
    }
    let modified = metadata
        .modified()
        .ok()
        .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |since| since.as_nanos());
    out.push((name.to_string(), metadata.len(), modified));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_print_notices_every_kind_of_change() {
        let dir = tempfile::tempdir().unwrap();
        let frames = dir.path().join("frames/v");
        std::fs::create_dir_all(&frames).unwrap();
        for k in 1..=3 {
            std::fs::write(frames.join(format!("{k}.jpg")), vec![7u8; 100 + k]).unwrap();
        }
        let print = FilePrint::take(dir.path(), "frames/v").unwrap();
        assert_eq!((print.files, print.bytes), (3, 306));
        assert_eq!(print.changed(dir.path(), Scrutiny::Listing), None);

        std::fs::write(frames.join("2.jpg"), b"").unwrap();
        assert!(
            print
                .changed(dir.path(), Scrutiny::Listing)
                .unwrap()
                .contains("bytes")
        );
        std::fs::remove_file(frames.join("2.jpg")).unwrap();
        assert!(
            print
                .changed(dir.path(), Scrutiny::Listing)
                .unwrap()
                .contains("2 files")
        );
        std::fs::remove_dir_all(&frames).unwrap();
        assert!(
            print
                .changed(dir.path(), Scrutiny::Listing)
                .unwrap()
                .contains("is gone")
        );

        // Same name and size, rewritten: the modification time tells.
        let file = dir.path().join("plan.json");
        std::fs::write(&file, b"abc").unwrap();
        let print = FilePrint::take(dir.path(), "plan.json").unwrap();
        let file_handle = std::fs::File::options().write(true).open(&file).unwrap();
        file_handle
            .set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
            .unwrap();
        assert!(
            print
                .changed(dir.path(), Scrutiny::Listing)
                .unwrap()
                .contains("modified")
        );
    }

    /// A print is its content: a `touch` (or a copy that did not keep times) changes nothing,
    /// and the print to record instead is a listing again; a rewrite of the same size does.
    #[test]
    fn a_touched_file_is_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let frames = dir.path().join("frames/v");
        std::fs::create_dir_all(&frames).unwrap();
        for k in 1..=3 {
            std::fs::write(frames.join(format!("{k}.jpg")), vec![k as u8; 100]).unwrap();
        }
        let print = FilePrint::take_with_content(dir.path(), "frames/v").unwrap();
        let later = |file: &Path, seconds: u64| {
            std::fs::File::options()
                .write(true)
                .open(file)
                .unwrap()
                .set_modified(
                    std::time::SystemTime::now() + std::time::Duration::from_secs(seconds),
                )
                .unwrap();
        };
        later(&frames.join("2.jpg"), 5);
        let Comparison::Retimed(retimed) = print.compare(dir.path(), Scrutiny::Listing) else {
            panic!("a touched file is the same file");
        };
        assert_ne!(retimed.digest, print.digest);
        assert_eq!(retimed.content, print.content);
        assert_eq!(
            retimed.compare(dir.path(), Scrutiny::Listing),
            Comparison::Same
        );
        std::fs::write(frames.join("3.jpg"), vec![9u8; 100]).unwrap();
        later(&frames.join("3.jpg"), 9);
        let Comparison::Changed(change) = retimed.compare(dir.path(), Scrutiny::Listing) else {
            panic!("a rewrite of the same size is a change");
        };
        assert!(change.contains("modified"), "{change}");
    }

    /// A flipped bit keeps names, sizes and times: only the content hash (`--verify`) sees it.
    #[test]
    fn only_the_content_hash_sees_a_flipped_bit() {
        let dir = tempfile::tempdir().unwrap();
        let frames = dir.path().join("frames/v");
        std::fs::create_dir_all(&frames).unwrap();
        for k in 1..=3 {
            std::fs::write(frames.join(format!("{k}.jpg")), vec![7u8; 100]).unwrap();
        }
        let print = FilePrint::take_with_content(dir.path(), "frames/v").unwrap();
        assert_eq!(print.changed(dir.path(), Scrutiny::Contents), None);
        let file = frames.join("2.jpg");
        let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
        let mut bytes = std::fs::read(&file).unwrap();
        bytes[50] ^= 1;
        std::fs::write(&file, &bytes).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        assert_eq!(print.changed(dir.path(), Scrutiny::Listing), None);
        let change = print.changed(dir.path(), Scrutiny::Contents).unwrap();
        assert!(change.contains("bytes differ"), "{change}");
    }
}
