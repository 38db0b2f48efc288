//! Condition types and reasons, as upstream names them.

/// ClusterExtension: whether a bundle is installed.
pub const TYPE_INSTALLED: &str = "Installed";
/// ClusterExtension: whether the extension is moving towards its desired state.
pub const TYPE_PROGRESSING: &str = "Progressing";
/// ClusterExtension: roll-up of the three deprecation conditions.
pub const TYPE_DEPRECATED: &str = "Deprecated";
/// ClusterExtension: the package is deprecated.
pub const TYPE_PACKAGE_DEPRECATED: &str = "PackageDeprecated";
/// ClusterExtension: a requested channel is deprecated.
pub const TYPE_CHANNEL_DEPRECATED: &str = "ChannelDeprecated";
/// ClusterExtension: the installed bundle is deprecated.
pub const TYPE_BUNDLE_DEPRECATED: &str = "BundleDeprecated";
/// ClusterCatalog: whether the catalog's content is served.
pub const TYPE_SERVING: &str = "Serving";

/// Every condition type of a ClusterExtension; each is present after any reconcile.
pub const CLUSTER_EXTENSION_CONDITION_TYPES: [&str; 6] = [
    TYPE_INSTALLED,
    TYPE_PROGRESSING,
    TYPE_DEPRECATED,
    TYPE_PACKAGE_DEPRECATED,
    TYPE_CHANNEL_DEPRECATED,
    TYPE_BUNDLE_DEPRECATED,
];

pub const REASON_SUCCEEDED: &str = "Succeeded";
pub const REASON_FAILED: &str = "Failed";
pub const REASON_BLOCKED: &str = "Blocked";
pub const REASON_RETRYING: &str = "Retrying";
pub const REASON_ROLLING_OUT: &str = "RollingOut";
pub const REASON_ABSENT: &str = "Absent";
pub const REASON_INVALID_CONFIGURATION: &str = "InvalidConfiguration";
pub const REASON_DEPRECATED: &str = "Deprecated";
pub const REASON_NOT_DEPRECATED: &str = "NotDeprecated";
pub const REASON_DEPRECATION_STATUS_UNKNOWN: &str = "DeprecationStatusUnknown";
pub const REASON_PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
/// ClusterExtension Progressing: an upgrade waits while the installed bundle's OperatorCondition
/// is not upgradeable (olmv1's; OLM classic gives a CSV the same reason).
pub const REASON_OPERATOR_CONDITION_NOT_UPGRADEABLE: &str = "OperatorConditionNotUpgradeable";

/// ClusterExtension reasons, as upstream's conditionsets list them.
pub const CLUSTER_EXTENSION_REASONS: [&str; 11] = [
    REASON_SUCCEEDED,
    REASON_FAILED,
    REASON_BLOCKED,
    REASON_RETRYING,
    REASON_ROLLING_OUT,
    REASON_ABSENT,
    REASON_INVALID_CONFIGURATION,
    REASON_DEPRECATED,
    REASON_NOT_DEPRECATED,
    REASON_DEPRECATION_STATUS_UNKNOWN,
    REASON_PROGRESS_DEADLINE_EXCEEDED,
];

/// ClusterCatalog Serving=True: content is served.
pub const REASON_AVAILABLE: &str = "Available";
/// ClusterCatalog Serving=False: content is not available yet.
pub const REASON_UNAVAILABLE: &str = "Unavailable";
/// ClusterCatalog Serving=False: `availabilityMode: Unavailable`.
pub const REASON_USER_SPECIFIED_UNAVAILABLE: &str = "UserSpecifiedUnavailable";

/// Conditions longer than this are cut, as upstream cuts them.
pub const MAX_CONDITION_MESSAGE_LEN: usize = 32768;
/// What a cut message ends with.
pub const TRUNCATED_MESSAGE_SUFFIX: &str = "\n\n... [message truncated]";

/// Finalizer: clears the bundle unpack cache of a ClusterExtension.
pub const FINALIZER_CLEANUP_UNPACK_CACHE: &str = "olm.operatorframework.io/cleanup-unpack-cache";
/// Finalizer: uninstalls what a ClusterExtension installed.
pub const FINALIZER_CLEANUP_CONTENT: &str = "olm.operatorframework.io/cleanup-contentmanager-cache";
/// Finalizer: drops a ClusterCatalog's served content.
pub const FINALIZER_DELETE_SERVER_CACHE: &str = "olm.operatorframework.io/delete-server-cache";
/// Annotation on a ClusterExtension whose content is handed to someone else (its value says
/// whom, e.g. OLM classic's CSV): the controller stops writing it, takes its finalizer off
/// without uninstalling, and leaves the extension alone while it is there.
pub const ANNOTATION_RELEASED: &str = "olmv1.operatorframework.io/released-to";

/// Label on every object applied for a ClusterExtension: the owner's kind.
pub const LABEL_OWNER_KIND: &str = "olm.operatorframework.io/owner-kind";
/// Label on every object applied for a ClusterExtension: the owner's name.
pub const LABEL_OWNER_NAME: &str = "olm.operatorframework.io/owner-name";
/// Label catalogd puts on every ClusterCatalog: its own name (for selectors).
pub const LABEL_CATALOG_NAME: &str = "olm.operatorframework.io/metadata.name";

/// The value of a condition's `status`, as `metav1.ConditionStatus` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`: the controller cannot tell.
    Unknown,
}

impl ConditionStatus {
    /// As the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    /// `True` or `False`.
    pub fn from_bool(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

impl std::fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
