//! What reaches the admin's terminal. Catalogs come from registries the admin does not control,
//! and terminals act on control sequences (window titles, hyperlinks, OSC 52 clipboard writes),
//! so every control character in catalog, bundle or cluster text is shown escaped: C0 (below
//! U+0020) and DEL as `\x1b`, C1 (U+0080-U+009F, two bytes in UTF-8) as `\u009b`, the forms Go's
//! `%q` writes. Text output keeps its own newlines and tabs; a table cell keeps none. JSON keeps
//! the exact strings: its encoder escapes C0, and [`to_json_pretty`] also escapes DEL and C1.

use std::{borrow::Cow, fmt};

use super::table::Table;

/// Whether `c` is shown escaped (`keep_layout`: newline and tab are not).
fn is_escaped(c: char, keep_layout: bool) -> bool {
    match c {
        '\n' | '\t' => !keep_layout,
        _ => c.is_control(),
    }
}

fn escape(text: &str, keep_layout: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_escaped(c, keep_layout)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c as u32 {
            _ if !is_escaped(c, keep_layout) => out.push(c),
            n @ ..0x80 => out.push_str(&format!("\\x{n:02x}")),
            n => out.push_str(&format!("\\u{n:04x}")),
        }
    }
    Cow::Owned(out)
}

/// `text` with every control character but newline and tab escaped: command output and error
/// messages.
pub fn escape_text(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// `text` with every control character escaped, newline and tab too: one table cell, which
/// must stay on its line and in its column.
pub fn escape_cell(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// Text ready for a terminal: whatever is pushed is escaped, except the colours a table adds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminalText(String);

impl TerminalText {
    /// Empty text.
    pub fn new() -> TerminalText {
        TerminalText::default()
    }

    /// Appends `text`, its control characters escaped ([`escape_text`]).
    pub fn push_str(&mut self, text: &str) {
        self.0.push_str(&escape_text(text));
    }

    /// Appends a table (its cells are escaped by [`Table::render`]); `colour` adds ANSI colours.
    pub fn push_table(&mut self, table: &Table, colour: bool) {
        self.0.push_str(&table.render(colour));
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for TerminalText {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TerminalText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A JSON formatter that writes DEL and C1 characters as `\u00XX` escapes (serde_json escapes
/// only C0), so that JSON output carries no raw control character and still decodes to the
/// exact strings.
struct NoControls<F>(F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for NoControls<F> {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if c.is_control() {
                writer.write_all(&fragment.as_bytes()[start..i])?;
                write!(writer, "\\u{:04x}", c as u32)?;
                start = i + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    // The rest is the inner formatter's.
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// `value` as indented JSON with no raw control character (see [`NoControls`]).
pub fn to_json_pretty(value: &impl serde::Serialize) -> Result<String, serde_json::Error> {
    to_json(value, serde_json::ser::PrettyFormatter::new())
}

/// `value` as JSON on one line with no raw control character (see [`NoControls`]).
pub fn to_json_line(value: &impl serde::Serialize) -> Result<String, serde_json::Error> {
    to_json(value, serde_json::ser::CompactFormatter)
}

fn to_json<F: serde_json::ser::Formatter>(
    value: &impl serde::Serialize,
    formatter: F,
) -> Result<String, serde_json::Error> {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, NoControls(formatter));
    value.serialize(&mut serializer)?;
    // The serializer writes only UTF-8 (strings are `str`, escapes are ASCII).
    Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ESC, BEL, CSI (ESC [), OSC (ESC ]), a C1 CSI (U+009B) and NEL (U+0085), DEL, CR.
    const HOSTILE: &str = "a\x1b]0;T\x07\x1b[31mR\u{9b}2J\u{85}\x7f\r\n\tz";

    #[test]
    fn every_control_character_is_escaped_and_layout_kept_only_outside_cells() {
        assert_eq!(
            escape_text(HOSTILE),
            "a\\x1b]0;T\\x07\\x1b[31mR\\u009b2J\\u0085\\x7f\\x0d\n\tz"
        );
        assert_eq!(
            escape_cell(HOSTILE),
            "a\\x1b]0;T\\x07\\x1b[31mR\\u009b2J\\u0085\\x7f\\x0d\\x0a\\x09z"
        );
        // Plain text, including non-ASCII letters, is untouched and not copied.
        assert!(matches!(escape_text("café-operator.v1"), Cow::Borrowed(_)));
        // Escaping twice changes nothing more.
        assert_eq!(escape_cell(&escape_cell(HOSTILE)), escape_cell(HOSTILE));
    }

    #[test]
    fn json_has_no_raw_control_character_and_decodes_to_the_same_strings() {
        let value = serde_json::json!({"name": HOSTILE, "list": [HOSTILE, "é"]});
        let text = to_json_pretty(&value).unwrap();
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text}");
        assert!(text.contains("\\u009b") && text.contains("\\u001b") && text.contains("\\u007f"));
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
        // Pretty as serde_json's own.
        let plain = serde_json::json!({"a": [1, "b"]});
        assert_eq!(
            to_json_pretty(&plain).unwrap(),
            serde_json::to_string_pretty(&plain).unwrap()
        );
        assert_eq!(
            to_json_line(&plain).unwrap(),
            serde_json::to_string(&plain).unwrap()
        );
    }
}
