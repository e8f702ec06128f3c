//! Synthetic annotation data for tests and benchmarks.

use std::io::Write;

use super::types::KeyframeRange;

/// SplitMix64: tiny, deterministic, good enough to vary test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const ID_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn video_id(rng: &mut Rng) -> String {
    (0..11)
        .map(|_| char::from(ID_CHARS[rng.below(ID_CHARS.len() as u64) as usize]))
        .collect()
}

/// A coordinate pair `lo <= hi` in thousandths, like AVA's 3-decimal boxes.
fn span(rng: &mut Rng) -> (u64, u64) {
    let lo = rng.below(700);
    let hi = lo + 1 + rng.below(1000 - lo);
    (lo, hi)
}

/// Valid 8-field ground-truth CSV with exactly `rows` rows, in AVA's order
/// (video, second, person) with 1-4 people per keyframe and 1-3 actions each,
/// all within [`KeyframeRange::AVA`]. Same `seed`, same bytes.
pub fn generate_ground_truth_csv(rows: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut out = Vec::with_capacity(rows * 48);
    let mut written = 0;
    let range = KeyframeRange::AVA;
    while written < rows {
        let video = video_id(&mut rng);
        for second in range.first()..=range.last() {
            for person in 0..1 + rng.below(4) {
                let (x1, x2) = span(&mut rng);
                let (y1, y2) = span(&mut rng);
                let first_action = 1 + rng.below(78);
                for action in first_action..first_action + 1 + rng.below(3) {
                    if written == rows {
                        return out;
                    }
                    // Writing into a Vec cannot fail.
                    let _ = writeln!(
                        out,
                        "{video},{second:04},{},{},{},{},{action},{person}",
                        thousandths(x1),
                        thousandths(y1),
                        thousandths(x2),
                        thousandths(y2),
                    );
                    written += 1;
                }
            }
        }
    }
    out
}

fn thousandths(v: u64) -> String {
    format!("{}.{:03}", v / 1000, v % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::{ReadOptions, parse_ground_truth};

    #[test]
    fn generated_rows_parse_and_are_deterministic() {
        let bytes = generate_ground_truth_csv(5_000, 7);
        assert_eq!(bytes, generate_ground_truth_csv(5_000, 7));
        assert_ne!(bytes, generate_ground_truth_csv(5_000, 8));
        let rows = parse_ground_truth(&bytes, "gen.csv", &ReadOptions::AVA).unwrap();
        assert_eq!(rows.len(), 5_000);
        assert!(rows.iter().all(|r| r.entry.is_some()));
        assert!(
            rows.windows(2)
                .all(|w| w[0].key.second <= w[1].key.second || w[0].key.video != w[1].key.video)
        );
        assert!(generate_ground_truth_csv(0, 1).is_empty());
    }
}
