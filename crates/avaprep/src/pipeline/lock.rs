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

use super::Shard;
use crate::fsutil::{FileKind, open_own_file, own_dir, read_regular_text};

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "{data_dir} is in use by {holders}; wait for it to finish (or stop it) and run this again: one command writes to a data directory at a time, and shards of one run (`run --shard I/N`) share it"
    )]
    Held { data_dir: PathBuf, holders: String },
    #[error(
        "{data_dir} is in use by {holders}, though its lock file .avaprep/lock was deleted or replaced meanwhile; wait for it to finish (or stop it) and run this again"
    )]
    LockFileReplaced { data_dir: PathBuf, holders: String },
    #[error(
        "{data_dir} is being prepared in {running} parts (`--shard I/{running}`), not {asked}: every shard of one run names the same N; wait for those shards to finish, or run this one as `--shard I/{running}`"
    )]
    OtherShardCount {
        data_dir: PathBuf,
        running: u32,
        asked: u32,
    },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// Set, to its own process id, by a command that holds the data directory for the trainer it
/// runs (see [`DataDirLock::acquire_unless_parent_holds`]).
pub const PARENT_HOLDS_LOCK: &str = "AVAPREP_PARENT_HOLDS_LOCK";

/// How the data directory is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// The only writer.
    Exclusive,
    /// One shard of a sharded run, beside the other shards of the same count but never beside
    /// itself or a shard of another count.
    Shard(Shard),
}

/// The lock, released when dropped (or when the process ends, however it ends).
pub struct DataDirLock {
    _files: Vec<File>,
    holder: PathBuf,
}

impl DataDirLock {
    /// Takes the data directory's lock without waiting, recording `command` as its holder. Every
    /// file and folder of the lock is opened without following links.
    pub fn acquire(data_dir: &Path, mode: LockMode, command: &str) -> Result<Self, LockError> {
        let folder = data_dir.join(".avaprep");
        let holders = folder.join("holders");
        // The data directory itself may be a link (to another disk): the user's to choose.
        fs::create_dir_all(data_dir).map_err(|source| io_error(data_dir, source))?;
        for own in [&folder, &holders] {
            own_dir(own).map_err(|source| io_error(own, source))?;
        }
        for own in ["state", "downloads"].map(|name| folder.join(name)) {
            if fs::symlink_metadata(&own).is_ok() {
                own_dir(&own).map_err(|source| io_error(&own, source))?;
            }
        }
        let held = || LockError::Held {
            data_dir: data_dir.to_path_buf(),
            holders: describe_holders(&holders),
        };
        let path = folder.join("lock");
        let file = open(&path)?;
        let mut files = Vec::new();
        match mode {
            LockMode::Exclusive => take(&file, &path, File::try_lock, held)?,
            LockMode::Shard(shard) => {
                take(&file, &path, File::try_lock_shared, held)?;
                // The same shard twice (a task requeued while it still runs) would write one
                // state file from two processes.
                let own = folder.join(format!("lock.shard-{}-of-{}", shard.index, shard.count));
                let own_file = open(&own)?;
                take(&own_file, &own, File::try_lock, held)?;
                files.push(own_file);
                files.push(join_shards_of(data_dir, &folder, shard)?);
            }
        }
        check_still_there(&file, &path)?;
        if mode == LockMode::Exclusive {
            refuse_living_holders(data_dir, &holders)?;
            // Alone: any note left is of a process that died holding the lock.
            clear_folder(&holders);
        }
        files.push(file);
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
        write_note(&staging, &note).map_err(|source| io_error(&staging, source))?;
        fs::rename(&staging, &holder).map_err(|source| io_error(&holder, source))?;
        Ok(DataDirLock {
            _files: files,
            holder,
        })
    }

