//! `avaprep lists`.

use std::sync::atomic::AtomicBool;

use clap::Args;

use avaprep::pipeline::prints::Scrutiny;
use avaprep::stages::lists::{ListsParams, ListsStage};

use crate::render::{RunHow, finish, lock, run_stages};
use avaprep_shell::{ExitStatus, GlobalArgs, Printer, UsageError};

#[derive(Debug, Args)]
pub struct ListsArgs {
    /// Rows per second of video: 30 for an unpatched PySlowFast (it assumes 30 fps), each row
    /// pointing at the extracted frame nearest its instant; the extraction rate for a loader
    /// patched to it.
    #[arg(long, default_value_t = ListsParams::default().list_fps)]
    pub list_fps: f64,
    /// PySlowFast's DATA.NUM_FRAMES: rows per clip, at the list rate.
    #[arg(long, default_value_t = ListsParams::default().num_frames)]
    pub num_frames: u32,
    /// PySlowFast's DATA.SAMPLING_RATE: rows between a clip's frames.
    #[arg(long, default_value_t = ListsParams::default().sampling_rate)]
    pub sampling_rate: u32,
    /// Also write the 30 fps view pytorchvideo's Ava reads (pytorchvideo/): per video a folder of
    /// links named as a full 30 fps extraction, each to the nearest extracted frame, and lists
    /// into it. No bytes are copied; it costs one inode a link.
    #[arg(long)]
    pub pytorchvideo: bool,
    /// Also write the view mmaction2 1.x's AVADataset reads (mmaction2/): per video a folder of
    /// links named as its filename_tmpl expects at the extracted rate, the annotations, the
    /// detector's boxes as its proposals pickle, and a config (mmaction2/ava.py).
    #[arg(long)]
    pub mmaction2: bool,
}

pub fn run(
    global: &GlobalArgs,
    args: &ListsArgs,
    printer: &Printer,
    cancel: &AtomicBool,
) -> anyhow::Result<ExitStatus> {
    let params = ListsParams {
        list_fps: args.list_fps,
        num_frames: args.num_frames,
        sampling_rate: args.sampling_rate,
        pytorchvideo: args.pytorchvideo,
        mmaction2: args.mmaction2,
    };
    params
        .validate()
        .map_err(|bad| UsageError(bad.as_flags()))?;
    let stage = ListsStage { params };
    let lock = lock(global, None)?;
    let how = RunHow::single(Scrutiny::Listing);
    let report = run_stages(global, &lock, vec![&stage], how, printer, cancel)?;
    Ok(finish(&report, printer))
}
