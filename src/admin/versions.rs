//! `olmv1 versions PACKAGE`: every channel of a package with its bundles, upgrade edges and
//! deprecations and what each bundle requires, per catalog; and their text form.

use std::{collections::HashSet, sync::Arc};

use serde::Serialize;

use super::{
    dependencies::BundleRequirements,
    table::{Table, Tone},
    terminal::{TerminalText, escape_value as value},
};
use crate::{
    catalog::{PackageIndex, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE},
    meter::{Exhausted, Meter, Refused, Work},
};

/// A package as one catalog has it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageVersions {
    /// The package.
    pub package: String,
    /// The catalog.
    pub catalog: String,
    /// The default channel.
    pub default_channel: Option<String>,
    /// The package's deprecation message, if it is deprecated.
    pub deprecated: Option<String>,
    /// Channels in catalog order.
    pub channels: Vec<ChannelVersions>,
}

/// One channel.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelVersions {
    /// The channel name.
    pub name: String,
    /// The channel's deprecation message, if it is deprecated.
    pub deprecated: Option<String>,
    /// Entries, highest version first (unreadable versions last, then catalog order).
    pub entries: Vec<EntryVersions>,
}

/// One channel entry.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryVersions {
    /// Bundle name.
    pub bundle: String,
    /// Version as status would report it; `None` when the bundle is missing or its version
    /// unreadable.
    pub version: Option<String>,
    /// `replaces`.
    pub replaces: Option<String>,
    /// `skips`.
    pub skips: Vec<String>,
    /// `skipRange`.
    pub skip_range: Option<String>,
    /// The bundle's deprecation message, if it is deprecated.
    pub deprecated: Option<String>,
    /// What the bundle requires (`requires`, `requiresError`); one value shared by the
    /// bundle's entries in every channel.
    #[serde(flatten)]
    pub requirements: Arc<BundleRequirements>,
}

/// The deprecation message of `schema`/`name`, found by key (one lookup charged).
fn message(
    package: &PackageIndex,
    schema: &str,
    name: &str,
    meter: &mut Meter,
) -> Result<Option<String>, crate::meter::Exhausted> {
    meter.charge(Work::Visit, 1)?;
    Ok(package.deprecation_message(schema, name).map(str::to_string))
}

