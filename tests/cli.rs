//! `explain` and `check-config`, end to end: the real binary, real files.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use pod_director_testkit::assert_contains;
use serde_json::Value;

use pod_director_testkit::cli::*;

#[test]
fn explain_reports_every_pod_and_template_of_the_examples_as_json() {
    let out = explain_examples(&["manifests"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let reports = reports(&out);
    let decisions: Vec<(&str, &str, &str)> = reports
        .iter()
        .map(|r| (field(r, "name"), field(r, "kind"), field(r, "decision")))
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
    for report in expect {
        assert!(decisions.contains(&report), "{}: {decisions:?}", report.0);
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
        agent["patch"]
            .as_array()
            .is_some_and(|ops| ops.iter().all(|op| field(op, "path").starts_with("/spec/"))),
        "DaemonSet patches are relative to the pod, like every template's: {agent}"
    );
    assert_eq!(find(&reports, "arm-build")["conflicts"][0]["resolution"], "ignored");
}

#[test]
fn explain_decides_pods_as_a_user_would_create_them_and_names_the_skips_that_depend_on_the_requester() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "config.yaml",
        "groups:\n  ci: {mode: enforce, nodeSelector: {pool: ci}}\n  agents: {mode: enforce, allowDaemonSets: true, nodeSelector: {pool: ci}}\n",
    );
    let manifests = write(
        dir.path(),
        "m.yaml",
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
    );
    let out = explain(&config, &[&manifests], &["-o", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let reports = reports(&out);
    let forged = find(&reports, "forged");
    assert_eq!(forged["decision"], "patched");
    assert!(
        field(forged, "requester_dependent").starts_with("daemonset_pod: skipped only when the DaemonSet controller (system:serviceaccount:kube-system:daemon-set-controller) creates it"),
        "{forged}"
    );
    let mirror = find(&reports, "static");
    assert_eq!(mirror["decision"], "patched");
    assert!(field(mirror, "requester_dependent").starts_with("mirror_pod: skipped only when its node creates it"));
    let agent = find(&reports, "agent");
    assert_eq!(
        (field(agent, "decision"), field(agent, "reason")),
        ("skipped", "daemonset_allowed")
    );
    assert_contains(field(agent, "requester_dependent"), "its pods are skipped");
    let tenant = find(&reports, "tenant-agent");
    assert_eq!(tenant["decision"], "patched");
    assert_eq!(tenant["requester_dependent"], Value::Null);

    let text = stdout(&explain(&config, &[&manifests], &[]));
    assert_contains(
        &text,
        "  requester-dependent: mirror_pod: skipped only when its node creates it",
    );
}

#[test]
fn explain_text_output_is_a_table_with_the_patches() {
    let ci = example("manifests/ci.yaml");
    let namespaces = example("manifests/namespaces.yaml");
    let out = explain(&example("config.yaml"), &[&ci, &namespaces], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("NAMESPACE   NAME"), "{text}");
    assert_contains(&text, "ci-runners  runner-1       Pod         ci     enforce  patched");
    assert_contains(&text, r#"patch: [{"op":"add","path":"/spec/nodeSelector""#);
}

#[test]
fn fail_on_deny_and_patch_set_the_exit_code() {
    for (files, fail_on, code) in [
        (&["manifests"][..], "deny", 1),
        (&["manifests/namespaces.yaml", "manifests/batch.yaml"], "deny", 0),
        (&["manifests/namespaces.yaml", "manifests/batch.yaml"], "patch", 1),
    ] {
        let out = explain_examples(files, &["--fail-on", fail_on]);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{files:?} --fail-on {fail_on}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn pods_of_namespaces_missing_from_the_input_are_reported_not_guessed() {
    let out = explain_examples(&["manifests/ci.yaml"], &[]);
    assert!(out.status.success());
    let unresolved = reports(&out);
    assert!(
        unresolved
            .iter()
            .all(|r| r["decision"] == "unresolved" && r["group"].is_null()),
        "{unresolved:?}"
    );
    assert_contains(
        field(&unresolved[0], "reason"),
        r#"namespace "ci-runners" is not in the input"#,
    );

    let batch = reports(&explain_examples(&["manifests/ci.yaml"], &["--group", "batch"]));
    assert!(
        !batch.is_empty() && batch.iter().all(|r| r["group"] == "batch"),
        "{batch:?}"
    );
}

#[test]
fn objects_without_a_namespace_use_the_namespace_flag() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "pod.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: build, labels: {pod-director/group: ci}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: b}]}\n",
    );
    let reports = reports(&explain(&example("config.yaml"), &[&f], &["-n", "build", "-o", "json"]));
    assert_eq!(reports[0]["namespace"], "build");
    assert_eq!(reports[0]["decision"], "patched");
}

fn explain_stdin(input: &str) -> Output {
    let mut child = bin()
        .arg("explain")
        .arg("-c")
        .arg(example("config.yaml"))
        .args(["-f", "-", "-o", "json"])
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
    let missing = explain(&example("config.yaml"), &[Path::new("/nonexistent/x.yaml")], &[]);
    let unknown = explain(&example("config.yaml"), &[&example("manifests")], &["--group", "nope"]);
    for (out, expected) in [
        (missing, "cannot read /nonexistent/x.yaml"),
        (
            unknown,
            r#"--group "nope" is not a group of the configuration (groups: batch, ci, gpu)"#,
        ),
    ] {
        assert_eq!(out.status.code(), Some(2), "{expected}");
        assert_contains(&stderr(&out), expected);
    }
}

#[test]
fn check_config_prints_ok_and_one_line_per_group() {
    let out = check_config(&example("config.yaml"));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("ok: ") && lines[0].contains("revision "), "{text}");
    assert_eq!(lines.len(), 7, "{text}");
    assert!(
        lines.contains(&"ci: mode=enforce onConflict=reject nodeSelector=node-pool=ci tolerations=1"),
        "{text}"
    );
    // And whether each group compiles to admission policies, or why not.
    assert!(
        lines.contains(&"policy ci: compiles to admission policies (enforceWith: policy or webhookAndPolicy)"),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("policy gpu: webhook only: affinity:")),
        "{text}"
    );
}

#[test]
fn check_config_lists_every_error_and_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let out = check_config(&write(
        dir.path(),
        "bad.yaml",
        "defaultMode: enforced\ngroups:\n  ci:\n    tolerations: [{key: dedicated, operator: Equals, value: ci}]\n    nodeSelectr: {a: b}\n",
    ));
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    for expected in [
        "(3 errors)",
        r#"groups.ci.tolerations[0].operator: "Equals" is not one of Equal, Exists"#,
        r#"defaultMode: "enforced" is not one of dryRun, warn, enforce"#,
        "groups.ci.nodeSelectr: unknown key",
    ] {
        assert!(err.contains(expected), "{expected}: {err}");
    }
}

