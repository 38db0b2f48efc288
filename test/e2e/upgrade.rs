//! Upgrades: along catalog edges, forced with SelfCertified, rollbacks, channel changes, pruning,
//! CRD upgrade safety, deprecation.

use k8s_openapi::api::{
    admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding},
    core::v1::ConfigMap,
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use olmv1_api::v1::conditions::LABEL_OWNER_NAME;
use serde_json::json;

use crate::{
    Scenario, components,
    fixtures::{self, Bundle, Channel, CrdShape, Deprecated, Package},
    support, two_versions,
};

fn only(package: &str, bundles: Vec<Bundle>, channel: &[&str]) -> Package {
    Package {
        name: package.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", channel)],
        bundles,
        deprecations: vec![],
    }
}

/// 1.0.0 and 1.1.0, which replaces it and no longer ships 1.0.0's ConfigMap.
fn dropping_the_config_map(package: &str) -> Package {
    only(
        package,
        vec![
            Bundle::new("1.0.0"),
            Bundle::new("1.1.0")
                .replaces("1.0.0", package)
                .without_config_map(),
        ],
        &["1.0.0", "1.1.0"],
    )
}

async fn manager_image(s: &Scenario) -> String {
    let deployment = s
        .operator_deployment()
        .await
        .expect("the operator Deployment exists");
    deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap()
}

#[tokio::test]
async fn a_successor_published_to_the_catalog_is_installed_automatically() {
    let s = Scenario::new("successor", |p| only(p, vec![Bundle::new("1.0.0")], &["1.0.0"])).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    s.republish("v2", &two_versions(&s.package)).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    assert!(manager_image(&s).await.ends_with(":v1.1.0"));
}

#[tokio::test]
async fn a_newer_version_without_an_upgrade_edge_waits_until_self_certified() {
    let s = Scenario::new("nonsucc", |p| only(p, vec![Bundle::new("1.0.0")], &["1.0.0"])).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    // 2.0.0 has no edge from 1.0.0. The package deprecation in the same catalog shows that the
    // controller did re-resolve against the new content, and still kept 1.0.0.
    let mut next = only(
        &s.package,
        vec![Bundle::new("1.0.0"), Bundle::new("2.0.0")],
        &["1.0.0", "2.0.0"],
    );
    next.deprecations = vec![Deprecated::Package("use the new package".into())];
    s.republish("v2", &next).await;
    let ext = components::wait_extension(&s.client, &s.extension, "PackageDeprecated=True", |ext| {
        components::condition(ext, "PackageDeprecated").is_some_and(|c| c.status == "True")
    })
    .await;
    assert_eq!(ext.status.unwrap().install.unwrap().bundle.version, "1.0.0");
    assert!(manager_image(&s).await.ends_with(":v1.0.0"));

    s.apply_extension(json!({"upgradeConstraintPolicy": "SelfCertified"}))
        .await;
    components::wait_installed(&s.client, &s.extension, "2.0.0").await;
}

#[tokio::test]
async fn self_certified_rolls_back_to_an_older_version() {
    let s = Scenario::new("rollback", two_versions).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;

    // 1.0.0's CRD lacks a field 1.1.0 added: a rollback the admin accepts explicitly.
    s.roll_back_to("1.0.0").await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    assert!(manager_image(&s).await.ends_with(":v1.0.0"));
}

