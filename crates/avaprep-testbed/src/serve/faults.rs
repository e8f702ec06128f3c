//! Fault injection, compiled only with the `fault-injection` feature (the download tests and the
//! fetch benchmark's fault server). See [`FaultPlan`] for the JSON format.

use super::ServeError;
use super::conn::Selected;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// A list of fault rules, for tests only.
///
/// JSON format (all fields shown; `first` is optional):
///
/// ```json
/// {
///   "rules": [
///     { "path": "/videos/a.mp4", "fault": { "drop_after_bytes": 1048576 }, "first": 1 },
///     { "path": "/annotations/*", "fault": { "status_first": { "code": 503, "count": 2, "retry_after": 1 } } },
///     { "path": "*.mkv",          "fault": { "slow": 204800 } },
///     { "path": "/b.csv",         "fault": { "wrong_length": { "declared_delta": 100 } } },
///     { "path": "/c.mp4",         "fault": "not_found" },
///     { "path": "/d.mp4",         "fault": "ignore_range" },
///     { "path": "/e.mp4",         "fault": { "corrupt_body": { "offset": 12345 } } }
///   ]
/// }
/// ```
///
/// * `path` is matched against the percent-decoded, normalised request path
///   (leading `/`, no empty segments). It is exact (`/a/b.mp4`), a prefix
///   glob (`/videos/*`), a suffix glob (`*.mp4`) or `*` for everything.
/// * `first: K` applies the rule to the first K matching requests only
///   (each rule has its own thread-safe counter). `status_first` carries its
///   own `count` instead and rejects `first`.
/// * Rules are evaluated in order and every matching rule with quota left
///   applies (e.g. `slow` plus `drop_after_bytes`). A rule that answers with
///   an error status (`status_first`, `not_found`) ends evaluation, so later
///   rules neither apply to nor count that request.
/// * HEAD requests are seen by the header-level faults (`status_first`,
///   `not_found`, `wrong_length`, `ignore_range`) only; the body faults
///   (`drop_after_bytes`, `slow`, `corrupt_body`) neither apply to nor count
///   HEAD requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultPlan {
    #[serde(default)]
    pub rules: Vec<FaultRule>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    pub path: String,
    pub fault: Fault,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Send the headers and this many body bytes, then close the connection.
    DropAfterBytes(u64),
    /// Answer the first `count` requests with `code` (plus `Retry-After`).
    StatusFirst {
        code: u16,
        count: u64,
        #[serde(default)]
        retry_after: Option<u64>,
    },
    /// Throttle the body to this many bytes per second.
    Slow(u64),
    /// Declare `Content-Length` = real length + delta, send the real bytes,
    /// then close.
    WrongLength { declared_delta: i64 },
    /// 404 even though the file exists.
    NotFound,
    /// Behave like a server without Range support: always 200 full body.
    IgnoreRange,
    /// Flip (xor 0xFF) the byte at this offset of the response body.
    CorruptBody { offset: u64 },
}

impl Fault {
    fn applies_to_head(&self) -> bool {
        !matches!(
            self,
            Fault::DropAfterBytes(_) | Fault::Slow(_) | Fault::CorruptBody { .. }
        )
    }
}

impl FaultPlan {
    /// The plan of a normal server.
    pub fn none() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn from_json_str(json: &str) -> Result<Self, ServeError> {
        let plan: FaultPlan =
            serde_json::from_str(json).map_err(|e| ServeError::InvalidFaultPlan(e.to_string()))?;
        plan.validate()?;
        Ok(plan)
    }

    pub fn from_json_file(path: &Path) -> Result<Self, ServeError> {
        let text = std::fs::read_to_string(path).map_err(|source| ServeError::FaultPlanRead {
            path: path.to_owned(),
            source,
        })?;
        let plan: FaultPlan =
            serde_json::from_str(&text).map_err(|e| ServeError::FaultPlanParse {
                path: path.to_owned(),
                message: e.to_string(),
            })?;
        plan.validate().map_err(|e| ServeError::FaultPlanParse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        Ok(plan)
    }

    pub fn validate(&self) -> Result<(), ServeError> {
        for (i, rule) in self.rules.iter().enumerate() {
            rule.validate()
                .map_err(|msg| ServeError::InvalidFaultPlan(format!("rule {i}: {msg}")))?;
        }
        Ok(())
    }
}

impl FaultRule {
    fn validate(&self) -> Result<(), String> {
        validate_pattern(&self.path)?;
        match self.fault {
            Fault::StatusFirst { .. } if self.first.is_some() => {
                Err("status_first has its own count; do not combine it with `first`".into())
            }
            Fault::StatusFirst { code, .. } if !(400..=599).contains(&code) => {
                Err(format!("status_first code {code} is not an error status"))
            }
            Fault::Slow(0) => Err("slow needs a positive bytes-per-second rate".into()),
            _ => Ok(()),
        }
    }

    fn limit(&self) -> Option<u64> {
        match self.fault {
            Fault::StatusFirst { count, .. } => Some(count),
            _ => self.first,
        }
    }
}

fn validate_pattern(pattern: &str) -> Result<(), String> {
    let stars = pattern.matches('*').count();
    let ok = match stars {
        0 => pattern.starts_with('/'),
        1 => pattern.starts_with('*') || (pattern.starts_with('/') && pattern.ends_with('*')),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "path pattern {pattern:?} must be an absolute path, `/prefix*`, `*suffix` or `*`"
        ))
    }
}

