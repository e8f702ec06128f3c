//! The command whose run made a data directory's first stages (for avaprep, the dataset: its
//! annotations and plan), kept so that a hint can name it word for word: another command with
//! its defaults (`avaprep fetch` alone fetches AVA's manifest with every video) would make
//! something else.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsutil::{self, FileKind};

#[derive(Debug, Serialize, Deserialize)]
struct MakingCommand {
    /// The words after `avaprep`, less the data directory (it may have moved since: a hint names
    /// it as the command that gives the hint does) and a shard's `--shard`.
    words: Vec<String>,
    /// The folder it ran in: its relative paths are from there.
    folder: PathBuf,
}

fn record_path(data_dir: &Path) -> PathBuf {
    data_dir.join(".avaprep").join("made-by.json")
}

/// Keeps `arguments` (this process's, after the program name), run in `folder`, as the command
/// that made `data_dir`'s first stages. A shard's `--shard I/N` is left out: what makes the whole
/// dataset is the run that combines the shards.
pub fn keep_making_command(
    data_dir: &Path,
    arguments: &[String],
    folder: &Path,
) -> std::io::Result<()> {
    let record = MakingCommand {
        words: without_passing_flags(without(arguments, &["--shard", "--data-dir"])),
        folder: folder.to_path_buf(),
    };
    let json = serde_json::to_vec_pretty(&record).expect("a command serialises");
    fsutil::write_atomic(&record_path(data_dir), &json)
}

/// Forgets the kept command: another made the first stages since, whose hint is made otherwise.
pub fn forget_making_command(data_dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(record_path(data_dir)) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// The command kept by [`keep_making_command`] on `data_dir` as this process names it, as a
/// shell runs it from the current folder: from another, `cd FOLDER && ` first, with the data
/// directory's absolute path.
pub fn making_command(data_dir: &Path) -> Option<String> {
    let record = kept(data_dir)?;
    spoken(data_dir, &record)
}

/// [`making_command`], where it runs a pipeline, run until `stage` (the one a hint needs made
/// again: the pipeline's later stages, its training included, wait for the command after it).
/// `None` where the kept command runs no pipeline, or none is kept.
pub fn making_run_until(data_dir: &Path, stage: &str) -> Option<String> {
    let mut record = kept(data_dir)?;
    let command = record
        .words
        .iter()
        .position(|word| !word.starts_with('-'))?;
    if record.words[command] != "run" {
        return None;
    }
    record.words = run_until(&record.words, stage);
    spoken(data_dir, &record)
}

/// This process's `run` (its `arguments` after the program name), on `data_dir` as named, run
/// until `stage` and without `--shard`: the unsharded run a shard needs first.
pub fn this_run_until(data_dir: &Path, arguments: &[String], stage: &str) -> Option<String> {
    let record = MakingCommand {
        words: run_until(&without(arguments, &["--shard", "--data-dir"]), stage),
        folder: std::env::current_dir().ok()?,
    };
    spoken(data_dir, &record)
}

fn run_until(words: &[String], stage: &str) -> Vec<String> {
    let mut bounded = without(words, &["--until"]);
    bounded.extend(["--until".to_string(), stage.to_string()]);
    bounded
}

/// `words` less each of `flags` with its value (`--flag VALUE` or `--flag=VALUE`).
fn without(words: &[String], flags: &[&str]) -> Vec<String> {
    let mut kept = Vec::new();
    let mut words = words.iter();
    while let Some(word) = words.next() {
        let (flag, joined) = match word.split_once('=') {
            Some((flag, _)) => (flag, true),
            None => (word.as_str(), false),
        };
        match flags.contains(&flag) {
            true if !joined => {
                words.next();
            }
            true => {}
            false => kept.push(word.clone()),
        }
    }
    kept
}

/// `words` less the flags of how the output is shown (`--json`, `-q`, `-v`) and of one-time
/// requests (`--retry-missing`, `--verify`), up to a `--`: a hint is read by a person, whom a
/// pasted `--json` would answer in JSON Lines and `-q` with nothing, and a hint that asks again
/// adds its own.
fn without_passing_flags(words: Vec<String>) -> Vec<String> {
    let passing_flag = |word: &str| {
        matches!(
            word,
            "--json" | "--quiet" | "--verbose" | "--retry-missing" | "--verify"
        ) || (word.len() > 1
            && word.starts_with('-')
            && !word.starts_with("--")
            && word[1..].chars().all(|letter| matches!(letter, 'q' | 'v')))
    };
    let mut flags_end = false;
    words
        .into_iter()
        .filter(|word| {
            flags_end |= word == "--";
            flags_end || !passing_flag(word)
        })
        .collect()
}

fn kept(data_dir: &Path) -> Option<MakingCommand> {
    let bytes = fsutil::read_regular(&record_path(data_dir), FileKind::Config).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn spoken(data_dir: &Path, record: &MakingCommand) -> Option<String> {
    let words: Vec<String> = record
        .words
        .iter()
        .map(|word| crate::progress::shell_word(Path::new(word)))
        .collect();
    let here = std::env::current_dir().ok();
    if here.as_deref() == Some(record.folder.as_path()) {
        return Some(format!(
            "{} {}",
            crate::progress::avaprep_in(data_dir),
            words.join(" ")
        ));
    }
    let absolute = std::path::absolute(data_dir).ok()?;
    Some(format!(
        "cd {} && avaprep --data-dir {} {}",
        crate::progress::shell_word(&record.folder),
        crate::progress::shell_word(&absolute),
        words.join(" ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command comes back as it was typed, less a shard's flag, the output's and one-time
    /// requests', with the data directory as it is now named (it may have moved), and from the
    /// folder it ran in.
    #[test]
    fn the_making_command_is_kept_without_its_shard() {
        let data = tempfile::tempdir().unwrap();
        let folder = tempfile::tempdir().unwrap();
        let words = |text: &str| -> Vec<String> { text.split(' ').map(String::from).collect() };
        let mut arguments = words("--data-dir elsewhere --json -qv run --verify");
        arguments.push("my pipeline.toml".into());
        arguments.extend(words("--shard 2/4 --set extract.height=240"));
        keep_making_command(data.path(), &arguments, folder.path()).unwrap();
        let typed = format!(
            "cd {} && avaprep --data-dir {} run 'my pipeline.toml' --set 'extract.height=240'",
            folder.path().display(),
            data.path().display()
        );
        assert_eq!(making_command(data.path()).unwrap(), typed);
        // Run until the stage a hint needs, not as far as the pipeline goes (its training).
        assert_eq!(
            making_run_until(data.path(), "extract").unwrap(),
            format!("{typed} --until extract")
        );
        arguments.extend(words("--until train"));
        keep_making_command(data.path(), &arguments, folder.path()).unwrap();
        assert_eq!(
            making_run_until(data.path(), "fetch-videos").unwrap(),
            format!("{typed} --until fetch-videos")
        );

        let arguments =
            words("--data-dir=work --shard=1/2 fetch --dataset own/dataset.toml --retry-missing");
        let here = std::env::current_dir().unwrap();
        keep_making_command(data.path(), &arguments, &here).unwrap();
        assert_eq!(
            making_command(data.path()).unwrap(),
            format!(
                "avaprep --data-dir {} fetch --dataset own/dataset.toml",
                data.path().display()
            )
        );
        assert_eq!(making_run_until(data.path(), "extract"), None);
        // After `--` a word is an argument, whatever it looks like.
        assert_eq!(
            without_passing_flags(words("-v keyframes --json -- -q")),
            words("keyframes -- -q")
        );
    }
}
