//! The one typed configuration: loaded from YAML, overridden by environment variables
//! (`env.rs`), validated completely against its schema (`schema.rs`, `kubernetes.rs`,
//! `validate.rs`), then frozen.

mod alternatives;
pub mod env;
mod kubernetes;
mod path;
mod reserve;
pub mod schema;
mod validate;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path as FsPath, PathBuf};

use k8s_openapi::api::core::v1::{Affinity, Toleration};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::plugin_config::{self, PluginFiles};

pub use alternatives::{Alternative, DEFAULT_ALTERNATIVE, DEFAULT_PLACEMENT_LABEL, MAX_ALTERNATIVES};
pub use env::ENV_PREFIX;
pub use reserve::{Allow, KUBE_SCHEDULER, Reserve, TrustedSchedulers};

/// Where the configuration is read from when neither `--config` nor
/// `$POD_DIRECTOR_CONFIG` names a file.
pub(crate) const DEFAULT_CONFIG_PATH: &str = "/etc/pod-director/config.yaml";
/// The environment variable naming the configuration file.
pub(crate) const CONFIG_PATH_ENV: &str = "POD_DIRECTOR_CONFIG";
/// Largest configuration file accepted.
const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

named_enum! {
    /// How a group's decisions take effect.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(rename = "mode", transform = schema::variants_as_enum)]
    pub enum Mode {
        /// Report the would-be patch or denial; admit the pod untouched.
        #[default]
        DryRun => "dryRun",
        /// Like dryRun, and tell the client with an admission warning.
        Warn => "warn",
        /// Apply the patch; deny non-compliant pods.
        Enforce => "enforce",
    }
}

named_enum! {
    /// What happens when the pod asks for something the group contradicts.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(rename = "onConflict", transform = schema::variants_as_enum)]
    pub enum OnConflict {
        /// Deny the pod (in enforce; reported as would_deny otherwise).
        #[default]
        Reject => "reject",
        /// The group's requirement replaces the pod's.
        Override => "override",
        /// The pod's own value stays; the conflict is recorded.
        Ignore => "ignore",
    }
}

/// What happens to pods of a namespace whose label names no defined group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "unknownGroup", transform = schema::variants_as_enum)]
pub enum UnknownGroup {
    /// Admit, with a warning and a log line.
    #[default]
    Allow,
    /// Deny the pod.
    Deny,
}

named_enum! {
    /// What happens when no node could take a pod after its group's placement.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(rename = "onNoFeasibleNode", transform = schema::variants_as_enum)]
    pub enum OnNoFeasibleNode {
        /// Admit, with a warning in warn and enforce (a cluster autoscaler may add a node).
        #[default]
        Warn => "warn",
        /// Deny the pod (in enforce; reported as would_deny otherwise).
        Deny => "deny",
    }
}

named_enum! {
    /// Which admission path enforces a group in enforce (`groups.NAME.enforceWith`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(rename = "enforceWith", transform = schema::variants_as_enum)]
    pub enum EnforceWith {
        /// pod-director's webhook entries (failurePolicy Fail): every rule, but none while it is down.
        #[default]
        Webhook => "webhook",
        /// The webhook's mutating call places the pod; its compiled ValidatingAdmissionPolicy checks the final pod.
        WebhookAndPolicy => "webhookAndPolicy",
        /// Admission policies compiled from the group, run by the API server even while pod-director is down.
        Policy => "policy",
    }
}

named_enum! {
    /// Which pods an observing webhook call is sent for, sampled by the owner's UID (a bare pod always is).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(rename = "observation", transform = schema::variants_as_enum)]
    pub enum Observation {
        Every => "every",
        /// The pods of one controller in 16 (its UID's last hex digit is 0), and every pod without an owner.
        #[default]
        OneIn16 => "oneIn16",
        /// The pods of one controller in 256 (its UID ends in 00), and every pod without an owner.
        OneIn256 => "oneIn256",
        None => "none",
    }
}

