//! Where pods really land: kwok nodes, bindings, phases and the scheduler's
//! `FailedScheduling` events, read from the API server (never computed by the suite).
//!
//! Locally (`e2e/cluster.sh`) kube-scheduler binds pods and kwok plays the kubelet
//! of every Node annotated [`KWOK_NODE`]. In cluster mode, set `E2E_KWOK=true` when
//! kwok runs in the cluster managing the Nodes with that annotation (as kwok's own
//! release manifests do); otherwise the scenarios that need scheduled pods skip.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams};

use super::k8s::eventually;
use super::{Env, Target, env_var, notice};

/// The annotation kwok manages Nodes by (`--manage-nodes-with-annotation-selector`).
pub const KWOK_NODE: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

/// `node`, annotated for kwok.
pub fn kwok_node(mut node: Node) -> Node {
    node.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(KWOK_NODE.0.to_owned(), KWOK_NODE.1.to_owned());
    node
}

/// Whether the node's `Ready` condition is `True`.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The node a pod is bound to.
pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

/// `status.phase`.
pub fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
}

/// What the scheduler said about a pod it could not place: `0/N nodes are available: …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedScheduling {
    /// `N`: the nodes the scheduler considered.
    pub nodes: usize,
    /// Each reason with its node count, e.g. `Insufficient cpu` → 3.
    pub reasons: BTreeMap<String, usize>,
    pub message: String,
}

impl FailedScheduling {
    /// Parses an event message: `0/46 nodes are available: 3 Insufficient cpu, 1 node(s) were
    /// unschedulable, …. preemption: …`. `None` when it is not of that form.
    pub fn parse(message: &str) -> Option<Self> {
        let rest = message.strip_prefix("0/")?;
        let (total, rest) = rest.split_once(" nodes are available")?;
        let nodes = total.parse().ok()?;
        let mut reasons = BTreeMap::new();
        if let Some(list) = rest.strip_prefix(": ") {
            // The filters' summary ends at the first ". " (or a final "."); what follows is the
            // PostFilter plugins' word: "preemption: …", on 1.34 after the DynamicResources
            // plugin's "no new claims to deallocate, ". No reason contains ". ".
            let list = list.split(". ").next().unwrap_or(list);
            let list = list.trim_end_matches('.');
            for item in list.split(", ") {
                let (count, reason) = item.trim().split_once(' ')?;
                reasons.insert(reason.to_owned(), count.parse().ok()?);
            }
        }
        Some(Self {
            nodes,
            reasons,
            message: message.to_owned(),
        })
    }

    /// The nodes that failed only for the given reason, or for it among others.
    pub fn count(&self, reason: &str) -> usize {
        self.reasons.get(reason).copied().unwrap_or(0)
    }
}

/// Every distinct `FailedScheduling` message of pod `namespace/name`, parsed.
pub async fn failed_scheduling(client: &Client, namespace: &str, name: &str) -> Vec<FailedScheduling> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().fields(&format!(
        "involvedObject.kind=Pod,involvedObject.name={name},reason=FailedScheduling"
    ));
    let mut found: Vec<FailedScheduling> = Vec::new();
    for event in events.list(&params).await.map(|l| l.items).unwrap_or_default() {
        let message = event.message.unwrap_or_default();
        let parsed = FailedScheduling::parse(&message)
            .unwrap_or_else(|| panic!("a FailedScheduling message of an unknown form: {message:?}"));
        if !found.contains(&parsed) {
            found.push(parsed);
        }
    }
    found
}

/// Waits until the scheduler reported pod `namespace/name` unschedulable; returns its first message.
pub async fn wait_failed_scheduling(client: &Client, namespace: &str, name: &str) -> FailedScheduling {
    eventually(
        &format!("a FailedScheduling event for pod {namespace}/{name}"),
        || async { failed_scheduling(client, namespace, name).await.into_iter().next() },
    )
    .await
}

impl Env {
    /// [`Env::start`] for a scenario that needs pods scheduled and run (kube-scheduler + kwok);
    /// `None` (with a notice) in cluster mode unless `E2E_KWOK=true`.
    pub async fn start_scheduling(scenario: &str) -> Option<Env> {
        if Self::kwok_missing(scenario) {
            return None;
        }
        Some(Self::start(scenario).await)
    }

    /// [`Env::start_local`] for a scenario that also needs pods scheduled and run.
    pub async fn start_local_scheduling(scenario: &str, why: &str) -> Option<Env> {
        if Self::kwok_missing(scenario) {
            return None;
        }
        Self::start_local(scenario, why).await
    }

