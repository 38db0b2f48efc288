//! The one writer of a command's output: every byte a command writes for people passes
//! [`write_stdout`], [`write_terminal`] or [`write_stderr`], which escape control and format
//! characters (catalog, bundle and cluster text never reaches the terminal raw; see `terminal`)
//! and stop at the output limit (`--max-output-bytes`, stdout and stderr together); [`finish`]
//! says what was left out, within the limit too. JSON is made within what is left of the limit ([`json`]) or not at all.

use std::{
    io::Write,
    process::ExitCode,
    sync::{Mutex, MutexGuard, PoisonError},
};

use super::terminal::{JsonError, TerminalText, escape_text, to_json_line_within, to_json_pretty_within};
use crate::meter::Meter;

/// The most bytes an admin command prints on stdout by default (`--max-output-bytes`): its
/// answers are tables and lists for people, which the largest real catalogs keep far below it
/// (docs/cli.md, "Output").
pub const MAX_OUTPUT_BYTES: u64 = 1 << 20;

/// The default for commands that print a bundle's manifests: as much as a bundle may unpack
/// to (`UnpackLimits::BUNDLE`).
pub const MAX_MANIFEST_OUTPUT_BYTES: u64 = 64 << 20;

/// Room kept for [`finish`]'s sentence: the rest of the limit is the output's.
const NOTE_BYTES: u64 = 256;

/// What has been written, against the limit.
struct Written {
    bytes: u64,
    left_out: u64,
}

const NOTHING: Written = Written {
    bytes: 0,
    left_out: 0,
};

/// The writer's state: the command, its limit and what stdout and stderr took.
struct OutputBudget {
    command: String,
    limit: u64,
    written: Written,
}

impl OutputBudget {
    /// What `text` may print of itself (see [`within_limit`]).
    fn take<'t>(&mut self, text: &'t [u8]) -> &'t [u8] {
        let room = self.limit.saturating_sub(NOTE_BYTES);
        within_limit(&mut self.written, room, text)
    }
}

static OUTPUT: Mutex<OutputBudget> = Mutex::new(OutputBudget {
    command: String::new(),
    limit: u64::MAX,
    written: NOTHING,
});

fn output() -> MutexGuard<'static, OutputBudget> {
    OUTPUT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts `command`'s output: at most `limit` bytes to stdout and stderr together.
pub fn start(command: &str, limit: u64) {
    let mut budget = output();
    budget.command = command.to_string();
    budget.limit = limit;
}

/// The command's name, as [`start`] was given it.
pub fn command() -> String {
    output().command.clone()
}

/// The output's limit and how many bytes the output can still take: what an answer made whole
/// (JSON, a graph) may be.
#[derive(Debug, Clone, Copy)]
pub struct Room {
    /// The limit, as the admin set it.
    pub limit: u64,
    /// What is left of it.
    pub left: u64,
}

/// The output's [`Room`] now.
pub fn room() -> Room {
    let budget = output();
    let room = budget.limit.saturating_sub(NOTE_BYTES);
    Room {
        limit: budget.limit,
        left: room.saturating_sub(budget.written.bytes),
    }
}

/// `value` as indented JSON (no raw control character; the strings exact) with its newline,
/// made only when it fits what is left of the limit and of the command's `meter` (charged as it
/// is made): the work and memory stop there.
pub fn json(value: &impl serde::Serialize, meter: &mut Meter) -> Result<String, JsonError> {
    json_within(value, meter, to_json_pretty_within)
}

/// [`json`] on one line (`olmv1 resolve -o json`).
pub fn json_line(value: &impl serde::Serialize, meter: &mut Meter) -> Result<String, JsonError> {
    json_within(value, meter, to_json_line_within)
}

