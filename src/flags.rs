//! Settings the library names by their pipeline-file keys, spelled as this command line's flags.

/// A library message that names settings by their keys (`num_frames 0 and sampling_rate 2: must
/// be ...`, the pipeline file's spelling) with the command line's flags instead
/// (`--num-frames 0 and --sampling-rate 2: ...`).
pub fn as_flags(message: &str) -> String {
    let (head, rest) = message.split_once(':').unwrap_or((message, ""));
    let mut words: Vec<String> = Vec::new();
    for (i, word) in head.split(' ').enumerate() {
        let names_a_key = i == 0 || words.last().is_some_and(|previous| previous == "and");
        words.push(if names_a_key {
            format!("--{}", word.replace('_', "-"))
        } else {
            word.to_string()
        });
    }
    let head = words.join(" ");
    if rest.is_empty() && !message.contains(':') {
        head
    } else {
        format!("{head}:{rest}")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_become_flags_and_values_stay() {
        assert_eq!(
            super::as_flags("num_frames 0 and sampling_rate 2: must be at least 1"),
            "--num-frames 0 and --sampling-rate 2: must be at least 1"
        );
        assert_eq!(
            super::as_flags("margin inf: must be finite"),
            "--margin inf: must be finite"
        );
    }
}
