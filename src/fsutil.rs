//! File-system helpers shared by every stage: nothing half-written is ever taken as complete,
//! files the user names for output are written where they point, and files read from a dataset
//! are what they claim to be.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The temporary name a file is written under before it is renamed into place. It sits in the same
/// directory so the rename is atomic, and its suffix marks it as incomplete to anyone listing files.
pub fn temporary_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{}", std::process::id()));
    path.with_file_name(name)
}

/// Writes `bytes` to `path` atomically: a crash at any moment leaves either the old file or the new
/// one, never a mixture. The data is flushed to disk before the rename for the same reason.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let temporary = temporary_path(path);
    let result = (|| {
        let mut file = File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, path)?;
        sync_parent(path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    result
}

/// Makes a completed rename durable: without it a power loss can forget the new directory entry.
pub fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => File::open(parent)?.sync_all(),
        _ => Ok(()),
    }
}

/// Writes a file the user named for output (`--junit`, `--out`) as a shell redirection would,
/// but never half: through a symbolic link to what it points at, in place into a device or FIFO
/// (`/dev/stdout`, a pipe a CI step reads), and atomically for a regular file, which is replaced
/// only once the new one is complete. A directory is refused (see [`check_output_file`]).
pub fn write_output(path: &Path, bytes: &[u8]) -> io::Result<()> {
    check_output_file(path)?;
    let target = link_target(path)?;
    match fs::metadata(&target) {
        Ok(meta) if !meta.is_file() => {
            // A device or FIFO is written where it is: renaming a file over it would replace it.
            let mut file = OpenOptions::new().write(true).open(&target)?;
            file.write_all(bytes)?;
            file.flush()
        }
        _ => write_atomic(&target, bytes),
    }
}

/// Whether `path` can take an output file: anything but a directory (or a link to one).
pub fn check_output_file(path: &Path) -> io::Result<()> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory: name a file",
        )),
        _ => Ok(()),
    }
}

/// Where a chain of symbolic links at `path` ends (a link's relative target is taken from the
/// link's own folder); `path` itself when it is not a link. The end need not exist yet.
fn link_target(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    // The kernel's own limit on links followed in one lookup.
    for _ in 0..40 {
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = fs::read_link(&current)?;
                let folder = current.parent().unwrap_or(Path::new("."));
                current = folder.join(target);
            }
            _ => return Ok(current),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// What a dataset file is, for the most bytes a reader takes of it: far above any real file of
/// the kind, far below what would exhaust memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A JPEG frame (a 4K frame at the best quality is under 10 MB).
    Frame,
    /// A frame list (AVA's train list at 30 rows a second: about 350 MB).
    FrameList,
    /// An annotation table, label map, checksum list or frame index (AVA's largest: 50 MB).
    Table,
    /// A config, pipeline file, manifest or record of a stage.
    Config,
}

impl FileKind {
    pub const fn limit(self) -> u64 {
        const MIB: u64 = 1 << 20;
        match self {
            FileKind::Frame => 64 * MIB,
            FileKind::FrameList => 1024 * MIB,
            FileKind::Table => 512 * MIB,
            FileKind::Config => 16 * MIB,
        }
    }

    const fn noun(self) -> &'static str {
        match self {
            FileKind::Frame => "a frame",
            FileKind::FrameList => "a frame list",
            FileKind::Table => "an annotation table",
            FileKind::Config => "a config or record",
        }
    }
}

