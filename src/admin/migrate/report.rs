//! The text forms of `migrate check` (a table of verdicts, then every reason with what to do)
//! and `migrate catalogs` (a table of what is made of each CatalogSource, then the notes).

use super::{
    catalogs::{Action, CatalogPlan},
    check::{CheckRow, Verdict},
};
use crate::{
    admin::{
        table::{Table, Tone},
        terminal::TerminalText,
    },
    meter::{Exhausted, Meter},
};

/// The text form of `migrate check`: the table, then each row's reasons with what to do; charged
/// to the command's `meter` as it is made.
pub fn render_check(rows: &[CheckRow], colour: bool, meter: &mut Meter) -> Result<TerminalText, Exhausted> {
    let mut t = Table::new(&[
        "NAMESPACE",
        "SUBSCRIPTION",
        "PACKAGE",
        "INSTALLED",
        "VERSION",
        "CATALOG",
        "VERDICT",
        "PODS RESTART",
    ]);
    let mut notes = TerminalText::new();
    for r in rows {
        let catalog = match (&r.catalog_source, &r.cluster_catalog) {
            (Some(s), Some(c)) => format!("{s} -> {c}"),
            (Some(s), None) => format!("{s} -> none"),
            (None, _) => r
                .extension
                .clone()
                .map_or("-".into(), |e| format!("ClusterExtension {e}")),
        };
        let tone = match r.verdict {
            Verdict::Eligible | Verdict::Migrated => Tone::Good,
            Verdict::Blocked => Tone::Bad,
            Verdict::Conflict => Tone::Warn,
        };
        t.toned_row(vec![
            (r.namespace.clone(), Tone::Plain),
            (r.subscription.clone(), Tone::Plain),
            (r.package.clone(), Tone::Plain),
            (r.installed_csv.clone().unwrap_or_else(|| "-".into()), Tone::Plain),
            (r.version.clone().unwrap_or_else(|| "-".into()), Tone::Plain),
            (catalog, Tone::Plain),
            (r.verdict.to_string(), tone),
            (r.pods_restart.to_string(), Tone::Plain),
        ]);
        for reason in &r.reasons {
            notes.push_charged(
                &format!(
                    "{}/{}: {}{}: {}\n  fix: {}\n",
                    r.namespace,
                    r.subscription,
                    if reason.blocking { "" } else { "note: " },
                    reason.code,
                    reason.message,
                    reason.fix
                ),
                meter,
            )?;
        }
    }
    let mut out = TerminalText::new();
    out.push_table(&t, colour, meter)?;
    if !notes.is_empty() {
        out.push_str("\n");
        out.append(&notes);
    }
    Ok(out)
}