/// One group: the placement its pods must carry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "group", transform = schema::ordered::<Group>)]
pub struct Group {
    /// Overrides `defaultMode` for this group.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Mode")]
    pub mode: Option<Mode>,
    pub on_conflict: OnConflict,
    /// Honour the pod exclusion label for pods of this group.
    pub allow_pod_exclusion: bool,
    /// Overrides the top-level `onNoFeasibleNode` for this group.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "OnNoFeasibleNode")]
    pub on_no_feasible_node: Option<OnNoFeasibleNode>,
    /// Leave this group's DaemonSets alone: their objects are not decided, and
    /// the pods the DaemonSet controller creates for them are skipped.
    pub allow_daemon_sets: bool,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "kubernetes::Labels")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<kubernetes::Toleration>")]
    pub tolerations: Vec<Toleration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "kubernetes::Affinity")]
    pub affinity: Option<Affinity>,
    /// Other placements a pod may choose with the placement label (`podPlacementLabel`), by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "alternatives::Alternatives")]
    pub alternatives: BTreeMap<String, Alternative>,
    /// Keep everyone else's pods off the group's nodes (absent: nobody is kept off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve: Option<Reserve>,
    /// Where the group's nodes come from, when they need not all exist yet.
    #[serde(skip_serializing_if = "is_default")]
    pub nodes: GroupNodes,
    /// The admission path that enforces the group in enforce.
    #[serde(skip_serializing_if = "is_default")]
    pub enforce_with: EnforceWith,
}

/// Where a group's nodes come from (`groups.NAME.nodes`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "groupNodes", transform = schema::ordered::<GroupNodes>)]
pub struct GroupNodes {
    /// An autoscaler pod-director cannot read creates the group's nodes when its pods need them
    /// (cluster-autoscaler node groups scaled to zero, GKE node auto-provisioning): no node now is
    /// "0 now, provisioned on demand", not a blocker, and `onNoFeasibleNode: deny` does not deny.
    /// Karpenter NodePools need no declaration: they are read.
    pub provisioned_on_demand: bool,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// The username kube-controller-manager's DaemonSet controller creates pods as
/// (with `--use-service-account-credentials`, as kubeadm, kind and managed clusters run it).
pub(crate) const DEFAULT_DAEMON_SET_CONTROLLER: &str = "system:serviceaccount:kube-system:daemon-set-controller";

/// Who may set, change or remove a namespace's group label (the namespace label guard,
/// `/validate-namespace`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "namespaceGuard", transform = schema::ordered::<NamespaceGuard>)]
pub struct NamespaceGuard {
    /// Unset (default): follow the groups — a change that takes a namespace into or out of a group in
    /// enforce (its label, or `defaultGroup` without one) is decided in enforce, any other in dryRun.
    /// Set, it decides every change: dryRun reports would-be denials; warn also warns the client;
    /// enforce denies.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Mode")]
    pub mode: Option<Mode>,
    /// Usernames allowed to change the label, as `request.userInfo.username` names them.
    #[schemars(with = "Vec<kubernetes::RequesterName>", extend("uniqueItems" = true))]
    pub allowed_users: Vec<String>,
    /// Groups whose members may change the label (default `system:masters`).
    #[schemars(with = "Vec<kubernetes::RequesterName>", extend("uniqueItems" = true))]
    pub allowed_groups: Vec<String>,
    /// Service accounts allowed to change the label, as `namespace/name`.
    #[schemars(with = "Vec<kubernetes::ServiceAccountName>", extend("uniqueItems" = true))]
    pub allowed_service_accounts: Vec<String>,
}

impl Default for NamespaceGuard {
    fn default() -> Self {
        Self {
            mode: None,
            allowed_users: Vec::new(),
            allowed_groups: vec!["system:masters".to_owned()],
            allowed_service_accounts: Vec::new(),
        }
    }
}

impl NamespaceGuard {
    /// The usernames of `allowedServiceAccounts` (`system:serviceaccount:NS:NAME`).
    pub(crate) fn service_account_usernames(&self) -> impl Iterator<Item = String> + '_ {
        self.allowed_service_accounts
            .iter()
            .filter_map(|sa| service_account_username(sa))
    }
}

/// The username a ServiceAccount written `namespace/name` acts as (`system:serviceaccount:NS:NAME`).
fn service_account_username(sa: &str) -> Option<String> {
    sa.split_once('/')
        .map(|(ns, name)| format!("system:serviceaccount:{ns}:{name}"))
}