#[test]
fn check_config_reads_the_path_from_the_environment_and_applies_overrides() {
    let with_env = |name: &str| {
        bin()
            .arg("check-config")
            .env("POD_DIRECTOR_CONFIG", example("config.yaml"))
            .env(name, "enforce")
            .output()
            .unwrap()
    };
    let out = with_env("POD_DIRECTOR__GROUPS__BATCH__MODE");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_contains(
        &text,
        "override: groups.batch.mode from POD_DIRECTOR__GROUPS__BATCH__MODE",
    );
    assert_contains(&text, "batch: mode=enforce");

    let out = with_env("POD_DIRECTOR__GROUPS__NOPE__MODE");
    assert_eq!(out.status.code(), Some(1));
    assert_contains(&stderr(&out), "environment variable POD_DIRECTOR__GROUPS__NOPE__MODE");
}

#[test]
fn missing_config_file_is_a_clear_error() {
    let out = check_config(Path::new("/nonexistent/config.yaml"));
    assert_eq!(out.status.code(), Some(1));
    assert_contains(&stderr(&out), "cannot read config file /nonexistent/config.yaml");
}

#[test]
fn version_prints_the_crate_version() {
    let out = run(&["version"]);
    assert_eq!(
        stdout(&out).trim(),
        format!("pod-director {}", env!("CARGO_PKG_VERSION"))
    );
}

/// The `console` blocks of `page` (a path in the repository) whose first line runs `pod-director
/// SUBCOMMAND`, run in examples/: (the arguments after the subcommand, the output lines).
fn console_examples(page: &str, subcommand: &str) -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(pod_director_testkit::repo().join(page)).unwrap();
    let prompt = format!("$ pod-director {subcommand}");
    let mut examples = Vec::new();
    let mut block: Option<Vec<String>> = None;
    for line in text.lines() {
        match &mut block {
            None if line.trim() == "```console" => block = Some(Vec::new()),
            None => {}
            Some(lines) if line.trim() == "```" => {
                if let Some(args) = lines.first().and_then(|l| l.strip_prefix(&prompt)) {
                    examples.push((args.trim().to_owned(), lines[1..].to_vec()));
                }
                block = None;
            }
            Some(lines) => lines.push(line.to_owned()),
        }
    }
    examples
}