    /// Whether pods bound to the suite's Nodes run (kwok plays them): locally, or `E2E_KWOK=true`.
    pub fn pods_run(&self) -> bool {
        self.settings.target == Target::Local || env_var("E2E_KWOK").as_deref() == Some("true")
    }

    fn kwok_missing(scenario: &str) -> bool {
        let settings = super::Settings::from_env();
        let missing = settings.target == Target::Cluster && env_var("E2E_KWOK").as_deref() != Some("true");
        if missing {
            notice(&format!(
                "SKIPPED {scenario} in cluster mode: it needs pods scheduled onto kwok nodes; install kwok \
                 (managing the Nodes annotated {}={}) and set E2E_KWOK=true",
                KWOK_NODE.0, KWOK_NODE.1
            ));
        }
        missing
    }

    /// Waits until the Nodes `names` are Ready (kwok has taken them over) and no longer carry the
    /// `node.kubernetes.io/not-ready` taint the API server gives a new Node.
    pub async fn wait_nodes_ready(&self, names: &[String]) {
        let api: Api<Node> = Api::all(self.client.clone());
        eventually(&format!("{} node(s) Ready (is kwok running?)", names.len()), || async {
            for name in names {
                let node = api.get_opt(name).await.ok().flatten()?;
                let not_ready_taint = node
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .into_iter()
                    .flatten()
                    .any(|t| t.key == "node.kubernetes.io/not-ready");
                if !is_ready(&node) || not_ready_taint {
                    return None;
                }
            }
            Some(())
        })
        .await;
    }

    /// Waits until pod `namespace/name` is bound and Running; returns it.
    pub async fn wait_running(&self, namespace: &str, name: &str) -> Pod {
        let api = self.pods(namespace);
        eventually(&format!("pod {namespace}/{name} Running"), || async {
            let pod = api.get_opt(name).await.ok().flatten()?;
            (node_of(&pod).is_some() && phase(&pod) == "Running").then_some(pod)
        })
        .await
    }

    /// Waits until `count` pods match `selector` in `namespace`, all bound and Running; returns them.
    pub async fn wait_running_pods(&self, namespace: &str, selector: &str, count: usize) -> Vec<Pod> {
        eventually(&format!("{count} Running pods {selector} in {namespace}"), || async {
            let pods = self.list_pods(namespace, selector).await;
            let running = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| node_of(p).is_some() && phase(p) == "Running")
                .count();
            (pods.len() == count && running == count).then_some(pods)
        })
        .await
    }

    /// Asserts that pod `namespace/name` stays unbound and Pending for `period`.
    pub async fn assert_stays_pending(&self, namespace: &str, name: &str, period: Duration) {
        let deadline = tokio::time::Instant::now() + period;
        while tokio::time::Instant::now() < deadline {
            let pod = self.get_pod(namespace, name).await;
            assert_eq!(node_of(&pod), None, "pod {namespace}/{name} was bound: {:?}", pod.spec);
            assert_eq!(phase(&pod), "Pending", "pod {namespace}/{name}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_scheduling_messages_are_parsed_with_their_counts() {
        let parsed = FailedScheduling::parse(
            "0/46 nodes are available: 1 node(s) were unschedulable, 12 node(s) didn't match Pod's node \
             affinity/selector, 3 Insufficient cpu, 30 node(s) had untolerated taint(s). preemption: 0/46 nodes \
             are available: 3 No preemption victims found for incoming pod, 43 Preemption is not helpful for \
             scheduling.",
        )
        .expect("parsed");
        assert_eq!(parsed.nodes, 46);
        assert_eq!(parsed.count("Insufficient cpu"), 3);
        assert_eq!(parsed.count("node(s) were unschedulable"), 1);
        assert_eq!(parsed.count("node(s) had untolerated taint(s)"), 30);
        assert_eq!(parsed.count("Too many pods"), 0);
        // Kubernetes 1.34: the DynamicResources PostFilter speaks before preemption.
        let dra = FailedScheduling::parse(
            "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had \
             untolerated taint(s). no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption \
             is not helpful for scheduling.",
        )
        .expect("parsed");
        assert_eq!(dra.nodes, 2);
        assert_eq!(dra.count("node(s) didn't match Pod's node affinity/selector"), 1);
        assert_eq!(dra.count("node(s) had untolerated taint(s)"), 1);
        assert_eq!(dra.reasons.len(), 2);
        let none = FailedScheduling::parse("0/2 nodes are available: 2 Insufficient cpu.").expect("parsed");
        assert_eq!(none.count("Insufficient cpu"), 2);
        assert_eq!(FailedScheduling::parse("binding rejected"), None);
    }
}
