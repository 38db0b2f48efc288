//! `olmv1 search [TEXT]`: packages across catalogs (see `admin::search`).

use std::process::ExitCode;

use super::sources::{DependencyArgs, Output, SourceArgs, colour, fail, print_json, warn_unreadable};
use crate::{
    admin::{
        search::{ManifestSource, PackageSummary, describe_bundle, search},
        table::{Table, Tone},
        terminal::TerminalText,
    },
    bundle::registry_v1::RegistryV1Bundle,
    image::pull_and_read,
};

/// Arguments of `olmv1 search`.
#[derive(clap::Args, Debug)]
pub struct SearchArgs {
    /// Text to look for in package names (case-insensitive); all packages when absent.
    pub text: Option<String>,
    #[command(flatten)]
    pub sources: SourceArgs,
    #[command(flatten)]
    pub dependencies: DependencyArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    pub output: Output,
    /// Do not pull bundle images when a catalog carries no manifests (install modes and the
    /// verdict are then unknown).
    #[arg(long)]
    pub no_pull: bool,
}

/// Runs `olmv1 search`.
pub async fn run(args: SearchArgs) -> ExitCode {
    let catalogs = match args.sources.load().await {
        Ok(c) => c,
        Err(e) => return fail("search", &e),
    };
    warn_unreadable("search", &catalogs);
    let text = args.text.unwrap_or_default();
    let mut rows: Vec<PackageSummary> = Vec::new();
    for c in &catalogs {
        let Some(content) = &c.content else { continue };
        match search(&c.input, content, &text, args.dependencies.mode) {
            Ok(found) => rows.extend(found),
            Err(e) => return fail("search", &format!("catalog {:?}: {e}", c.input.name)),
        }
    }
    if !args.no_pull {
        let pull = args.sources.pull_options();
        for row in rows
            .iter_mut()
            .filter(|r| r.manifests_from == ManifestSource::None)
        {
            let Some(image) = row.newest_image.clone() else {
                continue;
            };
            match pull_and_read(&image, &pull, RegistryV1Bundle::from_dir).await {
                Ok((_, loaded)) => match loaded {
                    Ok(bundle) => describe_bundle(row, &bundle, ManifestSource::Image),
                    Err(e) => row.not_installable_reason = Some(format!("bundle image {image:?}: {e}")),
                },
                Err(e) => errln!(
                    "olmv1 search: warning: pulling bundle image {image:?}: {}",
                    crate::admin::terminal::escape_value(&e.to_string())
                ),
            }
        }
    }
    rows.sort_by(|a, b| a.package.cmp(&b.package).then_with(|| a.catalog.cmp(&b.catalog)));
    if args.output == Output::Json {
        return print_json("search", &rows);
    }
    if rows.is_empty() {
        errln!("no package matches {text:?}");
        return ExitCode::SUCCESS;
    }
    let mut text = TerminalText::new();
    text.push_table(&table(&rows), colour());
    super::write_terminal(&text);
    ExitCode::SUCCESS
}

fn table(rows: &[PackageSummary]) -> Table {
    // REQUIRES only when a newest bundle declares dependencies.
    let requires = rows.iter().any(|r| !r.requirements.is_empty());
    let mut header = vec![
        "PACKAGE",
        "CATALOG",
        "CHANNEL",
        "NEWEST",
        "MODES",
        "WEBHOOKS",
        "MAX OCP",
        "DEPRECATED",
        "OLM V1",
    ];
    if requires {
        header.push("REQUIRES");
    }
    let mut t = Table::new(&header);
    for r in rows {
        let modes: Vec<&str> = r
            .install_modes
            .iter()
            .map(|m| match m.as_str() {
                "AllNamespaces" => "All",
                "SingleNamespace" => "Single",
                "OwnNamespace" => "Own",
                "MultiNamespace" => "Multi",
                other => other,
            })
            .collect();
        let deprecated = match (&r.deprecated, r.deprecated_entries) {
            (Some(_), _) => ("package".to_string(), Tone::Warn),
            (None, 0) => ("-".to_string(), Tone::Plain),
            (None, n) => (format!("{n} entries"), Tone::Warn),
        };
        let verdict = match &r.not_installable_reason {
            None if r.manifests_from == ManifestSource::None => {
                ("unknown (manifests not read)".to_string(), Tone::Warn)
            }
            // `--dependencies=check`: installs once what REQUIRES names is installed.
            None if !r.requirements.is_empty() => {
                ("yes, once REQUIRES are installed".to_string(), Tone::Good)
            }
            None => ("yes".to_string(), Tone::Good),
            // The whole reason, cut as every shown value is (after its row when long).
            Some(reason) => (format!("no: {reason}"), Tone::Bad),
        };
        let mut row = vec![
            (r.package.clone(), Tone::Plain),
            (r.catalog.clone(), Tone::Plain),
            (
                r.default_channel.clone().unwrap_or_else(|| "-".into()),
                Tone::Plain,
            ),
            (
                r.newest_version.clone().unwrap_or_else(|| "-".into()),
                Tone::Plain,
            ),
            (
                if modes.is_empty() {
                    "-".into()
                } else {
                    modes.join(",")
                },
                Tone::Plain,
            ),
            (if r.webhooks { "yes".into() } else { "-".into() }, Tone::Plain),
            (
                r.max_openshift_version.clone().unwrap_or_else(|| "-".into()),
                Tone::Plain,
            ),
            deprecated,
            verdict,
        ];
        if requires {
            let tone = match r.requirements.requires_error {
                Some(_) => Tone::Bad,
                None => Tone::Plain,
            };
            row.push((r.requirements.cell(), tone));
        }
        t.toned_row(row);
    }
    t
}
