//! Listener, connection threads and the handle that stops them.

use super::conn;
#[cfg(feature = "fault-injection")]
use super::faults::ActiveFaults;
use super::stats::{ServerStats, StatsRecorder};
use super::{ServeConfig, ServeError};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long `shutdown` waits for connection threads after closing sockets.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct Shared {
    /// Canonical, so symlink targets can be checked against it.
    pub root: PathBuf,
    #[cfg(feature = "fault-injection")]
    faults: ActiveFaults,
    pub stats: StatsRecorder,
    pub expose_stats: bool,
    pub throttle: Option<u64>,
    stopping: AtomicBool,
    conns: Connections,
}

impl Shared {
    #[cfg(feature = "fault-injection")]
    pub(crate) fn faults_for(&self, path: &str, is_head: bool) -> conn::Selected {
        self.faults.select(path, is_head)
    }

    #[cfg(not(feature = "fault-injection"))]
    pub(crate) fn faults_for(&self, _path: &str, _is_head: bool) -> conn::Selected {
        conn::Selected::default()
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

/// Open sockets, so shutdown can unblock threads parked in `read`.
#[derive(Default)]
struct Connections {
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, TcpStream>>,
    closed: Condvar,
}

impl Connections {
    fn register(&self, stream: &TcpStream) -> Option<u64> {
        let clone = stream.try_clone().ok()?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, clone);
        Some(id)
    }

    fn unregister(&self, id: u64) {
        self.lock().remove(&id);
        self.closed.notify_all();
    }

    fn close_all_and_wait(&self) {
        let open = self.lock();
        for stream in open.values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        let _ = self
            .closed
            .wait_timeout_while(open, DRAIN_TIMEOUT, |open| !open.is_empty());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, TcpStream>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running server. Dropping it shuts the server down.
pub struct ServerHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

impl ServerHandle {
    /// The bound address (with the real port when 0 was requested).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL with a trailing slash, e.g. `http://127.0.0.1:41234/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn stats(&self) -> ServerStats {
        self.shared.stats.snapshot()
    }

    pub fn reset_stats(&self) {
        self.shared.stats.reset();
    }

    /// Stops accepting, closes open connections and joins the threads.
    pub fn shutdown(mut self) {
        self.stop();
    }

    /// Blocks until the accept loop ends, i.e. until the process is killed.
    pub fn wait_forever(mut self) {
        if let Some(thread) = self.accept_thread.take() {
            let _ = thread.join();
        }
    }

    fn stop(&mut self) {
        let Some(thread) = self.accept_thread.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // `accept` has no timeout; a throwaway connection wakes it up. If
        // even that fails, detach rather than hang the caller.
        if TcpStream::connect_timeout(&wake_addr(self.addr), Duration::from_secs(1)).is_ok() {
            let _ = thread.join();
        }
        self.shared.conns.close_all_and_wait();
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

fn wake_addr(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

pub(crate) fn start(config: ServeConfig) -> Result<ServerHandle, ServeError> {
    let root = canonical_root(&config.root)?;
    #[cfg(feature = "fault-injection")]
    config.faults.validate()?;
    #[cfg(feature = "fault-injection")]
    if !config.faults.is_empty() {
        tracing::warn!(
            rules = config.faults.rules.len(),
            "FAULT INJECTION IS ACTIVE: this server deliberately misbehaves (test use only)"
        );
    }
    let listener = TcpListener::bind(config.addr).map_err(|source| ServeError::Bind {
        addr: config.addr,
        source,
    })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: config.addr,
        source,
    })?;
    let shared = Arc::new(Shared {
        root,
        #[cfg(feature = "fault-injection")]
        faults: ActiveFaults::new(config.faults),
        stats: StatsRecorder::default(),
        expose_stats: config.expose_stats,
        throttle: config.throttle,
        stopping: AtomicBool::new(false),
        conns: Connections::default(),
    });
    let loop_shared = Arc::clone(&shared);
    let accept_thread = std::thread::Builder::new()
        .name("avaprep-serve-accept".into())
        .spawn(move || accept_loop(&listener, &loop_shared))
        .map_err(ServeError::Spawn)?;
    Ok(ServerHandle {
        addr,
        shared,
        accept_thread: Some(accept_thread),
    })
}

fn canonical_root(root: &std::path::Path) -> Result<PathBuf, ServeError> {
    let canonical = root
        .canonicalize()
        .map_err(|source| ServeError::RootUnreadable {
            path: root.to_owned(),
            source,
        })?;
    if !canonical.is_dir() {
        return Err(ServeError::RootNotDirectory {
            path: root.to_owned(),
        });
    }
    Ok(canonical)
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.is_stopping() {
            return;
        }
        match stream {
            Ok(stream) => spawn_connection(stream, shared),
            Err(e) => {
                // Usually EMFILE or an aborted handshake: back off, go on.
                tracing::warn!(error = %e, "accept failed");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn spawn_connection(stream: TcpStream, shared: &Arc<Shared>) {
    let Some(id) = shared.conns.register(&stream) else {
        return;
    };
    let shared = Arc::clone(shared);
    let spawned = std::thread::Builder::new()
        .name("avaprep-serve-conn".into())
        .spawn({
            let shared = Arc::clone(&shared);
            move || {
                conn::serve_connection(&shared, stream);
                shared.conns.unregister(id);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot spawn connection thread");
        shared.conns.unregister(id);
    }
}
