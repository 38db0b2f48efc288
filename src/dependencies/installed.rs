//! What installed extensions require of each other: which requirements of installed dependents a
//! change to one extension (an upgrade, an uninstall) would leave unsatisfied. Pure.

use std::fmt;

use super::{
    BundleFacts, DependencyError, Gvk, InstalledExtension, Unsatisfied, requirements_of, unsatisfied,
};
use crate::{
    catalog::Property,
    meter::{Exhausted, Meter},
};

impl InstalledExtension {
    /// The facts its requirements are evaluated against.
    pub fn facts(&self) -> BundleFacts<'_> {
        BundleFacts::new(&self.bundle, &self.package, &self.properties)
    }
}

/// An installed extension's requirement that a change would leave unsatisfied.
#[derive(Debug, Clone)]
pub struct BrokenDependent {
    /// The dependent ClusterExtension.
    pub extension: String,
    /// Its installed bundle.
    pub bundle: String,
    /// The requirement, as it would then be unsatisfied.
    pub unsatisfied: Unsatisfied,
}

impl fmt::Display for BrokenDependent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ClusterExtension {:?} (bundle {:?}) {}",
            self.extension, self.bundle, self.unsatisfied
        )
    }
}

/// The requirements of the extensions in `others` that hold now, with `changed` installed, and
/// would not once `changed` is replaced by a bundle with `replacement`'s name and properties (an
/// upgrade) or removed (`None`: an uninstall). `served` are the APIs the cluster serves now; those
/// `changed` provides are taken to go with it. A dependent whose requirements cannot be read is
/// not one this change can break (its own reconcile reports them). Each evaluation is charged to
/// `meter`.
pub fn broken_by_change(
    others: &[InstalledExtension],
    served: &[Gvk],
    changed: &InstalledExtension,
    replacement: Option<(&str, &[Property])>,
    meter: &mut Meter,
) -> Result<Vec<BrokenDependent>, Exhausted> {
    let before: Vec<BundleFacts<'_>> = others
        .iter()
        .chain(std::iter::once(changed))
        .map(InstalledExtension::facts)
        .collect();
    let mut after: Vec<BundleFacts<'_>> = others.iter().map(InstalledExtension::facts).collect();
    if let Some((bundle, properties)) = replacement {
        after.push(BundleFacts::new(bundle, &changed.package, properties));
    }
    let provided = changed.facts().gvks;
    let served_after: Vec<Gvk> = served
        .iter()
        .filter(|api| !provided.contains(api))
        .cloned()
        .collect();
    let mut broken = Vec::new();
    for dependent in others {
        let requirements = match requirements_of(&dependent.bundle, &dependent.properties, meter) {
            Ok(requirements) => requirements,
            Err(DependencyError::Exhausted { exhausted, .. }) => return Err(exhausted),
            Err(_) => continue,
        };
        for requirement in requirements {
            let one = std::slice::from_ref(&requirement);
            if !unsatisfied(one, &before, served, meter)?.is_empty() {
                continue;
            }
            if let Some(unsatisfied) = unsatisfied(one, &after, &served_after, meter)?.pop() {
                broken.push(BrokenDependent {
                    extension: dependent.extension.clone(),
                    bundle: dependent.bundle.clone(),
                    unsatisfied,
                });
            }
        }
    }
    Ok(broken)
}

/// What the controller's dependency check finds for a bundle to install (or upgrade to).
#[derive(Debug, Clone)]
pub enum DependencyVerdict {
    /// Every requirement is satisfied, and no installed dependent breaks.
    Satisfied,
    /// Requirements that no other installed bundle (nor, for an API, the cluster) satisfies.
    Unsatisfied(Vec<Unsatisfied>),
    /// The upgrade would leave these requirements of installed dependents unsatisfied.
    BreaksDependents {
        /// The bundle installed now.
        installed: String,
        /// The broken requirements.
        broken: Vec<BrokenDependent>,
    },
}

