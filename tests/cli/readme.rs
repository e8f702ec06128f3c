//! Every shell command of README.md, run as written, in README order, in a folder laid out as
//! the repository is, where "AVA" is the synthetic miniature: `manifests/ava-v2.2.toml` there is
//! the miniature's manifest with its sources on 127.0.0.1, and the folders the README makes up
//! (`/shared/ava/...`, `clips/`, `exports/`, `boxes.csv`, `my_ava.yaml`) hold the miniature's
//! files. What a CPU test cannot do as written is listed below with its reason; every entry must
//! still match a README command, so neither the README nor these lists can drift apart.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Instant;

use avaprep_testbed::serve::{self, ServeConfig};

use crate::extract::fetched_data;
use crate::import::own_clock_detections;
use crate::invalidation::copy_tree;
use crate::support::{cut_video, mirror, repo_root, stderr, stdout, user_shell};

/// Commands not run here (by how they start), and why.
const NOT_RUN: &[(&str, &str)] = &[
    (
        "scripts/demo.sh",
        "the first set-up command: scripts/bench/fresh-clone.sh runs it on a fresh clone",
    ),
    (
        "scripts/test.sh",
        "the test command: this test runs inside it",
    ),
    (
        "sudo apt-get install",
        "system packages: scripts/setup.sh installed them before any test ran",
    ),
    (
        "cargo install",
        "a second release build of what the test command has just built",
    ),
    (
        "python -m torch.distributed.run",
        "PySlowFast's own trainer, from its repository, on 8 GPUs",
    ),
];

/// Text replaced before a command runs: what the README makes up, and what this machine lacks.
/// `{root}` is the folder the commands run in, `{mirror}` the miniature's URL.
const STAND_INS: &[(&str, &str)] = &[
    // A lab's shared folders: folders of this test.
    ("/shared/ava/", "{root}/shared/ava/"),
    ("/lab/ava", "{root}/lab/ava"),
    // A mirror of AVA: the miniature's.
    ("https://my-mirror.example/", "{mirror}"),
    // No GPU here.
    ("cuda:0", "cpu"),
    // validate's three roots, named by letters: those of the data directory validated above.
    (
        "--frame-dir F --frame-list-dir L --annotation-dir A",
        "--frame-dir data/frames --frame-list-dir data/frame_lists \
         --annotation-dir data/slowfast/annotations",
    ),
];

/// The README's weights: those of its `ava-r50` run (R50 on a GPU) 1000 steps in. Here that run
/// trains the tiny network for an epoch, in the same folder, and its best weights stand in.
const README_WEIGHTS: &str = "best-s1000.safetensors";

/// What the README says a command writes, under the folder it runs in: right after the command
/// (a later one may rightly remove it: a run without the mmaction2 view removes the view), each
/// file must be there and not empty. Each command is the README's text, which must still be there.
const WRITES: &[(&str, &[&str])] = &[
    (
        "avaprep --data-dir data/ava train --set device=\\\"cuda:0\\\"",
        &[
            "data/ava/runs/ava-r50/config.toml",
            "data/ava/runs/ava-r50/curves.png",
            "data/ava/runs/ava-r50/detections.csv",
            "data/ava/runs/ava-r50/summary.json",
        ],
    ),
    (
        "avaprep --data-dir work run pipelines/own-videos.toml",
        &["work/import/dataset.toml", "work/report/index.html"],
    ),
    (
        "avaprep keyframes --videos clips --out tolabel --actions fall,fight,wave --detections boxes.csv",
        &[
            "tolabel/images.zip",
            "tolabel/annotations.xml",
            "tolabel/via_project.json",
        ],
    ),
    (
        "avaprep import exports/*.xml --videos clips --out own --action-from checkboxes",
        &["own/dataset.toml", "own/import.json", "own/pipeline.toml"],
    ),
    (
        "avaprep --data-dir work run own/pipeline.toml",
        &["work/work/eval.json", "work/slowfast/validation.json"],
    ),
    (
        "avaprep fetch --split train,val --videos-per-split 4",
        &["data/work/videos.json"],
    ),
    (
        "avaprep lists",
        &["data/frame_lists/train.csv", "data/slowfast/ava.yaml"],
    ),
    (
        "avaprep lists --pytorchvideo --mmaction2",
        &[
            "data/pytorchvideo/frame_lists/train.csv",
            "data/mmaction2/ava.py",
        ],
    ),
    (
        "avaprep validate --json --junit validation.xml",
        &["validation.xml"],
    ),
    (
        "avaprep predict --weights data/runs/ava-r50/best-s1000.safetensors --split val --out val.csv",
        &["val.csv"],
    ),
    (
        "scripts/export_checkpoint.py data/runs/ava-r50/best-s1000.safetensors r50.pt --to pytorchvideo",
        &["r50.pt"],
    ),
    (
        "scripts/export_checkpoint.py data/runs/ava-r50/best-s1000.safetensors r50.ts --to torchscript",
        &["r50.ts"],
    ),
];

