//! The download tests' misbehaving server as a process, for `scripts/bench/fetch.sh`:
//! `avaprep-fault-server DIR PLAN.json` serves DIR on an ephemeral loopback port with statistics,
//! misbehaving as the fault plan says, prints `{"url": ...}` on stdout and serves until killed.
//! Built only with the `fault-injection` feature; never part of an install.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use avaprep_testbed::serve::{self, FaultPlan, ServeConfig};

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [dir, plan] = args.as_slice() else {
        eprintln!("usage: avaprep-fault-server DIR PLAN.json");
        return ExitCode::from(2);
    };
    match run(dir, plan) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(dir: &Path, plan: &Path) -> Result<(), serve::ServeError> {
    let mut config = ServeConfig::new(dir);
    config.faults = FaultPlan::from_json_file(plan)?;
    config.expose_stats = true;
    let handle = serve::start(config)?;
    println!("{}", serde_json::json!({ "url": handle.url() }));
    handle.wait_forever();
    Ok(())
}