/// The in-tree admission plugins PodNodeSelector and PodTolerationRestriction, honoured by
/// pod-director (`inTreePlugins`): the namespaces' annotations, and the plugins' files.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "inTreePlugins", transform = schema::ordered::<InTreePlugins>)]
pub struct InTreePlugins {
    pub mode: Mode,
    /// kube-apiserver's `--admission-control-config-file`: its two plugins' entries are read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_config_file: Option<String>,
    /// PodNodeSelector's own file (`podNodeSelectorPluginConfig`), instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_node_selector_config_file: Option<String>,
    /// PodTolerationRestriction's own file (`Configuration`), instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_toleration_restriction_config_file: Option<String>,
    /// What the files say, read as the configuration is loaded (paths relative to its file).
    #[serde(skip)]
    #[schemars(skip)]
    pub files: PluginFiles,
}

impl InTreePlugins {
    fn file_names(&self) -> [Option<&str>; 3] {
        let files = [&self.admission_config_file, &self.pod_node_selector_config_file];
        [files[0], files[1], &self.pod_toleration_restriction_config_file].map(Option::as_deref)
    }
}

/// pod-director's configuration: the server's config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "config", transform = schema::ordered::<Config>)]
pub struct Config {
    /// The namespace label whose value names the group.
    #[schemars(with = "kubernetes::LabelKey")]
    pub namespace_label: String,
    /// Group for namespaces without the label; none when absent.
    #[schemars(with = "Option<kubernetes::GroupName>")]
    pub default_group: Option<String>,
    /// Namespaces never touched (pod-director's own namespace is added at run time).
    #[schemars(with = "Vec<kubernetes::NamespaceName>", extend("uniqueItems" = true))]
    pub excluded_namespaces: Vec<String>,
    pub unknown_group: UnknownGroup,
    pub default_mode: Mode,
    /// Pod label that exempts a pod (value `"true"`) in groups with `allowPodExclusion`.
    #[schemars(with = "kubernetes::LabelKey")]
    pub pod_exclusion_label: String,
    /// Pod label naming the alternative of its group the pod chooses (absent: the group's own placement).
    #[serde(skip_serializing_if = "alternatives::is_default_placement_label")]
    #[schemars(with = "kubernetes::LabelKey", extend("default" = "pod-director/placement"))]
    pub pod_placement_label: String,
    /// When no node could take a pod after the patch: `warn` (default) or `deny`.
    #[serde(skip_serializing_if = "is_default")]
    pub on_no_feasible_node: OnNoFeasibleNode,
    /// The username of the DaemonSet controller: pods it creates in groups with
    /// `allowDaemonSets` are skipped.
    #[schemars(with = "kubernetes::RequesterName")]
    pub daemon_set_controller: String,
    /// Who may change namespace group labels.
    pub namespace_guard: NamespaceGuard,
    /// Schedulers whose bindings of pods to nodes (`pods/binding`) reservations trust.
    #[serde(skip_serializing_if = "is_default")]
    pub trusted_schedulers: TrustedSchedulers,
    /// Which pods of groups enforced by admission policies are still sent to the webhook, logged.
    #[serde(skip_serializing_if = "is_default")]
    pub policy_observation: Observation,
    /// Which pod CREATEs of dryRun and warn groups `/validate` judges again after `/mutate`.
    #[serde(skip_serializing_if = "is_default")]
    pub shadow_validation: Observation,
    /// Groups by name (the namespace label value)
    #[schemars(with = "kubernetes::MapOf<kubernetes::GroupName, Group>")]
    pub groups: BTreeMap<String, Group>,
    /// The in-tree plugins' annotations and files, honoured (absent: off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_tree_plugins: Option<InTreePlugins>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            namespace_label: "pod-director/group".to_owned(),
            default_group: None,
            excluded_namespaces: ["kube-system", "kube-public", "kube-node-lease"]
                .map(str::to_owned)
                .to_vec(),
            unknown_group: UnknownGroup::default(),
            default_mode: Mode::default(),
            pod_exclusion_label: "pod-director/exclude".to_owned(),
            pod_placement_label: DEFAULT_PLACEMENT_LABEL.to_owned(),
            on_no_feasible_node: OnNoFeasibleNode::default(),
            daemon_set_controller: DEFAULT_DAEMON_SET_CONTROLLER.to_owned(),
            namespace_guard: NamespaceGuard::default(),
            trusted_schedulers: TrustedSchedulers::default(),
            policy_observation: Observation::default(),
            shadow_validation: Observation::default(),
            groups: BTreeMap::new(),
            in_tree_plugins: None,
        }
    }
}

