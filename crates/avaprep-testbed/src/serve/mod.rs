//! `avaprep serve`: a small, fast HTTP/1.1 file server over a local mirror of
//! the AVA download tree, used to test and benchmark `avaprep fetch` against
//! a real server. With the `fault-injection` feature (tests and benchmarks only) it can also
//! misbehave as a `FaultPlan` says.
//!
//! Only std networking: one thread per connection, keep-alive, GET and HEAD,
//! single byte ranges, strong ETags, and per-path statistics.

mod conn;
mod error;
#[cfg(feature = "fault-injection")]
mod faults;
mod http;
mod paths;
mod range;
mod server;
mod stats;
#[cfg(test)]
#[cfg(feature = "fault-injection")]
mod tests;

pub use conn::STATS_PATH;
pub use error::ServeError;
#[cfg(feature = "fault-injection")]
pub use faults::{Fault, FaultPlan, FaultRule};
pub use server::ServerHandle;
pub use stats::{PathStats, ServerStats};

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Directory to serve; nothing outside it (even via symlinks) is served.
    pub root: PathBuf,
    /// Defaults to 127.0.0.1:0 (an ephemeral port; see [`ServerHandle::addr`]).
    pub addr: SocketAddr,
    /// Test-only misbehaviour; `FaultPlan::none()` for a normal server.
    #[cfg(feature = "fault-injection")]
    pub faults: FaultPlan,
    /// Serve JSON statistics at [`STATS_PATH`].
    pub expose_stats: bool,
    /// The most body bytes a second each response is sent at, as a slow link would: for
    /// rehearsing downloads on one machine.
    pub throttle: Option<u64>,
}

impl ServeConfig {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            #[cfg(feature = "fault-injection")]
            faults: FaultPlan::none(),
            expose_stats: false,
            throttle: None,
        }
    }
}

/// Binds and starts serving in background threads; returns once bound.
pub fn start(config: ServeConfig) -> Result<ServerHandle, ServeError> {
    server::start(config)
}

/// For the CLI: serve until the process is killed. Prints nothing; call
/// [`start`] instead if the URL must be logged (`handle.url()`), then
/// [`ServerHandle::wait_forever`].
pub fn run_forever(config: ServeConfig) -> Result<(), ServeError> {
    start(config)?.wait_forever();
    Ok(())
}