    /// [`Self::acquire`] exclusively, unless the process that started this one holds the data
    /// directory for it (the pipeline's train and eval stages run the trainer so): then `None`,
    /// and this process works under its parent's lock.
    pub fn acquire_unless_parent_holds(
        data_dir: &Path,
        command: &str,
    ) -> Result<Option<Self>, LockError> {
        let parent = std::os::unix::process::parent_id();
        let told = std::env::var(PARENT_HOLDS_LOCK).ok() == Some(parent.to_string());
        let holders = data_dir.join(".avaprep").join("holders");
        let parent_holds = fs::read_dir(&holders)
            .into_iter()
            .flatten()
            .flatten()
            .any(|entry| {
                entry
                    .file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{}-{parent}-", host_name()))
            });
        if told && parent_holds && own_dir(&holders).is_ok() {
            return Ok(None);
        }
        Self::acquire(data_dir, LockMode::Exclusive, command).map(Some)
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

/// Shards of one count hold `lock.shards-of-N` shared; a shard finds another count at work when
/// it cannot take that count's file alone (two counts starting at once both give way).
fn join_shards_of(data_dir: &Path, folder: &Path, shard: Shard) -> Result<File, LockError> {
    let ours = folder.join(format!("lock.shards-of-{}", shard.count));
    let file = open(&ours)?;
    file.lock_shared()
        .map_err(|source| io_error(&ours, source))?;
    let entries = fs::read_dir(folder).map_err(|source| io_error(folder, source))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(running) = name
            .to_str()
            .and_then(|name| name.strip_prefix("lock.shards-of-"))
            .and_then(|count| count.parse::<u32>().ok())
            .filter(|&count| count != shard.count)
        else {
            continue;
        };
        let other = open(&entry.path())?;
        match other.try_lock() {
            Ok(()) => drop(other),
            Err(fs::TryLockError::WouldBlock) => {
                return Err(LockError::OtherShardCount {
                    data_dir: data_dir.to_path_buf(),
                    running,
                    asked: shard.count,
                });
            }
            Err(fs::TryLockError::Error(source)) => return Err(io_error(&entry.path(), source)),
        }
    }
    Ok(file)
}

/// The lock file locked must still be the one at its path: deleted in between, it would lock
/// nothing anyone else sees.
fn check_still_there(file: &File, path: &Path) -> Result<(), LockError> {
    use std::os::unix::fs::MetadataExt;
    let locked = file.metadata().map_err(|source| io_error(path, source))?;
    let same = fs::symlink_metadata(path)
        .is_ok_and(|now| now.ino() == locked.ino() && now.dev() == locked.dev());
    match same {
        true => Ok(()),
        false => Err(io_error(
            path,
            io::Error::other("was deleted or replaced while this command took it; run it again"),
        )),
    }
}

/// A process on this machine that still has its note in the folder holds the data directory,
/// though the lock file we locked is new: someone deleted the one it holds.
fn refuse_living_holders(data_dir: &Path, holders: &Path) -> Result<(), LockError> {
    match join_notes(living_notes(holders, Hosts::ThisOne)) {
        Some(notes) => Err(LockError::LockFileReplaced {
            data_dir: data_dir.to_path_buf(),
            holders: notes,
        }),
        None => Ok(()),
    }
}

fn write_note(path: &Path, note: &str) -> io::Result<()> {
    use std::io::Write;
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(note.as_bytes())
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
    open_own_file(path).map_err(|source| io_error(path, source))
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
    join_notes(living_notes(holders, Hosts::All))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Hosts {
    All,
    /// Only processes on this machine, whose life can be checked.
    ThisOne,
}

fn living_notes(holders: &Path, hosts: Hosts) -> Vec<String> {
    living_holders(holders, hosts)
        .into_iter()
        .map(|holder| holder.note)
        .collect()
}

/// A command holding a data directory, as the note it left in `.avaprep/holders` tells.
#[derive(Debug, Clone)]
pub struct Holder {
    /// Which command, its process and since when, as the refusal of a second writer names it.
    pub note: String,
    /// When it took the lock (its note's modification time, on the data directory's clock).
    pub since: std::time::SystemTime,
    /// On another machine (a shared folder): whether it still runs cannot be checked from here.
    pub elsewhere: bool,
}

/// The commands holding `data_dir` now, read from their notes without taking the lock (a look
/// must never turn a writer away). A note of this machine counts only while its process lives.
pub fn holders_now(data_dir: &Path) -> Vec<Holder> {
    let holders = data_dir.join(".avaprep").join("holders");
    // Never read through a link planted in our own folder.
    match fs::symlink_metadata(&holders) {
        Ok(meta) if meta.is_dir() => living_holders(&holders, Hosts::All),
        _ => Vec::new(),
    }
}

fn living_holders(holders: &Path, hosts: Hosts) -> Vec<Holder> {
    let host = host_name();
    fs::read_dir(holders)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let elsewhere = match name.strip_prefix(&format!("{host}-")) {
                Some(rest) => {
                    let alive = rest
                        .split('-')
                        .next()
                        .and_then(|pid| pid.parse::<i32>().ok())
                        .is_some_and(process_exists);
                    if !alive {
                        return None;
                    }
                    false
                }
                None if hosts == Hosts::All => true,
                None => return None,
            };
            // A planted FIFO or device must not hold the command up.
            let note = read_regular_text(&entry.path(), FileKind::Config).ok()?;
            let since = entry.metadata().and_then(|meta| meta.modified()).ok()?;
            Some(Holder {
                note: note.chars().take(300).collect(),
                since,
                elsewhere,
            })
        })
        .collect()
}

