//! End-to-end tests of the ClusterExtension controller on the local control plane: real
//! kube-apiserver, controller-manager, scheduler and kwok; a real registry; `olmv1 catalogd`
//! serving ClusterCatalogs over HTTP; `olmv1 controller` installing as the service account.

#[path = "../support/mod.rs"]
mod support;

mod classic;
mod cli;
mod components;
mod fixtures;

mod aggregated_api;
mod alerts;
mod cache;
mod deadline;
mod dependencies;
mod failures;
mod gating;
mod ha;
mod hostile;
mod install;
mod install_identity;
mod installer;
mod lifecycle;
mod migrate;
mod migrate_aggregated;
mod migrate_real;
mod mirrors;
mod node;
mod openshift;
mod operations;
mod proxy;
mod pull_secrets;
mod real;
mod twins;
mod upgrade;
mod vap;
mod webhook_operator;

use fixtures::{Bundle, Channel, Package};
use kube::Client;

/// One test's world: a unique package in its own catalog, and a namespace with an installer.
pub struct Scenario {
    pub client: Client,
    pub package: String,
    pub catalog: String,
    pub namespace: String,
    pub extension: String,
    pub cluster: components::ClusterShare,
}

impl Scenario {
    /// Publishes `package` (built by `make` from a fresh package name) as catalog `:v1`, creates
    /// the ClusterCatalog and an admin installer namespace, and starts the components.
    pub async fn new(prefix: &str, make: impl FnOnce(&str) -> Package) -> Scenario {
        Self::with_share(
            components::shared_cluster().await,
            prefix,
            make,
            true,
            support::registry(),
        )
        .await
    }

    /// [`Scenario::new`] with the images in `registry` (`host:port`), e.g. one a test stops.
    pub async fn in_registry(prefix: &str, make: impl FnOnce(&str) -> Package, registry: &str) -> Scenario {
        Self::with_share(components::shared_cluster().await, prefix, make, true, registry).await
    }

    /// [`Scenario::new`] with a bare namespace: no installer ServiceAccount, no grants.
    pub async fn without_installer(prefix: &str, make: impl FnOnce(&str) -> Package) -> Scenario {
        Self::with_share(
            components::shared_cluster().await,
            prefix,
            make,
            false,
            support::registry(),
        )
        .await
    }

    /// [`Scenario::without_installer`] for a test that must have the cluster alone.
    pub async fn without_installer_exclusive(prefix: &str, make: impl FnOnce(&str) -> Package) -> Scenario {
        Self::with_share(
            components::exclusive_cluster().await,
            prefix,
            make,
            false,
            support::registry(),
        )
        .await
    }

    /// [`Scenario::new`] for a test that must have the cluster alone.
    pub async fn new_exclusive(prefix: &str, make: impl FnOnce(&str) -> Package) -> Scenario {
        Self::with_share(
            components::exclusive_cluster().await,
            prefix,
            make,
            true,
            support::registry(),
        )
        .await
    }

    async fn with_share(
        cluster: components::ClusterShare,
        prefix: &str,
        make: impl FnOnce(&str) -> Package,
        with_installer: bool,
        registry: &str,
    ) -> Scenario {
        components::ensure_running();
        let client = support::client().await;
        let package = support::fresh_name(prefix);
        let catalog = format!("{package}-catalog");
        let image =
            fixtures::publish_catalog(registry, &format!("e2e/{catalog}"), "v1", &make(&package)).await;
        components::apply_catalog(&client, &catalog, &image, 0, &package).await;
        components::wait_catalog_serving(&client, &catalog).await;
        let namespace = if with_installer {
            components::namespace_with_admin_installer(&client, &package).await
        } else {
            support::fresh_namespace(&client, &package).await
        };
        let extension = format!("{package}-ext");
        Scenario {
            client,
            package,
            catalog,
            namespace,
            extension,
            cluster,
        }
    }

    /// Publishes a new version of the catalog image and points the ClusterCatalog at it.
    pub async fn republish(&self, tag: &str, package: &Package) {
        let image = fixtures::publish_catalog(
            support::registry(),
            &format!("e2e/{}", self.catalog),
            tag,
            package,
        )
        .await;
        components::apply_catalog(&self.client, &self.catalog, &image, 0, &self.package).await;
        components::wait_catalog_serving(&self.client, &self.catalog).await;
    }

