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

/// Where a folder is built before [`replace_dir`] puts it at `destination`: beside it, so on
/// the same filesystem whatever links lead there (frames on another disk), and hidden by its
/// leading dot from anyone listing the folder's neighbours.
pub fn staging_beside(destination: &Path) -> PathBuf {
    hidden_beside(destination, ".partial")
}

/// `.<name><suffix>` in the folder of `path`.
fn hidden_beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(suffix);
    path.with_file_name(name)
}

/// Whether two paths name one folder: the same text, or the same folder reached another way (a
/// link, `./`); a path that does not exist is no other's.
pub fn same_place(a: &Path, b: &Path) -> bool {
    a == b || matches!((fs::canonicalize(a), fs::canonicalize(b)), (Ok(a), Ok(b)) if a == b)
}

/// Puts the complete folder `staging` (see [`staging_beside`]) at `destination`. The old folder
/// is moved aside, not deleted, until the new one is in place: a failure at any moment leaves a
/// whole folder there, old or new, and only then is the old one removed. A link at
/// `destination` is replaced, never followed into.
pub fn replace_dir(staging: &Path, destination: &Path) -> io::Result<()> {
    let aside = hidden_beside(destination, ".replaced");
    remove_if_present(&aside)?;
    let had_old = match fs::rename(destination, &aside) {
        Ok(()) => true,
        Err(error) if error.kind() == io::ErrorKind::NotFound => false,
        Err(error) => return Err(error),
    };
    if let Err(error) = fs::rename(staging, destination) {
        if had_old {
            let _ = fs::rename(&aside, destination);
        }
        return Err(error);
    }
    sync_parent(destination)?;
    remove_if_present(&aside)
}

/// Removes a folder, a file or a link (never what a link points at); nothing there is fine.
pub fn remove_if_present(path: &Path) -> io::Result<()> {
    let removed = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(error) => Err(error),
    };
    match removed {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Makes (or finds) a folder of avaprep's own (`.avaprep/` and the folders in it), refusing a
/// link or anything but a directory there: anyone who can write to a shared data directory could
/// plant a link that would have us create or delete files wherever it leads.
pub fn own_dir(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(not_followed("a symbolic link")),
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(not_followed("not a directory")),
        Err(error) if error.kind() == io::ErrorKind::NotFound => match fs::create_dir(path) {
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => own_dir(path),
            other => other,
        },
        Err(error) => Err(error),
    }
}

/// Opens (creating) a file of avaprep's own for writing, never through a link (`O_NOFOLLOW`).
pub fn open_own_file(path: &Path) -> io::Result<File> {
    let opened = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    match opened {
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
            Err(not_followed("a symbolic link"))
        }
        other => other,
    }
}

/// Reads a file of avaprep's own, never through a link (`O_NOFOLLOW`): a state or record
/// planted as a link would have us trust what it points at.
pub fn read_own_file(path: &Path) -> io::Result<Vec<u8>> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    let mut file = match opened {
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
            return Err(not_followed("a symbolic link"));
        }
        other => other?,
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn not_followed(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "is {what}: avaprep never follows a link in its own folder .avaprep/ (anyone who can write to the data directory could point it elsewhere); remove it and run again"
        ),
    )
}

/// Writes a file the user named for output (`--junit`, `--out`) as a shell redirection would,
/// but never half: a regular file is replaced atomically, once the new one is complete (through
/// symbolic links, at their target; the links stay); a FIFO (a pipe a CI step reads) and a
/// character device are written in place, never replaced; so is a regular file reached through
/// a process's open descriptors (`/dev/stdout` redirected to a file: the shell's descriptor must
/// see the bytes). A directory and a block device are refused, as is a FIFO nobody reads.
pub fn write_output(path: &Path, bytes: &[u8]) -> io::Result<()> {
    check_output_file(path)?;
    let end = link_target(path)?;
    match fs::metadata(path) {
        Ok(meta) if meta.file_type().is_fifo() => write_fifo(path, bytes),
        Ok(meta) if !meta.is_file() => {
            let mut file = OpenOptions::new().write(true).open(path)?;
            file.write_all(bytes)?;
            file.flush()
        }
        Ok(_) if end.through_descriptor => match end.own_descriptor {
            Some(descriptor) => write_own_descriptor(descriptor, bytes),
            None => {
                // After what the descriptor's owner wrote, as its own writes would go.
                let mut file = OpenOptions::new().append(true).open(path)?;
                file.write_all(bytes)?;
                file.flush()
            }
        },
        _ => write_atomic(&end.target, bytes),
    }
}

