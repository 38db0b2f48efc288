//! The plan: the requested extension plus, transitively, one bundle per dependency, chosen by
//! resolvo (a CDCL solver) over candidates ordered by classic's preferences.
//!
//! Candidates: the requested package's are exactly [`resolve::candidates`] (the resolver's
//! catalogs, channels, range, successors and order). A dependency's are every bundle of the
//! package in every available catalog, ordered as classic orders them: higher catalog priority,
//! then the catalog of the bundle that first asked for the package, then the default channel
//! before the other channels by name, then closer to the channel head (then higher version). An
//! installed extension's bundle is present: it is the only candidate of its package unless the
//! admin allows changes (then it is preferred). A requirement that the cluster's served APIs
//! satisfy is dropped. One bundle per package is resolvo's own rule.

use std::{
    collections::{BTreeSet, HashMap, HashSet, VecDeque},
    fmt,
    sync::Arc,
    time::{Duration, Instant},
};

use resolvo::{
    Candidates, Condition, ConditionId, ConditionalRequirement, DenseIndex, Dependencies, DependencyProvider,
    Interner, KnownDependencies, NameId, Problem, Requirement as SolverRequirement, SolvableId, Solver,
    SolverCache, StringId, UnsolvableOrCancelled, VersionSetId, VersionSetUnionId,
};
use serde::Serialize;

use super::{
    BundleFacts, DependencyError, Gvk, PLAN_DURATION, PLAN_WORK_UNITS, Requirement, model::Constraint,
    requirements_of,
};
use crate::{
    catalog::{BundleIndex, PackageIndex, Property},
    escape::escape_value,
    meter::{Exhausted, Meter, Work},
    resolve::{self, CatalogInput, ResolveError, ResolveRequest},
    version::VersionRelease,
};

/// An extension installed on the cluster, as the plan sees it.
#[derive(Debug, Clone)]
pub struct InstalledExtension {
    /// The ClusterExtension's name.
    pub extension: String,
    /// Its package.
    pub package: String,
    /// The installed bundle.
    pub bundle: String,
    /// Its version as status reports it.
    pub version: String,
    /// The bundle's properties (what it provides and requires).
    pub properties: Vec<Property>,
}

/// Bounds of one planning problem: loading, expansion, solving and explanation all within them.
#[derive(Debug, Clone, Copy)]
pub struct PlanLimits {
    /// The most candidate bundles considered.
    pub max_candidates: usize,
    /// The longest the whole plan may take, from the first candidate loaded to the explanation.
    pub max_duration: Duration,
    /// The work units ([`Meter`]) the plan may cost: each requirement's text read and compiled,
    /// each evaluation against a candidate, each package and candidate loaded, each text made.
    pub max_work: u64,
}

impl Default for PlanLimits {
    fn default() -> Self {
        PlanLimits {
            max_candidates: 50_000,
            max_duration: PLAN_DURATION,
            max_work: PLAN_WORK_UNITS,
        }
    }
}

impl PlanLimits {
    /// A meter of [`PlanLimits::max_work`] units with a deadline [`PlanLimits::max_duration`]
    /// from now.
    pub fn meter(&self) -> Meter {
        Meter::new(self.max_work).with_deadline(self.max_duration)
    }
}

/// What to plan.
#[derive(Debug, Clone)]
pub struct PlanRequest<'a> {
    /// The requested extension, as [`resolve::resolve`] takes it.
    pub request: &'a ResolveRequest,
    /// Every extension installed (the requested package's own, if any, is what the request
    /// upgrades: it is not kept).
    pub installed: &'a [InstalledExtension],
    /// APIs the cluster serves.
    pub served_apis: &'a [Gvk],
    /// Whether installed extensions other than the requested one may change bundle.
    pub allow_changes: bool,
    /// Bounds.
    pub limits: PlanLimits,
}

/// One bundle the plan installs (or changes to).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedBundle {
    /// The package.
    pub package: String,
    /// The bundle.
    pub bundle: String,
    /// Its version as status would report it.
    pub version: String,
    /// The catalog it comes from.
    pub catalog: String,
    /// The bundles of the plan (or installed) whose requirements it satisfies; empty for the
    /// requested package.
    pub required_by: Vec<String>,
    /// The installed bundle it replaces, when the plan changes an installed extension.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// The bundle image.
    #[serde(skip)]
    pub image: String,
}

/// An installed bundle the plan keeps and relies on.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptBundle {
    /// The ClusterExtension.
    pub extension: String,
    /// The package.
    pub package: String,
    /// The bundle.
    pub bundle: String,
    /// Its version.
    pub version: String,
    /// The bundles of the plan whose requirements it satisfies.
    pub required_by: Vec<String>,
}

/// A plan: what to install, dependencies before what needs them, the requested package last.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// The bundles to install or change to.
    pub plan: Vec<PlannedBundle>,
    /// Installed bundles that satisfy requirements of the plan (unchanged).
    pub installed: Vec<KeptBundle>,
    /// Which bundle satisfies each requirement of the plan's bundles, and why that one
    /// (`olmv1 explain`).
    #[serde(skip)]
    pub choices: Vec<Choice>,
    /// The work units the plan cost (at most [`PlanLimits::max_work`]).
    #[serde(skip)]
    pub work: u64,
}

/// The bundle that satisfies one requirement of a planned bundle, and why the planner took it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Choice {
    /// The bundle that declares the requirement.
    pub dependent: String,
    /// The requirement ([`Requirement::summary`]).
    pub requirement: String,
    /// The bundle that satisfies it.
    pub satisfied_by: String,
    /// Its catalog (`None` for an installed bundle).
    pub catalog: Option<String>,
    /// Classic's preference in words: its rank among the candidates, its catalog (priority,
    /// the dependent's own), channel and place from the head, and the candidates preferred to
    /// it that other requirements excluded.
    pub why: String,
}

/// Why there is no plan.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// The requested package itself does not resolve (the resolver's own message).
    #[error("{0}")]
    Resolve(ResolveError),
    /// No set of bundles satisfies every requirement: the chain of requirements that conflict.
    #[error("no set of bundles satisfies every requirement:\n{0}")]
    Unsatisfiable(String),
    /// The problem has more candidates than the limit.
    #[error("the dependency problem has more than {limit} candidate bundles; narrow the request")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The requirements of the candidates cost more work than the budget.
    #[error(
        "no plan for package {package:?} within the budget of {limit} work units: the requirements of {candidates} candidate bundles cost more; narrow the request or the catalogs"
    )]
    OverBudget {
        /// The requested package.
        package: String,
        /// The budget.
        limit: u64,
        /// The candidates whose requirements were read when it ran out.
        candidates: usize,
    },
    /// The plan ran out of time.
    #[error("no plan for package {package:?} within {limit:?}")]
    TimedOut {
        /// The requested package.
        package: String,
        /// The time allowed.
        limit: Duration,
    },
}