/// Runs each `console` example of `page` for `subcommand` in examples/ and compares what the binary prints
/// (standard output, then standard error) line by line, and its exit code: 1 when the output starts with
/// `error:`, else 0.
fn assert_console_examples_are_what_the_binary_prints(page: &str, subcommand: &str, at_least: usize) {
    let documented = console_examples(page, subcommand);
    assert!(
        documented.len() >= at_least,
        "{page} shows `pod-director {subcommand}` on the examples {at_least} times or more: {documented:?}"
    );
    for (args, expected) in documented {
        let out = bin()
            .arg(subcommand)
            .args(args.split_whitespace())
            .current_dir(example(""))
            .output()
            .expect("binary runs");
        let printed = format!("{}{}", stdout(&out), stderr(&out));
        assert_eq!(
            printed.lines().collect::<Vec<_>>(),
            expected,
            "{page} example `pod-director {subcommand} {args}` (run in examples/)"
        );
        let failed = expected.first().is_some_and(|l| l.starts_with("error:"));
        assert_eq!(out.status.code(), Some(if failed { 1 } else { 0 }), "{page}: {args}");
    }
}

#[test]
fn every_check_config_example_in_the_docs_is_what_the_binary_prints() {
    // examples/bad.yaml and examples/empty.yaml
    assert_console_examples_are_what_the_binary_prints("docs/src/configuration.md", "check-config", 2);
}

#[test]
fn the_admission_policy_lines_of_check_config_in_the_docs_are_what_the_binary_prints() {
    // examples/policies.yaml: a group on policies, one waiting for enforce, one that could be, one that cannot.
    assert_console_examples_are_what_the_binary_prints("docs/src/admission-policies.md", "check-config", 1);
}

#[test]
fn the_alternatives_examples_in_the_docs_are_what_the_binary_prints() {
    // examples/alternatives/: config.yaml and data-team.yaml
    assert_console_examples_are_what_the_binary_prints("docs/src/alternatives.md", "check-config", 1);
    assert_console_examples_are_what_the_binary_prints("docs/src/alternatives.md", "explain", 1);
}

#[test]
fn the_in_tree_examples_in_the_docs_are_what_the_binary_prints() {
    assert_console_examples_are_what_the_binary_prints("docs/src/in-tree-plugins.md", "migrate-in-tree", 1);
    assert_console_examples_are_what_the_binary_prints("docs/src/in-tree-plugins.md", "explain", 2);
}

#[test]
fn the_readme_explain_example_is_what_the_binary_prints() {
    assert_console_examples_are_what_the_binary_prints("README.md", "explain", 1);
}

#[test]
fn check_config_refuses_files_that_mean_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("empty.yaml", ""),
        ("comments.yaml", "# groups:\n#   ci: {}\n"),
        ("null.yaml", "null\n"),
        ("marker.yaml", "---\n"),
    ] {
        let f = write(dir.path(), name, text);
        let out = check_config(&f);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stdout(&out));
        assert!(stdout(&out).is_empty(), "{name}: nothing printed as success");
        assert!(
            stderr(&out).starts_with(&format!("error: config {} is empty (", f.display())),
            "{name}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn check_config_accepts_groups_written_empty_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let out = check_config(&write(dir.path(), "none.yaml", "groups: {}\n"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("ok: "), "{}", stdout(&out));
    assert_eq!(
        stderr(&out),
        "warning: groups is empty: no group is defined, so pod-director places no pod and every pod is admitted untouched\n"
    );
}