fn json_within<T: serde::Serialize>(
    value: &T,
    meter: &mut Meter,
    make: impl FnOnce(&T, u64, &mut Meter) -> Result<String, JsonError>,
) -> Result<String, JsonError> {
    let Room { limit, left } = room();
    match make(value, left.saturating_sub(1), meter) {
        Ok(text) => Ok(text + "\n"),
        Err(JsonError::TooLarge { .. }) => Err(JsonError::TooLarge { limit }),
        Err(e) => Err(e),
    }
}

/// What `text` may print of itself when `written` bytes were printed already: all of it within
/// the limit, else its whole lines that fit (the rest is counted as left out, and nothing more
/// is printed).
fn within_limit<'t>(written: &mut Written, limit: u64, text: &'t [u8]) -> &'t [u8] {
    let room = limit.saturating_sub(written.bytes);
    if written.left_out == 0 && text.len() as u64 <= room {
        written.bytes += text.len() as u64;
        return text;
    }
    let room = usize::try_from(room).unwrap_or(usize::MAX).min(text.len());
    let end = if written.left_out == 0 {
        text[..room]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1)
    } else {
        0
    };
    written.bytes += end as u64;
    written.left_out += (text.len() - end) as u64;
    &text[..end]
}

/// Ends the command: when its output passed the limit, says so (one sentence on stderr, in the
/// room kept for it) and turns the exit status into 2.
pub fn finish(code: ExitCode) -> ExitCode {
    let (command, limit, left_out) = {
        let budget = output();
        (budget.command.clone(), budget.limit, budget.written.left_out)
    };
    if left_out == 0 {
        return code;
    }
    let note = format!(
        "olmv1 {command}: {left_out} bytes of output were not printed: over the limit of {limit} bytes (--max-output-bytes)\n"
    );
    let note = escape_text(&note);
    let cut = note.len().min(usize::try_from(NOTE_BYTES).unwrap_or(usize::MAX));
    let _ = std::io::stderr().lock().write_all(&note.as_bytes()[..cut]);
    ExitCode::from(2)
}

/// Writes command output to stdout, its control and format characters but newline and tab escaped
/// ([`escape_text`]), within the output limit. A reader that went away (`olmv1 versions ... |
/// head -1`) ends the command quietly with status 0, as other command-line tools do, rather than
/// with `print!`'s panic.
pub fn write_stdout(text: &str) {
    write_raw_stdout(&escape_text(text));
}

/// Writes text built for the terminal (escaped, with a table's colours) to stdout, within the
/// output limit.
pub fn write_terminal(text: &TerminalText) {
    write_raw_stdout(text.as_str());
}

fn write_raw_stdout(text: &str) {
    let mut budget = output();
    let shown = budget.take(text.as_bytes());
    if shown.is_empty() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(shown).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("olmv1: writing the output: {e}");
        std::process::exit(1);
    }
}

/// Writes a message to stderr, its control and format characters but newline and tab escaped
/// (error messages quote bundle, package and catalog names), within the output limit.
pub fn write_stderr(text: &str) {
    let escaped = escape_text(text);
    let mut budget = output();
    let shown = budget.take(escaped.as_bytes());
    // Nothing better can be done when stderr is gone.
    let _ = std::io::stderr().lock().write_all(shown);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_limit_is_cut_after_its_last_whole_line_and_counted() {
        let mut written = NOTHING;
        assert_eq!(within_limit(&mut written, 10, b"abc\n"), b"abc\n");
        assert_eq!(within_limit(&mut written, 10, b"de\nfgh\nij"), b"de\n");
        assert_eq!((written.bytes, written.left_out), (7, 6));
        // Once cut, nothing more, even what would fit.
        assert_eq!(within_limit(&mut written, 10, b"k\n"), b"");
        assert_eq!((written.bytes, written.left_out), (7, 8));
        // A line longer than the limit prints nothing of itself.
        let mut written = NOTHING;
        assert_eq!(within_limit(&mut written, 4, b"abcdef\n"), b"");
        assert_eq!(written.left_out, 7);
    }
}