/// Reads a file of a dataset: only a regular file (or a link to one), of at most `kind`'s size.
/// A FIFO, a device or a directory is an error at once (never a read that waits for a writer
/// or never ends), as is a file larger than any file of its kind.
pub fn read_regular(path: &Path, kind: FileKind) -> io::Result<Vec<u8>> {
    check_regular(path, kind)?;
    // Non-blocking: a FIFO swapped in after the check must not hold the open.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let size = regular_size(&file.metadata()?, kind)?;
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(kind.limit() + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > kind.limit() {
        return Err(too_large(bytes.len() as u64, kind));
    }
    Ok(bytes)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_text(path: &Path, kind: FileKind) -> io::Result<String> {
    String::from_utf8(read_regular(path, kind)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// The size of a regular file (or a link to one) of at most `kind`'s size, without reading it.
pub fn check_regular(path: &Path, kind: FileKind) -> io::Result<u64> {
    regular_size(&fs::metadata(path)?, kind)
}

fn regular_size(meta: &fs::Metadata, kind: FileKind) -> io::Result<u64> {
    let file_type = meta.file_type();
    let what = if file_type.is_file() {
        return match meta.len() {
            len if len > kind.limit() => Err(too_large(len, kind)),
            len => Ok(len),
        };
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("is {what}, not a regular file"),
    ))
}

fn too_large(len: u64, kind: FileKind) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "is {len} bytes, more than {} can be ({} MiB)",
            kind.noun(),
            kind.limit() >> 20
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileTypeExt;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn write_atomic_replaces_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(names(path.parent().unwrap()), ["state.json"]);
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    pub(crate) fn make_fifo(path: &Path) {
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0, "mkfifo");
    }

    /// A character device made in a temporary folder: the null device's numbers, so writing to
    /// it discards. Needs root (CI runs as root); elsewhere the system's `/dev/null` stands in.
    fn make_null_device(dir: &Path) -> PathBuf {
        let path = dir.join("device");
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        let made =
            unsafe { libc::mknod(c_path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
        if made == 0 {
            path
        } else {
            PathBuf::from("/dev/null")
        }
    }

    #[test]
    fn output_replaces_a_regular_file_atomically_and_follows_links() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("report.xml");
        write_output(&file, b"one").unwrap();
        write_output(&file, b"two").unwrap();
        assert_eq!(fs::read(&file).unwrap(), b"two");
        assert_eq!(names(dir.path()), ["report.xml"], "no temporary left");

        // A link into a results folder: the target is written, the link stays a link.
        let results = dir.path().join("results");
        fs::create_dir(&results).unwrap();
        fs::write(results.join("junit.xml"), b"old").unwrap();
        let link = dir.path().join("latest.xml");
        std::os::unix::fs::symlink("results/junit.xml", &link).unwrap();
        write_output(&link, b"new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(results.join("junit.xml")).unwrap(), b"new");
        assert_eq!(names(&results), ["junit.xml"]);

        // A link whose target does not exist yet: the target is made.
        let dangling = dir.path().join("dangling.xml");
        std::os::unix::fs::symlink("results/fresh.xml", &dangling).unwrap();
        write_output(&dangling, b"fresh").unwrap();
        assert!(
            fs::symlink_metadata(&dangling)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(results.join("fresh.xml")).unwrap(), b"fresh");
    }

    #[test]
    fn output_goes_into_a_device_or_fifo_in_place_and_a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let device = make_null_device(dir.path());
        write_output(&device, b"discarded").unwrap();
        assert!(fs::metadata(&device).unwrap().file_type().is_char_device());
        let link = dir.path().join("to-device");
        std::os::unix::fs::symlink(&device, &link).unwrap();
        write_output(&link, b"discarded").unwrap();
        assert!(fs::metadata(&device).unwrap().file_type().is_char_device());
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );

        let fifo = dir.path().join("pipe");
        make_fifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(fifo).unwrap())
        };
        write_output(&fifo, b"through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());

        let error = write_output(dir.path(), b"x").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::IsADirectory, "{error}");
        assert!(check_output_file(&dir.path().join("new.xml")).is_ok());
    }

    /// Runs `read` on another thread: a reader that blocks fails the test instead of hanging it.
    fn read_within_seconds(path: &Path, kind: FileKind) -> io::Result<Vec<u8>> {
        let (send, receive) = mpsc::channel();
        let path = path.to_path_buf();
        std::thread::spawn(move || {
            let _ = send.send(read_regular(&path, kind));
        });
        receive
            .recv_timeout(Duration::from_secs(10))
            .expect("the read returns at once")
    }

    #[test]
    fn readers_take_only_regular_files_of_a_sensible_size() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.csv");
        fs::write(&good, b"a,b\n").unwrap();
        assert_eq!(read_regular(&good, FileKind::Table).unwrap(), b"a,b\n");
        let link = dir.path().join("link.csv");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        assert_eq!(read_regular(&link, FileKind::Table).unwrap(), b"a,b\n");

        let fifo = dir.path().join("fifo.jpg");
        make_fifo(&fifo);
        let error = read_within_seconds(&fifo, FileKind::Frame).unwrap_err();
        assert!(
            error.to_string().contains("is a FIFO, not a regular file"),
            "{error}"
        );

        let zero = dir.path().join("zero.jpg");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let error = read_within_seconds(&zero, FileKind::Frame).unwrap_err();
        assert!(error.to_string().contains("character device"), "{error}");

        let sparse = dir.path().join("sparse.jpg");
        File::create(&sparse).unwrap().set_len(2 << 30).unwrap();
        let error = read_within_seconds(&sparse, FileKind::Frame).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("2147483648 bytes, more than a frame"),
            "{error}"
        );
        let error = read_within_seconds(&sparse, FileKind::FrameList).unwrap_err();
        assert!(
            error.to_string().contains("more than a frame list"),
            "{error}"
        );
        assert!(check_regular(&sparse, FileKind::Frame).is_err());
        assert!(
            read_regular(dir.path(), FileKind::Config)
                .unwrap_err()
                .to_string()
                .contains("is a directory")
        );
    }
}
