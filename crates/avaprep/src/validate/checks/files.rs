//! File checks: checksums as `SHA256SUMS` and a manifest record them.

use sha2::{Digest, Sha256};

use super::{Results, result};
use crate::fsutil::{self, FileKind};
use crate::validate::{CheckId, ValidateRequest};

/// `SHA256SUMS` in the annotation folder (written by `avaprep lists`, `sha256sum -c` format),
/// and checksums known from a manifest.
pub fn check_checksums(request: &ValidateRequest, results: &mut Results) {
    let check = result(results, CheckId::Checksums);
    let sums_path = request.annotation_dir.join("SHA256SUMS");
    let mut expected: Vec<(std::path::PathBuf, String, String, &str)> = Vec::new();
    let sums = match fsutil::read_regular_text(&sums_path, FileKind::Table) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => {
            check.fail(format!("{}: {error}", sums_path.display()));
            String::new()
        }
    };
    for (n, line) in sums
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let parsed = line
            .split_once(char::is_whitespace)
            .and_then(|(sum, name)| {
                let name = name.trim_start().trim_start_matches('*');
                crate::layout::check_relative_name(name).ok()?;
                Some((sum.to_string(), name.to_string()))
            });
        match parsed {
            Some((sum, name)) => {
                let why = "recorded in SHA256SUMS when it was written: the file changed since";
                expected.push((request.annotation_dir.join(&name), sum, name, why));
            }
            None => check.fail(format!(
                "{}:{}: not `<sha256>  <file name>`",
                sums_path.display(),
                n + 1
            )),
        }
    }
    for (path, sum) in &request.known_sha256 {
        let why = "the manifest's: not the file the manifest names (another release, or edited)";
        expected.push((path.clone(), sum.clone(), path.display().to_string(), why));
    }
    if expected.is_empty() && check.failed == 0 {
        check.skip("no SHA256SUMS in the annotation folder and no manifest given");
        return;
    }
    for (path, sum, name, why) in expected {
        match fsutil::read_regular(&path, FileKind::Table) {
            Ok(bytes) => {
                let actual = hex::encode(Sha256::digest(&bytes));
                if actual.eq_ignore_ascii_case(&sum) {
                    check.pass(1);
                } else {
                    check.fail(format!("{name}: sha256 {actual}, expected {sum}, {why}"));
                }
            }
            Err(error) => check.fail(format!("{name}: {error}")),
        }
    }
}
