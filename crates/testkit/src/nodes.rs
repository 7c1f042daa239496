//! Synthetic Node objects shaped like a real cloud cluster's (the labels a
//! managed node carries, a pool taint on some, status with conditions,
//! addresses, capacity and a list of cached images), for the feasibility and
//! memory benches.

use k8s_openapi::api::core::v1::Node;
use serde_json::json;

/// Node pools, as `node-pool` label values; `ci` nodes are tainted `dedicated=ci:NoSchedule`.
pub const POOLS: [&str; 5] = ["ci", "general", "gpu", "batch", "edge"];

/// Node `i` of a cluster, as the API server lists it.
pub fn node(i: usize) -> Node {
    let pool = POOLS[i % POOLS.len()];
    let zone = ["eu-west-1a", "eu-west-1b", "eu-west-1c"][i % 3];
    let name = format!(
        "ip-10-{}-{}-{}.eu-west-1.compute.internal",
        i / 65536 % 256,
        i / 256 % 256,
        i % 256
    );
    let mut taints = vec![];
    if pool == "ci" {
        taints.push(json!({"key": "dedicated", "value": "ci", "effect": "NoSchedule"}));
    }
    if pool == "gpu" {
        taints.push(json!({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}));
    }
    let images: Vec<_> = (0..25)
        .map(|k| json!({"names": [format!("registry.example.com/team/app-{k}@sha256:{:064x}", k * 7919 + i), format!("registry.example.com/team/app-{k}:1.2.{k}")], "sizeBytes": 12_345_678 + k}))
        .collect();
    let conditions: Vec<_> = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        .iter()
        .map(|t| {
            json!({
                "type": t, "status": if *t == "Ready" { "True" } else { "False" },
                "lastHeartbeatTime": "2026-11-29T10:00:00Z", "lastTransitionTime": "2026-11-29T10:00:00Z",
                "reason": format!("Kubelet{t}"), "message": "kubelet is posting ready status"
            })
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": format!("5b1c2d3e-4f50-6172-8394-{i:012}"),
            "resourceVersion": format!("{}", 200_000 + i),
            "creationTimestamp": "2026-11-29T10:00:00Z",
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": "m6i.2xlarge",
                "beta.kubernetes.io/os": "linux",
                "failure-domain.beta.kubernetes.io/region": "eu-west-1",
                "failure-domain.beta.kubernetes.io/zone": zone,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m6i.2xlarge",
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": zone,
                "node-pool": pool,
                "eks.amazonaws.com/nodegroup": format!("{pool}-nodes"),
                "eks.amazonaws.com/capacityType": if i.is_multiple_of(4) { "SPOT" } else { "ON_DEMAND" },
                "disk": if i.is_multiple_of(2) { "ssd" } else { "hdd" },
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "alpha.kubernetes.io/provided-node-ip": format!("10.0.{}.{}", i / 256 % 256, i % 256),
            },
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-11-29T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:conditions": {}}}}],
        },
        "spec": {
            "providerID": format!("aws:///{zone}/i-{i:017x}"),
            "podCIDR": format!("10.{}.{}.0/24", 100 + i / 65536 % 100, i / 256 % 256),
            "taints": taints,
            "unschedulable": i.is_multiple_of(97),
        },
        "status": {
            "capacity": {"cpu": "8", "memory": "32386564Ki", "pods": "58", "ephemeral-storage": "104845292Ki"},
            "allocatable": {"cpu": "7910m", "memory": "31369732Ki", "pods": "58", "ephemeral-storage": "95551679124"},
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": format!("10.0.{}.{}", i / 256 % 256, i % 256)}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"machineID": format!("{i:032x}"), "systemUUID": format!("{i:032x}"), "bootID": format!("{i:032x}"),
                "kernelVersion": "6.1.0", "osImage": "Amazon Linux 2023", "containerRuntimeVersion": "containerd://1.7.0",
                "kubeletVersion": "v1.33.0", "kubeProxyVersion": "v1.33.0", "operatingSystem": "linux", "architecture": "amd64"},
            "images": images,
        }
    }))
    .expect("a valid Node")
}
