//! The committed CRDs and samples agree with the Rust types.

use std::{fs, path::PathBuf};

use olmv1_api::v1::{AvailabilityMode, ClusterCatalog, ClusterExtension, UpgradeConstraintPolicy};

fn repo_dir(sub: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(sub)
}

fn yaml_files(sub: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(repo_dir(sub))
        .unwrap_or_else(|e| panic!("{sub} must exist: {e}"))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn committed_crds_equal_the_generated_ones() {
    // The chart's crds/ (Helm installs them; the install manifest renders them) holds the CRDs
    // alone.
    let committed: String = yaml_files("charts/olmv1/crds")
        .iter()
        .map(|f| fs::read_to_string(f).unwrap())
        .collect();
    assert!(
        committed == olmv1_api::crd::crds_yaml(),
        "charts/olmv1/crds/ differs from `olmv1 crd`: run hack/update-crds.sh and commit the result"
    );
}

#[test]
fn every_sample_deserializes_into_its_kind() {
    let samples = yaml_files("config/samples");
    assert!(
        samples.len() >= 6,
        "config/samples holds the documentation's examples"
    );
    for file in samples {
        let text = fs::read_to_string(&file).unwrap();
        let kind: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        match kind["kind"].as_str() {
            Some("ClusterExtension") => {
                let ext: ClusterExtension =
                    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                let catalog = ext.spec.source.catalog.expect("samples install from catalogs");
                assert_eq!(catalog.package_name, "argocd-operator");
            }
            Some("ClusterCatalog") => {
                let cat: ClusterCatalog =
                    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                assert!(cat.spec.source.image.is_some());
            }
            other => panic!("{}: unexpected kind {other:?}", file.display()),
        }
    }
}

#[test]
fn omitted_fields_take_upstream_defaults_when_read() {
    let ext: ClusterExtension = serde_json::from_value(serde_json::json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": "x"},
        "spec": {"namespace": "ns", "serviceAccount": {"name": "sa"},
                 "source": {"sourceType": "Catalog", "catalog": {"packageName": "p"}}}
    }))
    .unwrap();
    let catalog = ext.spec.source.catalog.unwrap();
    assert_eq!(
        catalog.upgrade_constraint_policy,
        UpgradeConstraintPolicy::CatalogProvided
    );
    assert!(catalog.channels.is_empty() && catalog.version.is_none());

    let cat: ClusterCatalog = serde_json::from_value(serde_json::json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": "c"},
        "spec": {"source": {"type": "Image", "image": {"ref": "registry.example/c:latest"}}}
    }))
    .unwrap();
    assert_eq!(cat.spec.priority, 0);
    assert_eq!(cat.spec.availability_mode, AvailabilityMode::Available);
}
