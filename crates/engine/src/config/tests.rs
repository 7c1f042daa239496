use super::*;
use crate::testing::assert_contains;

fn load(yaml: &str) -> Result<Loaded, ConfigError> {
    Config::from_yaml(yaml, "test.yaml", Vec::new())
}

fn errors(yaml: &str) -> Vec<String> {
    match load(yaml) {
        Ok(_) => panic!("expected errors for:\n{yaml}"),
        Err(e) => {
            let errs: Vec<String> = crate::testing::field_errors(&e)
                .iter()
                .map(ToString::to_string)
                .collect();
            assert!(!errs.is_empty(), "expected field errors, got {e}");
            errs
        }
    }
}

const FULL: &str = r#"
namespaceLabel: pod-director/group
defaultGroup: null
excludedNamespaces: [kube-system, kube-public, kube-node-lease]
unknownGroup: allow
defaultMode: dryRun
groups:
  ci:
    mode: enforce
    onConflict: reject
    allowPodExclusion: false
    nodeSelector: {node-pool: ci}
    tolerations:
      - {key: dedicated, operator: Equal, value: ci, effect: NoSchedule}
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
            - matchExpressions:
                - {key: kubernetes.io/arch, operator: In, values: [amd64, arm64]}
        preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 10
            preference:
              matchExpressions: [{key: zone, operator: In, values: [a]}]
      podAntiAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 50
            podAffinityTerm:
              topologyKey: kubernetes.io/hostname
              labelSelector: {matchLabels: {app: build}}
  gpu:
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
"#;

#[test]
fn design_example_config_loads_with_its_values() {
    let loaded = load(FULL).unwrap();
    let c = &loaded.config;
    assert_eq!(c.namespace_label, "pod-director/group");
    assert_eq!(c.default_group, None);
    let ci = &c.groups["ci"];
    assert_eq!(c.mode_of(ci), Mode::Enforce);
    assert_eq!(c.mode_of(&c.groups["gpu"]), Mode::DryRun);
    assert_eq!(ci.node_selector["node-pool"], "ci");
    assert_eq!(ci.tolerations[0].operator.as_deref(), Some("Equal"));
    assert!(ci.affinity.as_ref().unwrap().pod_anti_affinity.is_some());
    assert_eq!(loaded.revision.len(), 12);
}

#[test]
fn a_document_that_means_nothing_is_refused() {
    for (text, what) in [
        ("", "no content"),
        ("   \n\n\t\n", "no content"),
        ("---\n", "no content"),
        ("# groups:\n#   ci: {mode: enforce}\n", "only comments"),
        ("---\n# a comment after the marker\n...\n", "only comments"),
        ("null\n", "a null document"),
        ("~\n", "a null document"),
    ] {
        let err = load(text).expect_err(text);
        assert!(
            matches!(&err, ConfigError::Empty { what: w, .. } if *w == what),
            "{text:?}: {err}"
        );
        let message = err.to_string();
        assert!(message.starts_with("config test.yaml is empty ("), "{message}");
        assert_contains(&message, "`groups: {}` to define no group on purpose");
    }
}

#[test]
fn groups_written_empty_on_purpose_load_with_a_warning() {
    let loaded = load("groups: {}\n").unwrap();
    assert_eq!(loaded.config, Config::default());
    assert_eq!(loaded.warnings, [NO_GROUPS_WARNING]);
    let loaded = load("defaultMode: warn\n").unwrap();
    assert_eq!(loaded.warnings, [NO_GROUPS_WARNING], "no groups key: the same warning");
    let loaded = load("{}").unwrap();
    assert_eq!(
        loaded.warnings,
        [NO_GROUPS_WARNING],
        "an explicit empty mapping: the same warning"
    );
    assert!(load(FULL).unwrap().warnings.is_empty());
}

#[test]
fn defaults_fill_every_setting_the_file_leaves_out() {
    let c = load("groups: {}").unwrap().config;
    assert_eq!(c.excluded_namespaces, ["kube-system", "kube-public", "kube-node-lease"]);
    assert_eq!(c.namespace_label, "pod-director/group");
}

