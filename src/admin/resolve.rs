//! `olmv1 resolve`'s workflow, with no cluster: the request (a ClusterExtension file, read as
//! strictly as the API server would, and the flags' overrides), the catalogs named on the
//! command line with their priorities, and the plan of `--with-dependencies`.

use std::{collections::BTreeMap, path::Path};

use olmv1_api::v1::{CatalogFilter, ClusterExtension, conditions::LABEL_CATALOG_NAME};

use super::{
    output,
    request::RequestOverrides,
    sources::parse_priorities,
    terminal::{JsonError, escape_value as value},
};
use crate::{
    catalog::source::{CatalogSpec, load_catalogs},
    dependencies::{Plan, PlanError, PlanLimits, PlanRequest, plan_within},
    image::PullOptions,
    meter::{Meter, Work},
    resolve::{CatalogInput, InstalledBundle, Resolution, ResolveRequest},
};

/// The catalogs of `--catalog` (`[NAME=]DIR|FILE|URL`) with the priorities of `--priority`
/// (`NAME=N`, default 0), each labelled with its name as catalogd labels a ClusterCatalog.
pub async fn load_inputs(catalogs: &[String], priorities: &[String]) -> Result<Vec<CatalogInput>, String> {
    let priorities: BTreeMap<String, i32> = parse_priorities(priorities).map_err(|e| e.to_string())?;
    let specs: Vec<CatalogSpec> = catalogs
        .iter()
        .map(|c| CatalogSpec::parse(c))
        .collect::<Result<_, _>>()?;
    for name in priorities.keys() {
        if !specs.iter().any(|s| &s.name == name) {
            return Err(format!("--priority names unknown catalog {name:?}"));
        }
    }
    let loaded = load_catalogs(&specs, &PullOptions::new(std::env::temp_dir())).await?;
    Ok(loaded
        .into_iter()
        .map(|catalog| CatalogInput {
            priority: priorities.get(&catalog.name).copied().unwrap_or(0),
            labels: BTreeMap::from([(LABEL_CATALOG_NAME.to_string(), catalog.name.clone())]),
            available: true,
            name: catalog.name,
            index: catalog.index,
        })
        .collect())
}

/// `--with-dependencies`: the package and what it requires, one bundle per package, nothing
/// installed; the plan on a part of the command's `meter` (its own budget and deadline, never
/// more than the command has left), what it spends the command's.
pub fn plan_with_dependencies(
    request: &ResolveRequest,
    catalogs: &[CatalogInput],
    meter: &mut Meter,
) -> Result<Plan, PlanError> {
    let plan_request = PlanRequest {
        request,
        installed: &[],
        served_apis: &[],
        allow_changes: false,
        limits: PlanLimits::default(),
    };
    let mut plan_meter = meter.part(plan_request.limits.max_work, plan_request.limits.max_duration);
    let planned = plan_within(&plan_request, catalogs, &mut plan_meter);
    meter.absorb(&plan_meter);
    planned
}

/// The resolution as `olmv1 resolve` prints it: `BUNDLE VERSION CATALOG`, or one JSON line;
/// charged to the command's `meter` as it is made, and JSON within the output limit
/// ([`output::json_line`]). Text past the meter is refused as JSON is
/// ([`JsonError::Exhausted`]: `rendering the output needs more than the budget of N work
/// units`).
pub fn resolution_text(resolution: &Resolution, json: bool, meter: &mut Meter) -> Result<String, JsonError> {
    if json {
        let out = serde_json::json!({
            "bundle": {"name": resolution.bundle.name, "version": resolution.bundle.status_version},
            "catalog": resolution.catalog,
            "image": resolution.bundle.image,
            "deprecated": resolution.bundle_deprecated(),
        });
        return output::json_line(&out, meter);
    }
    charged_line(
        format!(
            "{} {} {}\n",
            value(&resolution.bundle.name),
            value(&resolution.bundle.status_version),
            value(&resolution.catalog)
        ),
        meter,
    )
}

