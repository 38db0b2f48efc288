//! `olmv1 render`: prints the manifests a registry+v1 bundle would apply, as upstream OLM v1
//! renders them, with no cluster (loaded, rendered and formatted by `admin::render`, whose
//! `RenderOptions` are the flags).

use std::process::ExitCode;

use crate::admin::render::{RenderOptions, render_to_string};

/// Runs `olmv1 render`: exit status 0 with the objects on stdout, or 1 with one error on stderr.
pub async fn run(options: RenderOptions) -> ExitCode {
    match render_to_string(&options).await {
        Ok(text) => {
            out!("{text}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            errln!("olmv1 render: {message}");
            ExitCode::from(1)
        }
    }
}
