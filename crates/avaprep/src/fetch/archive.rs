//! Safe extraction of the annotation archives (zip and tar).
//!
//! Archives come from the network and are untrusted: an entry with an absolute path, a `..`
//! component, a link, or a device or FIFO is refused, and then nothing of that archive is kept.
//! Every member is written to a staging folder first and moved into place only when the whole
//! archive has been read, so a failure never leaves half an archive behind.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use crate::fsutil;

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{archive}: refusing entry `{entry}`: {reason}")]
    UnsafeEntry {
        archive: PathBuf,
        entry: String,
        reason: &'static str,
    },
    #[error("{archive}: not a readable {kind} archive: {message}")]
    Corrupt {
        archive: PathBuf,
        kind: &'static str,
        message: String,
    },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// What the caller's check of the members found wrong.
    #[error("{0}")]
    Refused(String),
}

/// A look at the members, in a folder of their own, before any of them takes its place: an
/// error leaves the destination as it was.
pub type MemberCheck<'a> = &'a dyn Fn(&Path) -> Result<(), String>;

/// Extracts a zip into `destination`, returning the paths written (relative to it).
pub fn extract_zip(
    archive: &Path,
    destination: &Path,
    check: MemberCheck,
) -> Result<Vec<PathBuf>, ArchiveError> {
    let corrupt = |error: zip::result::ZipError| ArchiveError::Corrupt {
        archive: archive.to_path_buf(),
        kind: "zip",
        message: error.to_string(),
    };
    let file = File::open(archive).map_err(|source| io_error(archive, source))?;
    let mut zip = zip::ZipArchive::new(file).map_err(corrupt)?;
    let staging = Staging::new(destination)?;
    for index in 0..zip.len() {
        let mut entry = zip.by_index(index).map_err(corrupt)?;
        let name = entry.name().map_err(corrupt)?.to_string();
        if entry.is_symlink() {
            return Err(unsafe_entry(archive, &name, "links are not allowed"));
        }
        let Some(relative) = safe_relative_path(&name, None)
            .map_err(|reason| unsafe_entry(archive, &name, reason))?
        else {
            continue;
        };
        if entry.is_dir() {
            continue;
        }
        staging.write(&relative, &mut entry)?;
    }
    check(&staging.root).map_err(ArchiveError::Refused)?;
    staging.commit()
}

/// Extracts a tar into `destination`, dropping `strip_prefix` (a leading folder) from every member.
pub fn extract_tar(
    archive: &Path,
    destination: &Path,
    strip_prefix: Option<&str>,
    check: MemberCheck,
) -> Result<Vec<PathBuf>, ArchiveError> {
    let corrupt = |error: io::Error| ArchiveError::Corrupt {
        archive: archive.to_path_buf(),
        kind: "tar",
        message: error.to_string(),
    };
    let file = File::open(archive).map_err(|source| io_error(archive, source))?;
    let mut tar = tar::Archive::new(file);
    let staging = Staging::new(destination)?;
    for entry in tar.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let kind = entry.header().entry_type();
        let reason = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => None,
            tar::EntryType::Directory => {
                // Checked like a file so a hostile folder name is refused too.
                safe_relative_path(&name, strip_prefix)
                    .map_err(|reason| unsafe_entry(archive, &name, reason))?;
                continue;
            }
            tar::EntryType::Symlink | tar::EntryType::Link => Some("links are not allowed"),
            tar::EntryType::Char | tar::EntryType::Block => Some("device files are not allowed"),
            tar::EntryType::Fifo => Some("FIFOs are not allowed"),
            _ => Some("only plain files and folders are allowed"),
        };
        if let Some(reason) = reason {
            return Err(unsafe_entry(archive, &name, reason));
        }
        let Some(relative) = safe_relative_path(&name, strip_prefix)
            .map_err(|reason| unsafe_entry(archive, &name, reason))?
        else {
            continue;
        };
        staging.write(&relative, &mut entry)?;
    }
    check(&staging.root).map_err(ArchiveError::Refused)?;
    staging.commit()
}

/// The member's path below the destination, or `None` for the stripped folder itself.
fn safe_relative_path(
    name: &str,
    strip_prefix: Option<&str>,
) -> Result<Option<PathBuf>, &'static str> {
    if name.contains('\0') || name.chars().any(char::is_control) {
        return Err("control characters in the name");
    }
    if name.contains('\\') {
        return Err("backslashes in the name");
    }
    let path = Path::new(name);
    let mut parts = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err("`..` in the path"),
            Component::RootDir | Component::Prefix(_) => return Err("an absolute path"),
        }
    }
    let parts = match strip_prefix {
        Some(prefix) => match parts.strip_prefix(prefix.trim_end_matches('/')) {
            Ok(rest) => rest.to_path_buf(),
            Err(_) => return Err("outside the archive's expected top folder"),
        },
        None => parts,
    };
    Ok((!parts.as_os_str().is_empty()).then_some(parts))
}

/// A hidden folder inside the destination (same file system, so the final moves are renames).
struct Staging {
    root: PathBuf,
    destination: PathBuf,
    written: std::cell::RefCell<Vec<PathBuf>>,
}