impl PlanError {
    /// The plan for `package` ran out of its meter, with `candidates` loaded.
    pub fn exhausted(package: &str, exhausted: Exhausted, candidates: usize) -> PlanError {
        match exhausted {
            Exhausted::Work { limit } => PlanError::OverBudget {
                package: package.to_string(),
                limit,
                candidates,
            },
            Exhausted::Time { limit } => PlanError::TimedOut {
                package: package.to_string(),
                limit,
            },
        }
    }

    /// The resolver's error for the requested package; its meter running out is the plan's.
    fn of_resolve(e: ResolveError, package: &str) -> PlanError {
        match e {
            ResolveError::Exhausted { exhausted, .. } => PlanError::exhausted(package, exhausted, 0),
            other => PlanError::Resolve(other),
        }
    }

    /// Whether retrying cannot help until the request changes (the resolver's terminal errors).
    pub fn is_terminal(&self) -> bool {
        match self {
            PlanError::Resolve(e) => e.is_terminal(),
            PlanError::TooLarge { .. } | PlanError::OverBudget { .. } => true,
            PlanError::Unsatisfiable(_) | PlanError::TimedOut { .. } => false,
        }
    }
}

/// The plan for a request over these catalogs, within its own limits ([`PlanLimits::meter`]).
pub fn plan(request: &PlanRequest<'_>, catalogs: &[CatalogInput]) -> Result<Plan, PlanError> {
    plan_within(request, catalogs, &mut request.limits.meter())
}

/// The plan for a request over these catalogs, its work charged to `meter` (a command's own, as
/// `explain`'s), its time within `meter`'s deadline ([`PlanLimits::max_work`] and
/// [`PlanLimits::max_duration`] are not used).
pub fn plan_within(
    request: &PlanRequest<'_>,
    catalogs: &[CatalogInput],
    meter: &mut Meter,
) -> Result<Plan, PlanError> {
    let (result, spent) = plan_owning(request, catalogs, std::mem::replace(meter, Meter::new(0)));
    *meter = spent;
    result
}

/// [`plan_within`] with the meter moved in and handed back.
fn plan_owning(
    request: &PlanRequest<'_>,
    catalogs: &[CatalogInput],
    mut meter: Meter,
) -> (Result<Plan, PlanError>, Meter) {
    let package = &request.request.package;
    // The resolver decides errors of the requested package itself (range, selector, ties, none).
    let resolved = resolve::resolve_allowing_dependencies_within(request.request, catalogs, &mut meter)
        .map_err(|e| PlanError::of_resolve(e, package))
        .and_then(|_| {
            resolve::candidates_within(request.request, catalogs, &mut meter)
                .map_err(|e| PlanError::of_resolve(e, package))
        });
    let requested = match resolved {
        Ok(r) => r,
        Err(e) => return (Err(e), meter),
    };
    universe_plan(Universe::new(request, catalogs, meter), &requested, request)
}

fn universe_plan<'a>(
    mut universe: Universe<'a>,
    requested: &[resolve::Candidate<'a>],
    request: &'a PlanRequest<'a>,
) -> (Result<Plan, PlanError>, Meter) {
    let (root, roots) = match prepare(&mut universe, requested, request) {
        Ok(prepared) => prepared,
        Err(e) => return (Err(e), universe.meter),
    };
    let deadline = universe.meter.deadline();
    let provider = Provider { universe, deadline };
    let mut solver = Solver::new(provider);
    let problem = Problem::new().requirements(roots);
    let mut cancelled = false;
    let solved = solver.solve(problem);
    // An answer found past the deadline is refused too: past it the provider stops handing the
    // solver version sets (`version_sets_in_union`), so it may rest on a truncated problem.
    let past_deadline = deadline.is_some_and(|d| Instant::now() > d);
    let result = match solved {
        _ if past_deadline => {
            cancelled = true;
            Err(solver.provider().universe.timed_out())
        }
        Ok(chosen) => Ok(solver.provider().universe.plan(&chosen, root)),
        Err(UnsolvableOrCancelled::Unsolvable(conflict)) => {
            let text = bounded_text(
                &conflict.display_user_friendly(&solver),
                MAX_EXPLANATION_BYTES,
                deadline,
            );
            Err(PlanError::Unsatisfiable(text.trim_end().to_string()))
        }
        Err(UnsolvableOrCancelled::Cancelled(_)) => {
            cancelled = true;
            Err(solver.provider().universe.timed_out())
        }
    };
    let mut meter = solver.provider().universe.meter.clone();
    if cancelled {
        // The solver read the clock itself: the meter records the deadline it ran into.
        meter.ran_out_of_time();
    }
    (result, meter)
}

/// The requested package and the installed extensions loaded, every requirement reached
/// expanded: the root's name and the solver's root requirements.
fn prepare<'a>(
    universe: &mut Universe<'a>,
    requested: &[resolve::Candidate<'a>],
    request: &'a PlanRequest<'a>,
) -> Result<(NameId, Vec<ConditionalRequirement>), PlanError> {
    let root = universe.load_requested(&request.request.package, requested)?;
    let mut roots = vec![ConditionalRequirement::from(universe.whole_package(root))];
    for (i, installed) in request.installed.iter().enumerate() {
        if installed.package == request.request.package {
            continue;
        }
        let name = universe.load_package(&installed.package, None)?;
        let set = if request.allow_changes {
            universe.whole_package(name)
        } else {
            let own = universe.installed_solvable[i];
            universe.version_set(name, &[own], Arc::from(""))
        };
        roots.push(set.into());
    }
    universe.expand()?;
    universe.allow_one_provider_per_api()?;
    Ok((root, roots))
}

/// The longest explanation of a conflict kept. resolvo's tree of the conflict can grow
/// exponentially with the catalog (each shared API or package repeats the subtrees under it),
/// so its text is cut, and formatting stops, at this size.
pub const MAX_EXPLANATION_BYTES: usize = 16 * 1024;

/// `value`'s text, formatting stopped once it passes `limit` bytes or `deadline` (then marked
/// as cut; the clock is read every 64 pieces written).
fn bounded_text(value: &impl fmt::Display, limit: usize, deadline: Option<Instant>) -> String {
    struct Bounded {
        text: String,
        limit: usize,
        cut: bool,
        deadline: Option<Instant>,
        writes: u32,
        late: bool,
    }
    impl fmt::Write for Bounded {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.writes = self.writes.wrapping_add(1);
            if self.writes.is_multiple_of(64) && self.deadline.is_some_and(|d| Instant::now() > d) {
                self.late = true;
                return Err(fmt::Error);
            }
            if self.text.len() + s.len() <= self.limit {
                self.text.push_str(s);
                return Ok(());
            }
            let mut end = self.limit - self.text.len();
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.text.push_str(&s[..end]);
            self.cut = true;
            // An error ends the formatting: the rest is never computed.
            Err(fmt::Error)
        }
    }
    let mut out = Bounded {
        text: String::new(),
        limit,
        cut: false,
        deadline,
        writes: 0,
        late: false,
    };
    let _ = fmt::Write::write_fmt(&mut out, format_args!("{value}"));
    if out.late {
        out.text
            .push_str("\n... (explanation cut at the plan's time limit)");
    } else if out.cut {
        out.text
            .push_str(&format!("\n... (explanation cut at {limit} bytes)"));
    }
    out.text
}