#[test]
fn unknown_keys_get_the_nearest_allowed_key_as_a_hint() {
    for (typo, meant) in [
        ("nodeSelctor", "nodeSelector"),
        ("nodeselector", "nodeSelector"),
        ("toleration", "tolerations"),
        ("tolerashuns", "tolerations"),
        ("mdoe", "mode"),
        ("onConflcit", "onConflict"),
        ("afinity", "affinity"),
    ] {
        let errs = errors(&format!("groups: {{ci: {{{typo}: {{}}}}}}"));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with(&format!(
                "groups.ci.{typo}: unknown key (did you mean {meant}?); allowed keys are mode, onConflict, "
            )),
            "{typo}: {errs:?}"
        );
    }
    let errs = errors("defaultMod: warn\ngroups: {}");
    assert!(
        errs[0].starts_with("defaultMod: unknown key (did you mean defaultMode?)"),
        "{errs:?}"
    );
    let errs = errors("colour: blue\ngroups: {}");
    assert!(!errs[0].contains("did you mean"), "nothing is near colour: {errs:?}");
    let errs = errors("groups: {ci: {tolerations: [{key: a, efect: NoSchedule, operator: Exists}]}}");
    assert!(errs[0].contains("(did you mean effect?)"), "{errs:?}");
}

#[test]
fn equals_operator_is_refused_with_the_allowed_values() {
    let errs = errors("groups: {ci: {tolerations: [{key: dedicated, operator: Equals, value: ci}]}}");
    assert_eq!(
        errs,
        [r#"groups.ci.tolerations[0].operator: "Equals" is not one of Equal, Exists"#]
    );
}

#[test]
fn every_error_is_reported_in_one_run_with_its_path() {
    let errs = errors(
        r#"
namespaceLabel: "bad label/with/slashes"
defaultMode: Enforce
unknownGroup: maybe
excludedNamespaces: [kube-system, Kube_Bad, kube-system]
defaultGroup: nope
colour: blue
groups:
  ci:
    mode: enforced
    onConflict: whatever
    allowPodExclusion: "yes"
    nodeSelctor: {a: b}
    nodeSelector: {"-bad": ci, version: 1.10, ok: "a/b"}
    tolerations:
      - {key: "", operator: Equal, value: x}
      - {key: a, operator: Exists, value: x}
      - {key: a, effect: NoSchedul}
      - {key: a, effect: NoSchedule, tolerationSeconds: 30}
      - {key: a, tolerationSeconds: "thirty", effect: NoExecute}
      - {key: a, colour: red}
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
            - matchExpressions:
                - {key: pool, operator: In, values: []}
                - {key: pool, operator: Exists, values: [a]}
                - {key: cpu, operator: Gt, values: ["many"]}
                - {key: cpu, operator: Lt, values: ["1", "2"]}
                - {key: pool, operator: Within, values: [a]}
              matchFields:
                - {key: metadata.uid, operator: In, values: [x]}
            - {}
        preferredDuringSchedulingIgnoredDuringExecution:
          - {weight: 0, preference: {matchExpressions: [{key: z, operator: In, values: [a]}]}}
      podAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchExpressions: [{key: app, operator: Exists, values: [x]}]}
  "Bad Group": {}
"#,
    );
    let expect = [
        r#"namespaceLabel: "bad label/with/slashes" is not a valid label key"#,
        r#"defaultMode: "Enforce" is not one of dryRun, warn, enforce"#,
        r#"unknownGroup: "maybe" is not one of allow, deny"#,
        r#"excludedNamespaces[1]: "Kube_Bad" is not a valid namespace name"#,
        r#"excludedNamespaces[2]: "kube-system" is listed twice"#,
        r#"defaultGroup: "nope" is not a defined group"#,
        "colour: unknown key; allowed keys are namespaceLabel",
        r#"groups.ci.mode: "enforced" is not one of dryRun, warn, enforce"#,
        r#"groups.ci.onConflict: "whatever" is not one of reject, override, ignore"#,
        "groups.ci.allowPodExclusion: expected true or false, got a string",
        "groups.ci.nodeSelctor: unknown key",
        r#"groups.ci.nodeSelector["-bad"]: "-bad" is not a valid label key"#,
        "groups.ci.nodeSelector.version: expected a string, got a number (1.1); quote it",
        r#"groups.ci.nodeSelector.ok: "a/b" is not a valid label value"#,
        "groups.ci.tolerations[0].operator: must be Exists when key is empty",
        r#"groups.ci.tolerations[1].value: must be empty when operator is Exists (got "x")"#,
        r#"groups.ci.tolerations[2].effect: "NoSchedul" is not one of NoSchedule, PreferNoSchedule, NoExecute"#,
        "groups.ci.tolerations[3].tolerationSeconds: only allowed with effect NoExecute (effect is NoSchedule)",
        "groups.ci.tolerations[4].tolerationSeconds: expected an integer, got a string",
        "groups.ci.tolerations[5].colour: unknown key",
        "nodeSelectorTerms[0].matchExpressions[0].values: must be non-empty when operator is In",
        "nodeSelectorTerms[0].matchExpressions[1].values: must be empty when operator is Exists",
        r#"nodeSelectorTerms[0].matchExpressions[2].values[0]: "many" is not an integer, as Gt requires"#,
        "nodeSelectorTerms[0].matchExpressions[3].values: must have exactly one value when operator is Lt",
        r#"nodeSelectorTerms[0].matchExpressions[4].operator: "Within" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt"#,
        r#"nodeSelectorTerms[0].matchFields[0].key: "metadata.uid" is not a supported field selector"#,
        "nodeSelectorTerms[1]: a term without requirements matches no node",
        "preferredDuringSchedulingIgnoredDuringExecution[0].weight: 0 is not in the range 1 to 100",
        "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: is required",
        "matchExpressions[0].values: must be empty when operator is Exists",
        r#"groups["Bad Group"]: group name "Bad Group" cannot be a namespace label value"#,
    ];
    for e in expect {
        assert!(
            errs.iter().any(|got| got.contains(e)),
            "missing error containing {e:?} in:\n{}",
            errs.join("\n")
        );
    }
    assert_eq!(
        errs.len(),
        expect.len(),
        "unexpected extra errors:\n{}",
        errs.join("\n")
    );
}

