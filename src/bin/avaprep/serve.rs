//! `avaprep serve`.

use std::path::PathBuf;

use clap::Args;

use crate::frame::Printer;

use crate::frame::ExitStatus;

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
}

pub fn run(args: &ServeArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let mut config = avaprep::serve::ServeConfig::new(&args.dir);
    config.addr = std::net::SocketAddr::new(args.bind, args.port);
    config.expose_stats = args.stats;
    let handle = avaprep::serve::start(config)?;
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