fn pattern_matches(pattern: &str, path: &str) -> bool {
    if let Some(suffix) = pattern.strip_prefix('*') {
        path.ends_with(suffix)
    } else if let Some(prefix) = pattern.strip_suffix('*') {
        path.starts_with(prefix)
    } else {
        pattern == path
    }
}

/// A plan plus the per-rule request counters of a running server.
pub(crate) struct ActiveFaults {
    rules: Vec<(FaultRule, AtomicU64)>,
}

impl ActiveFaults {
    pub(crate) fn new(plan: FaultPlan) -> Self {
        let rules = plan
            .rules
            .into_iter()
            .map(|r| (r, AtomicU64::new(0)))
            .collect();
        Self { rules }
    }

    pub(crate) fn select(&self, path: &str, is_head: bool) -> Selected {
        let mut out = Selected::default();
        for (rule, counter) in &self.rules {
            if !pattern_matches(&rule.path, path) || (is_head && !rule.fault.applies_to_head()) {
                continue;
            }
            let seen = counter.fetch_add(1, Ordering::Relaxed);
            if rule.limit().is_some_and(|k| seen >= k) {
                continue;
            }
            if apply(&rule.fault, &mut out) {
                break;
            }
        }
        out
    }
}

/// Returns true when the fault settles the whole response.
fn apply(fault: &Fault, out: &mut Selected) -> bool {
    match *fault {
        Fault::StatusFirst {
            code, retry_after, ..
        } => out.status = Some((code, retry_after)),
        Fault::NotFound => out.status = Some((404, None)),
        Fault::DropAfterBytes(n) => set_once(&mut out.drop_after, n),
        Fault::Slow(bps) => set_once(&mut out.slow, bps),
        Fault::WrongLength { declared_delta } => set_once(&mut out.declared_delta, declared_delta),
        Fault::CorruptBody { offset } => set_once(&mut out.corrupt_at, offset),
        Fault::IgnoreRange => out.ignore_range = true,
    }
    out.status.is_some()
}

// The first matching rule of a kind wins, so rule order is meaningful.
fn set_once<T>(slot: &mut Option<T>, value: T) {
    if slot.is_none() {
        *slot = Some(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(json: &str) -> FaultPlan {
        FaultPlan::from_json_str(json).unwrap()
    }

    #[test]
    fn parses_documented_example() {
        let p = plan(
            r#"{"rules":[
            {"path":"/videos/a.mp4","fault":{"drop_after_bytes":1048576},"first":1},
            {"path":"/annotations/*","fault":{"status_first":{"code":503,"count":2,"retry_after":1}}},
            {"path":"*.mkv","fault":{"slow":204800}},
            {"path":"/b.csv","fault":{"wrong_length":{"declared_delta":100}}},
            {"path":"/c.mp4","fault":"not_found"},
            {"path":"/d.mp4","fault":"ignore_range"},
            {"path":"/e.mp4","fault":{"corrupt_body":{"offset":12345}}}]}"#,
        );
        assert_eq!(p.rules.len(), 7);
        assert_eq!(p.rules[0].fault, Fault::DropAfterBytes(1048576));
        assert_eq!(p.rules[4].fault, Fault::NotFound);
    }

    #[test]
    fn rejects_bad_plans() {
        for bad in [
            r#"{"rules":[{"path":"a.mp4","fault":"not_found"}]}"#,
            r#"{"rules":[{"path":"/*a*","fault":"not_found"}]}"#,
            r#"{"rules":[{"path":"/a","fault":"explode"}]}"#,
            r#"{"rules":[{"path":"/a","fault":"not_found","typo":1}]}"#,
            r#"{"rules":[{"path":"/a","fault":{"status_first":{"code":200,"count":1}}}]}"#,
            r#"{"rules":[{"path":"/a","fault":{"status_first":{"code":503,"count":1}},"first":2}]}"#,
        ] {
            assert!(FaultPlan::from_json_str(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn counters_limit_rules_and_status_stops_evaluation() {
        let active = ActiveFaults::new(plan(
            r#"{"rules":[
            {"path":"/v/*","fault":{"status_first":{"code":503,"count":1}}},
            {"path":"*.mp4","fault":{"drop_after_bytes":10},"first":1}]}"#,
        ));
        assert_eq!(active.select("/v/a.mp4", false).status, Some((503, None)));
        let second = active.select("/v/a.mp4", false);
        assert_eq!((second.status, second.drop_after), (None, Some(10)));
        assert_eq!(active.select("/v/a.mp4", false), Selected::default());
        assert_eq!(active.select("/other", false), Selected::default());
    }

    #[test]
    fn head_does_not_consume_body_fault_quota() {
        let active = ActiveFaults::new(plan(
            r#"{"rules":[{"path":"*","fault":{"drop_after_bytes":5},"first":1}]}"#,
        ));
        assert_eq!(active.select("/a", true), Selected::default());
        assert_eq!(active.select("/a", false).drop_after, Some(5));
    }
}