#[tokio::test]
async fn changing_the_channel_follows_the_new_channel() {
    let s = Scenario::new("channel", |p| Package {
        name: p.into(),
        default_channel: "stable".into(),
        channels: vec![
            Channel::new("stable", &["1.0.0", "1.1.0"]),
            Channel::new("fast", &["1.0.0", "1.1.0", "1.2.0"]),
        ],
        bundles: vec![
            Bundle::new("1.0.0"),
            Bundle::new("1.1.0").replaces("1.0.0", p),
            Bundle::new("1.2.0").replaces("1.1.0", p),
        ],
        deprecations: vec![],
    })
    .await;
    s.apply_extension(json!({"channels": ["stable"]})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    s.apply_extension(json!({"channels": ["fast"]})).await;
    components::wait_installed(&s.client, &s.extension, "1.2.0").await;
}

#[tokio::test]
async fn an_upgrade_that_drops_an_object_prunes_it() {
    let s = Scenario::new("prune", |p| only(p, vec![Bundle::new("1.0.0")], &["1.0.0"])).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    let config_maps = Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace);
    let settings = format!("{}-settings", s.package);
    assert!(
        config_maps.get_opt(&settings).await.unwrap().is_some(),
        "1.0.0 ships the ConfigMap"
    );

    let next = dropping_the_config_map(&s.package);
    s.republish("v2", &next).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    assert!(
        config_maps.get_opt(&settings).await.unwrap().is_none(),
        "the dropped ConfigMap is pruned"
    );
}

/// An admission policy that refuses to delete one ConfigMap, as the API server enforces it.
fn refuse_deleting(
    policy: &str,
    config_map: &str,
) -> (ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding) {
    let policy_object = serde_json::from_value(json!({
        "metadata": {"name": policy},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["DELETE"], "resources": ["configmaps"],
            }]},
            "validations": [{
                "expression": format!("oldObject.metadata.name != '{config_map}'"),
                "message": format!("{config_map} is kept by policy {policy}"),
            }],
        },
    }))
    .unwrap();
    let binding = serde_json::from_value(json!({
        "metadata": {"name": policy},
        "spec": {"policyName": policy, "validationActions": ["Deny"]},
    }))
    .unwrap();
    (policy_object, binding)
}

#[tokio::test]
async fn a_failed_prune_keeps_the_object_recorded_until_it_is_pruned() {
    let s = Scenario::new("pruneguard", |p| only(p, vec![Bundle::new("1.0.0")], &["1.0.0"])).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    let config_maps = Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace);
    let settings = format!("{}-settings", s.package);
    let recorded = |record: &serde_json::Value| {
        record["objects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["kind"] == "ConfigMap" && o["name"] == settings.as_str())
    };
    assert!(recorded(&s.record().await), "1.0.0 records its ConfigMap");

    // The API server refuses to delete the ConfigMap (a dry run shows the policy in force).
    let policy_name = format!("{}-keep-settings", s.package);
    let (policy, binding) = refuse_deleting(&policy_name, &settings);
    let policies = Api::<ValidatingAdmissionPolicy>::all(s.client.clone());
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(s.client.clone());
    policies.create(&PostParams::default(), &policy).await.unwrap();
    bindings.create(&PostParams::default(), &binding).await.unwrap();
    let dry_run = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    support::wait_for(
        "the policy to refuse deleting the ConfigMap",
        components::INSTALL_TIMEOUT,
        || async {
            match config_maps.delete(&settings, &dry_run).await {
                Err(refused) => Ok(refused),
                Ok(_) => Err("a dry-run delete is still allowed"),
            }
        },
    )
    .await;

    // The upgrade drops the ConfigMap: applied and recorded, but its prune fails.
    let next = dropping_the_config_map(&s.package);
    s.republish("v2", &next).await;
    let refused = format!("kept by policy {policy_name}");
    let ext = components::wait_progressing(&s.client, &s.extension, "Retrying", &refused).await;
    assert_eq!(
        ext.status.unwrap().install.unwrap().bundle.version,
        "1.0.0",
        "until the upgrade completes, 1.0.0 stays installed"
    );
    let record = s.record().await;
    assert_eq!(
        record["bundleVersion"], "1.1.0",
        "the applied revision is recorded"
    );
    assert!(
        recorded(&record),
        "the ConfigMap still to prune stays in the record"
    );
    assert!(config_maps.get_opt(&settings).await.unwrap().is_some());

    // Once deleting is allowed again, the retry prunes it and the record drops it.
    bindings
        .delete(&policy_name, &DeleteParams::default())
        .await
        .unwrap();
    policies
        .delete(&policy_name, &DeleteParams::default())
        .await
        .unwrap();
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    assert!(config_maps.get_opt(&settings).await.unwrap().is_none(), "pruned");
    assert!(!recorded(&s.record().await), "no longer recorded");
}

