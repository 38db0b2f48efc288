//! First installs: latest in a channel, an exact version, a range.

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use serde_json::json;

use crate::{
    Scenario, components,
    fixtures::{self, Bundle, Channel, Package},
    support, two_versions,
};

#[tokio::test]
async fn installs_the_latest_bundle_of_a_channel_with_upstream_status() {
    let s = Scenario::new("latest", two_versions).await;
    s.apply_extension(json!({"channels": ["stable"]})).await;
    let ext = components::wait_installed(&s.client, &s.extension, "1.1.0").await;

    let status = ext.status.as_ref().unwrap();
    assert_eq!(
        status.install.as_ref().unwrap().bundle.name,
        fixtures::bundle_name(&s.package, "1.1.0")
    );
    let installed = components::condition(&ext, "Installed").unwrap();
    assert_eq!(installed.reason, "Succeeded");
    assert!(
        installed.message.starts_with("Installed bundle ") && installed.message.ends_with(" successfully")
    );
    assert!(
        installed
            .message
            .contains(&format!("e2e/{}-bundle@sha256:", s.package)),
        "{}",
        installed.message
    );
    assert_eq!(
        components::condition(&ext, "Progressing").unwrap().message,
        "Desired state reached"
    );
    for (type_, message) in [
        ("Deprecated", "not deprecated"),
        ("PackageDeprecated", "package not deprecated"),
        ("ChannelDeprecated", "channel not deprecated"),
        ("BundleDeprecated", "bundle not deprecated"),
    ] {
        let c = components::condition(&ext, type_).unwrap_or_else(|| panic!("{type_} is set"));
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            ("False", "NotDeprecated", message)
        );
    }
    for c in &status.conditions {
        assert_eq!(
            c.observed_generation, ext.metadata.generation,
            "{} carries observedGeneration",
            c.type_
        );
    }

    // The operator runs, owned by the extension.
    let deployment = Api::<Deployment>::namespaced(s.client.clone(), &s.namespace)
        .get(&fixtures::deployment_name(&s.package))
        .await
        .unwrap();
    let labels = deployment.metadata.labels.clone().unwrap();
    assert_eq!(labels["olm.operatorframework.io/owner-kind"], "ClusterExtension");
    assert_eq!(labels["olm.operatorframework.io/owner-name"], s.extension);
    let image = &deployment.spec.unwrap().template.spec.unwrap().containers[0].image;
    assert_eq!(
        image.as_deref(),
        Some(format!("registry.invalid/{}/manager:v1.1.0", s.package).as_str())
    );

    // kubectl shows upstream's columns.
    let table = support::kubectl(&["get", "clusterextension", &s.extension]).ok();
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "INSTALLED",
            "BUNDLE",
            "VERSION",
            "INSTALLED",
            "PROGRESSING",
            "AGE"
        ]
    );
    let row = table.lines().nth(1).unwrap();
    assert!(
        row.contains(&fixtures::bundle_name(&s.package, "1.1.0"))
            && row.contains("1.1.0")
            && row.contains("True")
    );

    // catalogd labels each catalog with its name, as upstream's webhook does, for selectors.
    let catalog = Api::<olmv1_api::v1::ClusterCatalog>::all(s.client.clone())
        .get(&s.catalog)
        .await
        .unwrap();
    assert_eq!(
        catalog.metadata.labels.unwrap()["olm.operatorframework.io/metadata.name"],
        s.catalog
    );

    // The revision record knows what is installed, for restarts, upgrades and gating.
    let data = s.record().await;
    assert_eq!(data["bundleName"], fixtures::bundle_name(&s.package, "1.1.0"));
    assert_eq!(data["catalog"], s.catalog);
    assert!(
        data["objects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["kind"] == "Deployment")
    );
}

#[tokio::test]
async fn an_exact_version_pins_the_install() {
    let s = Scenario::new("pinned", two_versions).await;
    s.apply_extension(json!({"version": "1.0.0"})).await;
    let ext = components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    assert_eq!(
        ext.status.unwrap().install.unwrap().bundle.name,
        fixtures::bundle_name(&s.package, "1.0.0")
    );
}

#[tokio::test]
async fn a_version_range_installs_the_highest_version_within_it() {
    let s = Scenario::new("range", |p| Package {
        name: p.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &["1.0.0", "1.1.0", "2.0.0"])],
        bundles: vec![
            Bundle::new("1.0.0"),
            Bundle::new("1.1.0").replaces("1.0.0", p),
            Bundle::new("2.0.0").replaces("1.1.0", p),
        ],
        deprecations: vec![],
    })
    .await;
    s.apply_extension(json!({"version": ">=1.0.0, <2.0.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
}
