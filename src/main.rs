//! The `olmv1` binary: parses the command line and hands it to [`olmv1::cmd`].
#![forbid(unsafe_code)]

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    olmv1::cmd::run(olmv1::cmd::parse()).await
}
