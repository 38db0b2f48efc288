//! The controller's bundle cache under faults: a damaged entry is pulled again and never applied;
//! a cache directory that cannot be written is named in status and nothing is applied. And the
//! status message limit: a message longer than upstream's 32,768 bytes is cut as upstream cuts it.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use olmv1_api::v1::ClusterExtension;
use serde_json::json;

use crate::{Scenario, components, fixtures, support, two_versions};

/// The shared controller's cache directory (`--cache-dir`) and its anonymous pull scope.
fn controller_cache() -> (PathBuf, PathBuf) {
    let cache = fixtures::scratch_dir("controller");
    let scope = cache.join("anonymous");
    (cache, scope)
}

/// The unpacked root of the cached bundle image of `package` at `version`, if cached.
fn cached_bundle(package: &str, version: &str) -> Option<PathBuf> {
    let (_, scope) = controller_cache();
    let repository = format!("/e2e/{package}-bundle@");
    std::fs::read_dir(scope).ok()?.flatten().find_map(|entry| {
        let marker = std::fs::read_to_string(entry.path().join("image.json")).ok()?;
        let rootfs = entry.path().join("rootfs");
        let settings = std::fs::read_to_string(rootfs.join("manifests/settings.configmap.yaml")).ok()?;
        (marker.contains(&repository) && settings.contains(&format!("\"{version}\""))).then_some(rootfs)
    })
}

#[tokio::test]
async fn a_damaged_bundle_in_the_cache_is_pulled_again_and_never_applied() {
    let s = Scenario::new("damaged", two_versions).await;
    s.apply_extension(json!({})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    let rootfs = cached_bundle(&s.package, "1.1.0").expect("the installed bundle is cached");
    let settings_path = rootfs.join("manifests/settings.configmap.yaml");
    let original = std::fs::read_to_string(&settings_path).unwrap();
    let configmaps = Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace);
    let settings_name = format!("{}-settings", s.package);
    let before = configmaps.get(&settings_name).await.unwrap();

    // The same size, another value: only a digest of the content tells them apart. Applied, it
    // would show in the cluster's ConfigMap.
    std::fs::write(&settings_path, original.replace("\"1.1.0\"", "\"6.6.6\"")).unwrap();
    // The Deployment's change makes the next reconcile render and apply in full.
    let deployments =
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(s.client.clone(), &s.namespace);
    deployments
        .patch(
            &fixtures::deployment_name(&s.package),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"olmv1.test/touch": "1"}}})),
        )
        .await
        .unwrap();
    support::wait_for(
        "the controller to find the damage and pull the bundle again",
        components::INSTALL_TIMEOUT,
        || async {
            let log = components::log("controller");
            let found = log
                .lines()
                .any(|l| l.contains("cached image is damaged; pulling it again") && l.contains(&s.package));
            let restored = std::fs::read_to_string(&settings_path).ok() == Some(original.clone());
            if found && restored {
                Ok(())
            } else {
                Err(format!("damage logged: {found}, entry restored: {restored}"))
            }
        },
    )
    .await;
    let ext = components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    assert_eq!(components::condition(&ext, "Installed").unwrap().status, "True");
    let settings = configmaps.get(&settings_name).await.unwrap();
    assert_eq!(
        settings.metadata.uid, before.metadata.uid,
        "no render of the damaged entry pruned the ConfigMap"
    );
    assert_eq!(
        settings.data.unwrap()["version"],
        "1.1.0",
        "the damaged content was never applied"
    );
}

