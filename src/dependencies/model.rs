//! Requirements, the facts of a candidate bundle, and the evaluator.

use std::{
    fmt,
    sync::{Arc, OnceLock},
};

use serde::{Deserialize, Serialize};

use super::cel_rule::{CelInput, CelRule};
use crate::{
    catalog::{PROPERTY_PACKAGE, Property},
    meter::{Exhausted, Meter, Work},
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

/// What a `package` or `gvk` leaf's evaluation costs, in [`Work::Evaluate`] units: a name
/// compared and a version range checked, about 30 ns (`cargo bench --bench meter`).
pub const LEAF_UNITS: u64 = 5;

impl Constraint {
    /// Whether the candidate bundle satisfies this predicate.
    pub fn holds(&self, bundle: &BundleFacts<'_>) -> bool {
        match self {
            Constraint::Package { package, range } => {
                bundle.package == package && bundle.version.as_ref().is_some_and(|v| range.contains(v))
            }
            Constraint::Gvk(gvk) => bundle.gvks.contains(gvk),
            Constraint::Cel(rule) => rule.matches_input(bundle.cel_input()),
            Constraint::All(cs) => cs.iter().all(|c| c.holds(bundle)),
            Constraint::Any(cs) => cs.iter().any(|c| c.holds(bundle)),
            Constraint::Not(cs) => !cs.iter().any(|c| c.holds(bundle)),
        }
    }

    /// The worst-case work of one [`Constraint::holds`]: [`LEAF_UNITS`] per package or API leaf, a CEL leaf's
    /// [`CelRule::estimated_cost`], summed over the tree (every branch counted, as if none
    /// short-circuits). Charge it before evaluating, to bound the work of many evaluations.
    pub fn cost(&self) -> u64 {
        match self {
            Constraint::Package { .. } | Constraint::Gvk(_) => LEAF_UNITS,
            Constraint::Cel(rule) => rule.estimated_cost(),
            Constraint::All(cs) | Constraint::Any(cs) | Constraint::Not(cs) => {
                cs.iter().fold(1, |total: u64, c| total.saturating_add(c.cost()))
            }
        }
    }

    /// The worst-case work of one [`Constraint::holds`] against `bundle`: as [`Constraint::cost`],
    /// with each CEL leaf's estimate for this bundle's size ([`CelRule::cost_for`], whose own
    /// estimating is charged to `meter` when the rule has not estimated that size yet).
    pub fn cost_for(&self, bundle: &BundleFacts<'_>, meter: &mut Meter) -> Result<u64, Exhausted> {
        Ok(match self {
            Constraint::Package { .. } | Constraint::Gvk(_) => LEAF_UNITS,
            Constraint::Cel(rule) => rule.cost_for(bundle.cel_input_within(meter)?, meter)?,
            Constraint::All(cs) | Constraint::Any(cs) | Constraint::Not(cs) => {
                let mut total: u64 = 1;
                for c in cs {
                    total = total.saturating_add(c.cost_for(bundle, meter)?);
                }
                total
            }
        })
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

/// The structured form (`-o json` of the admin commands): the catalog's `olm.constraint` shape,
/// `{"package": {packageName, versionRange}}`, `{"gvk": {group, version, kind}}`, `{"cel":
/// {rule}}`, `{"all"|"any"|"not": {"constraints": [...]}}`.
impl Serialize for Constraint {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde_json::json;
        let list = |cs: &[Constraint]| -> Result<serde_json::Value, S::Error> {
            let items = serde_json::to_value(cs).map_err(serde::ser::Error::custom)?;
            Ok(json!({ "constraints": items }))
        };
        let value = match self {
            Constraint::Package { package, range } => {
                json!({"package": {"packageName": package, "versionRange": range.as_str()}})
            }
            Constraint::Gvk(gvk) => json!({ "gvk": gvk }),
            Constraint::Cel(rule) => json!({"cel": {"rule": rule.source()}}),
            Constraint::All(cs) => json!({ "all": list(cs)? }),
            Constraint::Any(cs) => json!({ "any": list(cs)? }),
            Constraint::Not(cs) => json!({ "not": list(cs)? }),
        };
        value.serialize(serializer)
    }
}

/// The longest short form of a constraint ([`Constraint::short`]); longer ones end in `...`
/// (the structured form is whole).
pub const MAX_SHORT_CHARS: usize = 160;

impl Constraint {
    /// A compact form for one table cell: `pkg blue >=1.0.0`, `gvk etcd.database.coreos.com/v1beta2
    /// EtcdCluster`, `cel <rule>`, `all(..., ...)`, `any(...)`, `not(...)`; at most
    /// [`MAX_SHORT_CHARS`] characters.
    pub fn short(&self) -> String {
        let mut out = String::new();
        self.write_short(&mut out);
        cut(out, MAX_SHORT_CHARS)
    }

    fn write_short(&self, out: &mut String) {
        use std::fmt::Write as _;
        // Deep or wide trees stop growing the text once it is past the limit.
        if out.len() > MAX_SHORT_CHARS * 4 {
            return;
        }
        let list = |out: &mut String, word: &str, cs: &[Constraint]| {
            out.push_str(word);
            out.push('(');
            for (i, c) in cs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                c.write_short(out);
            }
            out.push(')');
        };
        match self {
            Constraint::Package { package, range } => {
                let _ = write!(out, "pkg {package} {}", range.as_str());
            }
            Constraint::Gvk(gvk) if gvk.group.is_empty() => {
                let _ = write!(out, "gvk {} {}", gvk.version, gvk.kind);
            }
            Constraint::Gvk(gvk) => {
                let _ = write!(out, "gvk {}/{} {}", gvk.group, gvk.version, gvk.kind);
            }
            Constraint::Cel(rule) => {
                let _ = write!(out, "cel {}", rule.source());
            }
            Constraint::All(cs) => list(out, "all", cs),
            Constraint::Any(cs) => list(out, "any", cs),
            Constraint::Not(cs) => list(out, "not", cs),
        }
    }
}

fn cut(text: String, max: usize) -> String {
    if text.chars().count() <= max {
        return text;
    }
    let mut cut: String = text.chars().take(max - 3).collect();
    cut.push_str("...");
    cut
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

    /// The worst-case work of one [`Requirement::satisfied_by`] ([`Constraint::cost`]).
    pub fn cost(&self) -> u64 {
        self.constraint.cost()
    }

    /// The worst-case work of one evaluation against `bundle` ([`Constraint::cost_for`]).
    pub fn cost_for(&self, bundle: &BundleFacts<'_>, meter: &mut Meter) -> Result<u64, Exhausted> {
        self.constraint.cost_for(bundle, meter)
    }

    /// Charges one evaluation against `bundle` to `meter`, before it runs: its worst-case cost
    /// for the bundle ([`Requirement::cost_for`]).
    pub fn charge(&self, bundle: &BundleFacts<'_>, meter: &mut Meter) -> Result<(), Exhausted> {
        let cost = self.cost_for(bundle, meter)?;
        meter.charge(Work::Evaluate, cost)
    }

    /// Whether the cluster serving `api` satisfies it (only requirements naming an API), its
    /// evaluation charged to `meter`.
    pub fn satisfied_by_served_api_within(&self, api: &Gvk, meter: &mut Meter) -> Result<bool, Exhausted> {
        if !self.constraint.names_api() {
            return Ok(false);
        }
        // The API stands for a bundle that provides it and nothing else.
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
            cel: OnceLock::new(),
        };
        self.charge(&served, meter)?;
        Ok(self.constraint.holds(&served))
    }
}