    /// Forces `version` with SelfCertified and no CRD upgrade safety check: the documented way
    /// to roll back (an older CRD usually lacks fields the newer one added).
    pub async fn roll_back_to(&self, version: &str) {
        let mut body = components::extension(
            &self.extension,
            &self.namespace,
            &self.package,
            serde_json::json!({"version": version, "upgradeConstraintPolicy": "SelfCertified"}),
        );
        body["spec"]["install"] =
            serde_json::json!({"preflight": {"crdUpgradeSafety": {"enforcement": "None"}}});
        components::apply_extension(&self.client, body).await;
    }

    /// The package's operator Deployment in the install namespace, if it exists.
    pub async fn operator_deployment(&self) -> Option<k8s_openapi::api::apps::v1::Deployment> {
        kube::Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(self.client.clone(), &self.namespace)
            .get_opt(&fixtures::deployment_name(&self.package))
            .await
            .unwrap()
    }

    /// The extension's revision record (`revision.json` of its Secret).
    pub async fn record(&self) -> serde_json::Value {
        let secret = kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
            self.client.clone(),
            components::SYSTEM_NAMESPACE,
        )
        .get(&format!("{}-revision", self.extension))
        .await
        .unwrap();
        serde_json::from_slice(&secret.data.unwrap()["revision.json"].0).unwrap()
    }

    /// Scales the operator Deployment to `replicas` (drift) and waits until the controller has
    /// written its one replica back: proof that a reconcile applied the Deployment since.
    pub async fn scale_operator_and_wait_restored(&self, replicas: i32) {
        use kube::api::{Patch, PatchParams};
        let deployments = kube::Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(
            self.client.clone(),
            &self.namespace,
        );
        let name = fixtures::deployment_name(&self.package);
        deployments
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"replicas": replicas}})),
            )
            .await
            .unwrap();
        support::wait_for(
            "the Deployment's replicas to be restored",
            components::INSTALL_TIMEOUT,
            || async {
                let replicas = deployments
                    .get(&name)
                    .await
                    .map_err(|e| e.to_string())?
                    .spec
                    .unwrap()
                    .replicas;
                if replicas == Some(1) {
                    Ok(())
                } else {
                    Err(format!("replicas {replicas:?}"))
                }
            },
        )
        .await;
    }

    /// Deletes the ClusterExtension and waits until it is gone (its finalizer has uninstalled).
    pub async fn uninstall(&self) {
        let extensions = kube::Api::<olmv1_api::v1::ClusterExtension>::all(self.client.clone());
        extensions
            .delete(&self.extension, &kube::api::DeleteParams::default())
            .await
            .unwrap();
        support::wait_for(
            "the extension to be uninstalled",
            components::INSTALL_TIMEOUT,
            || async {
                match extensions.get_opt(&self.extension).await {
                    Ok(None) => Ok(()),
                    Ok(Some(_)) => Err("still there".to_string()),
                    Err(e) => Err(e.to_string()),
                }
            },
        )
        .await;
    }

    /// Applies the scenario's ClusterExtension with the given `spec.source.catalog` fields.
    pub async fn apply_extension(&self, catalog_fields: serde_json::Value) {
        let body = components::extension(&self.extension, &self.namespace, &self.package, catalog_fields);
        components::apply_extension(&self.client, body).await;
    }
}

/// A package with the one bundle `bundle` in channel `stable`.
pub fn only(package: &str, bundle: Bundle) -> Package {
    Package {
        name: package.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &[bundle.version.as_str()])],
        bundles: vec![bundle],
        deprecations: vec![],
    }
}

/// A package with one plain bundle, 1.0.0, in channel `stable`.
pub fn one_version(package: &str) -> Package {
    only(package, Bundle::new("1.0.0"))
}

/// A package with bundles 1.0.0 and 1.1.0 (replaces 1.0.0) in channel `stable`.
pub fn two_versions(package: &str) -> Package {
    Package {
        name: package.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &["1.0.0", "1.1.0"])],
        bundles: vec![
            Bundle::new("1.0.0"),
            Bundle::new("1.1.0")
                .replaces("1.0.0", package)
                .crd(fixtures::CrdShape::Compatible),
        ],
        deprecations: vec![],
    }
}
