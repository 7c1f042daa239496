//! The reference API server of the in-tree admission plugins (`e2e/cluster.sh plugins-start`):
//! a second kube-apiserver of the cluster's release, on its etcd under a key prefix of its own,
//! with `PodNodeSelector` and `PodTolerationRestriction` enabled and configured by an
//! `AdmissionConfiguration` file. Differential scenarios create the same objects there and on
//! the main cluster (served by pod-director) and compare what each stored or refused.
//!
//! It has no controller-manager, scheduler or kubelet: [`Reference::namespace`] creates the
//! namespace's `default` ServiceAccount itself (the ServiceAccount admission plugin needs it),
//! pods stay Pending, and [`Reference::delete_namespaces`] deletes the pods, then finalizes the
//! namespaces (no namespace controller empties them). Dropping a [`Reference`] stops the server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

use super::k8s::{self, Created};
use super::repo;

/// How long `plugins-start` may take (the API server's start on two busy cores: ~10 s).
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// A running reference server; stopped on drop.
pub struct Reference {
    pub client: Client,
    /// Its admin kubeconfig (`$E2E_STATE_DIR/plugins/kubeconfig`).
    pub kubeconfig: PathBuf,
    state_dir: PathBuf,
    namespaces: Mutex<Vec<String>>,
}

/// Runs `e2e/cluster.sh COMMAND` for `state_dir`, with `env`; its output goes to the test's.
fn cluster_sh(state_dir: &Path, command: &str, env: &[(&str, &Path)]) -> Result<(), String> {
    let script = repo().join("e2e/cluster.sh");
    let mut cmd = Command::new(&script);
    cmd.arg(command)
        .env("E2E_STATE_DIR", state_dir)
        .env("E2E_START_TIMEOUT", START_TIMEOUT.as_secs().to_string());
    for (name, value) in env {
        cmd.env(name, value);
    }
    let output = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    print!("{stderr}");
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("e2e/cluster.sh {command}: {}\n{stderr}", output.status))
    }
}

impl Reference {
    /// Starts (or reuses, when it runs with the same files) the reference server of the cluster
    /// of `state_dir`, configured by the `AdmissionConfiguration` file `admission_config`.
    pub async fn start(state_dir: &Path, admission_config: &Path) -> Reference {
        let (dir, config) = (state_dir.to_owned(), admission_config.to_owned());
        tokio::task::spawn_blocking(move || {
            cluster_sh(&dir, "plugins-start", &[("E2E_PLUGINS_ADMISSION_CONFIG", &config)])
        })
        .await
        .expect("plugins-start ran")
        .unwrap_or_else(|e| panic!("the reference server did not start: {e}"));
        let kubeconfig = state_dir.join("plugins/kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(
            Kubeconfig::read_from(&kubeconfig).expect("the reference server's kubeconfig"),
            &KubeConfigOptions::default(),
        )
        .await
        .expect("a client config of the reference server");
        let client = Client::try_from(config).expect("a client of the reference server");
        Reference {
            client,
            kubeconfig,
            state_dir: state_dir.to_owned(),
            namespaces: Mutex::new(Vec::new()),
        }
    }

    /// Creates namespace `name` with `annotations` and its `default` ServiceAccount.
    pub async fn namespace(&self, name: &str, annotations: &BTreeMap<String, String>) {
        let namespace: Namespace = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations}
        }))
        .expect("a Namespace");
        self.namespaces.lock().expect("not poisoned").push(name.to_owned());
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("namespace {name} created on the reference server: {e}"));
        let account: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": "default"}})).expect("a ServiceAccount");
        Api::<ServiceAccount>::namespaced(self.client.clone(), name)
            .create(&PostParams::default(), &account)
            .await
            .unwrap_or_else(|e| panic!("ServiceAccount {name}/default created on the reference server: {e}"));
    }

    /// A client of the reference server acting as `user` in `groups` (its admin may impersonate).
    pub async fn impersonating(&self, user: &str, groups: &[&str]) -> Client {
        let mut config = kube::Config::from_custom_kubeconfig(
            Kubeconfig::read_from(&self.kubeconfig).expect("the reference server's kubeconfig"),
            &KubeConfigOptions::default(),
        )
        .await
        .expect("a client config of the reference server");
        config.auth_info.impersonate = Some(user.to_owned());
        config.auth_info.impersonate_groups = Some(groups.iter().map(|g| (*g).to_owned()).collect());
        Client::try_from(config).expect("an impersonating client of the reference server")
    }

    pub fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Creates a pod (for real, or with `dryRun=All`), keeping the status and any error.
    pub async fn create_pod(&self, namespace: &str, pod: &Pod, dry_run: bool) -> Created {
        k8s::create_pod(&self.client, namespace, pod, dry_run).await
    }

    /// Deletes the namespaces created here: their pods (unbound pods go at once), then each
    /// namespace, finalized (no namespace controller runs here).
    pub async fn delete_namespaces(&self) {
        let names = std::mem::take(&mut *self.namespaces.lock().expect("not poisoned"));
        let api = Api::<Namespace>::all(self.client.clone());
        for name in names {
            let pods = self.pods(&name);
            if let Err(e) = pods
                .delete_collection(&DeleteParams::default(), &ListParams::default())
                .await
            {
                eprintln!("reference cleanup: pods of {name}: {e}");
            }
            if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
                eprintln!("reference cleanup: namespace {name}: {e}");
                continue;
            }
            let finalized = json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name}, "spec": {"finalizers": []}
            });
            if let Err(e) = api
                .replace_subresource("finalize", &name, &PostParams::default(), &finalized)
                .await
            {
                eprintln!("reference cleanup: finalizing namespace {name}: {e}");
            }
        }
    }

    /// Waits until namespace `name` is gone from the reference server.
    pub async fn wait_deleted(&self, name: &str) {
        let api = Api::<Namespace>::all(self.client.clone());
        k8s::eventually(&format!("namespace {name} deleted on the reference server"), || async {
            matches!(api.get_opt(name).await, Ok(None)).then_some(())
        })
        .await;
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        if let Err(e) = cluster_sh(&self.state_dir, "plugins-stop", &[]) {
            eprintln!("{e}");
        }
    }
}
