//! Per-packet planning before decoding: which source frames could be the nearest frame to a
//! target. A frame at time p with presentation neighbours a < p < b is chosen for a target t
//! exactly when (a + p) / 2 <= t < (p + b) / 2 (ties go to the later frame), so its packet's pts
//! and its neighbours' pts decide, before anything is decoded, whether it is needed.

use std::collections::{BTreeMap, VecDeque};

use ffmpeg_next::Packet;

/// Packets held back before they are planned, so that neighbours arriving later in decode
/// order (B-frame reordering; H.264 reorders by at most 16 frames) are already known.
pub const LOOKAHEAD: usize = 32;

/// A target: frame number k and its time in clock units.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub k: u32,
    pub at: i128,
}

/// True when some target lies in the half-open cell [(prev + p) / 2, (p + next) / 2).
/// A missing neighbour leaves that side open, which can only make the cell larger (safe).
pub fn cell_has_target(
    targets: &[Target],
    prev: Option<i128>,
    p: i128,
    next: Option<i128>,
) -> bool {
    let first = match prev {
        Some(a) => targets.partition_point(|t| 2 * t.at < a + p),
        None => 0,
    };
    match (targets.get(first), next) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(t), Some(b)) => 2 * t.at < p + b,
    }
}

/// Packets in decode order, with a window of recent timestamps to find neighbours in
/// presentation order.
#[derive(Default)]
pub struct Lookahead {
    queue: VecDeque<Packet>,
    recent: BTreeMap<i64, u32>,
    history: VecDeque<i64>,
}

impl Lookahead {
    /// Adds a packet; returns the oldest one once the window is full.
    pub fn push(&mut self, packet: Packet) -> Option<Packet> {
        if let Some(ts) = packet.pts() {
            *self.recent.entry(ts).or_insert(0) += 1;
            self.history.push_back(ts);
            if self.history.len() > 3 * LOOKAHEAD {
                self.forget_oldest();
            }
        }
        self.queue.push_back(packet);
        if self.queue.len() > LOOKAHEAD {
            self.queue.pop_front()
        } else {
            None
        }
    }

    pub fn pop(&mut self) -> Option<Packet> {
        self.queue.pop_front()
    }

    pub fn queued(&self) -> impl Iterator<Item = &Packet> {
        self.queue.iter()
    }

    fn forget_oldest(&mut self) {
        if let Some(old) = self.history.pop_front()
            && let Some(count) = self.recent.get_mut(&old)
        {
            *count -= 1;
            if *count == 0 {
                self.recent.remove(&old);
            }
        }
    }

    /// Nearest known timestamps before and after `ts`.
    pub fn neighbours(&self, ts: i64) -> (Option<i64>, Option<i64>) {
        let prev = self.recent.range(..ts).next_back().map(|(&t, _)| t);
        let next = self.recent.range(ts + 1..).next().map(|(&t, _)| t);
        (prev, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(ats: &[i128]) -> Vec<Target> {
        ats.iter().map(|&at| Target { k: 0, at }).collect()
    }

    #[test]
    fn cells() {
        let t = targets(&[10, 20]);
        // Frame at 10 between 6 and 14: cell [8, 12) holds 10.
        assert!(cell_has_target(&t, Some(6), 10, Some(14)));
        // Frame at 14 between 10 and 18: cell [12, 16) holds nothing.
        assert!(!cell_has_target(&t, Some(10), 14, Some(18)));
        // Ties: target 20 is half-way between 18 and 22, so it belongs to 22, not 18.
        assert!(!cell_has_target(&t, Some(14), 18, Some(22)));
        assert!(cell_has_target(&t, Some(18), 22, Some(26)));
        // Unknown neighbours widen the cell.
        assert!(cell_has_target(&t, Some(10), 14, None));
        assert!(cell_has_target(&t, None, 30, Some(40)));
        assert!(cell_has_target(&t, None, 30, None));
        assert!(!cell_has_target(&t, None, 2, Some(4)));
        assert!(!cell_has_target(&t, Some(22), 30, None));
    }
}
