//! Dependencies in the controller: what `--dependencies` selects, the step's error, and which
//! blocked extensions to wake when what is installed (or what the cluster serves) changes.

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use olmv1_api::v1::ClusterExtension;

use crate::{
    apply::{
        identity::installer_name,
        revision::{InstalledRevision, RecordError},
    },
    catalog::{CatalogIndex, PROPERTY_PACKAGE, Property},
    dependencies,
};

pub use crate::resolve::DependencyMode;

/// How soon an extension blocked on dependencies is looked at again with no wake: the safety
/// net behind [`DependencyWaits`] (an API served by an object the controller does not watch).
pub const DEPENDENCY_RECHECK: Duration = Duration::from_secs(120);

/// The extensions blocked on a dependency relation (their own unsatisfied requirements, or an
/// installed dependent their upgrade would break), and a signal that what could unblock them
/// changed: an installed bundle installed, upgraded or removed, or the cluster's APIs changed.
#[derive(Clone, Default)]
pub struct DependencyWaits {
    blocked: Arc<Mutex<BTreeSet<String>>>,
    changes: Arc<tokio::sync::watch::Sender<u64>>,
}

impl DependencyWaits {
    fn blocked(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.blocked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records whether `extension` is blocked on dependencies after its reconcile.
    pub fn set_blocked(&self, extension: &str, blocked: bool) {
        let mut set = self.blocked();
        if blocked {
            set.insert(extension.to_string());
        } else {
            set.remove(extension);
        }
    }

    /// What is installed or served changed: every blocked extension is reconciled again.
    pub fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The blocked extensions, each time something changed (changes close together coalesce).
    pub fn wakes(&self) -> impl Stream<Item = ObjectRef<ClusterExtension>> + Send + 'static {
        let waits = self.clone();
        let changes = self.changes.subscribe();
        futures::stream::unfold(changes, move |mut changes| {
            let waits = waits.clone();
            async move {
                changes.changed().await.ok()?;
                let blocked: Vec<_> = waits.blocked().iter().map(|n| ObjectRef::new(n)).collect();
                Some((futures::stream::iter(blocked), changes))
            }
        })
        .flatten()
    }
}

/// How the message of a bundle blocked on unsatisfied dependencies begins (after the bundle).
pub const UNSATISFIED_DEPENDENCIES: &str = "dependencies not satisfied by any installed ClusterExtension";

/// Why the dependency step failed.
#[derive(Debug, thiserror::Error)]
pub enum DependencyCheckError {
    /// The bundle's requirements cannot be read (malformed, too large, a CEL rule that does not
    /// compile): an error of the bundle.
    #[error(transparent)]
    Invalid(#[from] dependencies::DependencyError),
    /// Requirements that no bundle installed through another ClusterExtension (nor, for an API,
    /// the cluster) satisfies.
    #[error(
        "{UNSATISFIED_DEPENDENCIES}: {}; install them with: {command}",
        join(unsatisfied)
    )]
    Unsatisfied {
        /// Each requirement left unsatisfied, with its `failureMessage` when given.
        unsatisfied: Vec<dependencies::Unsatisfied>,
        /// The `olmv1 install --with-dependencies` command that installs what is missing.
        command: String,
    },
    /// Installing the bundle would leave requirements of installed dependents unsatisfied.
    #[error(
        "installing it would break installed extensions: {}; bundle {installed:?} stays installed",
        join(broken)
    )]
    BreaksDependents {
        /// The bundle installed now, which keeps running.
        installed: String,
        /// Each dependent's requirement the bundle would break.
        broken: Vec<dependencies::BrokenDependent>,
    },
    /// The installed ClusterExtensions could not be listed.
    #[error("error listing ClusterExtensions to check dependencies: {0}")]
    ListExtensions(#[source] kube::Error),
    /// The revision records could not be read.
    #[error("error reading installed bundles to check dependencies: {0}")]
    ReadRecords(#[source] RecordError),
    /// The cluster's APIs could not be discovered.
    #[error("error discovering the cluster's APIs to check dependencies: {0}")]
    Discovery(#[source] kube::Error),
    /// Checking the bundle's requirements (and its installed dependents') costs more than the
    /// controller's budget for one check: the bundle is refused, whatever is installed.
    #[error(
        "checking the dependencies of bundle {bundle:?} {exhausted}: its requirements are too costly to evaluate against the installed bundles"
    )]
    OverBudget {
        /// The bundle.
        bundle: String,
        /// The budget or deadline that ran out.
        exhausted: crate::meter::Exhausted,
    },
    /// The check's thread ended without an answer (a bug; retried).
    #[error("the dependency check failed: {0}")]
    Panicked(String),
}

