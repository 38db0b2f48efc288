//! The upgrade graph of a package as Graphviz `dot` text: the catalog's edges (replaces solid,
//! skips dashed, skipRange dotted) in the requested channels, the installed bundle, the
//! versions reachable now (resolver answers, green) and the steps of the shortest paths (blue).

use std::{collections::BTreeSet, fmt::Write as _};

use super::{output::Room, upgrades::Upgrades};
use crate::{
    catalog::PackageIndex,
    meter::{Meter, Refused, Work},
    resolve::{CatalogInput, ResolveRequest},
};

/// The shortest line of an edge (`  "a" -> "b" [style=solid];`): a graph of more edges than the
/// room over this is over the output limit before its text is made.
const MIN_EDGE_LINE: u64 = 28;

/// Why the graph is not drawn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// The command's meter ran out.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// The graph's text is over what the output may still take: a cut graph is not a graph, so
    /// none is printed (as JSON).
    #[error(
        "the upgrade graph of package {package:?} is over the output limit of {limit} bytes (--max-output-bytes); nothing was printed"
    )]
    TooLarge {
        /// The package.
        package: String,
        /// The output limit.
        limit: u64,
    },
}

impl GraphError {
    /// Always true: the same inputs make the same graph.
    pub fn is_terminal(&self) -> bool {
        true
    }
}

/// The Graphviz source of `upgrades`' graph of `request`'s package, drawn from the catalog that
/// carries the installed bundle (when none does any more, the catalog of the first version
/// reachable now, else the first with the package), within `meter` and `room`; `Ok(None)` when
/// no catalog has the package.
pub fn upgrade_graph(
    request: &ResolveRequest,
    catalogs: &[CatalogInput],
    upgrades: &Upgrades,
    room: Room,
    meter: &mut Meter,
) -> Result<Option<String>, GraphError> {
    let catalog = upgrades
        .installed
        .catalog
        .as_ref()
        .or(upgrades.reachable.first().map(|t| &t.catalog));
    let Some(package) = catalogs
        .iter()
        .filter(|c| catalog.is_none_or(|name| c.name == *name))
        .find_map(|c| c.index.package(&request.package))
    else {
        return Ok(None);
    };
    upgrade_dot(package, &request.channels, upgrades, room, meter).map(Some)
}