struct NameInfo {
    display: String,
    candidates: Vec<SolvableId>,
    locked: Option<SolvableId>,
    /// The solvable's bundle of every catalog candidate; whole-package version set.
    whole: Option<VersionSetId>,
}

struct SolvableInfo<'a> {
    name: NameId,
    /// Its place among its name's candidates (what a version set's bits are indexed by).
    position: usize,
    facts: BundleFacts<'a>,
    status_version: String,
    catalog: Option<&'a CatalogInput>,
    image: &'a str,
    /// The installed extension it is, if any.
    installed: Option<usize>,
    dependencies: Option<Dependencies>,
    /// Each requirement (its summary) and its version sets (to find what a chosen bundle was
    /// required by).
    satisfies: Vec<(String, Arc<[VersionSetId]>)>,
    /// Where a dependency's candidate stood in classic's order (catalog bundles of dependencies).
    preference: Option<Preference<'a>>,
}

/// The facts classic's order ranked a dependency's candidate by.
#[derive(Debug, Clone, Copy)]
struct Preference<'a> {
    priority: i32,
    /// Whether it is in the catalog of the bundle that first required its package.
    dependents_catalog: bool,
    /// The channel where it ranks best, and whether that is the default channel.
    channel: Option<(&'a str, bool)>,
    /// Its distance from that channel's head.
    from_head: usize,
}

/// A set of candidates of one name: one bit per candidate of the name (in one word for a
/// package of up to 64 bundles), and the index of its requirement's text, kept once: a
/// requirement any package satisfies makes one set per package, so a set is kept small.
struct VersionSetInfo {
    name: NameId,
    display: u32,
    members: Members,
}

enum Members {
    Word(u64),
    Words(Box<[u64]>),
}

impl Members {
    fn new(words: Vec<u64>) -> Members {
        match words[..] {
            [] => Members::Word(0),
            [word] => Members::Word(word),
            _ => Members::Words(words.into_boxed_slice()),
        }
    }
}

impl VersionSetInfo {
    fn contains(&self, position: usize) -> bool {
        let word = match &self.members {
            Members::Word(word) => (position < 64).then_some(*word),
            Members::Words(words) => words.get(position / 64).copied(),
        };
        word.is_some_and(|word| word & (1 << (position % 64)) != 0)
    }
}

/// A requirement expanded: its sets, and what the solver is given for it.
type Expanded = (Arc<[VersionSetId]>, SolverRequirement);

/// Each set a requirement makes is charged as this many items visited beyond its evaluations:
/// what the solver does with it once it is handed over (its candidates filtered and sorted, its
/// clauses made: about 2 us; a plan of 16 `not` requirements over 2,000 packages spent 65 ms of
/// its 70 ms there when a set was charged 1 visit: `cargo bench --bench meter`), and what it
/// keeps (about 40 bytes with its share of the union), which bounds a plan's memory with its work.
pub(super) const UNITS_PER_SET: u64 = 100;

struct Universe<'a> {
    request: &'a PlanRequest<'a>,
    catalogs: &'a [CatalogInput],
    names: Vec<NameInfo>,
    name_of_package: HashMap<String, NameId>,
    solvables: Vec<SolvableInfo<'a>>,
    installed_solvable: Vec<SolvableId>,
    version_sets: Vec<VersionSetInfo>,
    unions: Vec<Arc<[VersionSetId]>>,
    /// The texts of the version sets ([`VersionSetInfo::display`]).
    displays: Vec<Arc<str>>,
    strings: Vec<String>,
    queue: VecDeque<SolvableId>,
    /// Packages providing each API, over every available catalog and the installed bundles.
    providers: Option<HashMap<Gvk, BTreeSet<&'a str>>>,
    /// Every package of the available catalogs and the installed extensions (built once).
    all_packages: Option<Vec<&'a str>>,
    /// The version sets of a requirement already expanded, by its text and the dependent's
    /// catalog: bundles declaring the same requirement share them.
    expanded: HashMap<(Arc<str>, Option<&'a str>), Expanded>,
    too_large: bool,
    meter: Meter,
}

impl<'a> Universe<'a> {
    fn new(request: &'a PlanRequest<'a>, catalogs: &'a [CatalogInput], meter: Meter) -> Self {
        let mut universe = Universe {
            request,
            catalogs,
            names: Vec::new(),
            name_of_package: HashMap::new(),
            solvables: Vec::new(),
            installed_solvable: Vec::new(),
            version_sets: Vec::new(),
            unions: Vec::new(),
            displays: Vec::new(),
            strings: Vec::new(),
            queue: VecDeque::new(),
            providers: None,
            all_packages: None,
            expanded: HashMap::new(),
            too_large: false,
            meter,
        };
        // Installed bundles exist whatever the catalogs say; their names are made on demand.
        for (i, installed) in request.installed.iter().enumerate() {
            let id = SolvableId::from_index(universe.solvables.len());
            universe.solvables.push(SolvableInfo {
                name: NameId::from_index(usize::MAX >> 33),
                position: 0,
                facts: BundleFacts::new(&installed.bundle, &installed.package, &installed.properties),
                status_version: installed.version.clone(),
                catalog: None,
                image: "",
                installed: Some(i),
                dependencies: None,
                satisfies: Vec::new(),
                preference: None,
            });
            universe.installed_solvable.push(id);
        }
        universe
    }

    fn new_name(&mut self, key: &str, display: String) -> NameId {
        let id = NameId::from_index(self.names.len());
        self.names.push(NameInfo {
            display,
            candidates: Vec::new(),
            locked: None,
            whole: None,
        });
        self.name_of_package.insert(key.to_string(), id);
        id
    }

    fn add_catalog_bundle(
        &mut self,
        name: NameId,
        catalog: &'a CatalogInput,
        package: &'a PackageIndex,
        bundle: &'a BundleIndex,
    ) -> Result<SolvableId, PlanError> {
        // Its facts are read from its properties.
        self.charge(Work::Parse, facts_bytes(&bundle.properties))?;
        let id = SolvableId::from_index(self.solvables.len());
        let version = bundle.version.as_ref().ok().cloned();
        self.solvables.push(SolvableInfo {
            name,
            position: self.names[name.to_index()].candidates.len(),
            facts: BundleFacts::new(&bundle.name, &package.name, &bundle.properties),
            status_version: version
                .as_ref()
                .map(VersionRelease::status_version)
                .unwrap_or_default(),
            catalog: Some(catalog),
            image: &bundle.image,
            installed: None,
            dependencies: None,
            satisfies: Vec::new(),
            preference: None,
        });
        self.queue.push_back(id);
        if self.solvables.len() > self.request.limits.max_candidates {
            self.too_large = true;
        }
        Ok(id)
    }

    /// Charges `quantity` of `kind` to the plan's meter.
    fn charge(&mut self, kind: Work, quantity: u64) -> Result<(), PlanError> {
        self.meter.charge(kind, quantity).map_err(|e| self.exhausted(e))
    }

