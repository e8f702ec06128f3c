//! One writer per data directory: an advisory lock (`flock`) on `.avaprep/lock`, held by every
//! command that writes there. A command that cannot take it is refused, naming who holds it.
//!
//! Shards of one sharded run share the lock (their per-video work touches different videos) and
//! take turns on a second one, `.avaprep/lock.setup`, for the whole-dataset work before it (the
//! annotation downloads and the plan): the first to come does it, the others wait, then find it
//! done. The kernel releases both when a process dies, so a killed command never leaves a lock
//! behind; the note of who held it is cleared by the next command that holds the lock alone.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "{data_dir} is in use by {holders}; wait for it to finish (or stop it) and run this again: one command writes to a data directory at a time, and shards of one run (`run --shard I/N`) share it"
    )]
    Held { data_dir: PathBuf, holders: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// How the data directory is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockMode {
    /// The only writer.
    Exclusive,
    /// One shard of a sharded run (named `I-of-N`), beside the others but never beside itself.
    Shard(String),
}

/// The lock, released when dropped (or when the process ends, however it ends).
pub struct DataDirLock {
    _files: Vec<File>,
    holder: PathBuf,
}

impl DataDirLock {
    /// Takes the data directory's lock without waiting, recording `command` as its holder.
    pub fn acquire(data_dir: &Path, mode: LockMode, command: &str) -> Result<Self, LockError> {
        let folder = data_dir.join(".avaprep");
        let holders = folder.join("holders");
        fs::create_dir_all(&holders).map_err(|source| io_error(&holders, source))?;
        let held = || LockError::Held {
            data_dir: data_dir.to_path_buf(),
            holders: describe_holders(&holders),
        };
        let path = folder.join("lock");
        let file = open(&path)?;
        let mut files = Vec::new();
        match &mode {
            LockMode::Exclusive => take(&file, &path, File::try_lock, held)?,
            LockMode::Shard(shard) => {
                take(&file, &path, File::try_lock_shared, held)?;
                // The same shard twice (a task requeued while it still runs) would write one
                // state file from two processes.
                let own = folder.join(format!("lock.shard-{shard}"));
                let own_file = open(&own)?;
                take(&own_file, &own, File::try_lock, held)?;
                files.push(own_file);
            }
        }
        files.push(file);
        if mode == LockMode::Exclusive {
            // Alone: any note left is of a process that died holding the lock.
            clear_folder(&holders);
        }
        // One note per lock taken (a process may hold it more than once, as the tests do).
        static TAKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let serial = TAKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let holder = holders.join(format!("{}-{}-{serial}", host_name(), std::process::id()));
        let note = format!(
            "`{command}` (pid {} on {}, since {})",
            std::process::id(),
            host_name(),
            httpdate::fmt_http_date(std::time::SystemTime::now())
        );
        // Written whole before it appears: a command refused meanwhile never reads half a note.
        let staging = folder.join(format!(".holder-{}-{serial}", std::process::id()));
        fs::write(&staging, note).map_err(|source| io_error(&staging, source))?;
        fs::rename(&staging, &holder).map_err(|source| io_error(&holder, source))?;
        Ok(DataDirLock {
            _files: files,
            holder,
        })
    }

    /// Takes the shards' turn at the whole-dataset work, waiting for the shard that has it;
    /// `waiting` is told once, when another shard has it.
    pub fn setup_turn(data_dir: &Path, waiting: &dyn Fn()) -> Result<SetupTurn, LockError> {
        let path = data_dir.join(".avaprep").join("lock.setup");
        let file = open(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                waiting();
                file.lock().map_err(|source| io_error(&path, source))?;
            }
            Err(fs::TryLockError::Error(source)) => return Err(io_error(&path, source)),
        }
        Ok(SetupTurn { file })
    }
}

impl Drop for DataDirLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.holder);
    }
}

/// A shard's turn at the whole-dataset work; [`SetupTurn::end`] (or dropping it) passes it on.
pub struct SetupTurn {
    file: File,
}

impl SetupTurn {
    pub fn end(self) {
        let _ = self.file.unlock();
    }
}

/// Takes a lock without waiting; `held` says who has it when another process does.
fn take(
    file: &File,
    path: &Path,
    try_lock: fn(&File) -> Result<(), fs::TryLockError>,
    held: impl Fn() -> LockError,
) -> Result<(), LockError> {
    match try_lock(file) {
        Ok(()) => Ok(()),
        Err(fs::TryLockError::WouldBlock) => Err(held()),
        Err(fs::TryLockError::Error(source)) => Err(io_error(path, source)),
    }
}

