//! The report as JUnit XML, the format CI systems show natively: one test case per check, a
//! failure carrying the check's count and examples, a skipped check marked skipped.

use std::fmt::Write as _;

use super::{CheckStatus, ValidationReport};

pub fn to_junit(report: &ValidationReport) -> String {
    let failures = report.failed_checks().count();
    let skipped = report
        .checks
        .iter()
        .filter(|check| check.status() == CheckStatus::Skipped)
        .count();
    let tests = report.checks.len();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let time = report.seconds;
    writeln!(
        xml,
        "<testsuites name=\"avaprep validate\" tests=\"{tests}\" failures=\"{failures}\" skipped=\"{skipped}\" time=\"{time:.3}\">"
    )
    .expect("a string");
    writeln!(
        xml,
        "  <testsuite name=\"avaprep validate\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{time:.3}\">"
    )
    .expect("a string");
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

/// XML text and attribute escaping; characters XML 1.0 cannot hold become U+FFFD.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' => out.push(c),
            c if (c as u32) < 0x20 => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_examples_is_escaped() {
        assert_eq!(
            escape("a<b & \"c\"\u{1}"),
            "a&lt;b &amp; &quot;c&quot;\u{fffd}"
        );
    }
}
