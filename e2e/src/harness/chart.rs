//! The chart, rendered with the suite's values: the ConfigMap's `config.yaml`
//! and both webhook configurations, so that the chart's namespaceSelectors,
//! failurePolicies and reinvocationPolicy are what the scenarios exercise.

use std::process::Command;

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use serde_json::Value;

use super::{Settings, tool};

/// What the suite takes from the chart.
pub struct Rendered {
    pub config_yaml: String,
    pub mutating: MutatingWebhookConfiguration,
    pub validating: ValidatingWebhookConfiguration,
}

/// `helm template` of the suite's release with its values, the certificate of
/// an existing Secret (`ca_bundle`, base64), `--set` `sets`, only `templates`.
fn template(settings: &Settings, ca_bundle: &str, sets: &[String], templates: &[&str]) -> Vec<Value> {
    let mut command = Command::new(tool("HELM", "helm"));
    command
        .arg("template")
        .arg(&settings.release)
        .arg(settings.repo.join("chart"))
        .args(["--namespace", &settings.namespace])
        .arg("--values")
        .arg(settings.values_file())
        .args(["--set", "certificates.source=existingSecret"])
        .args(["--set", "certificates.existingSecret.name=pod-director-e2e-tls"])
        .args(["--set", &format!("certificates.existingSecret.caBundle={ca_bundle}")]);
    for set in sets {
        command.args(["--set", set]);
    }
    for template in templates {
        command.args(["--show-only", template]);
    }
    let output = command.output().expect("helm runs");
    assert!(
        output.status.success(),
        "helm template failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("helm prints UTF-8");
    serde_saphyr::from_multiple(&text).expect("helm prints YAML documents")
}

/// `helm template` with the suite's values, webhooks calling `url` (e.g.
/// `https://127.0.0.1:PORT`) and trusting `ca_pem`.
pub fn render(settings: &Settings, url: &str, ca_pem: &[u8]) -> Rendered {
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let documents = template(
        settings,
        &ca_bundle,
        &[format!("webhook.url={url}")],
        &["templates/configmap.yaml", "templates/webhooks.yaml"],
    );
    let of_kind = |kind: &str| {
        documents
            .iter()
            .find(|d| d["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("the chart rendered no {kind}: {documents:?}"))
    };
    let config_map = of_kind("ConfigMap");
    let config_yaml = config_map["data"]["config.yaml"]
        .as_str()
        .expect("the ConfigMap has config.yaml")
        .to_owned();
    Rendered {
        config_yaml,
        mutating: serde_json::from_value(of_kind("MutatingWebhookConfiguration"))
            .expect("a valid MutatingWebhookConfiguration"),
        validating: serde_json::from_value(of_kind("ValidatingWebhookConfiguration"))
            .expect("a valid ValidatingWebhookConfiguration"),
    }
}

/// The objects of one chart template for the suite's release, with `--set` `sets` (e.g. ports,
/// `alerts.enabled=true`).
pub fn render_template_with(settings: &Settings, template_path: &str, sets: &[String]) -> Vec<Value> {
    template(settings, "Q0EK", sets, &[template_path])
}

/// The chart's RBAC objects (ClusterRole, ClusterRoleBinding) for the suite's release.
pub fn render_rbac(settings: &Settings) -> Vec<Value> {
    render_template(settings, "templates/rbac.yaml")
}

/// The chart's RBAC objects for the suite's release, rendered with `--set` `sets`.
pub fn render_rbac_with(settings: &Settings, sets: &[String]) -> Vec<Value> {
    render_template_with(settings, "templates/rbac.yaml", sets)
}

/// The objects of one chart template for the suite's release.
pub fn render_template(settings: &Settings, template_path: &str) -> Vec<Value> {
    template(settings, "Q0EK", &[], &[template_path])
}
