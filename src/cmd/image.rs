//! `olmv1 image`: publishes a directory as an OCI image to a registry, with no Docker.

use secrecy::SecretString;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::image::{
    self, RuntimeConfig,
    push::{PushRequest, parse_labels},
};

/// Subcommands of `olmv1 image`.
#[derive(clap::Subcommand, Debug)]
pub enum ImageCommand {
    /// Pushes DIR as a one-layer OCI image to REF; prints the digest reference.
    Push(PushArgs),
}

/// Arguments of `olmv1 image push`.
#[derive(clap::Args, Debug)]
pub struct PushArgs {
    /// Directory whose content becomes the image's file system.
    pub dir: PathBuf,
    /// Target reference, e.g. `127.0.0.1:5000/catalogs/community:v4.16`.
    pub reference: String,
    /// Config label `KEY=VALUE` (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Path inside the image where DIR's content lands (e.g. `/configs` for catalogs).
    #[arg(long, default_value = "/")]
    pub prefix: String,
    /// How a container runtime starts the image (a runnable image, e.g. olmv1's own).
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Allow plain HTTP to this registry (loopback registries always are).
    #[arg(long)]
    pub insecure: bool,
    /// PEM file or directory of extra trusted CA certificates.
    #[arg(long, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// Docker/Podman auth file (`{"auths":{...}}`).
    #[arg(long, value_name = "PATH", env = "REGISTRY_AUTH_FILE")]
    pub auth_file: Option<PathBuf>,
    /// User name for Basic or token auth.
    #[arg(long, env = "OLMV1_REGISTRY_USERNAME")]
    pub username: Option<String>,
    /// Password for Basic or token auth (prefer --password-stdin or --password-file: a flag's
    /// value shows in the process list).
    #[arg(long, env = "OLMV1_REGISTRY_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// Read the password from standard input (up to the first newline).
    #[arg(long, conflicts_with_all = ["password", "password_file"])]
    pub password_stdin: bool,
    /// Read the password from this file (up to the first newline).
    #[arg(long, value_name = "PATH", conflicts_with = "password")]
    pub password_file: Option<PathBuf>,
}

/// The image config of a runnable image.
#[derive(clap::Args, Debug, Default)]
pub struct RuntimeArgs {
    /// Entrypoint argument (repeatable, in order), e.g. `--entrypoint /usr/local/bin/olmv1`.
    #[arg(long = "entrypoint", value_name = "ARG")]
    pub entrypoint: Vec<String>,
    /// Default argument after the entrypoint (repeatable, in order).
    #[arg(long = "cmd", value_name = "ARG")]
    pub cmd: Vec<String>,
    /// User the process runs as, `UID[:GID]` (numeric, so runAsNonRoot can check it).
    #[arg(long, value_name = "UID[:GID]")]
    pub user: Option<String>,
    /// Environment entry `KEY=VALUE` (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Working directory of the process.
    #[arg(long, value_name = "PATH")]
    pub workdir: Option<String>,
}

impl From<RuntimeArgs> for RuntimeConfig {
    fn from(args: RuntimeArgs) -> Self {
        RuntimeConfig {
            entrypoint: args.entrypoint,
            cmd: args.cmd,
            user: args.user,
            env: args.env,
            working_dir: args.workdir,
        }
    }
}

/// Runs `olmv1 image ...`.
pub async fn run(cmd: ImageCommand) -> ExitCode {
    match cmd {
        ImageCommand::Push(args) => match push(args).await {
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

async fn push(args: PushArgs) -> Result<String, String> {
    let labels = parse_labels(&args.labels)?;
    let password = read_password(&args)?;
    let request = PushRequest {
        labels,
        login: args.username.clone().zip(password),
        dir: args.dir,
        reference: args.reference,
        prefix: args.prefix,
        runtime: args.runtime.into(),
        insecure: args.insecure,
        ca_file: args.ca_file,
        auth_file: args.auth_file,
    };
    image::push::push(request).await
}

/// The password from --password, --password-stdin or --password-file (first line, no newline).
fn read_password(args: &PushArgs) -> Result<Option<SecretString>, String> {
    use std::io::Read as _;
    let text = if args.password_stdin {
        let mut text = String::new();
        std::io::stdin()
            .take(64 * 1024)
            .read_to_string(&mut text)
            .map_err(|e| format!("reading the password from standard input: {e}"))?;
        text
    } else if let Some(path) = &args.password_file {
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(64 * 1024).read_to_string(&mut text))
            .map_err(|e| format!("reading the password file {}: {e}", path.display()))?;
        text
    } else {
        return Ok(args.password.clone().map(SecretString::from));
    };
    let line = text.lines().next().unwrap_or_default();
    if line.is_empty() {
        return Err("the password read is empty".to_string());
    }
    Ok(Some(SecretString::from(line)))
}