/// Whether `path` names a file of its own (a regular file, or none yet), beside which another
/// file may be written: not a device, a FIFO or a process's descriptor (`/dev/stdout`).
pub fn is_plain_output(path: &Path) -> bool {
    let Ok(end) = link_target(path) else {
        return false;
    };
    !end.through_descriptor && fs::metadata(path).map_or(true, |meta| meta.is_file())
}

/// Writes through one of this process's own descriptors (`/dev/stdout` when the shell
/// redirected it to a file), at its offset: what this process prints after then follows the
/// bytes, where a file opened anew would write over them.
fn write_own_descriptor(descriptor: std::os::fd::RawFd, bytes: &[u8]) -> io::Result<()> {
    io::stdout().flush()?;
    io::stderr().flush()?;
    match descriptor {
        1 => io::stdout().lock().write_all(bytes),
        2 => io::stderr().lock().write_all(bytes),
        other => {
            // SAFETY: the descriptor is open (its `/proc/self/fd` link was just read); it is
            // only duplicated here, and the duplicate shares its offset.
            let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(other) };
            File::from(borrowed.try_clone_to_owned()?).write_all(bytes)
        }
    }?;
    io::stdout().flush()
}

/// A FIFO is opened without blocking: with no process reading it (for `FIFO_WAIT`, so a reader
/// started at the same moment is met), the open fails instead of hanging; then the bytes are
/// written as the reader takes them.
fn write_fifo(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let started = std::time::Instant::now();
    let mut file = loop {
        let opened = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path);
        match opened {
            Err(error) if error.raw_os_error() == Some(libc::ENXIO) => {
                if started.elapsed() > FIFO_WAIT {
                    return Err(unread_fifo("is a FIFO that no process reads"));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other?,
        }
    };
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // Blocking again: a full pipe waits for its reader rather than failing.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    file.write_all(bytes)
        .and_then(|()| file.flush())
        .map_err(|error| match error.kind() {
            io::ErrorKind::BrokenPipe => {
                unread_fifo("is a FIFO whose reader left before the output was complete")
            }
            _ => error,
        })
}

/// Not `BrokenPipe`: the command line takes that for its own stdout closed by a reader that had
/// enough (`avaprep ... | head`) and exits 0, so a CI job read success from a report nobody
/// received.
fn unread_fifo(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, what)
}

/// How long a FIFO is given to find its reader.
const FIFO_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether `path` can take an output file: anything but a directory or a block device (or a
/// link to one), a read-only file, an empty name, or a name inside a file.
pub fn check_output_file(path: &Path) -> io::Result<()> {
    if path.as_os_str().is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is no file name: name a file",
        ));
    }
    let file_above = path.ancestors().skip(1).find(|folder| {
        !folder.as_os_str().is_empty() && fs::metadata(folder).is_ok_and(|meta| !meta.is_dir())
    });
    if let Some(file) = file_above {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!(
                "is inside {}, which is a file, not a folder",
                file.display()
            ),
        ));
    }
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory: name a file",
        )),
        Ok(meta) if meta.file_type().is_block_device() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is a block device: name a file",
        )),
        // Made read-only to keep it: a shell redirection would refuse it too (but for root).
        Ok(meta) if meta.is_file() && meta.permissions().readonly() => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "is read-only: name another file, or make it writable (chmod u+w) to replace it",
        )),
        _ => Ok(()),
    }
}

/// Where a chain of symbolic links ends (a link's relative target is taken from the link's own
/// folder; the end need not exist yet), and whether it passes through a process's descriptors
/// (`/proc/*/fd`, `/dev/fd`), whose links name open files, not paths.
struct LinkEnd {
    target: PathBuf,
    through_descriptor: bool,
    /// The first of this process's own descriptors the chain passes (`/dev/stdout`: 1).
    own_descriptor: Option<std::os::fd::RawFd>,
}