fn open(path: &Path) -> Result<File, LockError> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|source| io_error(path, source))
}

/// Who holds the lock. A holder writes its note just after taking the lock: a command refused in
/// between (seen on a loaded machine) waits a moment for the note rather than naming no one.
fn describe_holders(holders: &Path) -> String {
    for _ in 0..50 {
        if let Some(notes) = holder_notes(holders) {
            return notes;
        }
        std::thread::sleep(std::time::Duration::from_millis(40));
    }
    "another avaprep command".to_string()
}

/// The notes of the processes holding the lock now, joined; the notes of processes that are
/// gone (on this machine) are left out.
fn holder_notes(holders: &Path) -> Option<String> {
    let host = host_name();
    let mut notes: Vec<String> = fs::read_dir(holders)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            match name.strip_prefix(&format!("{host}-")) {
                Some(rest) => rest
                    .split('-')
                    .next()
                    .and_then(|pid| pid.parse::<i32>().ok())
                    .is_some_and(process_exists),
                None => true,
            }
        })
        .filter_map(|entry| fs::read_to_string(entry.path()).ok())
        .map(|note| note.chars().take(300).collect())
        .collect();
    notes.sort();
    (!notes.is_empty()).then(|| notes.join(" and "))
}

fn process_exists(pid: i32) -> bool {
    // Signal 0 checks the process exists without touching it.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    alive || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

fn clear_folder(folder: &Path) {
    for entry in fs::read_dir(folder).into_iter().flatten().flatten() {
        let _ = fs::remove_file(entry.path());
    }
}

fn host_name() -> String {
    let mut buffer = [0u8; 256];
    let ok = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) } == 0;
    let end = buffer.iter().position(|&byte| byte == 0).unwrap_or(0);
    match ok {
        true => String::from_utf8_lossy(&buffer[..end])
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
            .collect(),
        false => "localhost".to_string(),
    }
}

fn io_error(path: &Path, source: io::Error) -> LockError {
    LockError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_naming_the_first_and_shards_share() {
        let dir = tempfile::tempdir().unwrap();
        let first =
            DataDirLock::acquire(dir.path(), LockMode::Exclusive, "avaprep run a.toml").unwrap();
        let error = DataDirLock::acquire(dir.path(), LockMode::Exclusive, "avaprep run b.toml")
            .err()
            .expect("refused");
        let message = error.to_string();
        assert!(message.contains("`avaprep run a.toml`"), "{message}");
        assert!(
            message.contains(&format!("pid {}", std::process::id())),
            "{message}"
        );
        assert!(
            DataDirLock::acquire(dir.path(), LockMode::Shard("1-of-2".into()), "shard").is_err()
        );
        drop(first);

        let shard = |name: &str| LockMode::Shard(name.into());
        let one =
            DataDirLock::acquire(dir.path(), shard("1-of-2"), "avaprep run --shard 1/2").unwrap();
        let two =
            DataDirLock::acquire(dir.path(), shard("2-of-2"), "avaprep run --shard 2/2").unwrap();
        let again = DataDirLock::acquire(dir.path(), shard("2-of-2"), "avaprep run --shard 2/2")
            .err()
            .expect("the same shard twice is refused")
            .to_string();
        assert!(again.contains("--shard 2/2"), "{again}");
        let message = DataDirLock::acquire(dir.path(), LockMode::Exclusive, "avaprep run")
            .err()
            .expect("refused while shards run")
            .to_string();
        assert!(
            message.contains("--shard 1/2") && message.contains("--shard 2/2"),
            "{message}"
        );
        drop((one, two));
        assert!(DataDirLock::acquire(dir.path(), LockMode::Exclusive, "avaprep run").is_ok());
    }

    #[test]
    fn shards_take_turns_at_the_setup() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".avaprep")).unwrap();
        let turn = DataDirLock::setup_turn(dir.path(), &|| panic!("nobody else has it")).unwrap();
        let waited = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let other = scope.spawn(|| {
                let _turn = DataDirLock::setup_turn(dir.path(), &|| {
                    waited.store(true, std::sync::atomic::Ordering::SeqCst)
                })
                .unwrap();
            });
            std::thread::sleep(std::time::Duration::from_millis(200));
            turn.end();
            other.join().unwrap();
        });
        assert!(waited.load(std::sync::atomic::Ordering::SeqCst));
    }
}
