//! A setting that cannot work, carried with the keys it concerns, so that each front end spells
//! them its own way: a pipeline file as `[lists] num_frames 0`, the command line as
//! `--num-frames 0`. No message is rewritten by text.

use std::fmt;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct BadSetting {
    /// The settings the problem concerns, as (key, value), in the order the message names them.
    pub settings: Vec<(&'static str, String)>,
    pub problem: String,
}

impl BadSetting {
    pub fn new(key: &'static str, value: impl fmt::Display, problem: impl Into<String>) -> Self {
        BadSetting {
            settings: vec![(key, value.to_string())],
            problem: problem.into(),
        }
    }

    /// The same problem, concerning another setting too.
    pub fn and(mut self, key: &'static str, value: impl fmt::Display) -> Self {
        self.settings.push((key, value.to_string()));
        self
    }

    /// The message with each key as `spell` writes it.
    pub fn spelled(&self, spell: impl Fn(&str) -> String) -> String {
        let named: Vec<String> = self
            .settings
            .iter()
            .map(|(key, value)| format!("{} {value}", spell(key)))
            .collect();
        format!("{}: {}", named.join(" and "), self.problem)
    }

    /// The message with each key as a command-line flag (`list_fps` as `--list-fps`).
    pub fn as_flags(&self) -> String {
        self.spelled(|key| format!("--{}", key.replace('_', "-")))
    }
}

/// As a pipeline file's keys.
impl fmt::Display for BadSetting {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.spelled(str::to_string))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_spelled_by_each_front_end_and_values_stay() {
        let bad = BadSetting::new("num_frames", 0, "must be at least 1").and("sampling_rate", 2);
        assert_eq!(
            bad.to_string(),
            "num_frames 0 and sampling_rate 2: must be at least 1"
        );
        assert_eq!(
            bad.as_flags(),
            "--num-frames 0 and --sampling-rate 2: must be at least 1"
        );
    }
}