#[test]
fn yaml_syntax_errors_say_where() {
    let err = load("groups: {ci: [").unwrap_err();
    assert!(matches!(err, ConfigError::Syntax { .. }), "{err}");
    assert!(err.to_string().contains("test.yaml"), "{err}");
}

#[test]
fn a_non_mapping_document_is_refused() {
    let errs = errors("- a\n- b\n");
    assert_eq!(errs, ["(top level): expected a mapping, got a list"]);
}

#[test]
fn environment_overrides_win_over_the_file_and_are_validated() {
    let gpu_mode = |mode: &str| vec![("POD_DIRECTOR__GROUPS__GPU__MODE".to_owned(), mode.to_owned())];
    let loaded = Config::from_yaml(FULL, "test.yaml", gpu_mode("enforce")).unwrap();
    assert_eq!(loaded.config.mode_of(&loaded.config.groups["gpu"]), Mode::Enforce);
    assert_eq!(
        loaded.overrides,
        [(
            "POD_DIRECTOR__GROUPS__GPU__MODE".to_owned(),
            "groups.gpu.mode".to_owned()
        )]
    );

    let err = Config::from_yaml(FULL, "test.yaml", gpu_mode("on")).unwrap_err();
    assert_eq!(
        crate::testing::field_errors(&err)[0].to_string(),
        r#"groups.gpu.mode: "on" is not one of dryRun, warn, enforce"#
    );
}

