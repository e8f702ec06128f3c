use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Everything that can stop the server from starting.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("serve root {path} is not a directory")]
    RootNotDirectory { path: PathBuf },
    #[error("cannot open serve root {path}: {source}")]
    RootUnreadable {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[cfg(feature = "fault-injection")]
    #[error("cannot read fault plan file {path}: {source}")]
    FaultPlanRead {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[cfg(feature = "fault-injection")]
    #[error("bad fault plan file {path}: {message}")]
    FaultPlanParse { path: PathBuf, message: String },
    #[cfg(feature = "fault-injection")]
    #[error("invalid fault plan: {0}")]
    InvalidFaultPlan(String),
    #[error("cannot spawn the server thread: {0}")]
    Spawn(#[source] io::Error),
}