/// The plan as `olmv1 resolve --with-dependencies` prints it: one line per bundle, dependencies
/// first, each with what requires it; or one JSON line. Each line (or piece of JSON) is charged
/// to the command's `meter` before it is kept, as [`resolution_text`]'s.
pub fn plan_text(plan: &Plan, json: bool, meter: &mut Meter) -> Result<String, JsonError> {
    if json {
        return output::json_line(plan, meter);
    }
    let mut text = String::new();
    for step in &plan.plan {
        let mut line = format!(
            "{} {} {}",
            value(&step.bundle),
            value(&step.version),
            value(&step.catalog)
        );
        if !step.required_by.is_empty() {
            line.push_str(&format!(" (required by {})", value(&step.required_by.join(", "))));
        }
        line.push('\n');
        text.push_str(&charged_line(line, meter)?);
    }
    Ok(text)
}

/// `line`, charged to `meter` ([`Work::Render`], its bytes).
fn charged_line(line: String, meter: &mut Meter) -> Result<String, JsonError> {
    meter
        .charge(Work::Render, line.len() as u64)
        .map_err(JsonError::Exhausted)?;
    Ok(line)
}

/// The request of `olmv1 resolve`: the ClusterExtension of `file` (its `spec.source.catalog` and
/// installed bundle), if any, with `overrides` over it; `--installed` is `BUNDLE_NAME@VERSION`.
pub fn build_request(file: Option<&Path>, overrides: &RequestOverrides) -> Result<ResolveRequest, String> {
    let (mut filter, mut installed) = match file {
        Some(path) => read_cluster_extension(path)?,
        None => (CatalogFilter::default(), None),
    };
    if let Some(p) = &overrides.package {
        filter.package_name = p.clone();
    }
    if filter.package_name.is_empty() {
        return Err("--package (or -f with spec.source.catalog.packageName) is required".to_string());
    }
    if let Some(v) = &overrides.version {
        filter.version = Some(v.clone());
    }
    if !overrides.channels.is_empty() {
        filter.channels = overrides.channels.clone();
    }
    if let Some(policy) = &overrides.upgrade_constraint_policy {
        filter.upgrade_constraint_policy = *policy;
    }
    if let Some(spec) = &overrides.installed {
        let (name, version) = spec
            .split_once('@')
            .filter(|(n, v)| !n.is_empty() && !v.is_empty())
            .ok_or_else(|| format!("--installed must be BUNDLE_NAME@VERSION, got {spec:?}"))?;
        installed = Some(InstalledBundle {
            name: name.to_string(),
            version: version.to_string(),
            release: None,
        });
    }
    Ok(ResolveRequest {
        package: filter.package_name,
        version_range: filter.version,
        channels: filter.channels,
        selector: filter.selector,
        upgrade_constraint_policy: filter.upgrade_constraint_policy,
        installed,
    })
}