/// A README command: its first line in the README and its text, continuations joined, comment cut.
struct ReadmeCommand {
    line: usize,
    text: String,
}

fn shell_commands(readme: &str) -> Vec<ReadmeCommand> {
    let mut commands = Vec::new();
    let mut in_shell_block = false;
    let mut continued: Option<ReadmeCommand> = None;
    for (index, line) in readme.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            let language = line.trim_start().trim_start_matches('`');
            assert!(
                !["bash", "shell", "console", "zsh"].contains(&language),
                "README.md line {}: a shell block is marked ```sh here, so this test runs it",
                index + 1
            );
            in_shell_block = language == "sh";
            continue;
        }
        if !in_shell_block {
            continue;
        }
        let mut command = continued.take().unwrap_or(ReadmeCommand {
            line: index + 1,
            text: String::new(),
        });
        command.text.push_str(line.trim());
        if let Some(joined) = command.text.strip_suffix('\\') {
            command.text = format!("{} ", joined.trim_end());
            continued = Some(command);
            continue;
        }
        command.text = without_comment(&command.text).trim().to_string();
        if !command.text.is_empty() {
            commands.push(command);
        }
    }
    assert!(continued.is_none(), "a README shell block ends in `\\`");
    commands
}

/// The command before a shell comment: a `#` starting a word, outside quotes.
fn without_comment(text: &str) -> &str {
    let mut quote = None;
    let mut escaped = false;
    let mut previous = ' ';
    for (at, character) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if character == '\\' {
            escaped = true;
        } else if let Some(open) = quote {
            if character == open {
                quote = None;
            }
        } else if character == '"' || character == '\'' {
            quote = Some(character);
        } else if character == '#' && previous.is_whitespace() {
            return &text[..at];
        }
        previous = character;
    }
    text
}

/// The avaprep subcommand of a command line (`run`, `train`...), after the global options.
fn subcommand(text: &str) -> Option<&str> {
    let mut words = text.split_whitespace();
    if words.next() != Some("avaprep") {
        return None;
    }
    while let Some(word) = words.next() {
        if word == "--data-dir" {
            words.next();
        } else if !word.starts_with('-') {
            return Some(word);
        }
    }
    None
}

/// What shrinks every training to something 2 CPU cores finish in seconds: the recipe's run, in
/// the recipe's folder, with the tiny network on small clips for an epoch, evaluated once so it
/// keeps best weights (R50 8x8 at 224 would take hours here).
const TINY_TRAINING: &[&str] = &[
    "model=\\\"tiny\\\"",
    "clip_frames=4",
    "crop_size=112",
    "batch_size=4",
    "accumulate=1",
    "warmup_epochs=0",
    "epochs=1",
    "eval_every=1",
];