impl Requirement {
    /// What it asks for, in one table cell: the short form of a package or API requirement;
    /// for a CEL or compound constraint, its `failureMessage` when the author gave one.
    pub fn summary(&self) -> String {
        match (&self.constraint, &self.failure_message) {
            (Constraint::Package { .. } | Constraint::Gvk(_), _) => self.constraint.short(),
            (_, Some(m)) if !m.trim().is_empty() => cut(m.trim().to_string(), MAX_SHORT_CHARS),
            _ => self.constraint.short(),
        }
    }
}

/// `{property, summary, failureMessage, constraint}`: where it was declared, [`Requirement::summary`],
/// the author's message (or `null`) and the structured constraint.
impl Serialize for Requirement {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("Requirement", 4)?;
        s.serialize_field("property", &self.property)?;
        s.serialize_field("summary", &self.summary())?;
        s.serialize_field("failureMessage", &self.failure_message)?;
        s.serialize_field("constraint", &self.constraint)?;
        s.end()
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
    /// The properties as CEL sees them, converted on the first rule evaluated against the bundle
    /// and shared by its clones: N rules against one bundle convert them once.
    cel: OnceLock<Arc<CelInput>>,
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
            cel: OnceLock::new(),
        }
    }

    /// The properties as CEL rules see them, converted once.
    pub fn cel_input(&self) -> &CelInput {
        self.cel.get_or_init(|| Arc::new(CelInput::new(self.properties)))
    }

    /// [`BundleFacts::cel_input`], converting them (once) charged to `meter` by their bytes.
    pub fn cel_input_within(&self, meter: &mut Meter) -> Result<&CelInput, Exhausted> {
        if self.cel.get().is_none() {
            meter.charge(Work::Parse, CelInput::bytes_of(self.properties))?;
        }
        Ok(self.cel_input())
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
/// served API satisfies either, in declaration order; each evaluation charged to `meter`.
pub fn unsatisfied(
    requirements: &[Requirement],
    installed: &[BundleFacts<'_>],
    served: &[Gvk],
    meter: &mut Meter,
) -> Result<Vec<Unsatisfied>, Exhausted> {
    let mut out = Vec::new();
    for r in requirements {
        if !satisfied(r, installed, served, meter)? {
            out.push(Unsatisfied {
                requirement: r.clone(),
            });
        }
    }
    Ok(out)
}

/// Whether a bundle of `installed` or (for a requirement naming an API) a served API satisfies `r`.
fn satisfied(
    r: &Requirement,
    installed: &[BundleFacts<'_>],
    served: &[Gvk],
    meter: &mut Meter,
) -> Result<bool, Exhausted> {
    for bundle in installed {
        r.charge(bundle, meter)?;
        if r.satisfied_by(bundle) {
            return Ok(true);
        }
    }
    for api in served {
        if r.satisfied_by_served_api_within(api, meter)? {
            return Ok(true);
        }
    }
    Ok(false)
}
