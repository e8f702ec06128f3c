//! Early stopping on validation mAP (mode max): patience counts evaluation rounds, as in
//! Lightning's `EarlyStopping`, and an improvement must exceed `min_delta`.

use serde::{Deserialize, Serialize};

/// The state a checkpoint carries so a resumed run stops where the uninterrupted one would.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlyStopping {
    pub patience: usize,
    pub min_delta: f64,
    /// Best mAP so far and the epoch (1-based, completed) it was reached at.
    pub best: Option<(f64, usize)>,
    /// Evaluation rounds since the best.
    pub bad_rounds: usize,
    /// The latest evaluation's mAP and epoch.
    #[serde(default)]
    pub last: Option<(f64, usize)>,
}

/// What one evaluation round means for the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// A new best: keep this checkpoint.
    Improved,
    NoImprovement,
    /// `patience` rounds without improvement.
    Stop,
}

impl EarlyStopping {
    pub fn new(patience: usize, min_delta: f64) -> Self {
        Self {
            patience,
            min_delta,
            best: None,
            bad_rounds: 0,
            last: None,
        }
    }

    /// Records the mAP of the evaluation after `epoch`. A NaN mAP (no class had ground truth)
    /// never improves.
    pub fn update(&mut self, map: f64, epoch: usize) -> Verdict {
        self.last = (!map.is_nan()).then_some((map, epoch));
        let improved = match self.best {
            None => !map.is_nan(),
            Some((best, _)) => map > best + self.min_delta,
        };
        if improved {
            self.best = Some((map, epoch));
            self.bad_rounds = 0;
            return Verdict::Improved;
        }
        self.bad_rounds += 1;
        if self.bad_rounds >= self.patience {
            Verdict::Stop
        } else {
            Verdict::NoImprovement
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_after_patience_rounds_without_a_min_delta_improvement() {
        let mut stop = EarlyStopping::new(2, 0.01);
        assert_eq!(stop.update(0.5, 1), Verdict::Improved);
        assert_eq!(
            stop.update(0.505, 2),
            Verdict::NoImprovement,
            "below min_delta"
        );
        assert_eq!(stop.update(0.6, 3), Verdict::Improved);
        assert_eq!(stop.update(0.59, 4), Verdict::NoImprovement);
        assert_eq!(stop.update(0.605, 5), Verdict::Stop);
        assert_eq!(stop.best, Some((0.6, 3)));
        // The summary once gave the best value as the final one.
        assert_eq!(stop.last, Some((0.605, 5)));
    }

    #[test]
    fn nan_never_counts_as_best() {
        let mut stop = EarlyStopping::new(3, 0.0);
        assert_eq!(stop.update(f64::NAN, 1), Verdict::NoImprovement);
        assert_eq!(stop.best, None);
        assert_eq!(stop.update(0.1, 2), Verdict::Improved);
    }
}
