//! The trainer executable as users and `avaprep train` run it: usage errors are exit 2 before any
//! work, naming what is wrong. (Being an integration test, it also makes `cargo test` build the
//! executable that the data tool's pipeline tests run.)

use std::process::Command;

fn trainer(data_dir: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_avaprep-train"));
    command.arg("--data-dir").arg(data_dir);
    command
}

#[test]
fn bad_settings_and_presets_are_usage_errors_before_any_file_is_written() {
    let data = tempfile::tempdir().unwrap();
    for (args, named) in [
        (&["train", "--set", "epochz=3"][..], "epochz"),
        (&["train", "--set", "epochs=-3"][..], "epochs"),
        (
            &["train", "--preset", "synthetic-tinyy"][..],
            "synthetic-tinyy",
        ),
    ] {
        let output = trainer(data.path()).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read_dir(data.path()).unwrap().count(), 0);
}