#[test]
fn revision_follows_content_not_formatting() {
    let a = load("groups: {ci: {nodeSelector: {pool: ci}}}").unwrap().revision;
    let b = load("groups:\n  ci:\n    nodeSelector:\n      pool: ci\n")
        .unwrap()
        .revision;
    let c = load("groups: {ci: {nodeSelector: {pool: ci2}}}").unwrap().revision;
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn config_files_are_read_and_size_limited() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    std::fs::write(&path, "defaultMode: warn\n").unwrap();
    assert_eq!(
        Config::load_with_env(&path, Vec::new()).unwrap().config.default_mode,
        Mode::Warn
    );
    let missing = dir.path().join("missing.yaml");
    let err = Config::load_with_env(&missing, Vec::new()).unwrap_err();
    assert!(err.to_string().starts_with("cannot read config file"), "{err}");
    std::fs::write(&path, vec![b'#'; 5 * 1024 * 1024]).unwrap();
    assert!(matches!(
        Config::load_with_env(&path, Vec::new()),
        Err(ConfigError::TooLarge { .. })
    ));
}

#[test]
fn trusted_schedulers_are_validated_like_the_reservation_allow_list() {
    let c = load("trustedSchedulers: {users: [my-scheduler], serviceAccounts: [kube-system/second]}")
        .unwrap()
        .config;
    assert_eq!(
        c.trusted_schedulers.usernames(),
        [
            "my-scheduler",
            "system:kube-scheduler",
            "system:serviceaccount:kube-system:second"
        ]
    );
    assert!(
        load("groups: {}")
            .unwrap()
            .config
            .trusted_schedulers
            .trusts("system:kube-scheduler")
    );
    let errs = errors(
        "trustedSchedulers: {users: ['', my-scheduler, my-scheduler], serviceAccounts:          [system:serviceaccount:a:b, lonely], groups: [x]}",
    );
    for wanted in [
        "trustedSchedulers.users[0]: must not be empty",
        "trustedSchedulers.users[2]:",
        "trustedSchedulers.serviceAccounts[0]: \"system:serviceaccount:a:b\" is a username",
        "trustedSchedulers.serviceAccounts[1]: \"lonely\" is not namespace/name",
        "trustedSchedulers.groups: unknown key",
    ] {
        assert!(errs.iter().any(|e| e.starts_with(wanted)), "{wanted:?} in {errs:?}");
    }
}

#[test]
fn allow_daemon_sets_and_the_daemon_set_controller_load_with_their_defaults() {
    let c = load("groups: {ci: {}, agents: {allowDaemonSets: true}}")
        .unwrap()
        .config;
    assert!(!c.groups["ci"].allow_daemon_sets);
    assert!(c.groups["agents"].allow_daemon_sets);
    assert_eq!(
        c.daemon_set_controller,
        "system:serviceaccount:kube-system:daemon-set-controller"
    );
    let c = load("daemonSetController: system:kube-controller-manager")
        .unwrap()
        .config;
    assert_eq!(c.daemon_set_controller, "system:kube-controller-manager");
    let errs = errors("daemonSetController: ''\ngroups: {ci: {allowDaemonSets: yes please}}");
    assert!(
        errs.iter().any(|e| e == "daemonSetController: must not be empty"),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.starts_with("groups.ci.allowDaemonSets: expected true or false")),
        "{errs:?}"
    );
}

#[test]
fn the_namespace_guard_follows_the_groups_by_default_and_allows_system_masters() {
    let guard = load("{}").unwrap().config.namespace_guard;
    assert_eq!(guard.mode, None);
    assert_eq!(guard.allowed_groups, ["system:masters"]);
    assert!(guard.allowed_users.is_empty() && guard.allowed_service_accounts.is_empty());
    let guard = load("namespaceGuard: {mode: enforce, allowedServiceAccounts: [argocd/argocd-application-controller]}")
        .unwrap()
        .config
        .namespace_guard;
    assert_eq!(guard.mode, Some(Mode::Enforce));
    assert_eq!(
        guard.service_account_usernames().collect::<Vec<_>>(),
        ["system:serviceaccount:argocd:argocd-application-controller"]
    );
}

