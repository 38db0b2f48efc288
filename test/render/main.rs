//! Tests of registry+v1 loading and rendering (`olmv1::bundle::registry_v1`,
//! `olmv1::bundle::render`) and of `olmv1 render`. The real-data tests read
//! `../shared/catalogs/*-v4.16`; the image test starts a docker-registry.

#[path = "../support/mod.rs"]
mod support;

mod api_services;
mod cli;
mod common;
mod generators;
mod properties;
mod real_data;
mod webhook_providers;

/// Rewrites `test/snapshots/render/`. Run only by `hack/update-snapshots.sh`.
#[test]
#[ignore = "writes test/snapshots/render; run by hack/update-snapshots.sh"]
fn write_snapshots() {
    real_data::render_every_real_bundle(support::Snapshots::Write);
    webhook_providers::render_webhook_bundles_with_both_providers(support::Snapshots::Write);
}
