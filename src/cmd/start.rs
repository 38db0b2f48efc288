//! Start-up shared by the commands: logging and the parent watch. The components' own start-up
//! (replica, leader loop, operations servers) and their flags are `crate::components`.

/// Structured logs on stderr; `RUST_LOG` filters (default `info`), `OLMV1_LOG_FORMAT=json` for JSON.
pub fn init_tracing() {
    use tracing_subscriber::{EnvFilter, fmt};
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if std::env::var("OLMV1_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// With `OLMV1_EXIT_WITH_PARENT=1`, the process exits when its parent does: test harnesses and
/// scripts that start `olmv1 controller` or `olmv1 catalogd` leave nothing running behind them.
pub fn exit_with_parent() {
    if std::env::var("OLMV1_EXIT_WITH_PARENT").as_deref() != Ok("1") {
        return;
    }
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(std::time::Duration::from_millis(500));
            if std::os::unix::process::parent_id() != parent {
                std::process::exit(0);
            }
        }
    });
}
