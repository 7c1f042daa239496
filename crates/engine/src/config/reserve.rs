//! A group's reservation of its nodes (`groups.NAME.reserve`): who else may land on them.
//!
//! The decision is the engine's (`placement/reservation.rs`); this is its configuration.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Mode, kubernetes, schema};

/// Keeps everyone else's pods off the group's nodes: a pod of any other namespace that
/// tolerates a taint the group's tolerations exist for, or names a node of the group's
/// pool in `spec.nodeName`, is an intruder — reported in dryRun, warned in warn, denied in
/// enforce. Requesters, never pod fields, are exempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "reserve", transform = schema::ordered::<Reserve>)]
pub struct Reserve {
    /// The reservation's own mode, independent of the group's placement mode (default dryRun:
    /// watch who would be refused before refusing anyone).
    pub mode: Mode,
    /// Pods the DaemonSet controller creates for a DaemonSet may land on the pool (node agents
    /// run on every node). The requester is the controller; an owner reference alone exempts nothing.
    pub allow_daemon_sets: bool,
    /// Who else may land on the pool.
    #[serde(skip_serializing_if = "super::is_default")]
    pub allow: Allow,
}

impl Default for Reserve {
    fn default() -> Self {
        Self {
            mode: Mode::default(),
            allow_daemon_sets: true,
            allow: Allow::default(),
        }
    }
}

/// The explicit allow-list of a reservation: pods of these namespaces, or created by these
/// requesters (`request.userInfo`), may land on the pool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "reserveAllow", transform = schema::ordered::<Allow>)]
pub struct Allow {
    /// Namespaces whose pods may land on the pool.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<kubernetes::NamespaceName>", extend("uniqueItems" = true))]
    pub namespaces: Vec<String>,
    /// Usernames whose pods may land on the pool, as `request.userInfo.username` names them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<kubernetes::RequesterName>", extend("uniqueItems" = true))]
    pub users: Vec<String>,
    /// Groups whose members' pods may land on the pool.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<kubernetes::RequesterName>", extend("uniqueItems" = true))]
    pub groups: Vec<String>,
    /// Service accounts whose pods may land on the pool, as `namespace/name` (the requester:
    /// e.g. a controller's service account that creates the pods).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<kubernetes::ServiceAccountName>", extend("uniqueItems" = true))]
    pub service_accounts: Vec<String>,
    /// pod-director groups whose namespaces' pods may land on the pool (e.g. groups that offer it
    /// as an alternative).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<kubernetes::GroupName>", extend("uniqueItems" = true))]
    pub placement_groups: Vec<String>,
}

impl Allow {
    /// Whether `username` is one of `serviceAccounts` (`system:serviceaccount:NS:NAME`).
    pub(crate) fn has_service_account(&self, username: &str) -> bool {
        let mut usernames = self
            .service_accounts
            .iter()
            .filter_map(|sa| super::service_account_username(sa));
        usernames.any(|sa| sa == username)
    }
}

/// The username of the default scheduler (kube-scheduler's client certificate, `CN=system:kube-scheduler`).
pub const KUBE_SCHEDULER: &str = "system:kube-scheduler";

/// Schedulers trusted to bind pods (`pods/binding`) to reserved nodes: schedulers that honour
/// the pool's taints, so their bindings need no decision. kube-scheduler (`system:kube-scheduler`)
/// is always trusted; list a secondary scheduler here only when it honours taints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "trustedSchedulers", transform = schema::ordered::<TrustedSchedulers>)]
pub struct TrustedSchedulers {
    /// Usernames of schedulers, as `request.userInfo.username` names them (besides `system:kube-scheduler`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<kubernetes::RequesterName>", extend("uniqueItems" = true))]
    pub users: Vec<String>,
    /// Service accounts schedulers run as, as `namespace/name`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<kubernetes::ServiceAccountName>", extend("uniqueItems" = true))]
    pub service_accounts: Vec<String>,
}

impl TrustedSchedulers {
    /// Every trusted username, sorted and unique: `system:kube-scheduler`, `users`, and the
    /// service accounts' (`system:serviceaccount:NS:NAME`). What the reservation's webhook entry
    /// skips in its matchCondition.
    pub(crate) fn usernames(&self) -> Vec<String> {
        let mut names: Vec<String> = std::iter::once(KUBE_SCHEDULER.to_owned())
            .chain(self.users.iter().cloned())
            .chain(
                self.service_accounts
                    .iter()
                    .filter_map(|sa| super::service_account_username(sa)),
            )
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// Whether `username` is a trusted scheduler.
    pub fn trusts(&self, username: &str) -> bool {
        !username.is_empty() && self.usernames().iter().any(|n| n == username)
    }
}
