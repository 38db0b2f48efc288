//! Hostile bundle images: a manifest that is a symbolic link out of the image (to a host file,
//! to `/dev/zero`), through a chain of links each inside the image when read alone. The
//! controller refuses the bundle with one sentence naming the file and why, applies nothing of
//! it, and an installed version keeps running.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use serde_json::json;

use crate::{
    Scenario, components,
    fixtures::{self, Bundle, Channel, Package},
    support,
};

const LINKED_MANIFEST: &str = "settings.configmap.yaml";

fn package_of(name: &str, bundles: Vec<Bundle>) -> Package {
    let versions: Vec<String> = bundles.iter().map(|b| b.version.clone()).collect();
    let versions: Vec<&str> = versions.iter().map(String::as_str).collect();
    Package {
        name: name.into(),
        default_channel: "stable".into(),
        channels: vec![Channel::new("stable", &versions)],
        bundles,
        deprecations: vec![],
    }
}

/// The message the controller gives for a bundle whose manifest is a link.
fn refusal(package: &str, version: &str) -> String {
    format!(
        "error for resolved bundle {:?} with version {version:?}: \"manifests/{LINKED_MANIFEST}\" in the \
         bundle is a symbolic link, which is not followed",
        fixtures::bundle_name(package, version)
    )
}

/// A host file holding the sentinel secret, which no object or status may ever carry.
fn host_secret_file() -> std::path::PathBuf {
    let path = fixtures::scratch_dir("hostile").join("secret.txt");
    std::fs::write(&path, support::hostile::SECRET).unwrap();
    path
}

#[tokio::test]
async fn a_bundle_linking_a_manifest_to_dev_zero_is_refused_and_nothing_is_applied() {
    let s = Scenario::new("hostilenew", |p| {
        package_of(
            p,
            vec![Bundle::new("1.0.0").manifest_linked_to(LINKED_MANIFEST, std::path::Path::new("/dev/zero"))],
        )
    })
    .await;
    s.apply_extension(json!({})).await;

    let expected = refusal(&s.package, "1.0.0");
    let ext = components::wait_extension(&s.client, &s.extension, "Progressing says why", |ext| {
        components::condition(ext, "Progressing").is_some_and(|c| c.message == expected)
    })
    .await;
    let progressing = components::condition(&ext, "Progressing").unwrap();
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_str()),
        ("False", "Blocked"),
        "hostile content behind a digest never changes: not retried"
    );
    let installed = components::condition(&ext, "Installed").unwrap();
    assert_eq!(
        (installed.status.as_str(), installed.message.as_str()),
        ("False", "No bundle installed")
    );

    // Nothing of the bundle reached the cluster, and the controller is still there (the link
    // to /dev/zero was never read: an unbounded read would have run it out of memory).
    assert!(s.operator_deployment().await.is_none(), "no Deployment");
    let crds = Api::<CustomResourceDefinition>::all(s.client.clone());
    assert!(
        crds.get_opt(&fixtures::crd_name(&s.package))
            .await
            .unwrap()
            .is_none(),
        "no CRD"
    );
    let config_maps = Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace);
    assert!(
        config_maps
            .get_opt(&format!("{}-settings", s.package))
            .await
            .unwrap()
            .is_none(),
        "no ConfigMap"
    );
    let records = Api::<Secret>::namespaced(s.client.clone(), components::SYSTEM_NAMESPACE);
    assert!(
        records
            .get_opt(&format!("{}-revision", s.extension))
            .await
            .unwrap()
            .is_none(),
        "no revision record"
    );
    assert!(
        components::controller_running(),
        "the controller did not exit:\n{}",
        components::log_tail("controller")
    );
}

#[tokio::test]
async fn an_upgrade_to_a_bundle_linking_a_host_file_is_refused_and_the_installed_version_keeps_running() {
    let secret_file = host_secret_file();
    let s = Scenario::new("hostileup", |p| {
        package_of(
            p,
            vec![
                Bundle::new("1.0.0"),
                Bundle::new("1.1.0")
                    .replaces("1.0.0", p)
                    .manifest_linked_to(LINKED_MANIFEST, &secret_file),
            ],
        )
    })
    .await;
    s.apply_extension(json!({"version": "1.0.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    let config_maps = Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace);
    let settings = format!("{}-settings", s.package);
    let before = config_maps.get(&settings).await.unwrap();

    s.apply_extension(json!({"version": "1.1.0"})).await;
    let expected = refusal(&s.package, "1.1.0");
    let ext = components::wait_extension(&s.client, &s.extension, "Progressing says why", |ext| {
        components::condition(ext, "Progressing").is_some_and(|c| c.message == expected)
    })
    .await;
    assert_eq!(
        components::condition(&ext, "Progressing").unwrap().reason,
        "Blocked"
    );
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "True");
    assert_eq!(components::installed_version(&ext), Some("1.0.0"));
    let status_text = serde_json::to_string(&ext.status).unwrap();
    assert!(!status_text.contains(support::hostile::SECRET), "{status_text}");

    // 1.0.0 keeps running, untouched: the same Deployment image, the same ConfigMap (never
    // overwritten with the host file's content).
    let deployment = s
        .operator_deployment()
        .await
        .expect("the operator Deployment stays");
    let image = deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap();
    assert!(image.ends_with(":v1.0.0"), "{image}");
    let after = config_maps.get(&settings).await.unwrap();
    assert_eq!(after.data, before.data);
    assert_eq!(after.metadata.resource_version, before.metadata.resource_version);
    for config_map in config_maps.list(&Default::default()).await.unwrap() {
        let text = serde_json::to_string(&config_map.data).unwrap();
        assert!(!text.contains(support::hostile::SECRET), "{text}");
    }

    // The admin goes back to a good version: the extension is healthy again.
    s.apply_extension(json!({"version": "1.0.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
}
