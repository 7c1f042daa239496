//! What a decision knows besides the object and its namespace: who is asking,
//! and which nodes the cluster has.
//!
//! Exemptions trust the requester (`request.userInfo`, authenticated by the API
//! server), never fields the object's author writes: a DaemonSet pod is skipped
//! only when the DaemonSet controller creates it, a mirror pod only when its
//! node does.

use k8s_openapi::api::authentication::v1::UserInfo;

use super::NodeView;

/// The group every node's credentials carry (`system:node:<name>`).
pub const NODES_GROUP: &str = "system:nodes";
/// The username prefix of node credentials.
pub const NODE_USER_PREFIX: &str = "system:node:";

/// Everything a decision takes besides the configuration, the namespace and the object.
#[derive(Debug, Clone, Default)]
pub struct Context<'a> {
    /// Who sent the request.
    pub requester: Requester,
    /// The cluster's nodes (the Node cache, or `explain --nodes`); `None`
    /// without node data: no feasibility counts, `spec.nodeName` not checked.
    pub nodes: Option<&'a dyn NodeView>,
}

impl<'a> Context<'a> {
    /// The context of a live admission request.
    pub fn from_user_info(user_info: &UserInfo) -> Self {
        Self {
            requester: Requester::from_user_info(user_info),
            nodes: None,
        }
    }

    /// The context of an offline decision (`explain`): nobody is asking, so no
    /// exemption that depends on the requester applies.
    pub fn offline() -> Self {
        Self::default()
    }

    /// The same context, deciding with these nodes.
    pub fn with_nodes(self, nodes: Option<&'a dyn NodeView>) -> Self {
        Self { nodes, ..self }
    }
}

/// The authenticated requester of an admission request (`request.userInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requester {
    /// Empty when unknown (offline).
    pub username: String,
    pub groups: Vec<String>,
}

impl Requester {
    pub fn from_user_info(user_info: &UserInfo) -> Self {
        Self {
            username: user_info.username.clone().unwrap_or_default(),
            groups: user_info.groups.clone().unwrap_or_default(),
        }
    }

    /// Nobody: matches no user, group or node.
    pub fn unknown() -> Self {
        Self::default()
    }

    /// A requester with this username and these groups.
    pub fn new(username: &str, groups: &[&str]) -> Self {
        Self {
            username: username.to_owned(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }

    pub(crate) fn is_known(&self) -> bool {
        !self.username.is_empty()
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// The node's name when the requester is a node's kubelet: `system:node:<name>`
    /// in group `system:nodes`.
    pub fn node_name(&self) -> Option<&str> {
        self.username
            .strip_prefix(NODE_USER_PREFIX)
            .filter(|name| !name.is_empty() && self.in_group(NODES_GROUP))
    }

    /// `alice`, or `alice (groups: a, b)`, for messages.
    pub(crate) fn describe(&self) -> String {
        let name = if self.is_known() {
            format!("{:?}", self.username)
        } else {
            "an unknown requester".to_owned()
        };
        if self.groups.is_empty() {
            name
        } else {
            format!("{name} (groups: {})", self.groups.join(", "))
        }
    }
}