    /// The requested package: the resolver's candidates, in its order.
    fn load_requested(
        &mut self,
        package: &str,
        candidates: &[resolve::Candidate<'a>],
    ) -> Result<NameId, PlanError> {
        let name = self.new_name(package, package.to_string());
        for c in candidates {
            let id = self.add_catalog_bundle(name, c.catalog, c.package, c.bundle)?;
            self.names[name.to_index()].candidates.push(id);
        }
        Ok(name)
    }

    /// A dependency's package (loaded once): the installed bundle, and every catalog bundle in
    /// classic's order. `preferred` is the catalog of the bundle asking for it.
    fn load_package(&mut self, package: &str, preferred: Option<&str>) -> Result<NameId, PlanError> {
        if let Some(&id) = self.name_of_package.get(package) {
            return Ok(id);
        }
        let name = self.new_name(package, package.to_string());
        let installed = self
            .request
            .installed
            .iter()
            .position(|i| i.package == package && i.package != self.request.request.package);
        if let Some(i) = installed {
            let own = self.installed_solvable[i];
            self.solvables[own.to_index()].name = name;
            self.solvables[own.to_index()].position = 0;
            self.queue.push_back(own);
            self.names[name.to_index()].candidates.push(own);
            if !self.request.allow_changes {
                self.names[name.to_index()].locked = Some(own);
                return Ok(name);
            }
        }
        let installed_bundle = installed.map(|i| self.request.installed[i].bundle.as_str());
        #[allow(clippy::type_complexity)]
        let mut ordered: Vec<(
            OrderKey<'a>,
            Preference<'a>,
            &'a CatalogInput,
            &'a PackageIndex,
            &'a BundleIndex,
        )> = Vec::new();
        for catalog in self.catalogs.iter().filter(|c| c.available) {
            let Some(pkg) = catalog.index.package(package) else {
                continue;
            };
            // Ordering walks its bundles and its channels' entries and edges.
            self.charge(Work::Visit, package_items(pkg))?;
            let (places, channel_names) = channel_places(pkg);
            for (i, bundle) in pkg.bundles.iter().enumerate() {
                if Some(&*bundle.name) == installed_bundle {
                    continue;
                }
                let key = OrderKey {
                    priority: std::cmp::Reverse(catalog.priority),
                    other_catalog: preferred.is_some_and(|p| p != catalog.name),
                    place: places[i],
                    version: bundle.version.as_ref().ok(),
                    catalog: &catalog.name,
                    position: i,
                };
                let (rank, from_head) = places[i];
                let preference = Preference {
                    priority: catalog.priority,
                    dependents_catalog: preferred == Some(catalog.name.as_str()),
                    channel: channel_names
                        .get(rank)
                        .map(|c| (*c, Some(*c) == pkg.default_channel.as_deref())),
                    from_head,
                };
                ordered.push((key, preference, catalog, pkg, bundle));
            }
        }
        ordered.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, preference, catalog, pkg, bundle) in ordered {
            let id = self.add_catalog_bundle(name, catalog, pkg, bundle)?;
            self.solvables[id.to_index()].preference = Some(preference);
            self.names[name.to_index()].candidates.push(id);
        }
        Ok(name)
    }

    fn version_set(&mut self, name: NameId, members: &[SolvableId], display: Arc<str>) -> VersionSetId {
        let mut bits = vec![0u64; self.names[name.to_index()].candidates.len().div_ceil(64)];
        for m in members {
            let position = self.solvables[m.to_index()].position;
            bits[position / 64] |= 1 << (position % 64);
        }
        self.version_set_of_bits(name, bits, display)
    }

    fn version_set_of_bits(&mut self, name: NameId, members: Vec<u64>, display: Arc<str>) -> VersionSetId {
        // Consecutive sets of one requirement share its text.
        let display = match self.displays.last() {
            Some(last) if Arc::ptr_eq(last, &display) => self.displays.len() - 1,
            _ => {
                self.displays.push(display);
                self.displays.len() - 1
            }
        };
        let id = VersionSetId(self.version_sets.len() as u32);
        self.version_sets.push(VersionSetInfo {
            name,
            display: display as u32,
            members: Members::new(members),
        });
        id
    }

