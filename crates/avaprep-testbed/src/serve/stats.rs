use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Per-path counters. `body_bytes` counts body bytes handed to the socket,
/// so it is exact for completed responses and for deliberately cut ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathStats {
    pub requests: u64,
    pub body_bytes: u64,
    /// Status code -> number of responses with it.
    pub statuses: BTreeMap<u16, u64>,
}

/// Snapshot of what the server has sent. Requests for the stats endpoint
/// itself are not counted, so tests can poll it without skewing numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerStats {
    pub total_requests: u64,
    pub total_body_bytes: u64,
    /// Keyed by the normalised, percent-decoded request path ("/a/b.mp4").
    pub paths: BTreeMap<String, PathStats>,
}

impl ServerStats {
    pub fn path(&self, path: &str) -> Option<&PathStats> {
        self.paths.get(path)
    }
}

#[derive(Default)]
pub(crate) struct StatsRecorder {
    inner: Mutex<ServerStats>,
}

impl StatsRecorder {
    pub(crate) fn record(&self, path: &str, status: u16, body_bytes: u64) {
        let mut stats = self.lock();
        stats.total_requests += 1;
        stats.total_body_bytes += body_bytes;
        let entry = stats.paths.entry(path.to_owned()).or_default();
        entry.requests += 1;
        entry.body_bytes += body_bytes;
        *entry.statuses.entry(status).or_default() += 1;
    }

    pub(crate) fn snapshot(&self) -> ServerStats {
        self.lock().clone()
    }

    pub(crate) fn reset(&self) {
        *self.lock() = ServerStats::default();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ServerStats> {
        // A panicking connection thread must not take the stats down with it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}
