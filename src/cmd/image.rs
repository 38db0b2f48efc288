//! `olmv1 image`: publishes a directory as an OCI image to a registry, with no Docker (the
//! workflow, whose `PushRequest` is the flags, is `image::push`).

use std::process::ExitCode;

use crate::image::push::{self, PushRequest};

/// Subcommands of `olmv1 image`.
#[derive(clap::Subcommand, Debug)]
pub enum ImageCommand {
    /// Pushes DIR as a one-layer OCI image to REF; prints the digest reference.
    Push(PushRequest),
}

/// Runs `olmv1 image ...`.
pub async fn run(cmd: ImageCommand) -> ExitCode {
    match cmd {
        ImageCommand::Push(request) => match push::push(request).await {
            Ok(digest_ref) => {
                outln!("{digest_ref}");
                ExitCode::SUCCESS
            }
            Err(message) => {
                errln!("olmv1 image push: {message}");
                ExitCode::FAILURE
            }
        },
    }
}
