//! `olmv1 resolve`: Answers what a ClusterExtension would install or upgrade to, from catalog directories, JSONL files or URLs.

use std::process::ExitCode;

/// Arguments of `olmv1 resolve`.
#[derive(clap::Args, Debug)]
pub struct ResolveArgs {}

/// Runs `olmv1 resolve`.
pub async fn run(_args: ResolveArgs) -> ExitCode {
    eprintln!("olmv1 resolve: not implemented yet");
    ExitCode::from(2)
}
