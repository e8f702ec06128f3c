//! `--set KEY=VALUE`: one parser for every command that takes overrides (pipeline files, training
//! settings).

/// An assignment that is not `KEY=VALUE` with a non-empty dotted key, or whose key runs into a
/// value that is not a table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--set {0}: expected KEY=VALUE, e.g. extract.fps=10")]
pub struct OverrideError(pub String);

/// Applies `a.b=value` to `document`, as if the file said it: the value is read as TOML (`10`,
/// `true`, `"x"`, `[1, 2]`), or else as a bare string; a dotted key reaches into nested tables
/// (`schedule.kind=step`), creating them where missing.
pub fn apply_override(document: &mut toml::Table, assignment: &str) -> Result<(), OverrideError> {
    let bad = || OverrideError(assignment.to_string());
    let (key, raw_value) = assignment.split_once('=').ok_or_else(bad)?;
    let keys: Vec<&str> = key.trim().split('.').map(str::trim).collect();
    if keys.iter().any(|part| part.is_empty()) {
        return Err(bad());
    }
    let value = format!("value = {raw_value}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut table| table.remove("value"))
        .unwrap_or_else(|| toml::Value::String(raw_value.to_string()));
    let (last, parents) = keys.split_last().expect("at least one key");
    let mut table = document;
    for part in parents {
        let entry = table
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = entry.as_table_mut().ok_or_else(bad)?;
    }
    table.insert(last.to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_toml_or_bare_strings_and_dotted_keys_nest() {
        let mut document: toml::Table = "epochs = 3\n[schedule]\nkind = \"cosine\"\n"
            .parse()
            .unwrap();
        for assignment in [
            "epochs=10",
            "schedule.kind=step",
            "device=\"cuda:0\"",
            "a.b.c=[1, 2]",
        ] {
            apply_override(&mut document, assignment).unwrap();
        }
        assert_eq!(document["epochs"].as_integer(), Some(10));
        assert_eq!(document["schedule"]["kind"].as_str(), Some("step"));
        assert_eq!(document["device"].as_str(), Some("cuda:0"));
        assert_eq!(document["a"]["b"]["c"].as_array().map(Vec::len), Some(2));
        for bad in ["nonsense", "=3", "a..b=1", "epochs.x=1"] {
            assert_eq!(
                apply_override(&mut document, bad),
                Err(OverrideError(bad.to_string())),
                "{bad}"
            );
        }
    }
}