fn join_notes(mut notes: Vec<String>) -> Option<String> {
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

    fn shard(index: u32, count: u32) -> LockMode {
        LockMode::Shard(Shard { index, count })
    }

    /// `--shard 1/2` and `--shard 1/3` would split the videos two ways at once and race on the
    /// videos both give themselves.
    #[test]
    fn shards_of_another_count_are_refused_while_one_runs() {
        let dir = tempfile::tempdir().unwrap();
        let half =
            DataDirLock::acquire(dir.path(), shard(1, 2), "avaprep run --shard 1/2").unwrap();
        let error = DataDirLock::acquire(dir.path(), shard(1, 3), "avaprep run --shard 1/3")
            .err()
            .expect("another count is refused")
            .to_string();
        assert!(
            error.contains("in 2 parts") && error.contains("not 3"),
            "{error}"
        );
        let other_half =
            DataDirLock::acquire(dir.path(), shard(2, 2), "avaprep run --shard 2/2").unwrap();
        drop((half, other_half));
        // Once they are done, the folder may be split another way.
        assert!(DataDirLock::acquire(dir.path(), shard(1, 3), "avaprep run --shard 1/3").is_ok());
    }

    /// Anyone who can write to a shared data directory could plant these links: we would have
    /// deleted every file of the folder `holders` led to, and created the lock wherever `lock`
    /// led.
    #[test]
    fn links_in_our_own_folder_are_refused_and_nothing_outside_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        let victim = tempfile::tempdir().unwrap();
        fs::write(victim.path().join("thesis.tex"), "years of work").unwrap();
        fs::create_dir_all(dir.path().join(".avaprep")).unwrap();
        std::os::unix::fs::symlink(victim.path(), dir.path().join(".avaprep/holders")).unwrap();
        let error = DataDirLock::acquire(dir.path(), LockMode::Exclusive, "avaprep lists")
            .err()
            .expect("a linked holders folder is refused")
            .to_string();
        assert!(
            error.contains(".avaprep/holders") && error.contains("symbolic link"),
            "{error}"
        );
        assert!(victim.path().join("thesis.tex").exists());

        fs::remove_file(dir.path().join(".avaprep/holders")).unwrap();
        let elsewhere = victim.path().join("lock");
        std::os::unix::fs::symlink(&elsewhere, dir.path().join(".avaprep/lock")).unwrap();
        let error = DataDirLock::acquire(dir.path(), LockMode::Exclusive, "avaprep lists")
            .err()
            .expect("a linked lock file is refused")
            .to_string();
        assert!(
            error.contains(".avaprep/lock") && error.contains("symbolic link"),
            "{error}"
        );
        assert!(!elsewhere.exists());

        fs::remove_file(dir.path().join(".avaprep/lock")).unwrap();
        std::os::unix::fs::symlink(victim.path(), dir.path().join(".avaprep/state")).unwrap();
        let error = DataDirLock::acquire(dir.path(), LockMode::Exclusive, "avaprep lists")
            .err()
            .expect("a linked state folder is refused")
            .to_string();
        assert!(error.contains(".avaprep/state"), "{error}");
        assert_eq!(fs::read_dir(victim.path()).unwrap().count(), 1);
    }

    /// A deleted lock file would let a second writer lock a new one beside the first.
    #[test]
    fn a_deleted_lock_file_does_not_let_a_second_writer_in() {
        let dir = tempfile::tempdir().unwrap();
        let first =
            DataDirLock::acquire(dir.path(), LockMode::Exclusive, "avaprep run a.toml").unwrap();
        fs::remove_file(dir.path().join(".avaprep/lock")).unwrap();
        let error = DataDirLock::acquire(dir.path(), LockMode::Exclusive, "avaprep lists")
            .err()
            .expect("refused")
            .to_string();
        assert!(
            error.contains("`avaprep run a.toml`") && error.contains("deleted or replaced"),
            "{error}"
        );
        drop(first);
        assert!(DataDirLock::acquire(dir.path(), LockMode::Exclusive, "avaprep lists").is_ok());
    }

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
        assert!(DataDirLock::acquire(dir.path(), shard(1, 2), "shard").is_err());
        drop(first);

        let one = DataDirLock::acquire(dir.path(), shard(1, 2), "avaprep run --shard 1/2").unwrap();
        let two = DataDirLock::acquire(dir.path(), shard(2, 2), "avaprep run --shard 2/2").unwrap();
        let again = DataDirLock::acquire(dir.path(), shard(2, 2), "avaprep run --shard 2/2")
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
