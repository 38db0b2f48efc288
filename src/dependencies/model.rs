//! Requirements, the facts of a candidate bundle, and the evaluator.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::cel_rule::CelRule;
use crate::{
    catalog::{PROPERTY_PACKAGE, Property},
    version::SkipRange,
};

/// Property type of an API a bundle provides.
pub const PROPERTY_GVK: &str = "olm.gvk";

/// An API: group, version, kind (`olm.gvk`, `olm.gvk.required`, a constraint's `gvk`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Gvk {
    /// The API group (empty for the core group).
    pub group: String,
    /// The API version.
    pub version: String,
    /// The kind.
    pub kind: String,
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{} ({})", self.kind, self.version)
        } else {
            write!(f, "{} ({}/{})", self.kind, self.group, self.version)
        }
    }
}

/// One predicate over one candidate bundle.
#[derive(Debug, Clone)]
pub enum Constraint {
    /// A bundle of `package` whose version is in `range` (blang range).
    Package {
        /// The package.
        package: String,
        /// The version range.
        range: SkipRange,
    },
    /// A bundle that provides the API.
    Gvk(Gvk),
    /// A bundle whose properties make the rule true.
    Cel(CelRule),
    /// A bundle satisfying every one (true when empty).
    All(Vec<Constraint>),
    /// A bundle satisfying at least one (false when empty).
    Any(Vec<Constraint>),
    /// A bundle satisfying none of them (classic's `not`: the negation of their disjunction).
    Not(Vec<Constraint>),
}

impl Constraint {
    /// Whether the candidate bundle satisfies this predicate.
    pub fn holds(&self, bundle: &BundleFacts<'_>) -> bool {
        match self {
            Constraint::Package { package, range } => {
                bundle.package == package && bundle.version.as_ref().is_some_and(|v| range.contains(v))
            }
            Constraint::Gvk(gvk) => bundle.gvks.contains(gvk),
            Constraint::Cel(rule) => rule.matches(bundle.properties),
            Constraint::All(cs) => cs.iter().all(|c| c.holds(bundle)),
            Constraint::Any(cs) => cs.iter().any(|c| c.holds(bundle)),
            Constraint::Not(cs) => !cs.iter().any(|c| c.holds(bundle)),
        }
    }

    /// Whether an API is named anywhere in the constraint (then a served API can satisfy it).
    pub fn names_api(&self) -> bool {
        match self {
            Constraint::Gvk(_) => true,
            Constraint::Package { .. } | Constraint::Cel(_) => false,
            Constraint::All(cs) | Constraint::Any(cs) | Constraint::Not(cs) => cs.iter().any(Self::names_api),
        }
    }

    /// The package the constraint needs, when it can only be satisfied by bundles of one package
    /// (a `package` leaf, or an `all` containing one): the solver looks there only.
    pub fn only_package(&self) -> Option<&str> {
        match self {
            Constraint::Package { package, .. } => Some(package),
            Constraint::All(cs) => cs.iter().find_map(Self::only_package),
            _ => None,
        }
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, word: &str, cs: &[Constraint]| {
            write!(f, "{word} of (")?;
            for (i, c) in cs.iter().enumerate() {
                if i > 0 {
                    f.write_str("; ")?;
                }
                write!(f, "{c}")?;
            }
            f.write_str(")")
        };
        match self {
            Constraint::Package { package, range } => write!(f, "package {package} {}", range.as_str()),
            Constraint::Gvk(gvk) => write!(f, "API {gvk}"),
            Constraint::Cel(rule) => write!(f, "a bundle matching the CEL rule {:?}", rule.source()),
            Constraint::All(cs) => list(f, "all", cs),
            Constraint::Any(cs) => list(f, "any", cs),
            Constraint::Not(cs) => list(f, "none", cs),
        }
    }
}

