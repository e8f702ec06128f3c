//! Folders shared by the tests of one process, removed when the process exits.
//!
//! A test binary builds its synthetic data once, in a `static`, and Rust never drops statics: a
//! `TempDir` kept there stays on disk after every run, and on a CI machine that runs the tests
//! again and again they fill the disk. So the folder is registered here and removed by an
//! `atexit` hook, which runs when the test harness returns from `main` and when it exits with a
//! failure. A process killed by a signal runs no hook: its folders stay.

use std::path::PathBuf;
use std::sync::{Mutex, Once};

static FOLDERS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A new empty folder in the system temp folder, named `avaprep-<tag>-…`, that lives until the
/// process exits.
pub fn process_folder(tag: &str) -> std::io::Result<PathBuf> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        // SAFETY: the hook takes no arguments and reads only a static without a destructor, so
        // it is sound to run during exit.
        let registered = unsafe { libc::atexit(remove_folders) };
        assert_eq!(registered, 0, "atexit refused the temp folders' hook");
    });
    let path = tempfile::Builder::new()
        .prefix(&format!("avaprep-{tag}-"))
        .tempdir()?
        .keep();
    FOLDERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(path.clone());
    Ok(path)
}

extern "C" fn remove_folders() {
    // Never blocks: a thread still inside `process_folder` when the process exits holds the lock,
    // and waiting for it would hang the exit.
    let mut folders = match FOLDERS.try_lock() {
        Ok(folders) => folders,
        Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    for folder in folders.drain(..) {
        let _ = std::fs::remove_dir_all(folder);
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    const CHILD: &str = "AVAPREP_SCRATCH_CHILD";

    /// The hook runs in a real process exit, after passing tests and after a failing one: a
    /// child process (this test binary running this test alone) makes a folder, prints it and
    /// passes or fails; the folder must be gone afterwards.
    #[test]
    fn folders_go_when_the_process_exits() {
        if let Ok(outcome) = std::env::var(CHILD) {
            let folder = super::process_folder("scratch-test").unwrap();
            std::fs::write(folder.join("data"), b"kept until exit").unwrap();
            println!("FOLDER={}", folder.display());
            assert_eq!(outcome, "pass", "the child fails as asked");
            return;
        }
        let name = format!("{}::folders_go_when_the_process_exits", module_path!());
        let name = name
            .split_once("::")
            .map_or(name.as_str(), |(_, rest)| rest);
        for outcome in ["pass", "fail"] {
            let output = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", name, "--nocapture", "--test-threads=1"])
                .env(CHILD, outcome)
                .output()
                .unwrap();
            let printed = format!(
                "{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            assert_eq!(output.status.success(), outcome == "pass", "{printed}");
            // The harness prints the test's name on the same line, before the test's own output.
            let folder = printed
                .split_once("FOLDER=")
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .unwrap_or_else(|| panic!("the child printed no folder: {printed}"));
            assert!(folder.contains("avaprep-scratch-test-"), "{folder}");
            assert!(
                !std::path::Path::new(folder).exists(),
                "{folder} is still there after a child that was to {outcome}"
            );
        }
    }
}