#[test]
fn check_config_prints_the_json_schema_of_the_file_with_every_top_level_key() {
    let out = run(&["check-config", "--print-schema"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let schema: Value = serde_json::from_slice(&out.stdout).expect("the schema is JSON");
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    assert_eq!(schema["additionalProperties"], false);
    let keys: Vec<&str> = schema["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .map(String::as_str)
        .collect();
    for key in [
        "namespaceLabel",
        "defaultMode",
        "namespaceGuard",
        "groups",
        "onNoFeasibleNode",
    ] {
        assert!(keys.contains(&key), "{key} missing from {keys:?}");
    }
    assert_eq!(
        schema["definitions"]["mode"]["enum"],
        serde_json::json!(["dryRun", "warn", "enforce"])
    );
}

#[test]
fn the_chart_values_schema_embeds_the_schema_the_binary_prints() {
    let root = pod_director_testkit::repo();
    let out = Command::new("python3")
        .arg(root.join("scripts/config-schema.py"))
        .args(["--check", "--bin", env!("CARGO_BIN_EXE_pod-director")])
        .output()
        .expect("python3 runs scripts/config-schema.py");
    assert!(
        out.status.success(),
        "chart/values.schema.json has drifted from the config types; run scripts/config-schema.py:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
}

#[test]
fn explain_renders_an_empty_term_as_the_api_server_stores_and_sends_it() {
    // Checked on a real kube-apiserver: a pod created with `matchExpressions: []` is stored,
    // and sent to the webhook, as `{}` (Go's omitempty); the webhook's patch then carries `{}`.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "groups:\n  ci:\n    affinity:\n      nodeAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n            - matchExpressions: [{key: zone, operator: In, values: [a]}]\n").unwrap();
    let manifest = dir.path().join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: t, labels: {pod-director/group: ci}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: t}\nspec:\n  containers: [{name: c, image: x}]\n  \
         affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n          \
         - matchExpressions: []\n          - matchExpressions: [{key: disk, operator: In, values: [ssd]}]\n",
    )
    .unwrap();
    let reports = reports(&explain(&config, &[&manifest], &["-o", "json"]));
    let terms = &reports[0]["patch"][0]["value"];
    assert_eq!(terms[0], serde_json::json!({}), "{}", reports[0]);
    assert_eq!(terms[1]["matchExpressions"].as_array().map(Vec::len), Some(2));
}

#[test]
fn explain_decides_pods_and_templates_of_every_namespace_against_every_reservation() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = write(
        dir.path(),
        "config.yaml",
        "groups:\n  gpu:\n    mode: dryRun\n    nodeSelector: {node-pool: gpu}\n    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n    reserve: {mode: enforce}\n",
    );
    let manifests = write(
        dir.path(),
        "manifests.yaml",
        r#"
apiVersion: v1
kind: Namespace
metadata: {name: batch}
---
apiVersion: v1
kind: Namespace
metadata: {name: ml, labels: {pod-director/group: gpu}}
---
apiVersion: v1
kind: Pod
metadata: {name: wildcard, namespace: batch}
spec:
  containers: [{name: app, image: app}]
  tolerations: [{operator: Exists}]
---
apiVersion: v1
kind: Pod
metadata: {name: own, namespace: ml}
spec:
  containers: [{name: app, image: app}]
  tolerations: [{operator: Exists}]
---
apiVersion: v1
kind: Pod
metadata: {name: on-gpu-node, namespace: batch}
spec:
  containers: [{name: app, image: app}]
  nodeName: gpu-1
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: batch}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: agent}]
      tolerations: [{key: nvidia.com/gpu, operator: Exists}]