fn link_target(path: &Path) -> io::Result<LinkEnd> {
    let mut current = path.to_path_buf();
    let mut through_descriptor = false;
    let mut own_descriptor = None;
    // The kernel's own limit on links followed in one lookup.
    for _ in 0..40 {
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                through_descriptor |=
                    current.starts_with("/proc") || current.starts_with("/dev/fd");
                own_descriptor = own_descriptor.or_else(|| descriptor_of_this_process(&current));
                let target = fs::read_link(&current)?;
                let folder = current.parent().unwrap_or(Path::new("."));
                current = folder.join(target);
            }
            _ => {
                return Ok(LinkEnd {
                    target: current,
                    through_descriptor,
                    own_descriptor,
                });
            }
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// `N` of `/proc/self/fd/N`, `/proc/<this process>/fd/N` or `/dev/fd/N`.
fn descriptor_of_this_process(link: &Path) -> Option<std::os::fd::RawFd> {
    let folder = link.parent()?;
    let own = [
        PathBuf::from("/proc/self/fd"),
        PathBuf::from("/dev/fd"),
        PathBuf::from(format!("/proc/{}/fd", std::process::id())),
    ];
    own.contains(&folder.to_path_buf())
        .then(|| link.file_name()?.to_str()?.parse().ok())
        .flatten()
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
    let file = open_regular(path, kind)?;
    let size = file.metadata()?.len();
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(kind.limit() + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > kind.limit() {
        return Err(too_large(bytes.len() as u64, kind));
    }
    Ok(bytes)
}

/// Opens a file of a dataset to read as it goes, with [`read_regular`]'s checks (read it with
/// `take(kind.limit())` where the size matters: a file may grow after the check).
pub fn open_regular(path: &Path, kind: FileKind) -> io::Result<File> {
    check_regular(path, kind)?;
    // Non-blocking: a FIFO swapped in after the check must not hold the open.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    regular_size(&file.metadata()?, kind)?;
    Ok(file)
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
        io::ErrorKind::FileTooLarge,
        format!(
            "is {len} bytes, more than {} can be ({} MiB)",
            kind.noun(),
            kind.limit() >> 20
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
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
        assert!(check_output_file(&dir.path().join("new/folder/j.xml")).is_ok());
        let error = check_output_file(Path::new("")).unwrap_err();
        assert!(error.to_string().contains("no file name"), "{error}");
        assert!(is_plain_output(&dir.path().join("new.csv")));
        assert!(!is_plain_output(Path::new("/dev/stdout")));
        assert!(!is_plain_output(Path::new("/dev/null")));
        let file = dir.path().join("file.txt");
        fs::write(&file, b"x").unwrap();
        assert!(is_plain_output(&file));
        let error = check_output_file(&file.join("j.xml")).unwrap_err();
        assert!(
            error.to_string().contains("which is a file, not a folder"),
            "{error}"
        );
        let kept = dir.path().join("kept.csv");
        fs::write(&kept, b"kept").unwrap();
        fs::set_permissions(&kept, fs::Permissions::from_mode(0o444)).unwrap();
        let error = write_output(&kept, b"new").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied, "{error}");
        assert!(error.to_string().contains("chmod u+w"), "{error}");
        assert_eq!(fs::read(&kept).unwrap(), b"kept");
    }

    /// `--junit /dev/stdout` and a CI step's pipe: a descriptor's link (as `/proc/self/fd/N`)
    /// leads to a pipe or to the file a shell redirected to; both are written in place, the
    /// file after what it holds. A FIFO nobody reads is an error at once, not a hang.
    #[test]
    fn output_through_a_descriptor_or_to_an_unread_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let reader = std::thread::spawn(move || {
            use std::os::fd::FromRawFd;
            let mut read = unsafe { File::from_raw_fd(fds[0]) };
            let mut bytes = Vec::new();
            read.read_to_end(&mut bytes).unwrap();
            bytes
        });
        write_output(Path::new(&format!("/proc/self/fd/{}", fds[1])), b"piped").unwrap();
        unsafe { libc::close(fds[1]) };
        assert_eq!(reader.join().unwrap(), b"piped");

        let log = dir.path().join("log.txt");
        let mut redirected = File::create(&log).unwrap();
        redirected.write_all(b"before\n").unwrap();
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let inode = fs::metadata(&log).unwrap().ino();
        let descriptor = format!("/proc/self/fd/{}", redirected.as_raw_fd());
        write_output(Path::new(&descriptor), b"report\n").unwrap();
        assert_eq!(fs::read(&log).unwrap(), b"before\nreport\n");
        // What the descriptor's owner writes next follows the report, not over it.
        redirected.write_all(b"after\n").unwrap();
        assert_eq!(fs::read(&log).unwrap(), b"before\nreport\nafter\n");
        assert_eq!(
            fs::metadata(&log).unwrap().ino(),
            inode,
            "the same file, not a new one"
        );

        let fifo = dir.path().join("unread");
        make_fifo(&fifo);
        let (send, receive) = mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = send.send(write_output(&path, b"x"));
        });
        let error = receive
            .recv_timeout(Duration::from_secs(10))
            .expect("no hang")
            .unwrap_err();
        assert!(error.to_string().contains("no process reads"), "{error}");
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