/// `dot` source for `package` (one catalog's view) and its upgrade answer, within `meter` (the
/// walk over the channels, each skipRange tested against the channel's entries, the text made)
/// and `room`: a skipRange over every earlier bundle makes n²/2 edges, so the edges and the text
/// stop where the output would (a 518 KB catalog made 69 MB of text, 338 MiB, before it was cut).
pub fn upgrade_dot(
    package: &PackageIndex,
    channels: &[String],
    upgrades: &Upgrades,
    room: Room,
    meter: &mut Meter,
) -> Result<String, GraphError> {
    let refused = |e| {
        GraphError::Refused(Refused::new(
            format!("drawing the upgrade graph of package {:?}", package.name),
            e,
        ))
    };
    let too_large = || GraphError::TooLarge {
        package: package.name.to_string(),
        limit: room.limit,
    };
    let max_edges = room.left / MIN_EDGE_LINE;
    meter.charge(Work::Visit, package.items()).map_err(refused)?;
    let selected = |name: &str| channels.is_empty() || channels.iter().any(|c| c == name);
    let reachable: BTreeSet<&str> = upgrades.reachable.iter().map(|t| t.bundle.as_str()).collect();
    // The paths share their steps (a tree from the installed bundle): each is walked back to
    // the first step already seen, so the tree is walked once, not once per path.
    let mut on_path: BTreeSet<&str> = BTreeSet::new();
    let mut path_edges: BTreeSet<(&str, &str)> = BTreeSet::new();
    for p in &upgrades.paths {
        for (step, before) in p.steps.backwards() {
            let from = before.map_or(upgrades.installed.bundle.as_str(), |b| b.bundle.as_str());
            if !path_edges.insert((from, step.bundle.as_str())) {
                break;
            }
            on_path.insert(&step.bundle);
        }
    }
    let mut nodes: BTreeSet<&str> = BTreeSet::new();
    let mut edges: BTreeSet<(&str, &str, &str)> = BTreeSet::new();
    for ch in package.channels.iter().filter(|c| selected(&c.name)) {
        for e in &ch.entries {
            if edges.len() as u64 > max_edges {
                return Err(too_large());
            }
            nodes.insert(&e.name);
            if let Some(r) = &e.replaces {
                edges.insert((r, &e.name, "solid"));
            }
            for s in &e.skips {
                edges.insert((s, &e.name, "dashed"));
            }
            if let Some(range) = &e.skip_range_parsed {
                meter
                    .charge(Work::Visit, ch.entries.len() as u64)
                    .map_err(refused)?;
                for other in &ch.entries {
                    let covered = other
                        .bundle
                        .and_then(|i| package.bundles[i].version.as_ref().ok())
                        .is_some_and(|v| range.contains(&v.version));
                    if covered && other.name != e.name {
                        edges.insert((&other.name, &e.name, "dotted"));
                    }
                }
            }
        }
    }
    // A bundle the catalog pruned is still the start of its edges.
    nodes.insert(&upgrades.installed.bundle);
    let mut out = String::new();
    let _ = writeln!(out, "digraph {:?} {{", upgrades.package);
    let _ = writeln!(out, "  rankdir=LR;");
    let _ = writeln!(
        out,
        "  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\"];"
    );
    let _ = writeln!(out, "  edge [color=gray50];");
    for name in &nodes {
        let version = package
            .bundle(name)
            .and_then(|b| b.version.as_ref().ok())
            .map(|v| v.status_version())
            .or_else(|| (*name == upgrades.installed.bundle).then(|| upgrades.installed.version.clone()))
            .unwrap_or_default();
        let (fill, extra) = if *name == upgrades.installed.bundle {
            ("lightblue", ", penwidth=2")
        } else if reachable.contains(name) {
            ("palegreen", "")
        } else if on_path.contains(name) {
            ("lightyellow", "")
        } else {
            ("white", "")
        };
        let _ = writeln!(
            out,
            "  {name:?} [label={:?}, fillcolor={fill}{extra}];",
            format!("{name}\n{version}")
        );
        if out.len() as u64 > room.left {
            return Err(too_large());
        }
    }
    for (from, to, style) in &edges {
        if nodes.contains(from) {
            let _ = writeln!(out, "  {from:?} -> {to:?} [style={style}];");
            if out.len() as u64 > room.left {
                return Err(too_large());
            }
        }
    }
    for t in &upgrades.reachable {
        let _ = writeln!(
            out,
            "  {:?} -> {:?} [color=forestgreen, penwidth=2, constraint=false];",
            upgrades.installed.bundle, t.bundle
        );
    }
    for (from, to) in path_edges {
        if !reachable.contains(to) || from != upgrades.installed.bundle {
            let _ = writeln!(
                out,
                "  {from:?} -> {to:?} [color=royalblue, penwidth=2, constraint=false];"
            );
        }
    }
    out.push_str("}\n");
    if out.len() as u64 > room.left {
        return Err(too_large());
    }
    meter.charge(Work::Render, out.len() as u64).map_err(refused)?;
    Ok(out)
}

/// Renders `dot` source as SVG with Graphviz `dot`; a clear error when it is not installed.
pub fn dot_to_svg(dot: &str) -> Result<String, String> {
    use std::io::Write;
    let mut child = std::process::Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("-o svg needs Graphviz `dot` on PATH: {e}"))?;
    child
        .stdin
        .take()
        .ok_or("dot: no stdin")?
        .write_all(dot.as_bytes())
        .map_err(|e| format!("writing to dot: {e}"))?;
    let output = child
        .wait_with_output()
        .map_err(|e| format!("running dot: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "dot failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    String::from_utf8(output.stdout).map_err(|e| format!("dot wrote non-UTF-8 output: {e}"))
}
