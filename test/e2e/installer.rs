//! `olmv1 install` without `--service-account`: the command line creates `<extension>-installer`
//! with exactly `olmv1 rbac`'s permissions, and the controller installs, upgrades and
//! uninstalls as that account (with OwnerReferencesPermissionEnforcement on); `olmv1 upgrade`
//! shows and applies the permission change; `olmv1 uninstall` leaves nothing behind.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::ListParams;
use olmv1::admin::rbac::LABEL_INSTALLER_FOR;
use olmv1_api::v1::ClusterExtension;

use crate::components::olmv1;
use crate::{
    Scenario, components,
    fixtures::{self, Bundle, Channel, Package},
    support,
};

/// 1.0.0 without a ConfigMap; 2.0.0 replaces it and adds one (one more object to write).
fn growing(package: &str) -> Package {
    Package {
        name: package.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &["1.0.0", "2.0.0"])],
        bundles: vec![
            Bundle::new("1.0.0").without_config_map(),
            Bundle::new("2.0.0").replaces("1.0.0", package),
        ],
        deprecations: vec![],
    }
}

/// Resources the controller writes as itself, not bundle content: the extension's own status
/// and finalizers, its revision records, events, leases, token and access reviews.
fn controller_bookkeeping(w: &components::AuditWrite) -> bool {
    matches!(
        w.resource.as_str(),
        "clusterextensions"
            | "clusterextensions/status"
            | "events"
            | "leases"
            | "serviceaccounts/token"
            | "subjectaccessreviews"
            | "tokenreviews"
            | "clustercatalogs"
            | "clustercatalogs/status"
            | "clusteroperators"
            | "clusteroperators/status"
    ) || (w.resource == "secrets" && w.namespace.as_deref() == Some(components::SYSTEM_NAMESPACE))
}

async fn installer_objects(client: &kube::Client, extension: &str) -> Vec<String> {
    let lp = ListParams::default().labels(&format!("{LABEL_INSTALLER_FOR}={extension}"));
    let mut found = Vec::new();
    for a in Api::<ServiceAccount>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        found.push(format!("serviceaccount/{}", a.metadata.name.unwrap()));
    }
    for r in Api::<ClusterRole>::all(client.clone()).list(&lp).await.unwrap() {
        found.push(format!("clusterrole/{}", r.metadata.name.unwrap()));
    }
    for r in Api::<ClusterRoleBinding>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        found.push(format!("clusterrolebinding/{}", r.metadata.name.unwrap()));
    }
    for r in Api::<Role>::all(client.clone()).list(&lp).await.unwrap() {
        found.push(format!("role/{}", r.metadata.name.unwrap()));
    }
    for r in Api::<RoleBinding>::all(client.clone()).list(&lp).await.unwrap() {
        found.push(format!("rolebinding/{}", r.metadata.name.unwrap()));
    }
    found
}