/// One dependency of a bundle: satisfied when at least one bundle present satisfies its
/// constraint.
#[derive(Debug, Clone)]
pub struct Requirement {
    /// Where it was declared: `olm.package.required`, `olm.gvk.required` or `olm.constraint`.
    pub property: String,
    /// The predicate.
    pub constraint: Constraint,
    /// The author's words for when it cannot be satisfied (`olm.constraint` only).
    pub failure_message: Option<String>,
}

impl Requirement {
    /// Whether the candidate bundle satisfies this requirement.
    pub fn satisfied_by(&self, bundle: &BundleFacts<'_>) -> bool {
        self.constraint.holds(bundle)
    }

    /// Whether the cluster serving `api` satisfies it (only requirements naming an API).
    pub fn satisfied_by_served_api(&self, api: &Gvk) -> bool {
        if !self.constraint.names_api() {
            return false;
        }
        let property = Property::new(
            PROPERTY_GVK,
            serde_json::to_value(api).expect("a GVK serializes").into(),
        );
        let properties = [property];
        let served = BundleFacts {
            name: "",
            package: "",
            version: None,
            gvks: vec![api.clone()],
            properties: &properties,
        };
        self.constraint.holds(&served)
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.constraint)
    }
}

/// What a requirement is evaluated against: one bundle.
#[derive(Debug, Clone)]
pub struct BundleFacts<'a> {
    /// The bundle name (for messages).
    pub name: &'a str,
    /// The package.
    pub package: &'a str,
    /// The version from `olm.package` (blang `Parse`); `None` when missing or unreadable (then no
    /// `package` requirement is satisfied by it).
    pub version: Option<semver::Version>,
    /// The APIs it provides (`olm.gvk`).
    pub gvks: Vec<Gvk>,
    /// All its properties (what CEL rules see).
    pub properties: &'a [Property],
}

impl<'a> BundleFacts<'a> {
    /// The facts of a bundle, read from its properties.
    pub fn new(name: &'a str, package: &'a str, properties: &'a [Property]) -> Self {
        let mut version = None;
        let mut gvks = Vec::new();
        for p in properties {
            match &*p.type_ {
                PROPERTY_PACKAGE if version.is_none() => {
                    #[derive(Deserialize)]
                    struct PackageValue {
                        #[serde(default)]
                        version: String,
                    }
                    version = p
                        .value
                        .parse::<PackageValue>()
                        .ok()
                        .and_then(|v| crate::version::parse_strict(&v.version).ok());
                }
                PROPERTY_GVK => {
                    if let Ok(gvk) = p.value.parse::<Gvk>() {
                        gvks.push(gvk);
                    }
                }
                _ => {}
            }
        }
        BundleFacts {
            name,
            package,
            version,
            gvks,
            properties,
        }
    }
}

/// A requirement that nothing present satisfies, with the reason an admin reads.
#[derive(Debug, Clone)]
pub struct Unsatisfied {
    /// The requirement.
    pub requirement: Requirement,
}

impl Unsatisfied {
    /// The reason: the author's `failureMessage` when given, else what is missing.
    pub fn reason(&self) -> String {
        match &self.requirement.failure_message {
            Some(m) if !m.is_empty() => m.clone(),
            _ => format!("requires {}", self.requirement.constraint),
        }
    }
}

impl fmt::Display for Unsatisfied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.requirement.failure_message {
            Some(m) if !m.is_empty() => write!(f, "{m} (requires {})", self.requirement.constraint),
            _ => write!(f, "requires {}", self.requirement.constraint),
        }
    }
}

/// The requirements that no installed bundle satisfies and (for requirements naming an API) no
/// served API satisfies either, in declaration order.
pub fn unsatisfied(
    requirements: &[Requirement],
    installed: &[BundleFacts<'_>],
    served: &[Gvk],
) -> Vec<Unsatisfied> {
    requirements
        .iter()
        .filter(|r| {
            !installed.iter().any(|b| r.satisfied_by(b))
                && !served.iter().any(|api| r.satisfied_by_served_api(api))
        })
        .map(|r| Unsatisfied {
            requirement: r.clone(),
        })
        .collect()
}