/// One problem in the configuration, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path} is {size} bytes; the limit is {MAX_CONFIG_BYTES}")]
    TooLarge { path: PathBuf, size: u64 },
    #[error("config file {origin} is not valid YAML: {message}")]
    Syntax { origin: String, message: String },
    #[error(
        "config {origin} is empty ({what}): it would leave every pod unplaced, so it is refused; \
         write the settings, or `groups: {{}}` to define no group on purpose"
    )]
    Empty { origin: String, what: &'static str },
    #[error("config {origin} is invalid ({} error{}):\n{}", .errors.len(), if .errors.len() == 1 { "" } else { "s" }, render(.errors))]
    Invalid { origin: String, errors: Vec<FieldError> },
}

fn render(errors: &[FieldError]) -> String {
    errors.iter().map(|e| format!("  {e}")).collect::<Vec<_>>().join("\n")
}

/// A validated configuration and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    /// Short content hash of the effective configuration (after overrides).
    pub revision: String,
    /// Environment variables that overrode the file, as `(VARIABLE, path)`.
    pub overrides: Vec<(String, String)>,
    /// Valid but probably unintended settings (no groups at all), with
    /// what to do, for `check-config` to print and `serve` to log.
    pub warnings: Vec<String>,
}

/// Loads the configuration file and adds pod-director's own namespace to the excluded ones
/// ([`Config::exclude_own_namespace`]); `serve` and `audit` read their configuration so.
pub fn load_config(path: &FsPath, own_namespace: Option<&str>) -> Result<Loaded, ConfigError> {
    let mut loaded = Config::load(path)?;
    loaded.config.exclude_own_namespace(own_namespace);
    Ok(loaded)
}

/// The warning of a configuration that defines no group.
pub(crate) const NO_GROUPS_WARNING: &str =
    "groups is empty: no group is defined, so pod-director places no pod and every pod is admitted untouched";

/// Why `text` holds no document at all: only whitespace, comments and document markers.
fn blank(text: &str) -> Option<&'static str> {
    let mut comments = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            comments = true;
        } else if !(line.is_empty() || line == "---" || line == "...") {
            return None;
        }
    }
    Some(if comments { "only comments" } else { "no content" })
}

impl Config {
    /// Parses, overrides and validates a YAML (or JSON) document. `origin` names the source in
    /// error messages; the in-tree plugins' files are relative to its directory (a file's path).
    pub fn from_yaml(
        text: &str,
        origin: &str,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Loaded, ConfigError> {
        let empty = |what| ConfigError::Empty {
            origin: origin.to_owned(),
            what,
        };
        if let Some(what) = blank(text) {
            return Err(empty(what));
        }
        let mut document: Value = serde_saphyr::from_str(text).map_err(|e| ConfigError::Syntax {
            origin: origin.to_owned(),
            message: e.to_string(),
        })?;
        if document.is_null() {
            return Err(empty("a null document"));
        }
        let invalid = |errors| ConfigError::Invalid {
            origin: origin.to_owned(),
            errors,
        };
        let overrides = env::apply(&mut document, vars).map_err(invalid)?;
        let errors = validate::check(&document);
        if !errors.is_empty() {
            return Err(invalid(errors));
        }
        let mut config: Config = serde_json::from_value(document).map_err(|e| {
            invalid(vec![FieldError {
                path: "(document)".to_owned(),
                message: e.to_string(),
            }])
        })?;
        let mut errors = config.policy_errors();
        errors.extend(config.alternative_errors());
        if let Some(section) = config.in_tree_plugins.as_mut() {
            let base = FsPath::new(origin).parent().filter(|dir| !dir.as_os_str().is_empty());
            match plugin_config::read(section.file_names(), base.unwrap_or(FsPath::new("."))) {
                Ok(files) => section.files = files,
                Err(problems) => {
                    errors.extend(problems.into_iter().map(|(path, message)| FieldError { path, message }))
                }
            }
        }
        if !errors.is_empty() {
            return Err(invalid(errors));
        }
        let warnings = Vec::from_iter(config.groups.is_empty().then(|| NO_GROUPS_WARNING.to_owned()));
        let revision = config.revision();
        Ok(Loaded {
            config,
            revision,
            overrides,
            warnings,
        })
    }

    /// Reads `path`, applying the process environment's overrides.
    pub fn load(path: &FsPath) -> Result<Loaded, ConfigError> {
        Self::load_with_env(path, std::env::vars())
    }

    pub(crate) fn load_with_env(
        path: &FsPath,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Loaded, ConfigError> {
        let read_err = |source| ConfigError::Read {
            path: path.to_owned(),
            source,
        };
        let size = std::fs::metadata(path).map_err(read_err)?.len();
        if size > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLarge {
                path: path.to_owned(),
                size,
            });
        }
        let bytes = std::fs::read(path).map_err(read_err)?;
        let text = String::from_utf8(bytes).map_err(|e| ConfigError::Syntax {
            origin: path.display().to_string(),
            message: format!("not UTF-8: {e}"),
        })?;
        Self::from_yaml(&text, &path.display().to_string(), vars)
    }