#[tokio::test]
async fn pruning_leaves_a_dropped_object_whose_owner_labels_now_name_another_extension() {
    let s = Scenario::new("prunerelabel", |p| {
        only(p, vec![Bundle::new("1.0.0")], &["1.0.0"])
    })
    .await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    let config_maps = Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace);
    let settings = format!("{}-settings", s.package);

    // Someone hands the ConfigMap to another extension; then 1.1.0 drops it from the bundle.
    let other_owner = format!("{}-other", s.extension);
    let relabel = json!({"metadata": {"labels": {LABEL_OWNER_NAME: other_owner}}});
    config_maps
        .patch(&settings, &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .unwrap();
    let next = dropping_the_config_map(&s.package);
    s.republish("v2", &next).await;
    // Pruning runs before the status says 1.1.0 is installed.
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    let kept = config_maps
        .get_opt(&settings)
        .await
        .unwrap()
        .expect("the relabelled ConfigMap is not pruned: it is no longer this extension's");
    assert_eq!(kept.metadata.labels.unwrap()[LABEL_OWNER_NAME], other_owner);
    assert_eq!(kept.data.unwrap()["version"], "1.0.0");
}

#[tokio::test]
async fn an_upgrade_that_breaks_a_crd_is_refused_and_the_old_version_keeps_running() {
    let s = Scenario::new("crdsafety", |p| only(p, vec![Bundle::new("1.0.0")], &["1.0.0"])).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;

    let next = only(
        &s.package,
        vec![
            Bundle::new("1.0.0"),
            Bundle::new("1.1.0")
                .replaces("1.0.0", &s.package)
                .crd(CrdShape::Breaking),
        ],
        &["1.0.0", "1.1.0"],
    );
    s.republish("v2", &next).await;
    let ext = components::wait_extension(&s.client, &s.extension, "the CRD upgrade safety refusal", |ext| {
        components::condition(ext, "Progressing").is_some_and(|c| {
            c.message.contains(&format!(
                "validating upgrade for CRD \"{}\"",
                fixtures::crd_name(&s.package)
            ))
        })
    })
    .await;
    let progressing = components::condition(&ext, "Progressing").unwrap();
    assert!(progressing.message.contains("type"), "{}", progressing.message);
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "True");
    assert_eq!(components::installed_version(&ext), Some("1.0.0"));
    assert!(
        manager_image(&s).await.ends_with(":v1.0.0"),
        "the old operator keeps running"
    );
}

#[tokio::test]
async fn deprecations_in_the_catalog_show_as_conditions() {
    let s = Scenario::new("deprecated", |p| {
        let mut package = two_versions(p);
        package.deprecations = vec![
            Deprecated::Package("the package moves to example-next".into()),
            Deprecated::Channel("stable".into(), "stable is frozen".into()),
            Deprecated::Bundle("1.0.0".into(), "1.0.0 has a known bug".into()),
        ];
        package
    })
    .await;
    s.apply_extension(json!({"version": "1.0.0", "channels": ["stable"]}))
        .await;
    let ext = components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    let check = |type_: &str, message: &str| {
        let c = components::condition(&ext, type_).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            ("True", "Deprecated", message),
            "{type_}"
        );
    };
    check("PackageDeprecated", "the package moves to example-next");
    check("ChannelDeprecated", "stable is frozen");
    check("BundleDeprecated", "1.0.0 has a known bug");
    check(
        "Deprecated",
        "the package moves to example-next\nstable is frozen\n1.0.0 has a known bug",
    );
}