/// The text form of `migrate catalogs`; charged to the command's `meter` as it is made.
pub fn render_catalogs(
    lines: &[CatalogPlan],
    dry_run: bool,
    delete: bool,
    colour: bool,
    meter: &mut Meter,
) -> Result<TerminalText, Exhausted> {
    let mut t = Table::new(&[
        "CATALOGSOURCE",
        "CLUSTERCATALOG",
        "IMAGE",
        "PRIORITY",
        "POLL",
        "ACTION",
    ]);
    let mut notes = TerminalText::new();
    for l in lines {
        let (action, tone) = match (&l.action, dry_run) {
            (Action::Create, false) => ("created".to_string(), Tone::Good),
            (Action::Create, true) => ("would create".to_string(), Tone::Good),
            (Action::Update, false) => ("updated".to_string(), Tone::Good),
            (Action::Update, true) => ("would update".to_string(), Tone::Good),
            (Action::Served(by), _) => (format!("served by {by}"), Tone::Plain),
            (Action::Skip(_), _) => ("skipped".to_string(), Tone::Bad),
        };
        let action = match (&l.action, delete) {
            (Action::Skip(_), _) | (_, false) => action,
            (_, true) if dry_run => format!("{action}; would delete the CatalogSource"),
            (_, true) => format!("{action}; CatalogSource deleted"),
        };
        t.toned_row(vec![
            (l.catalog_source.clone(), Tone::Plain),
            (l.cluster_catalog.clone(), Tone::Plain),
            (l.image.clone(), Tone::Plain),
            (l.priority.to_string(), Tone::Plain),
            (
                l.poll_interval_minutes.map_or("-".into(), |m| format!("{m}m")),
                Tone::Plain,
            ),
            (action, tone),
        ]);
        if let Action::Skip(why) = &l.action {
            notes.push_charged(&format!("{}: {why}\n", l.catalog_source), meter)?;
        }
        for n in &l.notes {
            notes.push_charged(&format!("{}: {n}\n", l.catalog_source), meter)?;
        }
    }
    let mut out = TerminalText::new();
    out.push_table(&t, colour, meter)?;
    if !notes.is_empty() {
        out.push_str("\n");
        out.append(&notes);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::migrate::check::{PodRestart, Reason};

    fn row(verdict: Verdict, reasons: Vec<Reason>) -> CheckRow {
        CheckRow {
            namespace: "ns".into(),
            subscription: "sub".into(),
            package: "pkg".into(),
            installed_csv: Some("pkg.v1.0.0".into()),
            version: Some("1.0.0".into()),
            catalog_source: Some("olm/src".into()),
            cluster_catalog: None,
            extension: None,
            verdict,
            pods_restart: PodRestart::No,
            after: Vec::new(),
            reasons,
        }
    }

    #[test]
    fn check_lists_each_reason_with_what_to_do_under_the_table() {
        let reasons = vec![
            Reason {
                code: "NoClusterCatalog",
                blocking: true,
                message: "no ClusterCatalog serves olm/src".into(),
                fix: "run olmv1 migrate catalogs".into(),
            },
            Reason {
                code: "Note",
                blocking: false,
                message: "something to know".into(),
                fix: "nothing".into(),
            },
        ];
        let text = render_check(&[row(Verdict::Blocked, reasons)], false, &mut Meter::unlimited()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAMESPACE"), "{text}");
        assert!(
            lines[1].contains("olm/src -> none") && lines[1].contains("Blocked"),
            "{text}"
        );
        assert_eq!(
            lines[3..],
            [
                "ns/sub: NoClusterCatalog: no ClusterCatalog serves olm/src",
                "  fix: run olmv1 migrate catalogs",
                "ns/sub: note: Note: something to know",
                "  fix: nothing",
            ]
        );
        // No reason, no notes.
        assert_eq!(
            render_check(
                &[row(Verdict::Eligible, Vec::new())],
                false,
                &mut Meter::unlimited()
            )
            .unwrap()
            .lines()
            .count(),
            2
        );
    }

    #[test]
    fn catalogs_says_what_was_done_or_would_be() {
        let plan = |action| CatalogPlan {
            catalog_source: "olm/src".into(),
            cluster_catalog: "src".into(),
            image: "quay.io/x/index:v1".into(),
            priority: 0,
            poll_interval_minutes: Some(10),
            notes: vec!["priority carried over".into()],
            action,
        };
        let text = render_catalogs(
            &[plan(Action::Create)],
            true,
            true,
            false,
            &mut Meter::unlimited(),
        )
        .unwrap();
        assert!(
            text.contains("would create; would delete the CatalogSource"),
            "{text}"
        );
        assert!(text.contains("10m"), "{text}");
        assert!(text.ends_with("\nolm/src: priority carried over\n"), "{text}");
        let text = render_catalogs(
            &[plan(Action::Create)],
            false,
            true,
            false,
            &mut Meter::unlimited(),
        )
        .unwrap();
        assert!(text.contains("created; CatalogSource deleted"), "{text}");
        let text = render_catalogs(
            &[plan(Action::Skip("not image-backed".into()))],
            false,
            true,
            false,
            &mut Meter::unlimited(),
        )
        .unwrap();
        assert!(text.contains("skipped") && !text.contains("deleted"), "{text}");
        assert!(text.contains("olm/src: not image-backed\n"), "{text}");
    }
}
