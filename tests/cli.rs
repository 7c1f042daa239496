//! `explain` and `check-config`, end to end: the real binary, real files.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn bin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pod-director"));
    cmd.env_remove("POD_DIRECTOR_CONFIG");
    for (k, _) in std::env::vars() {
        if k.starts_with("POD_DIRECTOR__") {
            cmd.env_remove(k);
        }
    }
    cmd
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn explain_json(extra: &[&str]) -> (Output, Vec<Value>) {
    let config = examples().join("config.yaml");
    let manifests = examples().join("manifests");
    let mut args = vec![
        "explain",
        "-c",
        config.to_str().unwrap(),
        "-f",
        manifests.to_str().unwrap(),
        "-o",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    let reports: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (out, reports)
}

fn find<'a>(reports: &'a [Value], name: &str) -> &'a Value {
    reports
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no report for {name}"))
}

#[test]
fn explain_reports_every_pod_and_template_of_the_examples_as_json() {
    let (out, reports) = explain_json(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let decisions: Vec<(String, String, String)> = reports
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["kind"].as_str().unwrap().to_owned(),
                r["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expect = [
        ("report", "CronJob", "would_patch"),
        ("arm-build", "Pod", "would_patch"),
        ("frontend", "Pod", "skipped"),
        ("runner-1", "Pod", "patched"),
        ("runner-on-gpu", "Pod", "denied"),
        ("cache", "Deployment", "noop"),
        ("train-resnet", "Job", "would_patch"),
        ("notebook", "Pod", "skipped"),
        ("dcgm-exporter", "DaemonSet", "would_patch"),
    ];
    assert_eq!(decisions.len(), expect.len(), "{decisions:?}");
    for (name, kind, decision) in expect {
        assert!(
            decisions.contains(&(name.into(), kind.into(), decision.into())),
            "{name}: {decisions:?}"
        );
    }
    for r in &reports {
        for key in [
            "namespace",
            "name",
            "kind",
            "group",
            "mode",
            "decision",
            "patch",
            "conflicts",
            "violations",
            "reason",
            "requester_dependent",
        ] {
            assert!(r.get(key).is_some(), "report lacks {key}: {r}");
        }
        assert!(r["patch"].is_array());
    }
    let runner = find(&reports, "runner-1");
    assert_eq!(runner["group"], "ci");
    assert_eq!(runner["mode"], "enforce");
    assert_eq!(
        runner["patch"],
        serde_json::json!([
            {"op": "add", "path": "/spec/nodeSelector", "value": {"node-pool": "ci"}},
            {"op": "add", "path": "/spec/tolerations", "value": [{"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"}]}
        ])
    );
    let denied = find(&reports, "runner-on-gpu");
    assert_eq!(denied["conflicts"][0]["resolution"], "rejected");
    assert_eq!(denied["patch"], serde_json::json!([]));
    let agent = find(&reports, "dcgm-exporter");
    assert!(
        agent["patch"].as_array().is_some_and(|ops| ops
            .iter()
            .all(|op| op["path"].as_str().unwrap_or_default().starts_with("/spec/"))),
        "DaemonSet patches are relative to the pod, like every template's: {agent}"
    );
    assert_eq!(find(&reports, "arm-build")["conflicts"][0]["resolution"], "ignored");
}

#[test]
fn explain_decides_pods_as_a_user_would_create_them_and_names_the_skips_that_depend_on_the_requester() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "groups:\n  ci: {mode: enforce, nodeSelector: {pool: ci}}\n  agents: {mode: enforce, allowDaemonSets: true, nodeSelector: {pool: ci}}\n",
    )
    .unwrap();
    let manifests = dir.path().join("m.yaml");
    std::fs::write(
        &manifests,
        r#"apiVersion: v1
kind: Namespace
metadata: {name: agents, labels: {pod-director/group: agents}}
---
apiVersion: v1
kind: Namespace
metadata: {name: ci, labels: {pod-director/group: ci}}
---
apiVersion: v1
kind: Pod
metadata:
  name: forged
  namespace: agents
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: ds, uid: "1", controller: true}]
spec: {containers: [{name: a, image: b}]}
---
apiVersion: v1
kind: Pod
metadata: {name: static, namespace: ci, annotations: {kubernetes.io/config.mirror: abc}}
spec: {containers: [{name: a, image: b}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: agents}
spec:
  selector: {matchLabels: {app: a}}
  template: {metadata: {labels: {app: a}}, spec: {containers: [{name: a, image: b}]}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: tenant-agent, namespace: ci}
spec:
  selector: {matchLabels: {app: a}}
  template: {metadata: {labels: {app: a}}, spec: {containers: [{name: a, image: b}]}}
"#,
    )
    .unwrap();
    let out = run(&[
        "explain",
        "-c",
        config.to_str().unwrap(),
        "-f",
        manifests.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let reports: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let forged = find(&reports, "forged");
    assert_eq!(forged["decision"], "patched");
    assert!(
        forged["requester_dependent"]
            .as_str()
            .unwrap_or_default()
            .starts_with("daemonset_pod: skipped only when the DaemonSet controller (system:serviceaccount:kube-system:daemon-set-controller) creates it"),
        "{forged}"
    );
    let mirror = find(&reports, "static");
    assert_eq!(mirror["decision"], "patched");
    assert!(
        mirror["requester_dependent"]
            .as_str()
            .unwrap_or_default()
            .starts_with("mirror_pod: skipped only when its node creates it")
    );
    let agent = find(&reports, "agent");
    assert_eq!(
        (agent["decision"].as_str(), agent["reason"].as_str()),
        (Some("skipped"), Some("daemonset_allowed"))
    );
    assert!(
        agent["requester_dependent"]
            .as_str()
            .unwrap_or_default()
            .contains("its pods are skipped")
    );
    let tenant = find(&reports, "tenant-agent");
    assert_eq!(tenant["decision"], "patched");
    assert_eq!(tenant["requester_dependent"], Value::Null);

    let text = stdout(&run(&[
        "explain",
        "-c",
        config.to_str().unwrap(),
        "-f",
        manifests.to_str().unwrap(),
    ]));
    assert!(
        text.contains("  requester-dependent: mirror_pod: skipped only when its node creates it"),
        "{text}"
    );
}

#[test]
fn check_config_warns_about_the_deprecated_skip_daemon_set_pods() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "skipDaemonSetPods: true\ngroups: {ci: {}}\n").unwrap();
    let out = run(&["check-config", "-c", config.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("ok: "));
    assert!(
        stderr(&out).starts_with("warning: skipDaemonSetPods: deprecated; true no longer skips every DaemonSet pod"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn explain_text_output_is_a_table_with_the_patches() {
    let config = examples().join("config.yaml");
    let out = run(&[
        "explain",
        "-c",
        config.to_str().unwrap(),
        "-f",
        examples().join("manifests/ci.yaml").to_str().unwrap(),
        "-f",
        examples().join("manifests/namespaces.yaml").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("NAMESPACE   NAME"), "{text}");
    assert!(
        text.contains("ci-runners  runner-1       Pod         ci     enforce  patched"),
        "{text}"
    );
    assert!(
        text.contains(r#"patch: [{"op":"add","path":"/spec/nodeSelector""#),
        "{text}"
    );
}

#[test]
fn fail_on_deny_and_patch_set_the_exit_code() {
    let (out, _) = explain_json(&["--fail-on", "deny"]);
    assert_eq!(out.status.code(), Some(1));
    let config = examples().join("config.yaml");
    let ok_files = [
        examples().join("manifests/namespaces.yaml"),
        examples().join("manifests/batch.yaml"),
    ];
    let args = |fail: &str| {
        vec![
            "explain".to_owned(),
            "-c".into(),
            config.display().to_string(),
            "-f".into(),
            ok_files[0].display().to_string(),
            "-f".into(),
            ok_files[1].display().to_string(),
            "--fail-on".into(),
            fail.into(),
        ]
    };
    let deny = bin().args(args("deny")).output().unwrap();
    assert_eq!(deny.status.code(), Some(0), "{}", stderr(&deny));
    let patch = bin().args(args("patch")).output().unwrap();
    assert_eq!(patch.status.code(), Some(1));
}

#[test]
fn pods_of_namespaces_missing_from_the_input_are_reported_not_guessed() {
    let config = examples().join("config.yaml");
    let out = run(&[
        "explain",
        "-c",
        config.to_str().unwrap(),
        "-f",
        examples().join("manifests/ci.yaml").to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert!(out.status.success());
    let reports: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        reports
            .iter()
            .all(|r| r["decision"] == "unresolved" && r["group"].is_null()),
        "{reports:?}"
    );
    assert!(
        reports[0]["reason"]
            .as_str()
            .unwrap()
            .contains(r#"namespace "ci-runners" is not in the input"#)
    );

    let out = run(&[
        "explain",
        "-c",
        config.to_str().unwrap(),
        "-f",
        examples().join("manifests/ci.yaml").to_str().unwrap(),
        "-o",
        "json",
        "--group",
        "batch",
    ]);
    let reports: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(reports.iter().all(|r| r["group"] == "batch"), "{reports:?}");
}

#[test]
fn objects_without_a_namespace_use_the_namespace_flag() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("pod.yaml");
    std::fs::write(&f, "apiVersion: v1\nkind: Namespace\nmetadata: {name: build, labels: {pod-director/group: ci}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: b}]}\n").unwrap();
    let config = examples().join("config.yaml");
    let out = run(&[
        "explain",
        "-c",
        config.to_str().unwrap(),
        "-f",
        f.to_str().unwrap(),
        "-n",
        "build",
        "-o",
        "json",
    ]);
    let reports: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reports[0]["namespace"], "build");
    assert_eq!(reports[0]["decision"], "patched");
}

fn explain_stdin(input: &str) -> Output {
    let config = examples().join("config.yaml");
    let mut child = bin()
        .args(["explain", "-c", config.to_str().unwrap(), "-f", "-", "-o", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn bad_manifests_exit_2_naming_file_and_document() {
    let cases = [
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\nmetadata: {name: b}\n",
            "(stdin): document 2: missing kind",
        ),
        (
            "kind: Pod\nmetadata: {name: a\n",
            "(stdin): document 1: not valid YAML/JSON",
        ),
        (
            "--- \n# only a comment\n---\n[1, 2]\n",
            "(stdin): document 3: expected a Kubernetes object",
        ),
        (
            "kind: Pod\nmetadata: {name: a}\nspec: {containers: oops}\n",
            "(stdin): document 1: cannot read Pod a",
        ),
        (
            "kind: Deployment\nmetadata: {name: d}\nspec: {}\n",
            "(stdin): document 1: Deployment d has no pod template at .spec.template",
        ),
    ];
    for (input, expected) in cases {
        let out = explain_stdin(input);
        assert_eq!(out.status.code(), Some(2), "{input}");
        assert!(
            stdout(&out).is_empty(),
            "nothing may be printed as success: {}",
            stdout(&out)
        );
        assert!(
            stderr(&out).contains(expected),
            "expected {expected:?} in {}",
            stderr(&out)
        );
    }
}

#[test]
fn unreadable_files_and_unknown_groups_exit_2() {
    let config = examples().join("config.yaml");
    let out = run(&["explain", "-c", config.to_str().unwrap(), "-f", "/nonexistent/x.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot read /nonexistent/x.yaml"),
        "{}",
        stderr(&out)
    );
    let out = run(&[
        "explain",
        "-c",
        config.to_str().unwrap(),
        "-f",
        examples().join("manifests").to_str().unwrap(),
        "--group",
        "nope",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(r#"--group "nope" is not a group of the configuration (groups: batch, ci, gpu)"#),
        "{}",
        stderr(&out)
    );
}

#[test]
fn check_config_prints_ok_and_one_line_per_group() {
    let config = examples().join("config.yaml");
    let out = run(&["check-config", "-c", config.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("ok: ") && lines[0].contains("revision "), "{text}");
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines.contains(&"ci: mode=enforce onConflict=reject nodeSelector=node-pool=ci tolerations=1"),
        "{text}"
    );
}

#[test]
fn check_config_lists_every_error_and_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.yaml");
    std::fs::write(&f, "defaultMode: enforced\ngroups:\n  ci:\n    tolerations: [{key: dedicated, operator: Equals, value: ci}]\n    nodeSelectr: {a: b}\n").unwrap();
    let out = run(&["check-config", "-c", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert!(err.contains("(3 errors)"), "{err}");
    assert!(
        err.contains(r#"groups.ci.tolerations[0].operator: "Equals" is not one of Equal, Exists"#),
        "{err}"
    );
    assert!(
        err.contains(r#"defaultMode: "enforced" is not one of dryRun, warn, enforce"#),
        "{err}"
    );
    assert!(err.contains("groups.ci.nodeSelectr: unknown key"), "{err}");
}

#[test]
fn check_config_reads_the_path_from_the_environment_and_applies_overrides() {
    let config = examples().join("config.yaml");
    let out = bin()
        .arg("check-config")
        .env("POD_DIRECTOR_CONFIG", &config)
        .env("POD_DIRECTOR__GROUPS__BATCH__MODE", "enforce")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("override: groups.batch.mode from POD_DIRECTOR__GROUPS__BATCH__MODE"),
        "{text}"
    );
    assert!(text.contains("batch: mode=enforce"), "{text}");

    let out = bin()
        .arg("check-config")
        .env("POD_DIRECTOR__GROUPS__NOPE__MODE", "enforce")
        .env("POD_DIRECTOR_CONFIG", &config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("environment variable POD_DIRECTOR__GROUPS__NOPE__MODE"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn missing_config_file_is_a_clear_error() {
    let out = run(&["check-config", "-c", "/nonexistent/config.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot read config file /nonexistent/config.yaml"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn version_prints_the_crate_version() {
    let out = run(&["version"]);
    assert_eq!(
        stdout(&out).trim(),
        format!("pod-director {}", env!("CARGO_PKG_VERSION"))
    );
}