/// The command as it runs here: stand-ins replaced, and every training made tiny.
fn as_run_here(text: &str, root: &Path, mirror_url: &str, used: &mut [bool]) -> String {
    let mut command = text.to_string();
    for (index, (from, to)) in STAND_INS.iter().enumerate() {
        if command.contains(from) {
            let to = to
                .replace("{root}", &root.display().to_string())
                .replace("{mirror}", mirror_url);
            command = command.replace(from, &to);
            used[index] = true;
        }
    }
    command = command
        .split(' ')
        .map(|word| match word.strip_suffix(README_WEIGHTS) {
            Some(run) => best_weights(&root.join(run)),
            None => word.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ");
    let prefix = match subcommand(&command) {
        Some("run") => "train.settings.",
        Some("train") if !command.contains("--resume") => "",
        _ => return command,
    };
    for setting in TINY_TRAINING {
        command.push_str(&format!(" --set {prefix}{setting}"));
    }
    command
}

/// The best weights a run folder holds, the latest if a resumed run wrote several.
fn best_weights(run: &Path) -> String {
    let mut weights: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    for file in fs::read_dir(run).unwrap_or_else(|error| panic!("{}: {error}", run.display())) {
        let path = file.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("best-s") && name.ends_with(".safetensors") {
            weights.push((fs::metadata(&path).unwrap().modified().unwrap(), path));
        }
    }
    let (_, latest) = weights
        .into_iter()
        .max()
        .unwrap_or_else(|| panic!("no best weights in {}", run.display()));
    latest.display().to_string()
}

/// A folder laid out as the repository, with the miniature as AVA and the folders the README
/// names filled from it.
fn repository_folder(mirror_url: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path();
    copy_tree(&repo_root().join("pipelines"), &root_path.join("pipelines"));
    std::os::unix::fs::symlink(repo_root().join("scripts"), root_path.join("scripts")).unwrap();

    let manifest = fs::read_to_string(mirror().join("manifest.toml")).unwrap();
    let local = "http://127.0.0.1:8000/";
    assert!(manifest.contains(local), "the miniature's sources moved");
    fs::create_dir(root_path.join("manifests")).unwrap();
    fs::write(
        root_path.join("manifests/ava-v2.2.toml"),
        manifest.replace(local, mirror_url),
    )
    .unwrap();

    let videos = mirror().join("ava-dataset/trainval");
    // Your own videos: what pipelines/own-videos.toml and the import example name.
    link_videos(&videos, &root_path.join("clips"));
    fs::create_dir(root_path.join("exports")).unwrap();
    fs::copy(
        mirror().join("exports/cvat-images.xml"),
        root_path.join("exports/annotations.xml"),
    )
    .unwrap();
    fs::rename(own_clock_detections(root_path), root_path.join("boxes.csv")).unwrap();

    // Videos already on disk, and PySlowFast's videos_15min/ cut from them.
    let shared = root_path.join("shared/ava");
    link_videos(&videos, &shared.join("videos"));
    copy_tree(
        &fetched_data().path().join("annotations"),
        &shared.join("annotations"),
    );
    cut_at_segment_start(&videos, &shared.join("videos_15min"));

    fs::write(
        root_path.join("my_ava.yaml"),
        "_BASE_: data/slowfast/ava.yaml\n",
    )
    .unwrap();
    root
}

fn link_videos(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        fs::hard_link(&path, to.join(path.file_name().unwrap())).unwrap();
    }
}

/// Each video from the segment's start on, its time 0 the segment's first second (AVA's 900), as
/// PySlowFast's `videos_15min/`.
fn cut_at_segment_start(videos: &Path, out: &Path) {
    let manifest: toml::Table = fs::read_to_string(mirror().join("manifest.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let dataset = &manifest["dataset"];
    let segment_start = dataset["segment"][0].as_float().unwrap();
    let into_file = segment_start - dataset["video_start"].as_float().unwrap();
    fs::create_dir_all(out).unwrap();
    for entry in fs::read_dir(videos).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let fast = ["-c:v", "libx264", "-preset", "ultrafast"];
        cut_video(&path, into_file, &fast, &out.join(format!("{stem}.mp4")));
    }
}

/// The reader's shell, with a Slurm array task's variable.
fn shell(root: &Path, command: &str) -> Output {
    user_shell(root, command)
        .env("SLURM_ARRAY_TASK_ID", "1")
        .output()
        .unwrap()
}

#[test]
fn every_readme_shell_command_runs_as_written() {
    let readme = fs::read_to_string(repo_root().join("README.md")).unwrap();
    let commands = shell_commands(&readme);
    let server = serve::start(ServeConfig::new(mirror())).unwrap();
    let root = repository_folder(&server.url());
    let mut stand_ins_used = vec![false; STAND_INS.len()];
    let mut skipped = vec![false; NOT_RUN.len()];
    let mut checked = vec![false; WRITES.len()];
    let mut ran = 0;
    for command in &commands {
        if let Some(index) = NOT_RUN
            .iter()
            .position(|(start, _)| command.text.starts_with(start))
        {
            skipped[index] = true;
            continue;
        }
        let here = as_run_here(
            &command.text,
            root.path(),
            &server.url(),
            &mut stand_ins_used,
        );
        let started = Instant::now();
        let output = shell(root.path(), &here);
        eprintln!(
            "README.md:{} ({:.1} s): {here}",
            command.line,
            started.elapsed().as_secs_f64()
        );
        assert!(
            output.status.success(),
            "README.md line {}: `{}` failed ({}), run here as `{here}`\n{}\n{}",
            command.line,
            command.text,
            output.status,
            tail(&stdout(&output)),
            tail(&stderr(&output)),
        );
        ran += 1;
        if let Some(index) = WRITES.iter().position(|(text, _)| command.text == *text) {
            for written in WRITES[index].1 {
                let size = fs::metadata(root.path().join(written)).map_or(0, |meta| meta.len());
                assert!(
                    size > 0,
                    "README.md line {}: wrote no {written}",
                    command.line
                );
            }
            checked[index] = true;
        }
    }
    for ((start, why), matched) in NOT_RUN.iter().zip(&skipped) {
        assert!(
            matched,
            "no README command starts `{start}` ({why}) any more"
        );
    }
    for ((from, _), matched) in STAND_INS.iter().zip(&stand_ins_used) {
        assert!(matched, "no README command has `{from}` any more");
    }
    assert!(ran >= 30, "only {ran} README commands ran");
    for ((command, _), matched) in WRITES.iter().zip(&checked) {
        assert!(matched, "no README command is `{command}` any more");
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

#[test]
fn commands_are_read_with_continuations_joined_and_comments_cut() {
    let readme = "text\n```sh\n# a comment\navaprep run x \\\n    --set a=\\\"b#c\\\" # why\n\
                  ```\n```toml\nkey = 1\n```\n```sh\navaprep fetch 'a #kept'\n```\n";
    let commands = shell_commands(readme);
    let texts: Vec<&str> = commands.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "avaprep run x --set a=\\\"b#c\\\"",
            "avaprep fetch 'a #kept'"
        ]
    );
    assert_eq!(commands[0].line, 4);
    assert_eq!(
        subcommand("avaprep --data-dir data/ava train --resume"),
        Some("train")
    );
    assert_eq!(subcommand("scripts/demo.sh"), None);
}
