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

/// The most characters one value shows in text output ([`escape_value`]), counted in its escaped
/// form: every real catalog value is far shorter (the longest, a `skips` list, is 2,116), and a
/// 10 MB one still prints as one short paragraph.
pub const MAX_SHOWN_CHARS: usize = 4096;

/// The sentence that ends a cut text: how many bytes of the original were left out.
pub fn cut_note(left_out: usize) -> String {
    format!("... ({left_out} more bytes)")
}

/// How many characters `c` takes once escaped.
fn escaped_width(c: char, keep_layout: bool) -> usize {
    match c as u32 {
        _ if !is_escaped(c, keep_layout) => 1,
        ..0x80 => 4,
        0x80..0x1_0000 => 6,
        _ => 10,
    }
}

/// Pushes `c`, escaped when [`is_escaped`].
fn push_escaped(out: &mut String, c: char, keep_layout: bool) {
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

/// `text` escaped; linear in its length (one pass to find, one to copy).
fn escape(text: &str, keep_layout: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_escaped(c, keep_layout)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        push_escaped(&mut out, c, keep_layout);
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
///
/// It is also the one place where such a value is cut: past [`MAX_SHOWN_CHARS`] characters of
/// its escaped form it ends with [`cut_note`] (JSON output keeps every value whole).
pub fn escape_value(text: &str) -> Cow<'_, str> {
    escape_value_cut(text, MAX_SHOWN_CHARS)
}

/// [`escape_value`] with at most `max_chars` characters of escaped text; the work is bounded by
/// `max_chars`, whatever the length of `text`.
pub fn escape_value_cut(text: &str, max_chars: usize) -> Cow<'_, str> {
    if text.len() <= max_chars && !text.chars().any(|c| is_escaped(c, false)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(max_chars + 32);
    let mut shown = 0usize;
    for (i, c) in text.char_indices() {
        let width = escaped_width(c, false);
        if shown + width > max_chars {
            out.push_str(&cut_note(text.len() - i));
            return Cow::Owned(out);
        }
        push_escaped(&mut out, c, false);
        shown += width;
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_value_is_cut_once_saying_how_much_was_left_out() {
        assert!(matches!(escape_value("short"), Cow::Borrowed("short")));
        assert_eq!(escape_value_cut("abcdef", 6), "abcdef");
        assert_eq!(escape_value_cut("abcdef", 4), "abcd... (2 more bytes)");
        // Escapes count as shown and are never split; the bytes left out are the original's.
        assert_eq!(escape_value_cut("ab\ncd", 6), "ab\\x0a... (2 more bytes)");
        assert_eq!(escape_value_cut("ab\ncd", 5), "ab... (3 more bytes)");
        assert_eq!(escape_value_cut("é\u{202e}x", 7), "é\\u202e... (1 more bytes)");
        // A 10 MB value costs what is shown.
        let big = "k".repeat(10 << 20);
        let shown = escape_value(&big);
        assert_eq!(
            shown,
            format!(
                "{}... ({} more bytes)",
                "k".repeat(MAX_SHOWN_CHARS),
                (10 << 20) - MAX_SHOWN_CHARS
            )
        );
        // Short values that need escaping keep every character.
        assert_eq!(escape_value("a\u{1}b"), "a\\x01b");
    }
}
