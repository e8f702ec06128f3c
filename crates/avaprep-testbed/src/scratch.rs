//! Folders shared by the tests of one process, removed when the process exits.
//!
//! A test binary builds its synthetic data once, in a `static`, and Rust never drops statics: a
//! `TempDir` kept there stays on disk after every run, and on a CI machine that runs the tests
//! again and again they fill the disk. So the folder is registered here and removed by an
//! `atexit` hook, which runs when the test harness returns from `main` and when it exits with a
//! failure.

use std::path::PathBuf;
use std::sync::{Mutex, Once};

static FOLDERS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A new empty folder in the system temp folder, named `avaprep-<tag>-…`, that lives until the
/// process exits.
pub fn process_folder(tag: &str) -> std::io::Result<PathBuf> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        // SAFETY: `remove_folders` is a plain `extern "C"` function that never unwinds.
        unsafe { libc::atexit(remove_folders) };
    });
    let path = tempfile::Builder::new()
        .prefix(&format!("avaprep-{tag}-"))
        .tempdir()?
        .keep();
    lock().push(path.clone());
    Ok(path)
}

extern "C" fn remove_folders() {
    for folder in lock().drain(..) {
        let _ = std::fs::remove_dir_all(folder);
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    FOLDERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// The hook runs in a real process exit: a child process (this test binary, told to make
    /// one folder) prints its folder and exits; the folder must be gone afterwards.
    #[test]
    fn folders_go_when_the_process_exits() {
        if let Ok(tag) = std::env::var("AVAPREP_SCRATCH_CHILD") {
            let folder = super::process_folder(&tag).unwrap();
            std::fs::write(folder.join("data"), b"kept until exit").unwrap();
            println!("FOLDER={}", folder.display());
            return;
        }
        let output = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "scratch::tests::folders_go_when_the_process_exits",
            ])
            .args(["--nocapture", "--test-threads=1"])
            .env("AVAPREP_SCRATCH_CHILD", "scratch-test")
            .output()
            .unwrap();
        assert!(output.status.success());
        let stdout = String::from_utf8_lossy(&output.stdout);
        // The harness prints the test's name on the same line, before the test's own output.
        let folder = stdout
            .split_once("FOLDER=")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("the child printed no folder: {stdout}"));
        assert!(folder.contains("avaprep-scratch-test-"), "{folder}");
        assert!(
            !std::path::Path::new(folder).exists(),
            "{folder} is still there"
        );
    }
}