"#,
    );
    let nodes = write(
        dir.path(),
        "nodes.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: gpu-1, labels: {node-pool: gpu}}\nspec:\n  taints: [{key: nvidia.com/gpu, effect: NoSchedule}]\n",
    );
    let out = explain(
        &config,
        &[&manifests],
        &["-o", "json", "--nodes", nodes.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let reports = reports(&out);
    let wildcard = find(&reports, "wildcard");
    assert_eq!(
        (wildcard["decision"].as_str(), wildcard["group"].as_str()),
        (Some("denied"), Some("gpu")),
        "{wildcard}"
    );
    assert_contains(field(wildcard, "reason"), "reserves taint nvidia.com/gpu:NoSchedule");
    assert_contains(&wildcard["reservation"].to_string(), "1 of the pool's 1 nodes");
    let own = find(&reports, "own");
    assert!(
        own["reservation"].is_null(),
        "the group's own pods are no intruders: {own}"
    );
    assert_eq!(find(&reports, "on-gpu-node")["decision"], "denied");
    let agent = find(&reports, "agent");
    assert_eq!(agent["decision"], "denied", "{agent}");
    assert_contains(field(agent, "requester_dependent"), "DaemonSet controller");
    let text = stdout(&explain(&config, &[&manifests], &["--nodes", nodes.to_str().unwrap()]));
    assert_contains(
        &text,
        "  reservation: group \"gpu\" reserves taint nvidia.com/gpu:NoSchedule",
    );
}

/// Runs `args` with standard output a pipe whose reader reads `keep` bytes (none: closed before the start) and then
/// closes it, as `| head -c KEEP` would.
fn run_into_closed_pipe(args: &[&std::ffi::OsStr], keep: usize) -> Output {
    use std::io::Read;
    let (mut reader, writer) = std::io::pipe().expect("a pipe");
    let mut cmd = bin();
    cmd.args(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    if keep == 0 {
        drop(reader);
        return cmd.output().expect("binary runs");
    }
    let child = cmd.spawn().expect("binary runs");
    // The command's `cmd` holds the other end of the pipe: without dropping it the reader would never see the end.
    drop(cmd);
    let mut head = vec![0; keep];
    reader.read_exact(&mut head).expect("the first bytes");
    drop(reader);
    child.wait_with_output().expect("binary ends")
}

#[test]
fn no_command_panics_when_its_reader_closes_standard_output_and_each_keeps_its_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    // Far more output than a pipe buffers (64 KiB on Linux), so the writer is still writing when the reader goes.
    let mut manifests = vec![
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ci-runners, labels: {pod-director/group: ci}}\n".to_owned(),
    ];
    manifests.extend((0..2_000).map(|i| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: pod-{i}, namespace: ci-runners}}\nspec:\n  nodeSelector: {{node-pool: gpu-a100}}\n  containers: [{{name: app, image: nginx}}]\n"
        )
    }));
    let many = write(dir.path(), "many.yaml", &manifests.join("---\n"));
    let groups: String = (0..1_500)
        .map(|i| format!("  team-{i}:\n    mode: enforce\n    nodeSelector: {{pool: team-{i}}}\n"))
        .collect();
    let big_config = write(dir.path(), "groups.yaml", &format!("groups:\n{groups}"));
    let config = example("config.yaml");
    let os = |s: &str| std::ffi::OsString::from(s);
    let explain_many = |extra: &[&str]| {
        let mut args = vec![
            os("explain"),
            os("-c"),
            config.clone().into(),
            os("-f"),
            many.clone().into(),
        ];
        args.extend(extra.iter().map(|s| os(s)));
        args
    };
    let cases: Vec<(Vec<std::ffi::OsString>, i32)> = vec![
        (explain_many(&[]), 0),
        (explain_many(&["-o", "json"]), 0),
        (explain_many(&["-o", "yaml"]), 0),
        // The verdict was decided before the output: a closed pipe does not hide it.
        (explain_many(&["--fail-on", "deny"]), 1),
        (
            vec![
                os("explain"),
                os("--policies"),
                os("-c"),
                example("config.yaml").into(),
                os("--group"),
                os("ci"),
            ],
            0,
        ),
        (vec![os("check-config"), os("-c"), big_config.into()], 0),
        (vec![os("check-config"), os("--print-schema")], 0),
        (vec![os("version")], 0),
    ];
    for (args, code) in &cases {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsString::as_os_str).collect();
        for keep in [0, 1] {
            // `keep: 1` needs output past the pipe buffer to be still writing; the short outputs end first.
            let out = run_into_closed_pipe(&args, keep);
            assert!(
                !stderr(&out).contains("panicked"),
                "{args:?} (keep {keep}) panicked: {}",
                stderr(&out)
            );
            assert_eq!(
                out.status.code(),
                Some(*code),
                "{args:?} (keep {keep}): {}",
                stderr(&out)
            );
            assert!(
                !stderr(&out).contains("error"),
                "a closed pipe is not an error: {args:?} (keep {keep}): {}",
                stderr(&out)
            );
        }
    }
}

#[test]
fn explain_policies_excludes_pod_director_s_namespace_named_as_serve_takes_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "config.yaml",
        "groups:\n  ci:\n    mode: enforce\n    enforceWith: policy\n    nodeSelector: {pool: ci}\n",
    );
    let excluded = |out: &Output| -> Vec<Vec<Value>> {
        assert!(out.status.success(), "{}", stderr(out));
        let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        printed["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("Binding")))
            .map(|o| {
                let expressions = &o["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"];
                let not_in = expressions
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|r| r["operator"] == "NotIn");
                not_in.and_then(|r| r["values"].as_array().cloned()).unwrap_or_default()
            })
            .collect()
    };
    let policies = |extra: &[&str], env: Option<&str>| {
        let mut cmd = bin();
        if let Some(namespace) = env {
            cmd.env("POD_NAMESPACE", namespace);
        }
        cmd.args(["explain", "--policies", "-o", "json", "-c"])
            .arg(&config)
            .args(extra)
            .output()
            .expect("binary runs")
    };
    let by_flag = excluded(&policies(&["--pod-director-namespace", "pd-system"], None));
    let by_env = excluded(&policies(&[], Some("pd-system")));
    let without = excluded(&policies(&[], None));
    assert_eq!(by_flag.len(), 2, "both bindings: {by_flag:?}");
    for values in by_flag.iter().chain(&by_env) {
        assert!(values.iter().any(|v| v == "pd-system"), "{values:?}");
    }
    for values in &without {
        assert!(!values.iter().any(|v| v == "pd-system"), "{values:?}");
    }
}