#[tokio::test]
async fn install_creates_the_installer_and_the_extension_lives_and_dies_as_it() {
    let s = Scenario::without_installer("installer", growing).await;
    let label = format!("{}={}", components::PACKAGE_LABEL, s.package);
    let installer = format!("{}-installer", s.extension);
    let user = format!("system:serviceaccount:{}:{installer}", s.namespace);
    let install = |extra: &[&str]| {
        let mut args = vec![
            "install",
            &s.package,
            "--name",
            &s.extension,
            "-n",
            &s.namespace,
            "--catalog-label",
            &label,
            "--version",
            "1.0.0",
        ];
        args.extend_from_slice(extra);
        olmv1(&args)
    };

    // Without a terminal and without --yes it refuses, writing nothing.
    let refused = install(&[]);
    assert_eq!(refused.code, Some(2), "{}", refused.stdout);
    assert!(
        refused.stderr.contains("stdin is not a terminal"),
        "{}",
        refused.stderr
    );
    assert!(installer_objects(&s.client, &s.extension).await.is_empty());

    // --dry-run prints the installer and the ClusterExtension, and writes nothing.
    let dry = install(&["--dry-run"]).ok();
    assert!(dry.contains("kind: ClusterRole\n"), "{dry}");
    assert!(dry.contains(&format!("name: {installer}")), "{dry}");
    assert!(dry.contains("resourceNames:"), "{dry}");
    assert!(!dry.contains("escalate"), "{dry}");
    assert!(dry.contains("clusterextensions/finalizers"), "{dry}");
    assert!(dry.contains("# dry run: would install"), "{dry}");
    assert!(installer_objects(&s.client, &s.extension).await.is_empty());

    let audit = components::AuditLog::open();
    let before = audit.end();
    let out = install(&["--yes"]).ok();
    assert!(
        out.contains(&format!("clusterextension/{} applied", s.extension)),
        "{out}"
    );
    let ext = components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    assert_eq!(ext.spec.service_account_name(), Some(installer.as_str()));
    let mut objects = installer_objects(&s.client, &s.extension).await;
    objects.sort();
    assert_eq!(
        objects,
        [
            format!("clusterrole/{installer}"),
            format!("clusterrolebinding/{installer}"),
            format!("role/{installer}"),
            format!("rolebinding/{installer}"),
            format!("serviceaccount/{installer}"),
        ]
    );

    // Every write of this bundle's content went through the installer's account (other tests'
    // controllers write their own extensions meanwhile: only this namespace and the cluster-scoped
    // objects named after this test's fresh package are this extension's).
    let ours = |w: &components::AuditWrite| match w.namespace.as_deref() {
        Some(namespace) => namespace == s.namespace,
        None => w.name.as_deref().is_some_and(|n| n.contains(s.package.as_str())),
    };
    let bundle_writes: Vec<components::AuditWrite> = audit
        .writes_since(before)
        .into_values()
        .flatten()
        .filter(|w| !controller_bookkeeping(w) && ours(w))
        .collect();
    let deployment = fixtures::deployment_name(&s.package);
    let crd = fixtures::crd_name(&s.package);
    for (resource, name) in [
        ("deployments", deployment.as_str()),
        ("customresourcedefinitions", crd.as_str()),
    ] {
        assert!(
            bundle_writes
                .iter()
                .any(|w| w.resource == resource && w.name.as_deref() == Some(name) && w.user == user),
            "no write of {resource}/{name} as {user}: {bundle_writes:#?}"
        );
    }
    let foreign: Vec<_> = bundle_writes.iter().filter(|w| w.user != user).collect();
    assert!(
        foreign.is_empty(),
        "bundle writes not made as {user}: {foreign:#?}"
    );

    // The upgrade to 2.0.0 adds its ConfigMap: shown, then applied with --yes, and it converges.
    let settings = format!("{}-settings", s.package);
    let dry = olmv1(&["upgrade", &s.extension, "--version", "2.0.0", "--dry-run"]).ok();
    let added = format!(
        "+ create, delete, patch configmaps {settings:?} in namespace {:?}",
        s.namespace
    );
    assert!(dry.contains(&added), "{dry}");
    let diff = olmv1(&["rbac", "--diff", &s.extension, "--version", "2.0.0"]).ok();
    assert!(diff.contains(&added), "{diff}");
    let refused = olmv1(&["upgrade", &s.extension, "--version", "2.0.0"]);
    assert_eq!(refused.code, Some(2), "{}", refused.stdout);
    let out = olmv1(&["upgrade", &s.extension, "--version", "2.0.0", "--yes"]).ok();
    assert!(out.contains(&added), "{out}");
    components::wait_installed(&s.client, &s.extension, "2.0.0").await;
    Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace)
        .get(&settings)
        .await
        .expect("2.0.0's ConfigMap, written as the installer");
    let after_upgrade = audit.writes_since(before);
    let config_map_writes: Vec<_> = after_upgrade
        .values()
        .flatten()
        .filter(|w| w.resource == "configmaps" && w.name.as_deref() == Some(settings.as_str()))
        .collect();
    assert!(
        !config_map_writes.is_empty() && config_map_writes.iter().all(|w| w.user == user),
        "{config_map_writes:#?}"
    );

    // Uninstall: the extension, its objects, and then the installer are gone.
    let out = olmv1(&["uninstall", &s.extension]).ok();
    assert!(out.contains("installer removed"), "{out}");
    assert!(
        Api::<ClusterExtension>::all(s.client.clone())
            .get_opt(&s.extension)
            .await
            .unwrap()
            .is_none()
    );
    assert!(installer_objects(&s.client, &s.extension).await.is_empty());
    support::wait_for(
        "the extension's objects to be gone",
        components::INSTALL_TIMEOUT,
        || async {
            let deployment = Api::<Deployment>::namespaced(s.client.clone(), &s.namespace)
                .get_opt(&deployment)
                .await
                .map_err(|e| e.to_string())?;
            let config_map = Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace)
                .get_opt(&settings)
                .await
                .map_err(|e| e.to_string())?;
            let crd = Api::<CustomResourceDefinition>::all(s.client.clone())
                .get_opt(&crd)
                .await
                .map_err(|e| e.to_string())?;
            if deployment.is_none() && config_map.is_none() && crd.is_none() {
                Ok(())
            } else {
                Err(format!(
                    "left: deployment {} configmap {} crd {}",
                    deployment.is_some(),
                    config_map.is_some(),
                    crd.is_some()
                ))
            }
        },
    )
    .await;
    let deletes_as_others: Vec<_> = audit
        .writes_since(before)
        .into_values()
        .flatten()
        .filter(|w| {
            w.verb == "delete"
                && !controller_bookkeeping(w)
                && (w.name.as_deref() == Some(deployment.as_str()) || w.name.as_deref() == Some(crd.as_str()))
                && w.user != user
        })
        .collect::<Vec<_>>();
    assert!(deletes_as_others.is_empty(), "{deletes_as_others:#?}");
}
