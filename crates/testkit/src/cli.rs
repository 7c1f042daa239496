//! The binary end to end: a command with this checkout's environment removed, and readers of
//! what it printed (`tests/cli.rs`, `tests/cli_nodes.rs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub fn bin() -> Command {
    let mut cmd = Command::new(crate::binary());
    cmd.env_remove("POD_DIRECTOR_CONFIG").env_remove("POD_NAMESPACE");
    for (k, _) in std::env::vars() {
        if k.starts_with("POD_DIRECTOR__") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// `path` below `examples/`.
pub fn example(path: &str) -> PathBuf {
    crate::repo().join("examples").join(path)
}

pub fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("binary runs")
}

/// `explain -c CONFIG`, `-f` for each of `files`, then `extra`.
pub fn explain(config: &Path, files: &[&Path], extra: &[&str]) -> Output {
    let mut cmd = bin();
    cmd.arg("explain").arg("-c").arg(config);
    for file in files {
        cmd.arg("-f").arg(file);
    }
    cmd.args(extra).output().expect("binary runs")
}

/// `explain -o json` on the examples' config and `files`, then `extra`.
pub fn explain_examples(files: &[&str], extra: &[&str]) -> Output {
    let files: Vec<PathBuf> = files.iter().map(|f| example(f)).collect();
    let files: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    explain(&example("config.yaml"), &files, &[&["-o", "json"], extra].concat())
}

pub fn check_config(config: &Path) -> Output {
    bin()
        .arg("check-config")
        .arg("-c")
        .arg(config)
        .output()
        .expect("binary runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The JSON reports `explain -o json` printed.
pub fn reports(out: &Output) -> Vec<Value> {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stderr(out)))
}

pub fn find<'a>(reports: &'a [Value], name: &str) -> &'a Value {
    reports
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no report for {name}"))
}

/// A report's string field (empty when absent).
pub fn field<'a>(report: &'a Value, key: &str) -> &'a str {
    report[key].as_str().unwrap_or_default()
}

/// Writes `text` to `dir/name`.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a test file");
    path
}