/// The versions of `package` in `catalog`, within `meter`: the walk over its channels, the
/// deprecations looked up, each bundle's requirements (read once per bundle, shared by its
/// entries in every channel) and the text copied are charged.
pub fn versions(
    catalog: &str,
    package: &PackageIndex,
    meter: &mut Meter,
) -> Result<PackageVersions, Refused> {
    let refused = |e| Refused::new(format!("listing the versions of package {:?}", package.name), e);
    meter.charge(Work::Visit, package.items()).map_err(refused)?;
    let mut requirements: Vec<Option<Arc<BundleRequirements>>> = vec![None; package.bundles.len()];
    let none = Arc::new(BundleRequirements::default());
    let mut channels = Vec::with_capacity(package.channels.len());
    for ch in &package.channels {
        let mut entries: Vec<(Option<&crate::version::VersionRelease>, usize, EntryVersions)> =
            Vec::with_capacity(ch.entries.len());
        for (position, e) in ch.entries.iter().enumerate() {
            let version = e.bundle.and_then(|i| package.bundles[i].version.as_ref().ok());
            let requires = match e.bundle {
                Some(i) => match &requirements[i] {
                    Some(read) => read.clone(),
                    None => {
                        let read = Arc::new(BundleRequirements::of(&package.bundles[i], meter)?);
                        requirements[i] = Some(read.clone());
                        read
                    }
                },
                None => none.clone(),
            };
            let text = e.name.len()
                + e.replaces.as_ref().map_or(0, |r| r.len())
                + e.skips.iter().map(|s| s.len()).sum::<usize>()
                + e.skip_range.as_ref().map_or(0, |r| r.len());
            meter.charge(Work::Render, text as u64).map_err(refused)?;
            entries.push((
                version,
                position,
                EntryVersions {
                    bundle: e.name.to_string(),
                    version: version.map(|v| v.status_version()),
                    replaces: e.replaces.as_ref().map(|r| r.to_string()),
                    skips: e.skips.iter().map(|s| s.to_string()).collect(),
                    skip_range: e.skip_range.as_ref().map(|r| r.to_string()),
                    deprecated: message(package, SCHEMA_BUNDLE, &e.name, meter).map_err(refused)?,
                    requirements: requires,
                },
            ));
        }
        entries.sort_by(|a, b| match (a.0, b.0) {
            (Some(x), Some(y)) => y.compare(x).then(a.1.cmp(&b.1)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.1.cmp(&b.1),
        });
        channels.push(ChannelVersions {
            name: ch.name.to_string(),
            deprecated: message(package, SCHEMA_CHANNEL, &ch.name, meter).map_err(refused)?,
            entries: entries.into_iter().map(|(_, _, e)| e).collect(),
        });
    }
    Ok(PackageVersions {
        package: package.name.to_string(),
        catalog: catalog.to_string(),
        default_channel: package.default_channel.as_ref().map(|c| c.to_string()),
        deprecated: message(package, SCHEMA_PACKAGE, "", meter).map_err(refused)?,
        channels,
    })
}

/// The REQUIRES cell of a bundle whose requirements an earlier row showed.
pub const AS_ABOVE: &str = "as above";

/// The text form: per catalog a header line, then one table of every channel's entries;
/// charged to the command's `meter` as it is made.
pub fn render_text(
    found: &[PackageVersions],
    colour: bool,
    meter: &mut Meter,
) -> Result<TerminalText, Exhausted> {
    let mut out = TerminalText::new();
    for (i, p) in found.iter().enumerate() {
        if i > 0 {
            out.push_str("\n");
        }
        out.push_charged(
            &format!(
                "{} in catalog {} (default channel {})\n",
                value(&p.package),
                value(&p.catalog),
                value(p.default_channel.as_deref().unwrap_or("-"))
            ),
            meter,
        )?;
        if let Some(m) = &p.deprecated {
            out.push_charged(&format!("deprecated: {}\n", value(m)), meter)?;
        }
        // REQUIRES only for packages whose bundles declare dependencies.
        let requires = p
            .channels
            .iter()
            .flat_map(|ch| &ch.entries)
            .any(|e| !e.requirements.is_empty());
        let mut header = vec![
            "CHANNEL",
            "BUNDLE",
            "VERSION",
            "REPLACES",
            "SKIPS",
            "SKIP RANGE",
            "DEPRECATED",
        ];
        if requires {
            header.push("REQUIRES");
        }
        let mut t = Table::new(&header);
        // What a bundle requires is the bundle's, not its channel entry's: shown on its first
        // row only.
        let mut shown_requires: HashSet<&str> = HashSet::new();
        for ch in &p.channels {
            let channel = match &ch.deprecated {
                Some(_) => (format!("{} (deprecated)", ch.name), Tone::Warn),
                None => (ch.name.clone(), Tone::Plain),
            };
            for e in &ch.entries {
                let mut row = vec![
                    channel.clone(),
                    (e.bundle.clone(), Tone::Plain),
                    (e.version.clone().unwrap_or_else(|| "?".into()), Tone::Plain),
                    (e.replaces.clone().unwrap_or_else(|| "-".into()), Tone::Plain),
                    (
                        if e.skips.is_empty() {
                            "-".into()
                        } else {
                            e.skips.join(",")
                        },
                        Tone::Plain,
                    ),
                    (e.skip_range.clone().unwrap_or_else(|| "-".into()), Tone::Plain),
                    match &e.deprecated {
                        Some(_) => ("yes".into(), Tone::Warn),
                        None => ("-".into(), Tone::Plain),
                    },
                ];
                if requires {
                    let tone = match e.requirements.requires_error {
                        Some(_) => Tone::Bad,
                        None => Tone::Plain,
                    };
                    if e.requirements.is_empty() || shown_requires.insert(&e.bundle) {
                        row.push((e.requirements.cell(), tone));
                    } else {
                        row.push((AS_ABOVE.to_string(), tone));
                    }
                }
                t.toned_row(row);
            }
        }
        out.push_table(&t, colour, meter)?;
    }
    Ok(out)
}