    /// The candidates a version set holds, in the name's order (classic's preference).
    fn members(&self, set: VersionSetId) -> impl Iterator<Item = SolvableId> + '_ {
        let info = &self.version_sets[set.0 as usize];
        self.names[info.name.to_index()]
            .candidates
            .iter()
            .enumerate()
            .filter(|(position, _)| info.contains(*position))
            .map(|(_, &s)| s)
    }

    fn whole_package(&mut self, name: NameId) -> VersionSetId {
        if let Some(id) = self.names[name.to_index()].whole {
            return id;
        }
        let members = self.names[name.to_index()].candidates.clone();
        let id = self.version_set(name, &members, Arc::from(""));
        self.names[name.to_index()].whole = Some(id);
        id
    }

    fn string(&mut self, s: String) -> StringId {
        self.strings.push(s);
        StringId(self.strings.len() as u32 - 1)
    }

    /// Packages providing each API (built once, every bundle's facts read, charged).
    fn providers(&mut self) -> Result<&HashMap<Gvk, BTreeSet<&'a str>>, PlanError> {
        if self.providers.is_none() {
            let mut map: HashMap<Gvk, BTreeSet<&'a str>> = HashMap::new();
            for catalog in self.catalogs.iter().filter(|c| c.available) {
                for pkg in catalog.index.packages() {
                    for b in &pkg.bundles {
                        self.meter
                            .charge(Work::Parse, facts_bytes(&b.properties))
                            .map_err(|e| self.exhausted(e))?;
                        for gvk in BundleFacts::new(&b.name, &pkg.name, &b.properties).gvks {
                            map.entry(gvk).or_default().insert(&pkg.name);
                        }
                    }
                }
            }
            for i in self.request.installed {
                for gvk in BundleFacts::new(&i.bundle, &i.package, &i.properties).gvks {
                    map.entry(gvk).or_default().insert(&i.package);
                }
            }
            self.providers = Some(map);
        }
        Ok(self.providers.as_ref().expect("just built"))
    }

    /// The packages whose bundles may satisfy a constraint; `None` = any package. The sets made
    /// are charged by their sizes.
    fn packages_for(&mut self, c: &Constraint) -> Result<Option<BTreeSet<&'a str>>, PlanError> {
        let set = match c {
            Constraint::Package { package, .. } => {
                // Borrow the name from a catalog or the installed list (they outlive the universe).
                let named = self
                    .catalogs
                    .iter()
                    .find_map(|cat| cat.index.package(package).map(|p| &*p.name))
                    .or_else(|| {
                        self.request
                            .installed
                            .iter()
                            .find(|i| &i.package == package)
                            .map(|i| i.package.as_str())
                    });
                Some(named.into_iter().collect())
            }
            Constraint::Gvk(gvk) => {
                let size = self.providers()?.get(gvk).map_or(0, BTreeSet::len);
                self.charge(Work::Visit, size as u64)?;
                Some(self.providers()?.get(gvk).cloned().unwrap_or_default())
            }
            Constraint::All(cs) => {
                let mut narrowest: Option<BTreeSet<&'a str>> = None;
                for child in cs {
                    if let Some(set) = self.packages_for(child)? {
                        narrowest = Some(match narrowest {
                            None => set,
                            Some(n) => n.intersection(&set).copied().collect(),
                        });
                    }
                }
                narrowest
            }
            Constraint::Any(cs) => {
                let mut union = BTreeSet::new();
                for child in cs {
                    let Some(set) = self.packages_for(child)? else {
                        return Ok(None);
                    };
                    union.extend(set);
                }
                Some(union)
            }
            Constraint::Cel(_) | Constraint::Not(_) => None,
        };
        if let Some(set) = &set {
            self.charge(Work::Visit, set.len() as u64)?;
        }
        Ok(set)
    }

    /// Every package a requirement naming no package or API may be satisfied by (built once,
    /// its copy charged).
    fn all_packages(&mut self) -> Result<Vec<&'a str>, PlanError> {
        if self.all_packages.is_none() {
            let mut out: BTreeSet<&'a str> = self
                .catalogs
                .iter()
                .filter(|c| c.available)
                .flat_map(|c| c.index.packages().map(|p| &*p.name))
                .collect();
            out.extend(self.request.installed.iter().map(|i| i.package.as_str()));
            self.all_packages = Some(out.into_iter().collect());
        }
        let all = self.all_packages.clone().expect("just built");
        self.charge(Work::Visit, all.len() as u64)?;
        Ok(all)
    }

    /// What stops the plan: its meter ran out of work units or time.
    fn exhausted(&self, e: Exhausted) -> PlanError {
        PlanError::exhausted(&self.request.request.package, e, self.solvables.len())
    }

    fn timed_out(&self) -> PlanError {
        let limit = self.meter.time_limit().unwrap_or_default();
        self.exhausted(Exhausted::Time { limit })
    }

    /// Reads the requirements of every solvable reached, loading the packages they name.
    fn expand(&mut self) -> Result<(), PlanError> {
        while let Some(id) = self.queue.pop_front() {
            if self.too_large {
                return Err(PlanError::TooLarge {
                    limit: self.request.limits.max_candidates,
                });
            }
            // The deadline: read by the meter as the work below is charged.
            if self.solvables[id.to_index()].dependencies.is_some() {
                continue;
            }
            let (deps, satisfies) = self.dependencies_of(id)?;
            let info = &mut self.solvables[id.to_index()];
            info.dependencies = Some(deps);
            info.satisfies = satisfies;
        }
        if self.too_large {
            return Err(PlanError::TooLarge {
                limit: self.request.limits.max_candidates,
            });
        }
        Ok(())
    }

    #[allow(clippy::type_complexity)]
    fn dependencies_of(
        &mut self,
        id: SolvableId,
    ) -> Result<(Dependencies, Vec<(String, Arc<[VersionSetId]>)>), PlanError> {
        let info = &self.solvables[id.to_index()];
        let (bundle, properties) = (info.facts.name, info.facts.properties);
        let preferred = info.catalog.map(|c| c.name.as_str());
        // Reading the requirements costs their text and compiling their rules.
        let requirements = match requirements_of(bundle, properties, &mut self.meter) {
            Ok(r) => r,
            Err(DependencyError::Exhausted { exhausted, .. }) => return Err(self.exhausted(exhausted)),
            Err(e) => return Ok((Dependencies::Unknown(self.string(e.to_string())), Vec::new())),
        };
        let mut out = Vec::new();
        let mut satisfies = Vec::new();
        for r in requirements {
            if self.satisfied_by_served_apis(&r)? {
                continue;
            }
            // The whole requirement (its display shows only a package's range).
            let key = format!("{r}\0{:?}", r.failure_message);
            self.charge(Work::Render, key.len() as u64)?;
            let key = (Arc::from(key), preferred);
            // Bundles declaring the same requirement share its sets and its union.
            let (sets, requirement) = match self.expanded.get(&key) {
                Some(expanded) => expanded.clone(),
                None => {
                    let display = version_set_display(&r);
                    self.charge(Work::Render, display.len() as u64)?;
                    let display = Arc::from(display);
                    let sets: Arc<[VersionSetId]> = self.expand_requirement(&r, preferred, display)?.into();
                    let requirement = if sets.len() == 1 {
                        SolverRequirement::Single(sets[0])
                    } else {
                        self.unions.push(Arc::clone(&sets));
                        SolverRequirement::Union(VersionSetUnionId(self.unions.len() as u32 - 1))
                    };
                    self.expanded.insert(key, (Arc::clone(&sets), requirement));
                    (sets, requirement)
                }
            };
            let summary = r.summary();
            self.charge(Work::Render, summary.len() as u64)?;
            satisfies.push((summary, sets));
            out.push(ConditionalRequirement::from(requirement));
        }
        Ok((
            Dependencies::Known(KnownDependencies {
                requirements: out,
                constrains: Vec::new(),
            }),
            satisfies,
        ))
    }

    /// Whether an API the cluster serves satisfies `r` (then it is dropped from the plan).
    fn satisfied_by_served_apis(&mut self, r: &Requirement) -> Result<bool, PlanError> {
        if !r.constraint.names_api() {
            return Ok(false);
        }
        for api in self.request.served_apis {
            let satisfied = r
                .satisfied_by_served_api_within(api, &mut self.meter)
                .map_err(|e| self.exhausted(e))?;
            if satisfied {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The version sets of one requirement: per package that may satisfy it, the candidates that
    /// do, packages in classic's order of preference (installed first, then higher catalog
    /// priority, then the dependent's catalog); or a name with no candidates saying what is
    /// missing.
    fn expand_requirement(
        &mut self,
        r: &Requirement,
        preferred: Option<&'a str>,
        display: Arc<str>,
    ) -> Result<Vec<VersionSetId>, PlanError> {
        let packages: Vec<&'a str> = match self.packages_for(&r.constraint)? {
            Some(set) => set.into_iter().collect(),
            None => self.all_packages()?,
        };
        let mut sets: Vec<(PackageRank<'a>, VersionSetId)> = Vec::new();
        let mut kept_instead = Vec::new();
        for package in packages {
            // Each package considered costs, even one with nothing to evaluate; every
            // evaluation below is charged too, so the meter reads the clock inside a package's
            // candidates as well as between packages.
            self.charge(Work::Visit, 1)?;
            let name = self.load_package(package, preferred)?;
            if self.too_large {
                return Err(PlanError::TooLarge {
                    limit: self.request.limits.max_candidates,
                });
            }
            if let Some(own) = self.names[name.to_index()].locked {
                let facts = &self.solvables[own.to_index()].facts;
                r.charge(facts, &mut self.meter).map_err(|e| self.exhausted(e))?;
                if !r.satisfied_by(facts) {
                    kept_instead.push(own);
                }
            }
            let count = self.names[name.to_index()].candidates.len();
            let mut bits = vec![0u64; count.div_ceil(64)];
            let mut first = None;
            for position in 0..count {
                let candidate = self.names[name.to_index()].candidates[position];
                let facts = &self.solvables[candidate.to_index()].facts;
                r.charge(facts, &mut self.meter).map_err(|e| self.exhausted(e))?;
                if r.satisfied_by(facts) {
                    bits[position / 64] |= 1 << (position % 64);
                    first.get_or_insert(candidate);
                }
            }
            if let Some(first) = first {
                self.charge(Work::Visit, UNITS_PER_SET)?;
                let rank = self.rank(first, preferred);
                let set = self.version_set_of_bits(name, bits, Arc::clone(&display));
                sets.push((rank, set));
            }
        }
        if sets.is_empty() {
            // Nothing anywhere satisfies it: a name with no candidates says what is missing.
            let key = format!("missing: {r}");
            let name = match self.name_of_package.get(&key) {
                Some(&n) => n,
                None => {
                    let kept: Vec<String> = kept_instead
                        .iter()
                        .map(|s| {
                            let info = &self.solvables[s.to_index()];
                            let extension = info
                                .installed
                                .map_or("", |i| &self.request.installed[i].extension);
                            format!("{} installed as {extension}", info.facts.name)
                        })
                        .collect();
                    let display = missing_display(r, &kept);
                    self.charge(Work::Render, (key.len() + display.len()) as u64)?;
                    self.new_name(&key, display)
                }
            };
            return Ok(vec![self.version_set(name, &[], Arc::from(""))]);
        }
        // Stable: packages of equal rank keep their order (by name).
        sets.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(sets.into_iter().map(|(_, set)| set).collect())
    }

    /// Where a package's best candidate for a requirement stands among other packages'.
    fn rank(&self, best: SolvableId, preferred: Option<&str>) -> PackageRank<'a> {
        let info = &self.solvables[best.to_index()];
        match info.catalog {
            None => PackageRank {
                not_installed: false,
                priority: std::cmp::Reverse(i32::MAX),
                other_catalog: false,
                package: info.facts.package,
            },
            Some(catalog) => PackageRank {
                not_installed: true,
                priority: std::cmp::Reverse(catalog.priority),
                other_catalog: preferred.is_some_and(|p| p != catalog.name),
                package: info.facts.package,
            },
        }
    }

    /// Classic's rule: at most one package of a plan provides a given API (`olm.gvk`), since
    /// two would own the same CRD. Each bundle providing an API that several packages provide
    /// requires its own marker of a name per API, and resolvo picks one solvable per name. An
    /// API that installed extensions of two packages already provide is left alone: the cluster
    /// already has both, and refusing every plan would help nobody.
    fn allow_one_provider_per_api(&mut self) -> Result<(), PlanError> {
        // Nothing loaded provides an API: no marker, and no scan of the catalogs' providers.
        if !self
            .solvables
            .iter()
            .any(|s| s.dependencies.is_some() && !s.facts.gvks.is_empty())
        {
            return Ok(());
        }
        let upgraded = self.request.request.package.as_str();
        let mut installed_providers: HashMap<Gvk, BTreeSet<&str>> = HashMap::new();
        for i in self.request.installed.iter().filter(|i| i.package != upgraded) {
            for gvk in BundleFacts::new(&i.bundle, &i.package, &i.properties).gvks {
                installed_providers.entry(gvk).or_default().insert(&i.package);
            }
        }
        let shared: HashSet<Gvk> = self
            .providers()?
            .iter()
            .filter(|(gvk, packages)| {
                packages.len() > 1 && installed_providers.get(*gvk).is_none_or(|p| p.len() < 2)
            })
            .map(|(gvk, _)| gvk.clone())
            .collect();
        if shared.is_empty() {
            return Ok(());
        }
        for id in 0..self.solvables.len() {
            let info = &self.solvables[id];
            // Loaded bundles only: an installed bundle no requirement reached has no name yet.
            if info.dependencies.is_none() {
                continue;
            }
            // Once per API, even when a bundle lists it twice (two markers would exclude each other).
            let gvks: BTreeSet<Gvk> = info
                .facts
                .gvks
                .iter()
                .filter(|g| shared.contains(*g))
                .cloned()
                .collect();
            for gvk in gvks {
                let key = format!("provides: {gvk}");
                let name = match self.name_of_package.get(&key) {
                    Some(&n) => n,
                    None => self.new_name(&key, format!("one provider of {gvk}")),
                };
                // A marker is a candidate too: charged, counted, and with no facts of its own but
                // the bundle's name (a copy of all its APIs per API would grow as their square).
                self.charge(Work::Visit, 1)?;
                if self.solvables.len() >= self.request.limits.max_candidates {
                    return Err(PlanError::TooLarge {
                        limit: self.request.limits.max_candidates,
                    });
                }
                let marker = SolvableId::from_index(self.solvables.len());
                let facts = BundleFacts::new(
                    self.solvables[id].facts.name,
                    self.solvables[id].facts.package,
                    &[],
                );
                self.solvables.push(SolvableInfo {
                    name,
                    position: self.names[name.to_index()].candidates.len(),
                    facts,
                    status_version: String::new(),
                    catalog: None,
                    image: "",
                    installed: None,
                    dependencies: Some(Dependencies::Known(KnownDependencies::default())),
                    satisfies: Vec::new(),
                    preference: None,
                });
                self.names[name.to_index()].candidates.push(marker);
                let set = self.version_set(name, &[marker], Arc::from(gvk.to_string()));
                if let Some(Dependencies::Known(known)) = &mut self.solvables[id].dependencies {
                    known.requirements.push(ConditionalRequirement::from(set));
                }
            }
        }
        Ok(())
    }

    fn plan(&self, chosen: &[SolvableId], root: NameId) -> Plan {
        let chosen_set: HashSet<SolvableId> = chosen.iter().copied().collect();
        let label = |s: SolvableId| self.solvables[s.to_index()].facts.name.to_string();
        // Who requires whom, among the chosen.
        let mut required_by: HashMap<SolvableId, Vec<SolvableId>> = HashMap::new();
        for &s in chosen {
            for (_, sets) in &self.solvables[s.to_index()].satisfies {
                // The most preferred chosen member (several packages may provide one API).
                if let Some(provider) = sets
                    .iter()
                    .flat_map(|&vs| self.members(vs))
                    .find(|m| chosen_set.contains(m))
                {
                    let list = required_by.entry(provider).or_default();
                    if !list.contains(&s) {
                        list.push(s);
                    }
                }
            }
        }
        // Dependencies first: depth-first from the requested bundle, each after what it needs.
        let Some(&top) = chosen.iter().find(|s| self.solvables[s.to_index()].name == root) else {
            return Plan {
                plan: Vec::new(),
                installed: Vec::new(),
                choices: Vec::new(),
                work: self.meter.spent(),
            };
        };
        let mut needs: HashMap<SolvableId, Vec<SolvableId>> = HashMap::new();
        for (dep, users) in &required_by {
            for u in users {
                needs.entry(*u).or_default().push(*dep);
            }
        }
        let mut order = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![(top, false)];
        while let Some((s, done)) = stack.pop() {
            if done {
                order.push(s);
                continue;
            }
            if !seen.insert(s) {
                continue;
            }
            stack.push((s, true));
            let mut deps = needs.get(&s).cloned().unwrap_or_default();
            deps.sort_by_key(|d| std::cmp::Reverse(d.to_index()));
            for d in deps {
                if !seen.contains(&d) {
                    stack.push((d, false));
                }
            }
        }
        let mut plan = Vec::new();
        let mut installed = Vec::new();
        let mut choices = Vec::new();
        for &s in &order {
            for (requirement, sets) in &self.solvables[s.to_index()].satisfies {
                // In the order of preference the sets and their members keep.
                let mut seen = HashSet::new();
                let candidates: Vec<SolvableId> = sets
                    .iter()
                    .flat_map(|&vs| self.members(vs))
                    .filter(|c| seen.insert(*c))
                    .collect();
                let Some(position) = candidates.iter().position(|c| chosen_set.contains(c)) else {
                    continue;
                };
                let provider = candidates[position];
                let info = &self.solvables[provider.to_index()];
                choices.push(Choice {
                    dependent: label(s),
                    requirement: requirement.clone(),
                    satisfied_by: info.facts.name.to_string(),
                    catalog: info.catalog.map(|c| c.name.clone()),
                    why: self.why(provider, &candidates[..position], candidates.len()),
                });
            }
        }
        for s in order {
            let info = &self.solvables[s.to_index()];
            let mut by: Vec<String> = required_by
                .get(&s)
                .into_iter()
                .flatten()
                .map(|&u| label(u))
                .collect();
            by.sort();
            match (info.installed, info.catalog) {
                (Some(i), _) => {
                    let ext = &self.request.installed[i];
                    installed.push(KeptBundle {
                        extension: ext.extension.clone(),
                        package: ext.package.clone(),
                        bundle: ext.bundle.clone(),
                        version: ext.version.clone(),
                        required_by: by,
                    });
                }
                (None, Some(catalog)) => {
                    let replaces = self
                        .request
                        .installed
                        .iter()
                        .find(|i| i.package == info.facts.package)
                        .map(|i| i.bundle.clone());
                    plan.push(PlannedBundle {
                        package: info.facts.package.to_string(),
                        bundle: info.facts.name.to_string(),
                        version: info.status_version.clone(),
                        catalog: catalog.name.clone(),
                        required_by: by,
                        replaces,
                        image: info.image.to_string(),
                    });
                }
                (None, None) => {}
            }
        }
        Plan {
            plan,
            installed,
            choices,
            work: self.meter.spent(),
        }
    }

    /// Why `chosen` satisfies a requirement: where classic's order put it, and the candidates
    /// preferred to it, which other requirements excluded.
    fn why(&self, chosen: SolvableId, preferred: &[SolvableId], candidates: usize) -> String {
        let info = &self.solvables[chosen.to_index()];
        let facts = match (info.installed, info.preference) {
            (Some(i), _) => format!("installed as {}, kept", self.request.installed[i].extension),
            (None, Some(p)) => {
                let catalog = info.catalog.map_or("", |c| c.name.as_str());
                let mut text = format!("catalog {catalog} (priority {}", p.priority);
                if p.dependents_catalog {
                    text.push_str(", the dependent's catalog");
                }
                text.push(')');
                match p.channel {
                    Some((channel, default)) => {
                        let kind = if default { "default" } else { "non-default" };
                        let place = match p.from_head {
                            0 => "its head".to_string(),
                            n if n >= usize::MAX - 1 => "not reachable from its head".to_string(),
                            n => format!("{n} below its head"),
                        };
                        text.push_str(&format!(", {kind} channel {channel}, {place}"));
                    }
                    None => text.push_str(", in no channel"),
                }
                text
            }
            // The requested package's own candidates: the resolver's order.
            (None, None) => "the resolver's choice for the requested package".to_string(),
        };
        if preferred.is_empty() {
            return format!("first choice of {candidates}: {facts}");
        }
        let mut names: Vec<String> = preferred
            .iter()
            .take(3)
            .map(|p| self.solvables[p.to_index()].facts.name.to_string())
            .collect();
        if preferred.len() > 3 {
            names.push(format!("{} more", preferred.len() - 3));
        }
        format!(
            "choice {} of {candidates}: {facts}; preferred to it but excluded by other requirements: {}",
            preferred.len() + 1,
            names.join(", ")
        )
    }
}

/// What loading a package's candidates walks ([`PackageIndex::items`]).
fn package_items(pkg: &PackageIndex) -> u64 {
    pkg.items()
}

/// What reading a bundle's facts parses: its `olm.package` and `olm.gvk` values.
pub(super) fn facts_bytes(properties: &[Property]) -> u64 {
    properties
        .iter()
        .filter(|p| matches!(&*p.type_, crate::catalog::PROPERTY_PACKAGE | super::PROPERTY_GVK))
        .map(|p| p.value.raw().len() as u64)
        .sum::<u64>()
        + 1
}

/// Where a bundle sits in its package's channels: the default channel before the others by
/// name, then its distance from the channel head; and the channels' names by rank.
fn channel_places(pkg: &PackageIndex) -> (Vec<(usize, usize)>, Vec<&str>) {
    let mut places = vec![(usize::MAX, usize::MAX); pkg.bundles.len()];
    let mut channels: Vec<_> = pkg.channels.iter().collect();
    channels.sort_by(|a, b| {
        let default = |c: &&crate::catalog::ChannelIndex| Some(&c.name) != pkg.default_channel.as_ref();
        default(a).cmp(&default(b)).then_with(|| a.name.cmp(&b.name))
    });
    for (rank, ch) in channels.iter().enumerate() {
        // Distance from the head: a breadth-first walk down replaces/skips from entries that
        // nothing in the channel replaces or skips.
        let mut replaced: HashSet<&str> = HashSet::new();
        for e in &ch.entries {
            replaced.extend(e.replaces.as_deref());
            replaced.extend(e.skips.iter().map(|s| &**s));
        }
        let by_name: HashMap<&str, &crate::catalog::ChannelEntryIndex> =
            ch.entries.iter().map(|e| (&*e.name, e)).collect();
        let mut depth: HashMap<&str, usize> = HashMap::new();
        let mut queue: VecDeque<&str> = ch
            .entries
            .iter()
            .filter(|e| !replaced.contains(&*e.name))
            .map(|e| &*e.name)
            .collect();
        for head in &queue {
            depth.insert(head, 0);
        }
        while let Some(n) = queue.pop_front() {
            let d = depth[n];
            if let Some(e) = by_name.get(n) {
                for next in e.replaces.iter().chain(e.skips.iter()) {
                    if by_name.contains_key(&**next) && !depth.contains_key(&**next) {
                        depth.insert(next, d + 1);
                        queue.push_back(next);
                    }
                }
            }
        }
        for e in &ch.entries {
            if let Some(i) = e.bundle {
                let place = (rank, depth.get(&*e.name).copied().unwrap_or(usize::MAX - 1));
                places[i] = places[i].min(place);
            }
        }
    }
    let names = channels.iter().map(|c| &*c.name).collect();
    (places, names)
}

/// Classic's order of the packages that may satisfy one requirement: an installed bundle first
/// (nothing new to install), then the package whose best candidate is in the catalog of higher
/// priority, then in the dependent's catalog; then by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct PackageRank<'a> {
    not_installed: bool,
    priority: std::cmp::Reverse<i32>,
    other_catalog: bool,
    package: &'a str,
}

