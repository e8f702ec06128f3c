//! Every figure the README and the pipeline files quote is BENCHMARKS.md's: each quote is marked
//! `<!-- fig:NAME -->` right after it, and must end with the value of NAME in BENCHMARKS.md's table
//! of quoted figures, which in turn must stand in the benchmark it names. Before, the same
//! measurement was quoted as 63 GB and 67.8 GB, 3.3 h and 2.5 h, 0.764 and 0.755.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

const MARK: &str = "<!-- fig:";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// NAME -> (value, benchmark), from the table under "## Figures quoted elsewhere".
fn table(benchmarks: &str) -> BTreeMap<String, (String, String)> {
    let section = benchmarks
        .split("\n## ")
        .find(|section| section.starts_with("Figures quoted elsewhere"))
        .expect("BENCHMARKS.md has its table of quoted figures");
    section
        .lines()
        .filter(|line| line.starts_with("| ") && !line.starts_with("| figure"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 3, "{line}");
            (
                cells[0].to_string(),
                (cells[1].to_string(), cells[2].to_string()),
            )
        })
        .collect()
}

/// (NAME, the text before its mark) for every mark in `text`.
fn quotes(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = text;
    let mut before = String::new();
    while let Some(at) = rest.find(MARK) {
        before.push_str(&rest[..at]);
        let after = &rest[at + MARK.len()..];
        let end = after.find(" -->").expect("a mark ends with -->");
        found.push((after[..end].to_string(), before.clone()));
        rest = &after[end + " -->".len()..];
    }
    found
}

/// The text as words, a line break and a comment's `#` read as one space (a quote may wrap).
fn words(text: &str) -> String {
    let words: Vec<&str> = text
        .split_whitespace()
        .filter(|word| *word != "#")
        .collect();
    words.join(" ")
}

fn quoting_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    for entry in fs::read_dir(repo().join("pipelines")).unwrap() {
        files.push(entry.unwrap().path());
    }
    files
}

#[test]
fn every_quoted_figure_is_the_one_benchmarks_md_measured() {
    let benchmarks = fs::read_to_string(repo().join("BENCHMARKS.md")).unwrap();
    let figures = table(&benchmarks);
    assert!(figures.len() >= 5, "{figures:?}");
    for (name, (value, benchmark)) in &figures {
        let section = benchmarks
            .split("\n## ")
            .find(|section| section.lines().next() == Some(benchmark.as_str()))
            .unwrap_or_else(|| panic!("{name}: no benchmark `## {benchmark}` in BENCHMARKS.md"));
        assert!(
            section.contains(value.as_str()),
            "{name}: `{value}` is not in `## {benchmark}`"
        );
    }
    let mut quoted = BTreeMap::<&str, usize>::new();
    for file in quoting_files() {
        let text = fs::read_to_string(&file).unwrap();
        for (name, before) in quotes(&text) {
            let (value, _) = figures.get(&name).unwrap_or_else(|| {
                panic!(
                    "{}: `{name}` is not in BENCHMARKS.md's table",
                    file.display()
                )
            });
            let tail = words(&before);
            let near: String = tail
                .chars()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            assert!(
                tail.ends_with(value.as_str()),
                "{}: `{name}` quoted as `...{near}`, BENCHMARKS.md says {value}",
                file.display()
            );
            *quoted
                .entry(figures.get_key_value(&name).unwrap().0)
                .or_default() += 1;
        }
    }
    for name in figures.keys() {
        assert!(
            quoted.contains_key(name.as_str()),
            "{name} is quoted nowhere"
        );
    }
}

/// The check can fail: a stale quote is found, named with its file.
#[test]
fn a_stale_quote_is_found() {
    let found = quotes("frames: 63 GB <!-- fig:ava-frames --> and 2.53 h<!-- fig:x -->");
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].0, "ava-frames");
    assert!(words(&found[0].1).ends_with("63 GB"));
    assert!(!words(&found[0].1).ends_with("67.8 GB"));
    let wrapped = quotes("= 2.53\n# h <!-- fig:x -->");
    assert!(words(&wrapped[0].1).ends_with("2.53 h"));
    assert_eq!(found[1].0, "x");
}