/// Reads `spec.source.catalog` and `status.install.bundle` of a ClusterExtension YAML file.
fn read_cluster_extension(path: &Path) -> Result<(CatalogFilter, Option<InstalledBundle>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    check_is_cluster_extension(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let ext: ClusterExtension = match serde_saphyr::from_str(&text) {
        Ok(ext) => ext,
        // Upstream's current API leaves optional what ours requires (serviceAccount): then only
        // the parts resolution needs are read.
        Err(full_error) => {
            return read_catalog_parts(path, &text)
                .map_err(|_| format!("{}: not a ClusterExtension: {full_error}", path.display()));
        }
    };
    let filter = ext
        .spec
        .source
        .catalog
        .clone()
        .ok_or_else(|| format!("{}: spec.source.catalog is required", path.display()))?;
    let installed = ext
        .status
        .as_ref()
        .and_then(|s| s.install.as_ref())
        .map(|i| InstalledBundle {
            name: i.bundle.name.clone(),
            version: i.bundle.version.clone(),
            release: i.bundle.release.clone(),
        });
    Ok((filter, installed))
}

/// Refuses what the API server would: another kind or apiVersion, and fields the
/// ClusterExtension schema does not have (strict field validation).
fn check_is_cluster_extension(text: &str) -> Result<(), String> {
    let value: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
    let field = |k: &str| value.get(k).and_then(|v| v.as_str()).unwrap_or_default();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if kind != "ClusterExtension" || api_version != "olm.operatorframework.io/v1" {
        return Err(format!(
            "kind {kind:?} of apiVersion {api_version:?} is not a ClusterExtension (olm.operatorframework.io/v1)"
        ));
    }
    let crd = olmv1_api::crd::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "ClusterExtension")
        .ok_or("the ClusterExtension CRD is missing from this build")?;
    let schema = crd
        .spec
        .versions
        .first()
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let mut unknown = Vec::new();
    unknown_fields(&schema, &value, "", &mut unknown);
    match unknown.as_slice() {
        [] => Ok(()),
        fields => Err(format!(
            "strict decoding error: {}",
            fields
                .iter()
                .map(|f| format!("unknown field {f:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Collects the paths of `value` that `schema` (an OpenAPI v3 schema as JSON) does not define.
fn unknown_fields(schema: &serde_json::Value, value: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&serde_json::Value::Bool(true)) {
        return;
    }
    match value {
        serde_json::Value::Object(map) => {
            let properties = schema.get("properties").and_then(|p| p.as_object());
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            if properties.is_none() && additional.is_none() {
                return; // an open object (e.g. metadata)
            }
            for (key, child) in map {
                // The schema of a CRD describes spec and status; the object's header is the API's.
                if at.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                match properties.and_then(|p| p.get(key)).or(additional) {
                    Some(child_schema) => unknown_fields(child_schema, child, &path, out),
                    None => out.push(path),
                }
            }
        }
        serde_json::Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    unknown_fields(item_schema, item, &format!("{at}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// `spec.source.catalog` and `status.install.bundle` read from any YAML object.
fn read_catalog_parts(path: &Path, text: &str) -> Result<(CatalogFilter, Option<InstalledBundle>), String> {
    let value: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    let catalog = value
        .pointer("/spec/source/catalog")
        .cloned()
        .ok_or("no spec.source.catalog")?;
    let filter: CatalogFilter = serde_json::from_value(catalog).map_err(|e| e.to_string())?;
    let installed = match value.pointer("/status/install/bundle") {
        None => None,
        Some(b) => {
            let field = |k: &str| b.get(k).and_then(|v| v.as_str()).map(str::to_string);
            let (Some(name), Some(version)) = (field("name"), field("version")) else {
                return Err(format!(
                    "{}: status.install.bundle needs name and version",
                    path.display()
                ));
            };
            Some(InstalledBundle {
                name,
                version,
                release: field("release"),
            })
        }
    };
    Ok((filter, installed))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use olmv1_api::v1::UpgradeConstraintPolicy;
    use serde_json::json;

    use super::*;
    use crate::{
        catalog::{CatalogIndex, Meta},
        meter::Exhausted,
    };

    /// `app` requiring `dep` (whose name is long), each with one bundle, in catalog `c`.
    fn app_and_dep() -> Vec<CatalogInput> {
        let dep = "d".repeat(200);
        let bundle = |package: &str, more: serde_json::Value| {
            let mut properties =
                vec![json!({"type": "olm.package", "value": {"packageName": package, "version": "1.0.0"}})];
            properties.extend(more.as_array().cloned().unwrap_or_default());
            json!({"schema": "olm.bundle", "package": package, "name": format!("{package}.v1.0.0"),
                "image": "i", "properties": properties})
        };
        let mut objects = Vec::new();
        for (package, more) in [
            (
                "app",
                json!([{"type": "olm.package.required", "value": {"packageName": dep, "versionRange": ">=1.0.0"}}]),
            ),
            (dep.as_str(), json!([])),
        ] {
            objects.push(json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}));
            objects.push(
                json!({"schema": "olm.channel", "package": package, "name": "stable",
                "entries": [{"name": format!("{package}.v1.0.0")}]}),
            );
            objects.push(bundle(package, more));
        }
        let metas: Vec<Meta> = objects
            .iter()
            .enumerate()
            .map(|(i, o)| {
                Meta::from_json_object(Bytes::from(o.to_string()), Arc::from("t.json"), i as u32 + 1).unwrap()
            })
            .collect();
        vec![CatalogInput::new(
            "c",
            Arc::new(CatalogIndex::from_metas(&metas).unwrap()),
        )]
    }

    fn app_request() -> ResolveRequest {
        ResolveRequest {
            package: "app".into(),
            version_range: None,
            channels: Vec::new(),
            selector: None,
            upgrade_constraint_policy: UpgradeConstraintPolicy::CatalogProvided,
            installed: None,
        }
    }

    #[test]
    fn the_plan_and_its_text_are_charged_to_the_commands_meter_and_refused_past_it() {
        let catalogs = app_and_dep();
        let mut meter = Meter::unlimited();
        let plan = plan_with_dependencies(&app_request(), &catalogs, &mut meter).unwrap();
        // The plan's work is the command's.
        assert!(
            meter.spent() > 0 && meter.spent() == plan.work,
            "{meter}, plan {}",
            plan.work
        );
        let (before, rendered) = (meter.spent(), meter.spent_on(Work::Render));
        let text = plan_text(&plan, false, &mut meter).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert_eq!(
            text,
            format!(
                "{0}.v1.0.0 1.0.0 c (required by app.v1.0.0)\napp.v1.0.0 1.0.0 c\n",
                "d".repeat(200)
            )
        );
        // Each line its bytes.
        assert_eq!(meter.spent() - before, text.len() as u64);
        assert_eq!(meter.spent_on(Work::Render) - rendered, text.len() as u64);
        // A meter one unit short refuses, with the other commands' sentence.
        let mut short = Meter::new(text.len() as u64 - 1);
        let refused = plan_text(&plan, false, &mut short).unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!(
                "rendering the output needs more than the budget of {} work units",
                text.len() - 1
            )
        );
        // JSON: one line, each piece written charged.
        let mut meter = Meter::unlimited();
        let json = plan_text(&plan, true, &mut meter).unwrap();
        assert_eq!(json.lines().count(), 1);
        assert!(json.starts_with("{\"plan\":["), "{json}");
        assert_eq!(meter.spent_on(Work::Render), json.len() as u64 - 1);
        let mut short = Meter::new(json.len() as u64 / 2);
        assert!(matches!(
            plan_text(&plan, true, &mut short),
            Err(JsonError::Exhausted(Exhausted::Work { .. }))
        ));
    }

    #[test]
    fn a_resolution_and_its_text_are_charged_to_the_commands_meter() {
        let catalogs = app_and_dep();
        let mut meter = Meter::unlimited();
        let request = ResolveRequest {
            package: "d".repeat(200),
            ..app_request()
        };
        let resolution = crate::resolve::resolve_within(&request, &catalogs, &mut meter).unwrap();
        let text = resolution_text(&resolution, false, &mut meter).unwrap();
        assert_eq!(text, format!("{0}.v1.0.0 1.0.0 c\n", "d".repeat(200)));
        assert_eq!(meter.spent_on(Work::Render), text.len() as u64);
        let refused = resolution_text(&resolution, false, &mut Meter::new(10)).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "rendering the output needs more than the budget of 10 work units"
        );
        assert!(matches!(
            resolution_text(&resolution, true, &mut Meter::new(10)),
            Err(JsonError::Exhausted(Exhausted::Work { limit: 10 }))
        ));
        let json = resolution_text(&resolution, true, &mut Meter::unlimited()).unwrap();
        assert!(
            json.starts_with("{\"bundle\":{") && json.ends_with("}\n"),
            "{json}"
        );
    }

    const EXTENSION: &str = "apiVersion: olm.operatorframework.io/v1\nkind: ClusterExtension\nmetadata: {name: e, labels: {a: b}}\nspec:\n  namespace: ns\n  serviceAccount: {name: sa}\n  source:\n    sourceType: Catalog\n    catalog: {packageName: p, version: '>=1.0.0'}\n";

    #[test]
    fn a_cluster_extension_file_is_checked_as_strictly_as_the_api_server() {
        check_is_cluster_extension(EXTENSION).unwrap();
        let typo = EXTENSION.replace("packageName: p,", "packageName: p, vesrion: '1',");
        assert_eq!(
            check_is_cluster_extension(&typo).unwrap_err(),
            "strict decoding error: unknown field \"spec.source.catalog.vesrion\""
        );
        let extra = format!("{EXTENSION}  bogus: true\n");
        assert!(
            check_is_cluster_extension(&extra)
                .unwrap_err()
                .contains("\"spec.bogus\"")
        );
        let other_kind = EXTENSION.replace("kind: ClusterExtension", "kind: ClusterCatalog");
        assert!(check_is_cluster_extension(&other_kind).unwrap_err().contains(
            "kind \"ClusterCatalog\" of apiVersion \"olm.operatorframework.io/v1\" is not a ClusterExtension"
        ));
        let other_version = EXTENSION.replace("/v1\n", "/v2\n");
        assert!(check_is_cluster_extension(&other_version).is_err());
    }

    #[test]
    fn the_flags_override_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ext.yaml");
        std::fs::write(&path, EXTENSION).unwrap();
        let from_file = build_request(Some(&path), &RequestOverrides::default()).unwrap();
        assert_eq!(from_file.package, "p");
        assert_eq!(from_file.version_range.as_deref(), Some(">=1.0.0"));
        let overrides = RequestOverrides {
            version: Some("1.2.x".into()),
            channels: vec!["fast".into()],
            installed: Some("p.v1.1.0@1.1.0".into()),
            ..RequestOverrides::default()
        };
        let request = build_request(Some(&path), &overrides).unwrap();
        assert_eq!(request.version_range.as_deref(), Some("1.2.x"));
        assert_eq!(request.channels, ["fast"]);
        let installed = request.installed.unwrap();
        assert_eq!(
            (installed.name.as_str(), installed.version.as_str()),
            ("p.v1.1.0", "1.1.0")
        );
        // Upstream's YAML without spec.serviceAccount: the parts resolution needs are read.
        std::fs::write(&path, EXTENSION.replace("  serviceAccount: {name: sa}\n", "")).unwrap();
        assert_eq!(
            build_request(Some(&path), &RequestOverrides::default())
                .unwrap()
                .package,
            "p"
        );
    }

    #[test]
    fn a_request_needs_a_package_and_installed_names_bundle_and_version() {
        assert_eq!(
            build_request(None, &RequestOverrides::default()).unwrap_err(),
            "--package (or -f with spec.source.catalog.packageName) is required"
        );
        let overrides = RequestOverrides {
            package: Some("p".into()),
            installed: Some("1.0.0".into()),
            ..RequestOverrides::default()
        };
        assert_eq!(
            build_request(None, &overrides).unwrap_err(),
            "--installed must be BUNDLE_NAME@VERSION, got \"1.0.0\""
        );
    }

    #[tokio::test]
    async fn catalogs_carry_their_name_label_and_priority() {
        let dir = tempfile::tempdir().unwrap();
        let fbc = dir.path().join("demo");
        std::fs::create_dir(&fbc).unwrap();
        std::fs::write(
            fbc.join("catalog.json"),
            r#"{"schema":"olm.package","name":"p","defaultChannel":"stable"}"#,
        )
        .unwrap();
        let catalog = fbc.to_str().unwrap().to_string();
        let inputs = load_inputs(std::slice::from_ref(&catalog), &["demo=5".into()])
            .await
            .unwrap();
        assert_eq!(inputs.len(), 1);
        assert_eq!((inputs[0].name.as_str(), inputs[0].priority), ("demo", 5));
        assert_eq!(inputs[0].labels[LABEL_CATALOG_NAME], "demo");
        assert!(inputs[0].index.package("p").is_some());
        assert_eq!(
            load_inputs(&[catalog], &["other=1".into()]).await.unwrap_err(),
            "--priority names unknown catalog \"other\""
        );
    }
}
