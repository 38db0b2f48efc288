//! Escaping of untrusted text (catalog, bundle and cluster values) before it is shown: control
//! characters (Cc), format characters (Cf: bidi overrides and isolates, zero-width characters,
//! tag characters) and the line and paragraph separators, as Go's `%q` writes them (`\x1b`,
//! `\u202e`, `\U000e0001`). Lives below every module that puts such text into messages (the
//! planner's explanation, the admin commands), so each escapes at the source; see
//! `admin::terminal` for what reaches the terminal.

use std::{borrow::Cow, fmt::Write as _};

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// Whether `c` is never shown raw: a control character (Cc), a format character (Cf) or a line
/// or paragraph separator (Zl, Zp). Which characters are Cf comes from `unicode-properties`
/// (Unicode 18.0 in its 0.1.5).
pub fn is_hidden(c: char) -> bool {
    match c {
        // Printable ASCII: the common case, no table lookup.
        ' '..='~' => false,
        '\u{2028}' | '\u{2029}' => true,
        _ => c.is_control() || c.general_category() == GeneralCategory::Format,
    }
}

/// Whether `c` is shown escaped (`keep_layout`: newline and tab are not).
pub fn is_escaped(c: char, keep_layout: bool) -> bool {
    match c {
        '\n' | '\t' => !keep_layout,
        _ => is_hidden(c),
    }
}

/// `text` escaped; linear in its length (one pass to find, one to copy).
fn escape(text: &str, keep_layout: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_escaped(c, keep_layout)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        // Writing to a String cannot fail.
        let _ = match c as u32 {
            _ if !is_escaped(c, keep_layout) => {
                out.push(c);
                Ok(())
            }
            n @ ..0x80 => write!(out, "\\x{n:02x}"),
            n @ ..0x1_0000 => write!(out, "\\u{n:04x}"),
            n => write!(out, "\\U{n:08x}"),
        };
    }
    Cow::Owned(out)
}

/// `text` with every control and format character but newline and tab escaped: what a command
/// writes, after its values were escaped with [`escape_value`].
pub fn escape_text(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// `text` with every control and format character escaped, newline and tab too: one value
/// (a name, a message) quoted in text output, or one table cell, which must stay on its line.
/// Text output interpolates catalog and cluster values through this, so that a name carrying a
/// newline cannot start a line of its own (a forged plan line).
pub fn escape_value(text: &str) -> Cow<'_, str> {
    escape(text, false)
}