impl Staging {
    fn new(destination: &Path) -> Result<Self, ArchiveError> {
        let root = destination.join(format!(".extracting-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).map_err(|source| io_error(&root, source))?;
        Ok(Staging {
            root,
            destination: destination.to_path_buf(),
            written: std::cell::RefCell::new(Vec::new()),
        })
    }

    fn write(&self, relative: &Path, reader: &mut dyn Read) -> Result<(), ArchiveError> {
        let path = self.root.join(relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|source| io_error(parent, source))?;
        }
        let mut file = File::create(&path).map_err(|source| io_error(&path, source))?;
        io::copy(reader, &mut file).map_err(|source| io_error(&path, source))?;
        file.sync_all().map_err(|source| io_error(&path, source))?;
        self.written.borrow_mut().push(relative.to_path_buf());
        Ok(())
    }

    fn commit(self) -> Result<Vec<PathBuf>, ArchiveError> {
        let written = self.written.borrow().clone();
        for relative in &written {
            let target = self.destination.join(relative);
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent).map_err(|source| io_error(parent, source))?;
            }
            fs::rename(self.root.join(relative), &target)
                .map_err(|source| io_error(&target, source))?;
            fsutil::sync_parent(&target).map_err(|source| io_error(&target, source))?;
        }
        Ok(written)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn unsafe_entry(archive: &Path, entry: &str, reason: &'static str) -> ArchiveError {
    ArchiveError::UnsafeEntry {
        archive: archive.to_path_buf(),
        entry: entry.to_string(),
        reason,
    }
}

fn io_error(path: &Path, source: io::Error) -> ArchiveError {
    ArchiveError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zip_with(names: &[&str]) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default();
        for name in names {
            zip.start_file(*name, options).unwrap();
            zip.write_all(b"data").unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    /// Raw tar bytes, so hostile names that the tar builder would refuse can be written.
    fn tar_with(entries: &[(&str, tar::EntryType, &str)]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for (name, kind, link) in entries {
            let mut header = tar::Header::new_old();
            header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
            header.set_entry_type(*kind);
            header.set_mode(0o644);
            let body: &[u8] = if *kind == tar::EntryType::Regular {
                b"data"
            } else {
                b""
            };
            header.set_size(body.len() as u64);
            header.set_cksum();
            bytes.extend_from_slice(header.as_bytes());
            bytes.extend_from_slice(body);
            bytes.resize(bytes.len().div_ceil(512) * 512, 0);
        }
        bytes.extend_from_slice(&[0; 1024]);
        bytes
    }

    fn write_archive(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn zip_extracts_plain_files() {
        let dir = tempfile::tempdir().unwrap();
        let archive = write_archive(dir.path(), "a.zip", &zip_with(&["a.csv", "sub/b.txt"]));
        let out = dir.path().join("out");
        let written = extract_zip(&archive, &out, &|_| Ok(())).unwrap();
        assert_eq!(
            written,
            vec![PathBuf::from("a.csv"), PathBuf::from("sub/b.txt")]
        );
        assert_eq!(fs::read(out.join("sub/b.txt")).unwrap(), b"data");
        assert_eq!(
            fs::read_dir(&out).unwrap().count(),
            2,
            "no staging folder left behind"
        );
    }

    #[test]
    fn zip_slip_is_refused_and_nothing_is_kept() {
        for hostile in ["../evil.csv", "/etc/evil", "a/../../evil", "a\\..\\evil"] {
            let dir = tempfile::tempdir().unwrap();
            let bytes = zip_with(&["good.csv", hostile]);
            let archive = write_archive(dir.path(), "a.zip", &bytes);
            let out = dir.path().join("out");
            let error = extract_zip(&archive, &out, &|_| Ok(()))
                .unwrap_err()
                .to_string();
            assert!(error.contains("refusing entry"), "{hostile}: {error}");
            assert!(
                !out.join("good.csv").exists(),
                "{hostile}: a refused archive left files"
            );
            assert!(!dir.path().join("evil.csv").exists());
        }
    }

    #[test]
    fn tar_strips_its_top_folder() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = tar_with(&[
            ("ava_annotations/", tar::EntryType::Directory, ""),
            ("ava_annotations/boxes/a.csv", tar::EntryType::Regular, ""),
        ]);
        let archive = write_archive(dir.path(), "a.tar", &bytes);
        let out = dir.path().join("out");
        let written = extract_tar(&archive, &out, Some("ava_annotations/"), &|_| Ok(())).unwrap();
        assert_eq!(written, vec![PathBuf::from("boxes/a.csv")]);
        assert_eq!(fs::read(out.join("boxes/a.csv")).unwrap(), b"data");
    }

    #[test]
    fn tar_refuses_links_devices_and_escapes() {
        let cases: &[(&str, tar::EntryType, &str, &str)] = &[
            ("top/link", tar::EntryType::Symlink, "/etc/passwd", "links"),
            ("top/hard", tar::EntryType::Link, "../../x", "links"),
            ("top/dev", tar::EntryType::Char, "", "device"),
            ("top/fifo", tar::EntryType::Fifo, "", "FIFO"),
            ("top/../../x", tar::EntryType::Regular, "", "`..`"),
            ("/abs/x", tar::EntryType::Regular, "", "absolute"),
            ("other/x", tar::EntryType::Regular, "", "top folder"),
        ];
        for (name, kind, link, expected) in cases {
            let dir = tempfile::tempdir().unwrap();
            let bytes = tar_with(&[("top/ok", tar::EntryType::Regular, ""), (name, *kind, link)]);
            let archive = write_archive(dir.path(), "a.tar", &bytes);
            let out = dir.path().join("out");
            let error = extract_tar(&archive, &out, Some("top/"), &|_| Ok(()))
                .unwrap_err()
                .to_string();
            assert!(
                error.contains(expected) && error.contains(name),
                "{name}: {error}"
            );
            assert!(
                !out.join("ok").exists(),
                "{name}: a refused archive left files"
            );
        }
    }
}
