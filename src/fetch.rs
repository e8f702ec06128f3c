//! `avaprep fetch`.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use clap::Args;

use avaprep::annotations::plan::Selection;
use avaprep::fetch::FetchParams;
use avaprep::manifest::DatasetManifest;
use avaprep::pipeline::StateStore;
use avaprep::pipeline::prints::Scrutiny;
use avaprep::stages::{self, Dataset, ProductStages, StageId};
use avaprep_shell::Printer;

use crate::render::{MakingCommand, RunHow, finish, lock, run_stages};
use avaprep_shell::{ExitStatus, GlobalArgs, UsageError};

/// The AVA 2.2 manifest, relative to the folder the command runs in.
pub const DEFAULT_DATASET: &str = "manifests/ava-v2.2.toml";

/// The dataset manifest `--dataset` names. The default is found only in the checkout, so when
/// it is not there the error says which path to give (the checkout this binary was built from,
/// where it still has the file).
pub fn load_dataset(path: &Path) -> anyhow::Result<DatasetManifest> {
    let error = match DatasetManifest::load(path) {
        Ok(manifest) => return Ok(manifest),
        Err(error) => error,
    };
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join(DEFAULT_DATASET);
    if path != Path::new(DEFAULT_DATASET) || path.exists() {
        return Err(error.into());
    }
    let named = match checkout.is_file() {
        true => checkout.display().to_string(),
        false => format!("/path/to/avaprep/{DEFAULT_DATASET}"),
    };
    Err(anyhow::anyhow!(
        "{error}; the default manifest is read from the folder you run in: give `--dataset {named}`"
    ))
}

/// `--verify` on what was downloaded: every recorded download re-hashed, a damaged one forgotten
/// (so the run downloads it again) and named. Its lock held.
pub fn forget_damaged_downloads(global: &GlobalArgs, printer: &Printer) -> anyhow::Result<()> {
    let store = StateStore::new(&global.data_dir, None);
    let damaged = stages::verify_downloads(&global.data_dir, &store)?;
    printer.note(&format!("verify: {} damaged file(s)", damaged.len()));
    for file in &damaged {
        printer.note(&format!(
            "damaged: {}: {}; it is downloaded again now",
            file.file.display(),
            file.problem
        ));
    }
    Ok(())
}

#[derive(Debug, Args)]
pub struct FetchArgs {
    /// The dataset manifest: URLs, sizes, checksums, splits.
    #[arg(long, default_value = DEFAULT_DATASET)]
    pub dataset: PathBuf,
    /// Splits whose videos to download, comma-separated (train, val, test).
    #[arg(long, value_delimiter = ',', default_value = "train,val")]
    pub split: Vec<avaprep::split::SplitName>,
    /// Download only N videos of each split, chosen deterministically (0: all). The choice is
    /// written to DATA_DIR/work/videos.json for every later stage.
    #[arg(long, default_value_t = 0, conflicts_with = "video_list")]
    pub videos_per_split: usize,
    /// Download only the videos whose ids this file lists, one per line.
    #[arg(long)]
    pub video_list: Option<PathBuf>,
    /// Download the annotations and name lists, not the videos.
    #[arg(long)]
    pub annotations_only: bool,
    /// Concurrent video downloads.
    #[arg(long, default_value_t = 4)]
    pub jobs: usize,
    /// A mirror: URL serves every source (each under its mirror_path), SOURCE=URL one source.
    /// Repeatable. Default: the manifest's URLs.
    #[arg(long, value_name = "URL")]
    pub base_url: Vec<String>,
    /// Re-hash every downloaded file first; one that no longer matches its record is downloaded
    /// again (and the annotation files extracted from the archive are re-hashed too).
    #[arg(long)]
    pub verify: bool,
    /// Ask again for the videos an earlier fetch found missing (the server had none): they are
    /// otherwise left out of every later run.
    #[arg(long)]
    pub retry_missing: bool,
}

/// `--retry-missing`: the plan's videos an earlier run found missing are asked for again.
pub fn ask_again_for_missing(global: &GlobalArgs, printer: &Printer) -> anyhow::Result<()> {
    let layout = avaprep::layout::DataLayout::new(&global.data_dir);
    let asked = avaprep::stages::fetch_videos::ask_again_for_missing(&layout)
        .with_context(|| format!("{}", layout.missing_videos().display()))?;
    printer.note(&format!(
        "asking again for {} videos found missing before{}",
        asked.len(),
        match asked.is_empty() {
            true => String::new(),
            false => format!(": {}", avaprep::progress::first_named(&asked, 10)),
        }
    ));
    Ok(())
}

pub fn run(
    global: &GlobalArgs,
    args: &FetchArgs,
    printer: &Printer,
    cancel: &AtomicBool,
) -> anyhow::Result<ExitStatus> {
    let video_list = match &args.video_list {
        Some(path) => Some(stages::read_video_list(path)?),
        None => None,
    };
    let selection = Selection {
        splits: args.split.clone(),
        videos_per_split: args.videos_per_split,
        video_list,
    };
    let fetch = FetchParams {
        jobs: args.jobs,
        base_url: args.base_url.clone(),
        ..FetchParams::default()
    };
    let dataset =
        Dataset::new(load_dataset(&args.dataset)?, selection, fetch).map_err(UsageError)?;
    let last = if args.annotations_only {
        StageId::Parse
    } else {
        StageId::FetchVideos
    };
    let built = ProductStages::for_command(&dataset, last)?;
    // Before anything is written, --verify's forgetting included.
    let lock = lock(global, None)?;
    built
        .refuse_another_held(&global.data_dir)
        .map_err(UsageError)?;
    if args.verify {
        forget_damaged_downloads(global, printer)?;
    }
    if args.retry_missing {
        ask_again_for_missing(global, printer)?;
    }
    let how = RunHow {
        shard: None,
        scrutiny: Scrutiny::verify(args.verify),
        making: MakingCommand::Keep,
    };
    let report = run_stages(global, &lock, built.as_refs(), how, printer, cancel)?;
    Ok(finish(&report, printer))
}