/// The controller's check of a bundle's `requirements` against the bundles the `others`
/// installed and the `served` APIs, then, for an upgrade (`upgrade`: the installed extension as
/// it is, and the new bundle's name and properties), against the installed dependents: all of it
/// within `meter`.
pub fn check_dependencies_within(
    requirements: &[super::Requirement],
    others: &[InstalledExtension],
    served: &[Gvk],
    upgrade: Option<(InstalledExtension, String, Vec<Property>)>,
    meter: &mut Meter,
) -> Result<DependencyVerdict, Exhausted> {
    let facts: Vec<BundleFacts<'_>> = others.iter().map(InstalledExtension::facts).collect();
    let missing = unsatisfied(requirements, &facts, served, meter)?;
    if !missing.is_empty() {
        return Ok(DependencyVerdict::Unsatisfied(missing));
    }
    if let Some((before, bundle, after)) = upgrade {
        let broken = broken_by_change(others, served, &before, Some((&bundle, &after)), meter)?;
        if !broken.is_empty() {
            return Ok(DependencyVerdict::BreaksDependents {
                installed: before.bundle,
                broken,
            });
        }
    }
    Ok(DependencyVerdict::Satisfied)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn property(type_: &str, value: serde_json::Value) -> Property {
        serde_json::from_value(json!({"type": type_, "value": value})).expect("a property")
    }

    /// An extension `name` of `package` at `version`, providing `apis` (kinds of group
    /// `<package>.io`, version v1), with `more` properties.
    fn installed(
        name: &str,
        package: &str,
        version: &str,
        apis: &[&str],
        more: Vec<Property>,
    ) -> InstalledExtension {
        let mut properties = vec![property(
            "olm.package",
            json!({"packageName": package, "version": version}),
        )];
        for kind in apis {
            properties.push(property(
                "olm.gvk",
                json!({"group": format!("{package}.io"), "version": "v1", "kind": kind}),
            ));
        }
        properties.extend(more);
        InstalledExtension {
            extension: name.into(),
            package: package.into(),
            bundle: format!("{package}.v{version}"),
            version: version.into(),
            properties,
        }
    }

    fn needs_package(package: &str, range: &str) -> Property {
        property(
            "olm.package.required",
            json!({"packageName": package, "versionRange": range}),
        )
    }

    fn needs_api(group: &str, kind: &str) -> Property {
        property(
            "olm.gvk.required",
            json!({"group": group, "version": "v1", "kind": kind}),
        )
    }

    /// `broken_by_change` within the controller's budget.
    fn broken_by(
        others: &[InstalledExtension],
        served: &[Gvk],
        changed: &InstalledExtension,
        replacement: Option<(&str, &[Property])>,
    ) -> Vec<BrokenDependent> {
        let mut meter = Meter::new(crate::dependencies::CHECK_WORK_UNITS);
        broken_by_change(others, served, changed, replacement, &mut meter).expect("within the budget")
    }

    fn gvk(group: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
        }
    }

    fn package_of(version: &str, apis: &[&str]) -> Vec<Property> {
        installed("b-ext", "b", version, apis, vec![]).properties
    }

    #[test]
    fn an_upgrade_out_of_a_dependents_range_breaks_it_and_one_inside_does_not() {
        let a = installed(
            "a-ext",
            "a",
            "1.0.0",
            &[],
            vec![needs_package("b", ">=1.0.0 <2.0.0")],
        );
        let b = installed("b-ext", "b", "1.0.0", &["Widget"], vec![]);
        let others = [a];
        let broken = broken_by(
            &others,
            &[],
            &b,
            Some(("b.v2.0.0", &package_of("2.0.0", &["Widget"]))),
        );
        assert_eq!(broken.len(), 1);
        assert_eq!(
            broken[0].to_string(),
            r#"ClusterExtension "a-ext" (bundle "a.v1.0.0") requires package b >=1.0.0 <2.0.0"#
        );
        assert!(
            broken_by(
                &others,
                &[],
                &b,
                Some(("b.v1.5.0", &package_of("1.5.0", &["Widget"])))
            )
            .is_empty()
        );
    }

    #[test]
    fn dropping_an_api_breaks_a_dependent_even_while_the_cluster_still_serves_it() {
        let a = installed("a-ext", "a", "1.0.0", &[], vec![needs_api("b.io", "Widget")]);
        let b = installed("b-ext", "b", "1.0.0", &["Widget"], vec![]);
        // The old bundle's CRD is still served during the check: it does not count.
        let served = [gvk("b.io", "Widget"), gvk("apps", "Deployment")];
        let broken = broken_by(
            std::slice::from_ref(&a),
            &served,
            &b,
            Some(("b.v2.0.0", &package_of("2.0.0", &["Gadget"]))),
        );
        assert_eq!(broken.len(), 1);
        assert!(
            broken[0].to_string().contains("requires API Widget (b.io/v1)"),
            "{}",
            broken[0]
        );
        // Keeping the API keeps the dependent.
        let kept = package_of("2.0.0", &["Gadget", "Widget"]);
        assert!(broken_by(&[a], &served, &b, Some(("b.v2.0.0", &kept))).is_empty());
    }

    #[test]
    fn an_uninstall_breaks_only_requirements_nothing_else_satisfies() {
        let a = installed(
            "a-ext",
            "a",
            "1.0.0",
            &[],
            vec![needs_package("b", ">=1.0.0"), needs_api("c.io", "Gear")],
        );
        let b = installed("b-ext", "b", "1.0.0", &[], vec![]);
        let c = installed("c-ext", "c", "1.0.0", &["Gear"], vec![]);
        let second_b = installed("b2-ext", "b", "1.2.0", &[], vec![]);
        let broken = broken_by(&[a.clone(), c.clone()], &[], &b, None);
        assert_eq!(broken.len(), 1);
        assert_eq!(broken[0].extension, "a-ext");
        // Another extension of the same package still satisfies it.
        assert!(broken_by(&[a.clone(), c.clone(), second_b], &[], &b, None).is_empty());
        // An API served by something else (not by the removed bundle) keeps the requirement.
        let served = [gvk("c.io", "Gear")];
        assert_eq!(
            broken_by(std::slice::from_ref(&a), &served, &c, None).len(),
            1,
            "c's own API goes with it"
        );
        let d = installed("d-ext", "d", "1.0.0", &[], vec![]);
        assert!(
            broken_by(&[a, b, c], &served, &d, None).is_empty(),
            "nothing needs d"
        );
    }

    #[test]
    fn a_requirement_already_unsatisfied_is_not_one_the_change_breaks() {
        let a = installed(
            "a-ext",
            "a",
            "1.0.0",
            &[],
            vec![needs_package("missing", ">=1.0.0")],
        );
        let b = installed("b-ext", "b", "1.0.0", &[], vec![]);
        assert!(broken_by(&[a], &[], &b, None).is_empty());
    }

    #[test]
    fn a_constraint_breaks_with_its_failure_message() {
        let constraint = property(
            "olm.constraint",
            json!({"failureMessage": "a needs b 1.x with Widgets", "all": {"constraints": [
                {"package": {"packageName": "b", "versionRange": "1.x"}},
                {"gvk": {"group": "b.io", "version": "v1", "kind": "Widget"}}
            ]}}),
        );
        let a = installed("a-ext", "a", "1.0.0", &[], vec![constraint]);
        let b = installed("b-ext", "b", "1.0.0", &["Widget"], vec![]);
        let broken = broken_by(&[a], &[], &b, Some(("b.v1.1.0", &package_of("1.1.0", &[]))));
        assert_eq!(broken.len(), 1);
        assert!(
            broken[0].to_string().contains("a needs b 1.x with Widgets"),
            "{}",
            broken[0]
        );
    }
}
