//! Mapping request targets to files without ever leaving the root.

use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// Normalised decoded path ("/a/b.mp4"): the key for stats and faults.
    pub key: String,
    pub fs_path: PathBuf,
}

/// The path part of a request target (origin-form or absolute-form).
pub(crate) fn target_path(target: &str) -> Option<&str> {
    let target = match target.split_once("://") {
        Some((_, rest)) => &rest[rest.find('/')?..],
        None => target,
    };
    let end = target.find(['?', '#']).unwrap_or(target.len());
    let path = &target[..end];
    path.starts_with('/').then_some(path)
}

/// Percent-decodes and checks every segment. Errors mean 400.
pub(crate) fn resolve(root: &Path, raw_path: &str) -> Result<Resolved, ()> {
    let decoded = String::from_utf8(percent_decode(raw_path)?).map_err(|_| ())?;
    if decoded.contains(['\0', '\\']) {
        return Err(());
    }
    let mut key = String::new();
    let mut fs_path = root.to_path_buf();
    for segment in decoded.split('/').filter(|s| !s.is_empty()) {
        if !is_plain_segment(segment) {
            return Err(());
        }
        key.push('/');
        key.push_str(segment);
        fs_path.push(segment);
    }
    if key.is_empty() {
        key.push('/');
    }
    Ok(Resolved { key, fs_path })
}

// Rejects ".", "..", and anything the platform would read as a root or
// prefix, so a pushed segment can only ever descend one level.
fn is_plain_segment(segment: &str) -> bool {
    let mut components = Path::new(segment).components();
    matches!(
        (components.next(), components.next()),
        (Some(Component::Normal(c)), None) if c == segment
    )
}

fn percent_decode(s: &str) -> Result<Vec<u8>, ()> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(())?;
            let hex = std::str::from_utf8(hex).map_err(|_| ())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| ())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// Symlinks inside the tree are followed only while they stay inside the
/// (canonical) root; anything else is reported as missing.
pub(crate) fn open_regular_file(
    canonical_root: &Path,
    path: &Path,
) -> Option<(std::fs::File, std::fs::Metadata)> {
    let real = path.canonicalize().ok()?;
    if !real.starts_with(canonical_root) {
        return None;
    }
    let file = std::fs::File::open(&real).ok()?;
    let meta = file.metadata().ok()?;
    meta.is_file().then_some((file, meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_path_strips_query_and_authority() {
        assert_eq!(target_path("/a/b?x=1#f"), Some("/a/b"));
        assert_eq!(target_path("http://h:1/a"), Some("/a"));
        assert_eq!(target_path("http://h:1"), None);
        assert_eq!(target_path("*"), None);
        assert_eq!(target_path("a/b"), None);
    }

    #[test]
    fn resolve_normalises_and_rejects_escapes() {
        let root = Path::new("/srv");
        let ok = resolve(root, "//a/%20b//c.mp4").unwrap();
        assert_eq!(ok.key, "/a/ b/c.mp4");
        assert_eq!(ok.fs_path, PathBuf::from("/srv/a/ b/c.mp4"));
        assert_eq!(resolve(root, "/").unwrap().key, "/");
        for bad in [
            "/../x",
            "/%2e%2e/x",
            "/%2E%2E/x",
            "/a/../../x",
            "/./x",
            "/a\\..\\x",
            "/a%5c..%5cx",
            "/a%00b",
            "/%zz",
            "/%4",
            "/%ff",
        ] {
            assert!(resolve(root, bad).is_err(), "{bad}");
        }
    }
}
