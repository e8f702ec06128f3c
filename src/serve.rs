//! `avaprep serve`.

use std::path::PathBuf;

use clap::Args;

use avaprep_shell::Printer;

use avaprep_shell::ExitStatus;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The folder to serve (for example the --out of `avaprep synth`).
    pub dir: PathBuf,
    /// TCP port; 0 picks a free one (printed on stderr).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Address to listen on. Only this machine can connect to the default.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// Serve JSON statistics (bytes sent per path) at /__avaprep/stats.
    #[arg(long)]
    pub stats: bool,
    /// Send each response at most this many bytes a second, as a slow link would (for
    /// rehearsing a download on one machine).
    #[arg(long, value_name = "BYTES_PER_SECOND", value_parser = clap::value_parser!(u64).range(1..))]
    pub throttle: Option<u64>,
}

pub fn run(args: &ServeArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let mut config = avaprep_testbed::serve::ServeConfig::new(&args.dir);
    config.addr = std::net::SocketAddr::new(args.bind, args.port);
    config.expose_stats = args.stats;
    config.throttle = args.throttle;
    let handle = avaprep_testbed::serve::start(config)?;
    printer.record(
        "serving",
        &serde_json::json!({ "url": handle.url(), "dir": args.dir }),
    );
    printer.note(&format!(
        "serving {} at {}",
        args.dir.display(),
        handle.url()
    ));
    handle.wait_forever();
    Ok(ExitStatus::Success)
}