/// Classic's order of dependency candidates.
struct OrderKey<'a> {
    priority: std::cmp::Reverse<i32>,
    other_catalog: bool,
    place: (usize, usize),
    version: Option<&'a VersionRelease>,
    catalog: &'a str,
    position: usize,
}

impl OrderKey<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        self.priority
            .cmp(&other.priority)
            .then(self.other_catalog.cmp(&other.other_catalog))
            .then(self.place.cmp(&other.place))
            .then_with(|| match (self.version, other.version) {
                (Some(a), Some(b)) => b.compare(a),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            })
            .then_with(|| self.catalog.cmp(other.catalog))
            .then(self.position.cmp(&other.position))
    }
}

pub(super) fn version_set_display(r: &Requirement) -> String {
    let what = match &r.constraint {
        Constraint::Package { range, .. } => range.as_str().to_string(),
        other => format!("(for {other})"),
    };
    match &r.failure_message {
        Some(m) if !m.is_empty() => format!("{what} [{m}]"),
        _ => what,
    }
}

fn missing_display(r: &Requirement, kept: &[String]) -> String {
    let what = match &r.constraint {
        _ if !kept.is_empty() => format!(
            "{} (not satisfied by {}, which is kept: changing an installed extension needs the admin's consent)",
            r.constraint,
            kept.join(", ")
        ),
        Constraint::Package { package, range } => {
            format!(
                "package {package} {} (no catalog has a bundle of it in that range)",
                range.as_str()
            )
        }
        Constraint::Gvk(gvk) => format!("API {gvk} (no bundle in the catalogs provides it)"),
        other => format!("{other} (no bundle in the catalogs satisfies it)"),
    };
    match &r.failure_message {
        Some(m) if !m.is_empty() => format!("{what} [{m}]"),
        _ => what,
    }
}

