//! Regular expressions shared by the CEL rules of both kinds, spelled as upstream's CRDs spell them.

/// A DNS-1123 label (namespaces).
pub(crate) const DNS1123_LABEL_RULE: &str = r#"self.matches("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")"#;

/// A DNS-1123 subdomain (package names, channels, service accounts, bundle names).
pub(crate) const DNS1123_SUBDOMAIN_RULE: &str =
    r#"self.matches("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")"#;

/// The message upstream gives for a package (or bundle) name that is not a DNS-1123 subdomain.
pub(crate) const PACKAGE_NAME_MESSAGE: &str = "packageName must be a valid DNS1123 subdomain. It must contain only lowercase alphanumeric characters, hyphens (-) or periods (.), start and end with an alphanumeric character, and be no longer than 253 characters";

/// Upstream's version-expression rule, byte for byte (including its oddities such as `[x|X|\\*]`
/// and `=||`): a ClusterExtension that upstream accepts is accepted here, and the reverse.
pub(crate) const VERSION_RANGE_RULE: &str = r#"self.matches("^(\\s*(=||!=|>|<|>=|=>|<=|=<|~|~>|\\^)\\s*(v?(0|[1-9]\\d*|[x|X|\\*])(\\.(0|[1-9]\\d*|x|X|\\*]))?(\\.(0|[1-9]\\d*|x|X|\\*))?(-([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?(\\+([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?)\\s*)((?:\\s+|,\\s*|\\s*\\|\\|\\s*)(=||!=|>|<|>=|=>|<=|=<|~|~>|\\^)\\s*(v?(0|[1-9]\\d*|x|X|\\*])(\\.(0|[1-9]\\d*|x|X|\\*))?(\\.(0|[1-9]\\d*|x|X|\\*]))?(-([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?(\\+([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?)\\s*)*$")"#;

/// `status.install.bundle.version` must be well-formed semver.
pub(crate) const BUNDLE_VERSION_RULE: &str = r#"self.matches("^([0-9]+)(\\.[0-9]+)?(\\.[0-9]+)?(-([-0-9A-Za-z]+(\\.[-0-9A-Za-z]+)*))?(\\+([-0-9A-Za-z]+(-\\.[-0-9A-Za-z]+)*))?")"#;

/// `status.install.bundle.release`.
pub(crate) const BUNDLE_RELEASE_RULE: &str = r#"self.matches("^$|^(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*$")"#;
