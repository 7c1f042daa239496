use std::path::Path;

use super::*;
use crate::testing::{assert_contains, toleration};

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write");
}

fn errors(result: Result<PluginFiles, Vec<FileError>>) -> Vec<String> {
    match result {
        Ok(files) => panic!("expected errors, read {files:?}"),
        Err(errors) => errors
            .into_iter()
            .map(|(key, message)| format!("{key}: {message}"))
            .collect(),
    }
}

const PNS: &str = "podNodeSelectorPluginConfig:\n  clusterDefaultNodeSelector: pool=shared\n  team: pool=team,zone=a\n";
const PTR: &str = "apiVersion: podtolerationrestriction.admission.k8s.io/v1alpha1\nkind: Configuration\ndefault:\n  - {key: cluster, operator: Exists, effect: NoSchedule}\nwhitelist:\n  - {operator: Exists, effect: NoSchedule}\n";

fn expected() -> PluginFiles {
    PluginFiles {
        cluster_default_node_selector: [("pool".to_owned(), "shared".to_owned())].into(),
        node_selector_whitelists: [(
            "team".to_owned(),
            [
                ("pool".to_owned(), "team".to_owned()),
                ("zone".to_owned(), "a".to_owned()),
            ]
            .into(),
        )]
        .into(),
        default_tolerations: vec![toleration("cluster", "Exists", "", "NoSchedule", None)],
        tolerations_whitelist: vec![toleration("", "Exists", "", "NoSchedule", None)],
    }
}

#[test]
fn each_plugin_s_own_file_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pns.yaml", PNS);
    write(dir.path(), "ptr.yaml", PTR);
    let files = read([None, Some("pns.yaml"), Some("ptr.yaml")], dir.path()).expect("read");
    assert_eq!(files, expected());
    assert_eq!(
        read([None, None, None], dir.path()).expect("nothing"),
        PluginFiles::default()
    );
}

#[test]
fn an_admission_configuration_s_entries_are_read_by_path_and_inline() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
    write(&dir.path().join("sub"), "pns.yaml", PNS);
    let inline: String = PTR.lines().map(|l| format!("      {l}\n")).collect();
    write(
        dir.path(),
        "admission.yaml",
        &format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n  - name: EventRateLimit\n    path: missing.yaml\n  - name: PodNodeSelector\n    path: sub/pns.yaml\n  - name: PodTolerationRestriction\n    configuration:\n{inline}"
        ),
    );
    assert_eq!(
        read([Some("admission.yaml"), None, None], dir.path()).expect("read"),
        expected()
    );
    // What a reload watches: the admission configuration and its two plugins' files, not the
    // other plugins' (EventRateLimit's missing.yaml).
    assert_eq!(
        paths(
            &serde_json::json!({"mode": "enforce", "admissionConfigFile": "admission.yaml"}),
            dir.path()
        ),
        ["admission.yaml", "sub/pns.yaml"].map(|name| dir.path().join(name))
    );
}

#[test]
fn a_legacy_pod_node_selector_file_is_an_admission_configuration_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "admission.yaml", PNS);
    let files = read([Some("admission.yaml"), None, None], dir.path()).expect("read");
    assert_eq!(
        files.cluster_default_node_selector,
        expected().cluster_default_node_selector
    );
}

#[test]
fn a_plugin_configured_twice_is_refused_naming_what_to_drop() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pns.yaml", PNS);
    write(
        dir.path(),
        "admission.yaml",
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n  - name: PodNodeSelector\n    path: pns.yaml\n",
    );
    let errs = errors(read([Some("admission.yaml"), Some("pns.yaml"), None], dir.path()));
    assert_eq!(
        errs,
        [
            "inTreePlugins.podNodeSelectorConfigFile: the admissionConfigFile configures PodNodeSelector too: drop \
          podNodeSelectorConfigFile or the PodNodeSelector entry of the admission configuration"
        ]
    );
}

#[test]
fn bad_files_are_refused_with_their_key_and_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "bad-selector.yaml",
        "podNodeSelectorPluginConfig:\n  team: pool\n",
    );
    write(
        dir.path(),
        "bad-ptr.yaml",
        &PTR.replace(
            "operator: Exists, effect: NoSchedule}\nwhitelist",
            "operator: Exists, value: x}\nwhitelist",
        ),
    );
    write(dir.path(), "kind.yaml", "apiVersion: v1\nkind: Configuration\n");
    let errs = errors(read(
        [None, Some("bad-selector.yaml"), Some("bad-ptr.yaml")],
        dir.path(),
    ));
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_contains(&errs[0], "inTreePlugins.podNodeSelectorConfigFile: ");
    assert_contains(&errs[0], "podNodeSelectorPluginConfig.team: invalid selector");
    assert_contains(&errs[1], "default[0]: value must be empty when `operator` is 'Exists'");
    assert_contains(
        &errors(read([None, None, Some("kind.yaml")], dir.path()))[0],
        "not apiVersion podtolerationrestriction",
    );
    assert_contains(
        &errors(read([None, None, Some("absent.yaml")], dir.path()))[0],
        "cannot read",
    );
    write(
        dir.path(),
        "strict.yaml",
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugin: []\n",
    );
    assert_contains(
        &errors(read([Some("strict.yaml"), None, None], dir.path()))[0],
        "unknown field \"plugin\"",
    );
}