struct Provider<'a> {
    universe: Universe<'a>,
    deadline: Option<Instant>,
}

impl Provider<'_> {
    fn past_deadline(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() > d)
    }
}

impl fmt::Debug for Provider<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Provider")
    }
}

impl Interner for Provider<'_> {
    type NameId = NameId;
    type SolvableId = SolvableId;

    // The explanation is several lines of catalog text: each value is escaped where it is put
    // in, so that a name or message carrying a newline cannot start a line of its own.
    fn display_solvable(&self, solvable: SolvableId) -> impl fmt::Display + '_ {
        let info = &self.universe.solvables[solvable.to_index()];
        let name = escape_value(info.facts.name);
        match (info.installed, info.catalog) {
            (Some(i), _) => format!(
                "{name} (installed as {})",
                escape_value(&self.universe.request.installed[i].extension)
            ),
            (None, Some(c)) => format!("{name} (catalog {})", escape_value(&c.name)),
            (None, None) => name.into_owned(),
        }
    }

    fn display_merged_solvables(&self, solvables: &[SolvableId]) -> impl fmt::Display + '_ {
        solvables
            .iter()
            .map(|&s| self.display_solvable(s).to_string())
            .collect::<Vec<_>>()
            .join(" | ")
    }

    fn display_name(&self, name: NameId) -> impl fmt::Display + '_ {
        escape_value(&self.universe.names[name.to_index()].display)
    }

    fn display_version_set(&self, version_set: VersionSetId) -> impl fmt::Display + '_ {
        let display = self.universe.version_sets[version_set.0 as usize].display;
        escape_value(&self.universe.displays[display as usize])
    }

    fn display_string(&self, string_id: StringId) -> impl fmt::Display + '_ {
        escape_value(&self.universe.strings[string_id.0 as usize])
    }

    fn version_set_name(&self, version_set: VersionSetId) -> NameId {
        self.universe.version_sets[version_set.0 as usize].name
    }

    fn solvable_name(&self, solvable: SolvableId) -> NameId {
        self.universe.solvables[solvable.to_index()].name
    }

    fn version_sets_in_union(&self, union: VersionSetUnionId) -> impl Iterator<Item = VersionSetId> {
        // resolvo reads the cancel flag only when it first fetches a name's candidates or a
        // solvable's dependencies: a union of thousands of version sets whose names it already
        // knows (a `not` requirement met by every package) is encoded whole, unmetered, tens of
        // seconds past the deadline. Past it, unions are empty, and the answer is refused.
        let sets: &[VersionSetId] = if self.past_deadline() {
            &[]
        } else {
            &self.universe.unions[union.0 as usize]
        };
        sets.iter().copied()
    }

    fn resolve_condition(&self, _condition: ConditionId) -> Condition {
        // No requirement of a plan is conditional; an empty version set stands for "never".
        Condition::Requirement(VersionSetId(0))
    }
}

