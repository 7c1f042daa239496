//! The reservation entry of the ValidatingWebhookConfiguration,
//! `reservation.<configuration>.pod-director.io` (`/validate-reservation`): pods of every
//! namespace but the excluded ones, CREATE and UPDATE, and their bindings (`pods/binding`
//! CREATE). It exists only while a group reserves its nodes, and two `matchConditions` let the
//! API server send only what could intrude — a pod with a toleration without a key or with a
//! reserved key, or a `spec.nodeName` the request sets; a binding that a trusted scheduler
//! (`system:kube-scheduler`, `trustedSchedulers`) does not send — so every other pod of the
//! cluster, and every binding of the scheduler, never reaches pod-director.

use serde_json::{Value, json};

use crate::config::{Config, Mode};
use crate::placement::reservation::{any_reservation, reserved_keys};

/// The path the entry calls.
pub const PATH: &str = "/validate-reservation";
/// The name of the entry's matchCondition on pods.
pub const MATCH_CONDITION: &str = "may-intrude-on-a-reservation";
/// The name of the matchCondition on bindings (this entry's and the `/validate` entries').
pub const BINDING_CONDITION: &str = "binding-not-by-a-trusted-scheduler";
/// CEL: the request is a Binding (`pods/binding`; the API server omits an empty subResource).
pub(super) const IS_BINDING: &str = "has(request.subResource) && request.subResource == 'binding'";

/// `reservation.pod-director.pod-director.io`.
pub fn entry_name(configuration: &str) -> String {
    format!("reservation.{configuration}.pod-director.io")
}

/// The CEL expression of the entry's matchCondition on pods: the request sets `spec.nodeName`,
/// or the pod has a toleration whose key is empty (every key) or reserved; a Binding passes (its
/// object has no spec; [`binding_expression`] decides it). The chart renders the same text
/// (`pod-director.reservationEntry`).
pub(crate) fn match_expression(config: &Config) -> String {
    let keys: Vec<String> = reserved_keys(config)
        .into_iter()
        .filter(|k| !k.is_empty())
        .map(|k| format!("'{k}'"))
        .collect();
    format!(
        "({IS_BINDING}) || \
         (has(object.spec.nodeName) && (oldObject == null || !has(oldObject.spec.nodeName))) || \
         (has(object.spec.tolerations) && object.spec.tolerations.exists(t, !has(t.key) || t.key == '' || \
         t.key in [{}]))",
        keys.join(", ")
    )
}

/// The CEL expression of the matchCondition on bindings (this entry's and the `/validate`
/// entries'): a Binding's requester is not a trusted scheduler
/// ([`crate::config::TrustedSchedulers::usernames`]); every other request
/// passes.
pub(crate) fn binding_expression(config: &Config) -> String {
    let names: Vec<String> = config
        .trusted_schedulers
        .usernames()
        .into_iter()
        .map(|n| format!("'{n}'"))
        .collect();
    format!(
        "!({IS_BINDING}) || !(request.userInfo.username in [{}])",
        names.join(", ")
    )
}

/// The failurePolicy: `enforce` (the chart's `webhook.failurePolicy.enforce`) when a
/// reservation is in enforce — its intruders must not be admitted while pod-director is
/// down — else Ignore.
pub fn failure_policy<'s>(config: &Config, enforce: &'s str) -> &'s str {
    let enforced = crate::placement::reservation::reservations(config).any(|r| r.reserve.mode == Mode::Enforce);
    if enforced { enforce } else { "Ignore" }
}

/// The entry's fields besides those every entry has (name, versions, timeout, policy):
/// namespaces, rules, matchConditions; `None` when no group reserves.
pub fn fields(config: &Config, not_excluded: Value) -> Option<Vec<(&'static str, Value)>> {
    any_reservation(config).then(|| {
        vec![
            ("namespaceSelector", not_excluded),
            (
                "rules",
                json!([{
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["pods"],
                    "scope": "Namespaced",
                }, {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE"],
                    "resources": ["pods/binding"],
                    "scope": "Namespaced",
                }]),
            ),
            (
                "matchConditions",
                json!([
                    { "name": MATCH_CONDITION, "expression": match_expression(config) },
                    { "name": BINDING_CONDITION, "expression": binding_expression(config) },
                ]),
            ),
        ]
    })
}

/// The entry's clientConfig, made from another entry's (`/validate`): the same Service or
/// URL and CA bundle, at [`PATH`]. `None` when it has neither a Service nor a URL.
pub(crate) fn client_config_from(validate: &Value) -> Option<Value> {
    let mut client = validate.get("clientConfig")?.clone();
    if let Some(service) = client.get_mut("service").and_then(Value::as_object_mut) {
        service.insert("path".to_owned(), Value::String(PATH.to_owned()));
        return Some(client);
    }
    let url = client.get("url")?.as_str()?;
    let base = url.strip_suffix("/validate")?.to_owned();
    client["url"] = Value::String(format!("{base}{PATH}"));
    Some(client)
}
