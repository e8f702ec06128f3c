//! The learning rate as a pure function of training progress (in epochs, fractional), updated
//! every iteration as PySlowFast does (`slowfast/utils/lr_policy.py`).

use serde::{Deserialize, Serialize};

/// The schedule after warm-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", deny_unknown_fields)]
pub enum ScheduleKind {
    /// Half a cosine from the base LR at epoch 0 to `end_lr` at the last epoch.
    Cosine { end_lr: f64 },
    /// The base LR times `gamma` for every milestone (in epochs) passed.
    Steps { milestones: Vec<f64>, gamma: f64 },
}

impl ScheduleKind {
    /// Each kind as settings spell it, with the keys it takes besides `kind`.
    const KEYS: [(&str, &[&str]); 2] =
        [("cosine", &["end_lr"]), ("steps", &["milestones", "gamma"])];
}

/// Refuses a key the schedule's kind does not take, naming the kind that takes it: a preset's
/// cosine schedule given `gamma` (as the steps schedule of the other preset takes) would
/// otherwise read "unknown field `gamma`, expected `end_lr`".
pub fn check_keys(schedule: &toml::Table) -> Result<(), String> {
    let Some(kind) = schedule.get("kind").and_then(toml::Value::as_str) else {
        return Ok(());
    };
    let Some((_, takes)) = ScheduleKind::KEYS.iter().find(|(name, _)| *name == kind) else {
        return Ok(());
    };
    let foreign = schedule
        .keys()
        .find(|key| *key != "kind" && !takes.contains(&key.as_str()));
    let Some(key) = foreign else {
        return Ok(());
    };
    let mut message = format!(
        "schedule.{key}: a {kind} schedule takes {}",
        takes.join(" and ")
    );
    if let Some((other, its_keys)) = ScheduleKind::KEYS
        .iter()
        .find(|(name, keys)| *name != kind && keys.contains(&key.as_str()))
    {
        let example: Vec<String> = its_keys
            .iter()
            .map(|key| format!(" --set schedule.{key}=..."))
            .collect();
        message.push_str(&format!(
            "; {key} belongs to the {other} schedule, which needs all of its keys: --set schedule.kind={other}{}",
            example.concat()
        ));
    }
    Err(message)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LrSchedule {
    pub base_lr: f64,
    pub warmup_epochs: f64,
    pub warmup_start_lr: f64,
    pub total_epochs: f64,
    pub kind: ScheduleKind,
}

impl LrSchedule {
    /// The LR at `epoch` (e.g. 2.5 = half-way through the third epoch). During warm-up it rises
    /// linearly from `warmup_start_lr` to what the main schedule gives at the end of warm-up, so
    /// the curve is continuous there.
    pub fn lr_at(&self, epoch: f64) -> f64 {
        if epoch < self.warmup_epochs {
            let end = self.main_lr(self.warmup_epochs);
            let alpha = epoch / self.warmup_epochs;
            return self.warmup_start_lr + (end - self.warmup_start_lr) * alpha;
        }
        self.main_lr(epoch)
    }

    fn main_lr(&self, epoch: f64) -> f64 {
        match &self.kind {
            ScheduleKind::Cosine { end_lr } => {
                let progress = (epoch / self.total_epochs).clamp(0.0, 1.0);
                end_lr
                    + (self.base_lr - end_lr)
                        * 0.5
                        * (1.0 + (std::f64::consts::PI * progress).cos())
            }
            ScheduleKind::Steps { milestones, gamma } => {
                let passed = milestones.iter().filter(|&&m| epoch >= m).count();
                self.base_lr * gamma.powi(passed as i32)
            }
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(self.warmup_epochs >= 0.0 && self.warmup_start_lr >= 0.0) {
            return Err("warmup_epochs and warmup_start_lr must not be negative".into());
        }
        if let ScheduleKind::Steps { milestones, gamma } = &self.kind
            && (milestones.windows(2).any(|w| w[0] > w[1])
                || gamma.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater))
        {
            return Err("milestones must ascend and gamma must be positive".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    fn recipe() -> LrSchedule {
        LrSchedule {
            base_lr: 0.1,
            warmup_epochs: 5.0,
            warmup_start_lr: 1.25e-4,
            total_epochs: 20.0,
            kind: ScheduleKind::Steps {
                milestones: vec![10.0, 15.0],
                gamma: 0.1,
            },
        }
    }

    #[test]
    fn each_kind_takes_the_keys_it_serialises_and_a_foreign_key_names_its_kind() {
        for kind in [
            ScheduleKind::Cosine { end_lr: 0.0 },
            ScheduleKind::Steps {
                milestones: vec![1.0],
                gamma: 0.1,
            },
        ] {
            let table = toml::Table::try_from(&kind).unwrap();
            let name = table["kind"].as_str().unwrap();
            let (_, takes) = ScheduleKind::KEYS
                .iter()
                .find(|(known, _)| *known == name)
                .unwrap();
            let mut keys: Vec<&str> = table.keys().map(String::as_str).collect();
            keys.retain(|key| *key != "kind");
            keys.sort_unstable();
            let mut listed = takes.to_vec();
            listed.sort_unstable();
            assert_eq!(keys, listed, "{name}");
            check_keys(&table).unwrap();
        }
        let cosine_with_gamma: toml::Table = "kind = \"cosine\"\nend_lr = 0.0\ngamma = 0.5\n"
            .parse()
            .unwrap();
        let message = check_keys(&cosine_with_gamma).unwrap_err();
        assert!(
            message.starts_with("schedule.gamma: a cosine schedule takes end_lr; gamma belongs to the steps schedule")
                && message.contains("--set schedule.kind=steps --set schedule.milestones=... --set schedule.gamma=..."),
            "{message}"
        );
        let misspelt: toml::Table = "kind = \"steps\"\nmilestone = [1.0]\n".parse().unwrap();
        assert_eq!(
            check_keys(&misspelt).unwrap_err(),
            "schedule.milestone: a steps schedule takes milestones and gamma"
        );
    }

    #[test]
    fn step_schedule_warms_up_linearly_then_steps() {
        let s = recipe();
        assert!(close(s.lr_at(0.0), 1.25e-4));
        assert!(close(s.lr_at(2.5), 1.25e-4 + (0.1 - 1.25e-4) * 0.5));
        assert!(close(s.lr_at(5.0), 0.1));
        assert!(close(s.lr_at(9.999), 0.1));
        assert!(close(s.lr_at(10.0), 0.01));
        assert!(close(s.lr_at(15.0), 0.001));
        assert!(close(s.lr_at(19.9), 0.001));
    }

    #[test]
    fn cosine_ends_at_end_lr_and_warm_up_meets_it_continuously() {
        let s = LrSchedule {
            kind: ScheduleKind::Cosine { end_lr: 1e-3 },
            warmup_epochs: 2.0,
            ..recipe()
        };
        let at_warmup_end = 1e-3 + (0.1 - 1e-3) * 0.5 * (1.0 + (std::f64::consts::PI * 0.1).cos());
        assert!(close(s.lr_at(2.0), at_warmup_end));
        assert!((s.lr_at(2.0 - 1e-9) - at_warmup_end).abs() < 1e-9);
        assert!(close(s.lr_at(10.0), 1e-3 + (0.1 - 1e-3) * 0.5));
        assert!(close(s.lr_at(20.0), 1e-3));
        assert!(close(s.lr_at(25.0), 1e-3), "clamped past the end");
    }

    #[test]
    fn no_warmup_starts_at_the_base_lr_and_is_monotone() {
        let s = LrSchedule {
            kind: ScheduleKind::Cosine { end_lr: 0.0 },
            warmup_epochs: 0.0,
            ..recipe()
        };
        assert!(close(s.lr_at(0.0), 0.1));
        let lrs: Vec<f64> = (0..=200).map(|i| s.lr_at(i as f64 / 10.0)).collect();
        assert!(lrs.windows(2).all(|w| w[1] <= w[0]));
    }

    #[test]
    fn bad_milestones_are_refused() {
        let s = LrSchedule {
            kind: ScheduleKind::Steps {
                milestones: vec![15.0, 10.0],
                gamma: 0.1,
            },
            ..recipe()
        };
        assert!(s.validate().is_err());
        assert!(recipe().validate().is_ok());
    }
}