impl DependencyProvider for Provider<'_> {
    async fn filter_candidates(
        &self,
        candidates: &[SolvableId],
        version_set: VersionSetId,
        inverse: bool,
    ) -> Vec<SolvableId> {
        let set = &self.universe.version_sets[version_set.0 as usize];
        candidates
            .iter()
            .copied()
            .filter(|c| {
                let info = &self.universe.solvables[c.to_index()];
                (info.name == set.name && set.contains(info.position)) != inverse
            })
            .collect()
    }

    async fn get_candidates(&self, name: NameId) -> Option<Candidates<SolvableId>> {
        let info = &self.universe.names[name.to_index()];
        Some(Candidates {
            candidates: info.candidates.clone(),
            locked: info.locked,
            ..Candidates::default()
        })
    }

    async fn sort_candidates(&self, _solver: &SolverCache<Self>, solvables: &mut [SolvableId]) {
        // Candidates were added in order of preference: their ids keep it.
        solvables.sort_unstable();
    }

    async fn get_dependencies(&self, solvable: SolvableId) -> Dependencies {
        self.universe.solvables[solvable.to_index()]
            .dependencies
            .clone()
            .unwrap_or(Dependencies::Known(KnownDependencies::default()))
    }

    fn should_cancel_with_value(&self) -> Option<Box<dyn std::any::Any>> {
        self.past_deadline()
            .then(|| Box::new(()) as Box<dyn std::any::Any>)
    }
}

#[cfg(test)]
mod bounded_text_tests {
    use super::*;

    /// Formatting stops at the limit (a Display that would write without end still ends).
    #[test]
    fn text_is_cut_at_the_limit_and_formatting_stops() {
        struct Endless;
        impl fmt::Display for Endless {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                loop {
                    f.write_str("é and more ")?;
                }
            }
        }
        let text = bounded_text(&Endless, 100, None);
        let (kept, marker) = text.split_once('\n').unwrap();
        assert!(kept.len() <= 100 && kept.len() > 90, "{kept}");
        assert_eq!(marker, "... (explanation cut at 100 bytes)");
        assert_eq!(bounded_text(&"short", 100, None), "short");
    }
}