    /// Excludes pod-director's own namespace (`--namespace`, `POD_NAMESPACE`): its pods are never
    /// touched. An empty name excludes nothing.
    pub(crate) fn exclude_own_namespace(&mut self, own_namespace: Option<&str>) {
        if let Some(own) = own_namespace.filter(|n| !n.is_empty())
            && !self.excluded_namespaces.iter().any(|n| n == own)
        {
            self.excluded_namespaces.push(own.to_owned());
        }
    }

    /// The file to read: `--config`, else `$POD_DIRECTOR_CONFIG`, else the default path.
    pub fn resolve_path(flag: Option<&FsPath>) -> PathBuf {
        flag.map(FsPath::to_owned)
            .or_else(|| {
                std::env::var_os(CONFIG_PATH_ENV)
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_PATH))
    }

    /// Short, stable content hash of this configuration.
    pub fn revision(&self) -> String {
        let canonical = match &self.in_tree_plugins {
            Some(section) => serde_json::to_vec(&(self, &section.files)),
            None => serde_json::to_vec(self),
        };
        let canonical = canonical.unwrap_or_default();
        let digest = Sha256::digest(&canonical);
        digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
    }

    /// The mode a group runs in.
    pub fn mode_of(&self, group: &Group) -> Mode {
        group.mode.unwrap_or(self.default_mode)
    }

    /// What a group does when no node could take a pod after its placement.
    pub(crate) fn on_no_feasible_node_of(&self, group: &Group) -> OnNoFeasibleNode {
        group.on_no_feasible_node.unwrap_or(self.on_no_feasible_node)
    }

    /// Why `group` (named `name`) cannot be enforced by admission policies: the rules of it that
    /// only the webhook can decide. Empty when it can.
    pub fn policy_blockers(&self, name: &str, group: &Group) -> Vec<String> {
        let mut out = Vec::new();
        if group.affinity.is_some() {
            out.push(
                "affinity: the webhook merges it with the pod's own (implied and contradictory node selector \
                 terms, their cross product, pod affinity terms compared whole), which the policy compiler \
                 does not express in CEL"
                    .to_owned(),
            );
        }
        if !group.alternatives.is_empty() {
            out.push("alternatives: the pod's choice is not compiled into CEL".to_owned());
        }
        if self.on_no_feasible_node_of(group) == OnNoFeasibleNode::Deny {
            out.push("onNoFeasibleNode: deny counts the cluster's nodes, which only the webhook can".to_owned());
        }
        if self.default_group.as_deref() == Some(name) {
            out.push(
                "it is the defaultGroup: namespaces without the label stay on the webhook's default-group entry"
                    .to_owned(),
            );
        }
        out
    }

    /// Whether `group` is enforced by admission policies: in enforce, with `enforceWith: policy`.
    pub fn on_policy(&self, group: &Group) -> bool {
        group.enforce_with == EnforceWith::Policy && self.mode_of(group) == Mode::Enforce
    }

    /// A group with `enforceWith: policy` whose rules a policy cannot express is refused: it
    /// would silently stay on the webhook.
    fn policy_errors(&self) -> Vec<FieldError> {
        self.groups
            .iter()
            .filter(|(_, group)| group.enforce_with == EnforceWith::Policy)
            .filter_map(|(name, group)| {
                let blockers = self.policy_blockers(name, group);
                (!blockers.is_empty()).then(|| FieldError {
                    path: path::Path::root()
                        .key("groups")
                        .key(name)
                        .key("enforceWith")
                        .to_string(),
                    message: format!(
                        "policy, but admission policies cannot enforce this group: {}; set enforceWith: webhook \
                         (or remove what only the webhook can decide)",
                        blockers.join("; ")
                    ),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