#[test]
fn namespace_guard_errors_say_what_to_write() {
    let errs = errors(
        "namespaceGuard:\n  mode: Enforce\n  allowedUser: [bob]\n  allowedGroups: [a, a, 'b c']\n  \
         allowedServiceAccounts: [system:serviceaccount:argocd:controller, argocd, 'Bad/x', 'ns/Bad_Name']",
    );
    let expect = [
        "namespaceGuard.mode: \"Enforce\" is not one of dryRun, warn, enforce",
        "namespaceGuard.allowedUser: unknown key",
        "namespaceGuard.allowedGroups[1]: \"a\" is listed twice",
        "namespaceGuard.allowedGroups[2]: \"b c\" contains whitespace",
        "namespaceGuard.allowedServiceAccounts[0]: \"system:serviceaccount:argocd:controller\" is a username: write the service account as \"argocd/controller\"",
        "namespaceGuard.allowedServiceAccounts[1]: \"argocd\" is not namespace/name",
        "namespaceGuard.allowedServiceAccounts[2]: \"Bad\" (in \"Bad/x\") is not a valid namespace name",
        "namespaceGuard.allowedServiceAccounts[3]: \"Bad_Name\" (in \"ns/Bad_Name\") is not a valid service account name",
    ];
    for e in expect {
        assert!(errs.iter().any(|got| got.starts_with(e)), "missing {e:?} in {errs:#?}");
    }
    let errs = errors("namespaceGuard: {allowedGroups: []}");
    assert!(
        errs[0].starts_with("namespaceGuard: allows nobody to change namespace group labels"),
        "{errs:?}"
    );
}

#[test]
fn the_namespace_guard_mode_can_be_set_from_the_environment_without_the_file_naming_it() {
    let loaded = Config::from_yaml(
        "{}",
        "t",
        vec![
            ("POD_DIRECTOR__NAMESPACE_GUARD__MODE".to_owned(), "enforce".to_owned()),
            (
                "POD_DIRECTOR__NAMESPACE_GUARD__ALLOWED_USERS".to_owned(),
                "bob, carol".to_owned(),
            ),
        ],
    )
    .unwrap();
    assert_eq!(loaded.config.namespace_guard.mode, Some(Mode::Enforce));
    assert_eq!(loaded.config.namespace_guard.allowed_users, ["bob", "carol"]);
}

#[test]
fn a_reservation_loads_with_its_defaults_and_bad_ones_say_what_to_fix() {
    let loaded = load(
        "groups:\n  gpu:\n    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n    reserve: {}\n",
    )
    .expect("valid");
    let reserve = loaded.config.groups["gpu"].reserve.clone().expect("reserve");
    assert_eq!(reserve, Reserve::default());
    assert_eq!((reserve.mode, reserve.allow_daemon_sets), (Mode::DryRun, true));

    let errs = errors(
        "groups:\n  gpu:\n    tolerations: [{operator: Exists}]\n    reserve:\n      mode: enforced\n      allow:\n        namespaces: [Bad_NS]\n        serviceAccounts: [system:serviceaccount:ops:runner]\n        usrs: [a]\n",
    );
    let all = errs.join("\n");
    assert_contains(&all, "groups.gpu.reserve.mode:");
    assert_contains(&all, "groups.gpu.reserve.allow.namespaces[0]:");
    assert_contains(
        &all,
        "groups.gpu.reserve.allow.serviceAccounts[0]: \"system:serviceaccount:ops:runner\" is a username",
    );
    assert_contains(&all, "groups.gpu.reserve.allow.usrs: unknown key (did you mean users?)");
    assert_contains(
        &all,
        "groups.gpu.reserve: cannot reserve: tolerations[0] (empty key, operator Exists) tolerates every taint",
    );
}
