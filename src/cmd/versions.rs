//! `olmv1 versions PACKAGE`: every channel with its bundles, edges and deprecations.

use std::{collections::HashSet, process::ExitCode};

use super::sources::{Output, SourceArgs, colour, fail, print_json, warn_unreadable};
use crate::admin::{
    table::{Table, Tone},
    terminal::{TerminalText, escape_value as value},
    versions::{PackageVersions, versions},
};

/// Arguments of `olmv1 versions`.
#[derive(clap::Args, Debug)]
pub struct VersionsArgs {
    /// The package.
    pub package: String,
    #[command(flatten)]
    pub sources: SourceArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub output: Output,
}

/// Runs `olmv1 versions`.
pub async fn run(args: VersionsArgs) -> ExitCode {
    let catalogs = match args.sources.load().await {
        Ok(c) => c,
        Err(e) => return fail("versions", &e),
    };
    warn_unreadable("versions", &catalogs);
    let found: Vec<PackageVersions> = catalogs
        .iter()
        .filter_map(|c| {
            c.input
                .index
                .package(&args.package)
                .map(|p| versions(&c.input.name, p))
        })
        .collect();
    if found.is_empty() {
        return fail("versions", &format!("no catalog has package {:?}", args.package));
    }
    if args.output == Output::Json {
        return print_json("versions", &found);
    }
    super::write_terminal(&render_text(&found, colour()));
    ExitCode::SUCCESS
}

/// The REQUIRES cell of a bundle whose requirements an earlier row showed.
pub const AS_ABOVE: &str = "as above";

/// The text form: per catalog a header line, then one table of every channel's entries.
pub fn render_text(found: &[PackageVersions], colour: bool) -> TerminalText {
    let mut out = TerminalText::new();
    for (i, p) in found.iter().enumerate() {
        if i > 0 {
            out.push_str("\n");
        }
        out.push_str(&format!(
            "{} in catalog {} (default channel {})\n",
            value(&p.package),
            value(&p.catalog),
            value(p.default_channel.as_deref().unwrap_or("-"))
        ));
        if let Some(m) = &p.deprecated {
            out.push_str(&format!("deprecated: {}\n", value(m)));
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
        out.push_table(&t, colour);
    }
    out
}