fn join<T: std::fmt::Display>(items: &[T]) -> String {
    items.iter().map(T::to_string).collect::<Vec<_>>().join("; ")
}

impl DependencyCheckError {
    /// Whether only a change elsewhere (an install, an uninstall, a new bundle) can fix it.
    pub fn is_terminal(&self) -> bool {
        match self {
            Self::Invalid(e) => e.is_terminal(),
            Self::Unsatisfied { .. } | Self::BreaksDependents { .. } => true,
            // Work is the same on every try; a deadline may pass on a busy machine only.
            Self::OverBudget { exhausted, .. } => matches!(exhausted, crate::meter::Exhausted::Work { .. }),
            Self::ListExtensions(_) | Self::ReadRecords(_) | Self::Discovery(_) | Self::Panicked(_) => false,
        }
    }

    /// Whether the extension waits on other extensions or the cluster's APIs (see
    /// [`DependencyWaits`]).
    pub fn waits_on_others(&self) -> bool {
        matches!(self, Self::Unsatisfied { .. } | Self::BreaksDependents { .. })
    }
}

/// An installed extension as dependency checks see it: its revision record, whose properties
/// the catalog entry's (`from_catalog`) complete (a record keeps the catalog's only for kinds the
/// bundle image lacks), and its `olm.package` when neither has one.
pub fn installed_extension(
    extension: &str,
    record: &InstalledRevision,
    from_catalog: Option<&[Property]>,
) -> dependencies::InstalledExtension {
    let mut properties = union(&record.properties, from_catalog.unwrap_or_default());
    if !properties.iter().any(|p| &*p.type_ == PROPERTY_PACKAGE) {
        let value = serde_json::json!({"packageName": record.package, "version": record.bundle_version});
        properties.push(Property::new(PROPERTY_PACKAGE, value.into()));
    }
    dependencies::InstalledExtension {
        extension: extension.to_string(),
        package: record.package.clone(),
        bundle: record.bundle_name.clone(),
        version: record.bundle_version.clone(),
        properties,
    }
}

/// The properties `index` (the catalog a record names) lists for the record's bundle, when it
/// still carries it: what completes the record in [`installed_extension`].
pub fn catalog_entry_properties<'a>(
    index: &'a CatalogIndex,
    record: &InstalledRevision,
) -> Option<&'a [Property]> {
    let bundle = index
        .package(&record.package)?
        .bundles
        .iter()
        .find(|b| *b.name == *record.bundle_name)?;
    Some(&bundle.properties)
}

/// `first`, then each property of `then` it lacks.
pub fn union(first: &[Property], then: &[Property]) -> Vec<Property> {
    let mut properties = first.to_vec();
    for property in then {
        if !properties.contains(property) {
            properties.push(property.clone());
        }
    }
    properties
}

/// Every group/version/kind discovery lists.
pub fn served_apis(discovery: &kube::Discovery) -> Vec<dependencies::Gvk> {
    let mut apis = Vec::new();
    for group in discovery.groups() {
        for version in group.versions() {
            for (resource, _) in group.versioned_resources(version) {
                apis.push(dependencies::Gvk {
                    group: resource.group,
                    version: resource.version,
                    kind: resource.kind,
                });
            }
        }
    }
    apis.sort();
    apis.dedup();
    apis
}

