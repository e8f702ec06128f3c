//! The report as JUnit XML, the format CI systems show natively: one test case per check, a
//! failure carrying the check's count and examples, a skipped check marked skipped.

use std::fmt::Write as _;

use super::{CheckStatus, ValidationReport};
use crate::markup::escape;

pub fn to_junit(report: &ValidationReport) -> String {
    let failures = report.failed_checks().count();
    let skipped = report.skipped_checks().count();
    let counts = Counts {
        tests: report.checks.len(),
        failures,
        errors: 0,
        skipped,
    };
    let mut xml = opening(&counts, report.seconds);
    for check in &report.checks {
        let name = check.id.name();
        write!(
            xml,
            "    <testcase classname=\"avaprep.validate\" name=\"{name}\">"
        )
        .expect("a string");
        match check.status() {
            CheckStatus::Passed => {}
            CheckStatus::Skipped => {
                let reason = check.skipped.as_deref().unwrap_or_default();
                write!(xml, "<skipped message=\"{}\"/>", escape(reason)).expect("a string");
            }
            CheckStatus::Failed => {
                let message = format!(
                    "{} of {} failed: {}",
                    check.failed,
                    check.checked,
                    check.id.rule()
                );
                write!(
                    xml,
                    "<failure type=\"{name}\" message=\"{}\">{}</failure>",
                    escape(&message),
                    escape(&check.examples.join("\n"))
                )
                .expect("a string");
            }
        }
        xml.push_str("</testcase>\n");
    }
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

/// An error that stopped the checks before any ran (no lists yet, a config that cannot be read),
/// as one test case in error: a CI system shows why, where it looks for the checks.
pub fn setup_error_junit(message: &str) -> String {
    let counts = Counts {
        tests: 1,
        failures: 0,
        errors: 1,
        skipped: 0,
    };
    let mut xml = opening(&counts, 0.0);
    // In the body too: an attribute's line breaks are read as spaces.
    writeln!(
        xml,
        "    <testcase classname=\"avaprep.validate\" name=\"setup\"><error type=\"setup\" message=\"{}\">{}</error></testcase>",
        escape(message),
        escape(message)
    )
    .expect("a string");
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

struct Counts {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
}

/// The XML declaration and the opening tags of the suites and of the one suite.
fn opening(counts: &Counts, seconds: f64) -> String {
    let Counts {
        tests,
        failures,
        errors,
        skipped,
    } = counts;
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let totals = format!(
        "tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{seconds:.3}\""
    );
    writeln!(xml, "<testsuites name=\"avaprep validate\" {totals}>").expect("a string");
    writeln!(xml, "  <testsuite name=\"avaprep validate\" {totals}>").expect("a string");
    xml
}
