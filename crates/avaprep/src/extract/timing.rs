//! Exact target times. Frame k's target is `segment_start + (k - 1) / fps` seconds after the
//! stream's first timestamp; it is compared with source timestamps in integer arithmetic so that
//! a target exactly half-way between two frames always goes to the later one, as defined.

/// A rational approximation of `x` with a denominator of at most 1,000,000, exact to 1e-9
/// (relative): `5.0`, `29.97` and `30000.0 / 1001.0` all come back as the intended fraction.
pub fn to_rational(x: f64) -> Option<(i128, i128)> {
    if !x.is_finite() {
        return None;
    }
    // Continued fraction convergents h/k.
    let (mut h0, mut h1, mut k0, mut k1) = (0i128, 1i128, 1i128, 0i128);
    let mut rest = x;
    for _ in 0..40 {
        let a = rest.floor();
        if a.abs() > 1e15 {
            return None;
        }
        let a_int = a as i128;
        let (h2, k2) = (a_int * h1 + h0, a_int * k1 + k0);
        if k2 > 1_000_000 {
            break;
        }
        (h0, h1, k0, k1) = (h1, h2, k1, k2);
        if (h1 as f64 / k1 as f64 - x).abs() <= 1e-9 * x.abs().max(1.0) {
            return Some((h1, k1));
        }
        let frac = rest - a;
        if frac == 0.0 {
            break;
        }
        rest = 1.0 / frac;
    }
    None
}

/// Maps frame numbers and source timestamps onto one integer scale: a time `t` seconds after
/// the first timestamp is `t * scale` units, with `scale` chosen so that every target and every
/// timestamp of the stream is an integer.
#[derive(Clone, Debug)]
pub struct Clock {
    /// First timestamp of the stream, in its time base.
    first_ts: i64,
    /// Stream time base, num / den seconds per tick.
    tb: (i128, i128),
    segment_start: (i128, i128),
    fps: (i128, i128),
    /// Units per second: lcm-free product, which keeps the arithmetic obviously exact.
    scale: i128,
}

impl Clock {
    /// `None` when `segment_start` or `fps` is not a reasonable fraction or the time base is bad.
    pub fn new(first_ts: i64, time_base: (i32, i32), segment_start: f64, fps: f64) -> Option<Self> {
        let (tb_num, tb_den) = (i128::from(time_base.0), i128::from(time_base.1));
        if tb_num <= 0 || tb_den <= 0 || fps.is_nan() || fps <= 0.0 {
            return None;
        }
        let segment_start = to_rational(segment_start)?;
        let fps = to_rational(fps)?;
        Some(Clock {
            first_ts,
            tb: (tb_num, tb_den),
            segment_start,
            fps,
            scale: tb_den * segment_start.1 * fps.0,
        })
    }

    /// Target time of frame k (1-based) in clock units since the first timestamp.
    pub fn target(&self, k: u32) -> i128 {
        let (s_num, s_den) = self.segment_start;
        let (f_num, f_den) = self.fps;
        // scale * (s_num / s_den + (k - 1) * f_den / f_num)
        self.tb.1 * (s_num * f_num + i128::from(k - 1) * f_den * s_den)
    }

    /// A source timestamp (stream time base) in clock units since the first timestamp.
    pub fn pts(&self, ts: i64) -> i128 {
        i128::from(ts - self.first_ts) * self.tb.0 * self.scale / self.tb.1
    }

    /// Seconds since the first timestamp, for the index and for messages.
    pub fn seconds(&self, units: i128) -> f64 {
        units as f64 / self.scale as f64
    }

    /// `seconds` after the first timestamp in clock units, rounded down.
    pub fn units_at(&self, seconds: f64) -> i128 {
        match to_rational(seconds) {
            Some((num, den)) => (num * self.scale).div_euclid(den),
            None => (seconds * self.scale as f64).floor() as i128,
        }
    }

    /// Clock units per second.
    #[cfg(test)]
    pub fn units_per_second(&self) -> i128 {
        self.scale
    }
}

/// True when the source frame at `prev` is strictly nearer to `target` than the one at `next`
/// (`prev <= target < next`); a tie goes to `next`, the later frame.
pub fn prev_is_nearer(prev: i128, next: i128, target: i128) -> bool {
    2 * target < prev + next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rationals() {
        assert_eq!(to_rational(5.0), Some((5, 1)));
        assert_eq!(to_rational(900.0), Some((900, 1)));
        assert_eq!(to_rational(29.97), Some((2997, 100)));
        assert_eq!(to_rational(30000.0 / 1001.0), Some((30000, 1001)));
        assert_eq!(to_rational(0.0), Some((0, 1)));
        assert_eq!(to_rational(f64::NAN), None);
    }

    #[test]
    fn targets_are_exact() {
        // 25 fps source in a 1/12800 time base, first timestamp 1000, 10 fps targets from 900.
        let clock = Clock::new(1000, (1, 12800), 900.0, 10.0).unwrap();
        let per_s = clock.units_per_second();
        assert_eq!(clock.target(1), 900 * per_s);
        assert_eq!(clock.target(2), 900 * per_s + per_s / 10);
        assert_eq!(clock.pts(1000 + 12800), per_s);
        // 900.1 s lies exactly between the frames at 900.08 and 900.12: the later one wins.
        let (a, b) = (
            clock.pts(1000 + 900 * 12800 + 1024),
            clock.pts(1000 + 900 * 12800 + 1536),
        );
        assert!(!prev_is_nearer(a, b, clock.target(2)));
        assert!(prev_is_nearer(a, b, clock.target(2) - 1));
        assert!((clock.seconds(clock.target(2)) - 900.1).abs() < 1e-9);
    }
}