/// The `olmv1 install --with-dependencies` command that installs what `ext` needs: the same
/// package, namespace, service account and catalog filter, so that the plan is for this
/// extension (applying it again changes nothing of it).
pub fn install_command(ext: &ClusterExtension) -> String {
    let spec = &ext.spec;
    let catalog = spec.source.catalog.as_ref();
    let mut words = vec![
        "olmv1".to_string(),
        "install".to_string(),
        shell_word(catalog.map(|c| c.package_name.as_str()).unwrap_or_default()),
        "--name".to_string(),
        shell_word(&ext.name_any()),
        "--namespace".to_string(),
        shell_word(&spec.namespace),
    ];
    // The installer olmv1 made is made again, and each dependency gets its own.
    let made_by_olmv1 = installer_name(&ext.name_any());
    if let Some(account) = spec.service_account.as_ref().filter(|a| a.name != made_by_olmv1) {
        words.extend(["--service-account".to_string(), shell_word(&account.name)]);
    }
    if let Some(catalog) = catalog {
        if let Some(version) = catalog.version.as_deref().filter(|v| !v.is_empty()) {
            words.extend(["--version".to_string(), shell_word(version)]);
        }
        for channel in &catalog.channels {
            words.extend(["--channel".to_string(), shell_word(channel)]);
        }
        let labels = catalog.selector.as_ref().and_then(|s| s.match_labels.as_ref());
        for (key, value) in labels.into_iter().flatten() {
            words.extend([
                "--catalog-label".to_string(),
                shell_word(&format!("{key}={value}")),
            ]);
        }
    }
    words.push("--with-dependencies".to_string());
    words.join(" ")
}

/// `word` as one shell word: as is when it has nothing a shell would read, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extension(catalog: serde_json::Value) -> ClusterExtension {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "olm.operatorframework.io/v1",
            "kind": "ClusterExtension",
            "metadata": {"name": "a-ext"},
            "spec": {
                "namespace": "team-a",
                "serviceAccount": {"name": "installer"},
                "source": {"sourceType": "Catalog", "catalog": catalog},
            },
        }))
        .expect("a valid ClusterExtension")
    }

    #[test]
    fn the_install_command_keeps_the_extensions_filter_and_quotes_what_a_shell_would_read() {
        let ext = extension(serde_json::json!({
            "packageName": "a",
            "version": ">=1.0.0, <2.0.0",
            "channels": ["stable", "fast"],
            "selector": {"matchLabels": {"team": "a's"}},
        }));
        assert_eq!(
            install_command(&ext),
            "olmv1 install a --name a-ext --namespace team-a --service-account installer \
             --version '>=1.0.0, <2.0.0' --channel stable --channel fast --catalog-label 'team=a'\\''s' \
             --with-dependencies"
        );
        assert_eq!(
            install_command(&extension(serde_json::json!({"packageName": "a"}))),
            "olmv1 install a --name a-ext --namespace team-a --service-account installer --with-dependencies"
        );
        let mut own_installer = extension(serde_json::json!({"packageName": "a"}));
        own_installer
            .spec
            .service_account
            .as_mut()
            .expect("an account")
            .name = "a-ext-installer".into();
        assert_eq!(
            install_command(&own_installer),
            "olmv1 install a --name a-ext --namespace team-a --with-dependencies"
        );
    }

    #[test]
    fn an_installed_extension_has_its_records_properties_then_its_catalog_entrys_and_a_package() {
        let property = |text: &str| serde_json::from_str::<Property>(text).expect("a property");
        let record = InstalledRevision {
            package: "b".into(),
            bundle_name: "b.v1.0.0".into(),
            bundle_version: "1.0.0".into(),
            properties: vec![property(r#"{"type":"olm.maxOpenShiftVersion","value":"4.20"}"#)],
            ..Default::default()
        };
        let gvk = property(r#"{"type":"olm.gvk","value":{"group":"b.io","version":"v1","kind":"Widget"}}"#);
        let from_catalog = [record.properties[0].clone(), gvk.clone()];
        let installed = installed_extension("b-ext", &record, Some(&from_catalog));
        let types: Vec<&str> = installed.properties.iter().map(|p| &*p.type_).collect();
        assert_eq!(types, ["olm.maxOpenShiftVersion", "olm.gvk", "olm.package"]);
        assert_eq!(
            installed.properties[2].value.to_value(),
            serde_json::json!({"packageName": "b", "version": "1.0.0"})
        );
        let facts = installed.facts();
        assert_eq!(facts.version.map(|v| v.to_string()).as_deref(), Some("1.0.0"));
        assert_eq!(facts.gvks.len(), 1);
    }

    #[tokio::test]
    async fn a_change_wakes_the_blocked_extensions_only() {
        let waits = DependencyWaits::default();
        let mut wakes = Box::pin(waits.wakes());
        waits.set_blocked("a", true);
        waits.set_blocked("b", true);
        waits.set_blocked("c", true);
        waits.set_blocked("b", false);
        waits.changed();
        let woken: Vec<String> = vec![
            wakes.next().await.expect("a wake").name,
            wakes.next().await.expect("a wake").name,
        ];
        assert_eq!(woken, ["a", "c"]);
    }
}
