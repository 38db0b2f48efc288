//! The admin's command line (`olmv1 search|versions|upgrades|explain`) offline: snapshots of
//! every real package, a hand-checked sample, catalog images from the real registry, and the
//! kubectl plugin. The cluster side is in `test/e2e/cli.rs`.

#[path = "../support/mod.rs"]
mod support;

mod commands;
mod dependencies;
mod hostile;
mod sample;
mod snapshots;
