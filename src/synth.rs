//! `avaprep synth`.

use std::path::PathBuf;

use clap::Args;

use avaprep_shell::Printer;
use avaprep_testbed::synth::{MANIFEST_FILE, Profile, SynthConfig, generate};

use avaprep::progress::human_bytes;
use avaprep_shell::ExitStatus;

#[derive(Debug, Args)]
pub struct SynthArgs {
    /// The folder to write the mirror tree, its manifest.toml and synth-report.json into.
    #[arg(long)]
    pub out: PathBuf,
    /// How many videos to make; kinds (containers, codecs, frame rates, sizes) cycle through the
    /// first six, test-split videos appear from 6, val has 3 videos from 10 (the demo makes 12).
    #[arg(long, default_value_t = 6)]
    pub video_count: usize,
    /// Seed of everything random: the same seed gives the same files.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// quick: 36 s videos, segment [5, 35) s, keyframes 7..=32. ava-times: 1802 s low-resolution
    /// videos with AVA's segment [900, 1801) s and keyframes 902..=1798.
    #[arg(long, default_value = "quick")]
    pub profile: Profile,
    /// Also write the ground truth of the train and val videos as annotation-tool exports, in
    /// exports/: CVAT for video 1.1 (cvat-video/<id>.xml), CVAT for images 1.1
    /// (cvat-images.xml) and VIA 3 (via3.json), for `avaprep import`.
    #[arg(long)]
    pub exports: bool,
}

pub fn run(args: &SynthArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let config = SynthConfig {
        out: args.out.clone(),
        videos: args.video_count,
        seed: args.seed,
        profile: args.profile,
        exports: args.exports,
    };
    let report = generate(&config)?;
    printer.record("synth", &report);
    let bytes: u64 = report.files.iter().map(|file| file.size).sum();
    printer.result(&format!(
        "synthetic AVA ({:?}, seed {}): {} videos, {} files, {} in {:.1} s\nmirror: {}\nmanifest: {}",
        report.profile,
        report.seed,
        report.videos.len(),
        report.files.len(),
        human_bytes(bytes),
        report.elapsed_s,
        args.out.display(),
        args.out.join(MANIFEST_FILE).display(),
    ));
    Ok(ExitStatus::Success)
}
