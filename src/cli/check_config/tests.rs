use pod_director_engine::config::Config;

use super::group_summaries;

fn config(yaml: &str) -> Config {
    Config::from_yaml(yaml, "test", Vec::new())
        .expect("valid config")
        .config
}

#[test]
fn summaries_name_each_group_its_mode_and_its_placement() {
    let c = config(
        "groups:\n  ci:\n    mode: enforce\n    nodeSelector: {node-pool: ci}\n    tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]\n    affinity:\n      nodeAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]}]\n      podAntiAffinity:\n        preferredDuringSchedulingIgnoredDuringExecution:\n          - weight: 50\n            podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: build}}}\n  gpu:\n    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n    reserve: {}\n",
    );
    assert_eq!(
        group_summaries(&c),
        [
            "ci: mode=enforce onConflict=reject nodeSelector=node-pool=ci tolerations=1 affinity=node+podAnti",
            "gpu: mode=dryRun onConflict=reject tolerations=1 reserve=dryRun",
        ]
    );
}