#[tokio::test]
async fn bundle_images_no_extension_uses_leave_the_cache() {
    let s = Scenario::new("cachegc", two_versions).await;
    s.apply_extension(json!({"version": "1.0.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.0.0").await;
    assert!(
        cached_bundle(&s.package, "1.0.0").is_some(),
        "the installed bundle is cached"
    );

    // Once the grace (the shared controller's `--bundle-cache-grace`) has passed, the bundle
    // the upgrade replaced goes; the installed one stays.
    s.apply_extension(json!({"version": "1.1.0"})).await;
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
    support::wait_for(
        "the replaced bundle to leave the cache",
        components::INSTALL_TIMEOUT,
        || async {
            match cached_bundle(&s.package, "1.0.0") {
                None => Ok(()),
                Some(path) => Err(format!("{} is still cached", path.display())),
            }
        },
    )
    .await;
    assert!(
        cached_bundle(&s.package, "1.1.0").is_some(),
        "the installed bundle stays cached"
    );

    Api::<ClusterExtension>::all(s.client.clone())
        .delete(&s.extension, &Default::default())
        .await
        .unwrap();
    support::wait_for(
        "the deleted extension's bundle to leave the cache",
        components::INSTALL_TIMEOUT,
        || async {
            match cached_bundle(&s.package, "1.1.0") {
                None => Ok(()),
                Some(path) => Err(format!("{} is still cached", path.display())),
            }
        },
    )
    .await;
}

#[tokio::test]
async fn a_read_only_cache_directory_is_named_in_status_and_nothing_is_applied() {
    let s = Scenario::new_exclusive("rocache", two_versions).await;
    let (cache, scope) = controller_cache();
    // Hides what the controller cached so far: this test has the cluster alone, and the mount
    // goes when it ends.
    let mount = support::TmpfsMount::new(&scope, "ro,size=1m");
    s.apply_extension(json!({})).await;
    let expected = format!(
        "cannot write to the cache directory {}: Read-only file system (os error 30)",
        cache.display()
    );
    let ext = components::wait_progressing(&s.client, &s.extension, "Retrying", &expected).await;
    let message = &components::condition(&ext, "Progressing").unwrap().message;
    let bundle = fixtures::bundle_name(&s.package, "1.1.0");
    assert!(
        message.starts_with(&format!(
            "error for resolved bundle \"{bundle}\" with version \"1.1.0\": image "
        )) && message.ends_with(&expected)
            && !message.contains('\n'),
        "one sentence naming the bundle, the image, the directory and the cause: {message}"
    );
    assert_eq!(
        components::condition(&ext, "Installed").unwrap().message,
        "No bundle installed"
    );
    assert!(
        s.operator_deployment().await.is_none(),
        "nothing of the bundle was applied"
    );

    drop(mount);
    components::wait_installed(&s.client, &s.extension, "1.1.0").await;
}

#[tokio::test]
async fn a_status_message_longer_than_32768_bytes_is_cut_as_upstream_cuts_it() {
    let s = Scenario::new("longmsg", two_versions).await;
    // An unknown configuration key is named in the message: 40,000 bytes of it.
    let key = "k".repeat(40_000);
    let mut body = components::extension(&s.extension, &s.namespace, &s.package, json!({}));
    body["spec"]["config"] = json!({"configType": "Inline", "inline": {key.clone(): 1}});
    // Created from JSON: an apply patch is read as YAML, whose keys stop at 1,024 characters.
    Api::<ClusterExtension>::all(s.client.clone())
        .create(&PostParams::default(), &serde_json::from_value(body).unwrap())
        .await
        .unwrap();
    let ext = components::wait_extension(&s.client, &s.extension, "a cut Progressing message", |ext| {
        components::condition(ext, "Progressing").is_some_and(|c| c.message.contains("unknown field"))
    })
    .await;
    let message = &components::condition(&ext, "Progressing").unwrap().message;
    const SUFFIX: &str = "\n\n... [message truncated]";
    assert_eq!(message.len(), 32_768, "cut to exactly the limit");
    assert!(message.ends_with(SUFFIX), "{}", &message[message.len() - 40..]);
    let kept = &message[..32_768 - SUFFIX.len()];
    let field = kept
        .find("unknown field \"k")
        .expect("the message names the field");
    assert!(
        kept[field + "unknown field \"".len()..]
            .bytes()
            .all(|b| b == b'k'),
        "the cut falls inside the 40,000-byte name"
    );
    assert!(
        kept.starts_with(&format!(
            "error for resolved bundle \"{}\"",
            fixtures::bundle_name(&s.package, "1.1.0")
        )),
        "{}",
        &kept[..field]
    );
    // The API server took it as it is: the CRD's maxLength is the same 32,768.
    let stored = Api::<ClusterExtension>::all(s.client.clone())
        .get_status(&s.extension)
        .await
        .unwrap();
    assert_eq!(
        components::condition(&stored, "Progressing").unwrap().message,
        *message
    );
}
