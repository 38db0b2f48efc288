//! What reaches the admin's terminal. Catalogs come from registries the admin does not control,
//! and terminals act on control sequences (window titles, hyperlinks, OSC 52 clipboard writes),
//! while newlines and Unicode format characters (General Category Cf: bidi overrides and
//! isolates such as U+202E and U+2066, zero-width characters, U+FEFF, tag characters) let a name
//! forge or reorder what a line seems to say. So every such character in catalog, bundle or
//! cluster text is shown escaped: C0 (below U+0020) and DEL as `\x1b`, other characters up to
//! U+FFFF (C1, Cf, the line and paragraph separators U+2028/U+2029) as `\u202e`, above it as
//! `\U000e0001`, the forms Go's `%q` writes. Text output keeps its own newlines and tabs
//! ([`escape_text`]); a value quoted in it, like a table cell, keeps none ([`escape_value`]).
//! JSON keeps the exact strings: its encoder escapes C0, and [`to_json_pretty`] also escapes the
//! rest as `\uXXXX`.

use std::fmt;

use super::table::Table;
use crate::meter::{Exhausted, Meter, Work};

pub use crate::escape::{escape_text, escape_value};
use crate::escape::{is_escaped, is_hidden};

/// Text ready for a terminal: whatever is pushed is escaped, except the colours a table adds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminalText(String);

impl TerminalText {
    /// Empty text.
    pub fn new() -> TerminalText {
        TerminalText::default()
    }

    /// Appends `text`, its control and format characters escaped ([`escape_text`]); values
    /// quoted in it are escaped by the caller ([`escape_value`]).
    pub fn push_str(&mut self, text: &str) {
        self.0.push_str(&escape_text(text));
    }

    /// [`TerminalText::push_str`] for text made from catalog or cluster content, one piece of a
    /// loop over it: charged to `meter` ([`Work::Render`], its bytes) before it is escaped and
    /// appended.
    pub fn push_charged(&mut self, text: &str, meter: &mut Meter) -> Result<(), Exhausted> {
        meter.charge(Work::Render, text.len() as u64)?;
        self.push_str(text);
        Ok(())
    }

    /// Appends `other`, already escaped.
    pub fn append(&mut self, other: &TerminalText) {
        self.0.push_str(&other.0);
    }

    /// Appends a table (its cells are escaped by [`Table::render`], which charges `meter`);
    /// `colour` adds ANSI colours.
    pub fn push_table(&mut self, table: &Table, colour: bool, meter: &mut Meter) -> Result<(), Exhausted> {
        self.0.push_str(&table.render(colour, meter)?);
        Ok(())
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

/// A JSON formatter that writes DEL, C1, format characters and U+2028/U+2029 as `\uXXXX`
/// escapes (serde_json escapes only C0; above U+FFFF as a surrogate pair, as JSON spells it), so
/// that JSON output carries no character [`escape_text`] would escape and still decodes to the
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
            if is_hidden(c) {
                writer.write_all(&fragment.as_bytes()[start..i])?;
                for unit in c.encode_utf16(&mut [0; 2]) {
                    write!(writer, "\\u{unit:04x}")?;
                }
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

/// `value` as indented JSON with no raw control or format character (see [`NoControls`]).
pub fn to_json_pretty(value: &impl serde::Serialize) -> Result<String, serde_json::Error> {
    to_json(
        value,
        serde_json::ser::PrettyFormatter::new(),
        u64::MAX,
        &mut Meter::unlimited(),
    )
    .map_err(JsonError::into_serde)
}

/// `value` as JSON on one line with no raw control or format character (see [`NoControls`]).
pub fn to_json_line(value: &impl serde::Serialize) -> Result<String, serde_json::Error> {
    to_json(
        value,
        serde_json::ser::CompactFormatter,
        u64::MAX,
        &mut Meter::unlimited(),
    )
    .map_err(JsonError::into_serde)
}

/// [`to_json_pretty`], refused once it passes `max_bytes` or `meter` runs out: the work and
/// memory stop there, so an answer too large to print costs no more than the limit. Each piece
/// written is charged to `meter` before it is kept ([`Work::Render`], its bytes).
pub fn to_json_pretty_within(
    value: &impl serde::Serialize,
    max_bytes: u64,
    meter: &mut Meter,
) -> Result<String, JsonError> {
    to_json(value, serde_json::ser::PrettyFormatter::new(), max_bytes, meter)
}

/// [`to_json_line`], refused as [`to_json_pretty_within`] is.
pub fn to_json_line_within(
    value: &impl serde::Serialize,
    max_bytes: u64,
    meter: &mut Meter,
) -> Result<String, JsonError> {
    to_json(value, serde_json::ser::CompactFormatter, max_bytes, meter)
}

/// Why JSON output was not made.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// It passed the output limit.
    #[error(
        "the JSON answer is over the output limit of {limit} bytes (--max-output-bytes); nothing was printed"
    )]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// The command's meter ran out while it was made.
    #[error("rendering the output {0}")]
    Exhausted(Exhausted),
    /// The value could not be serialized.
    #[error(transparent)]
    Serialize(serde_json::Error),
}

impl JsonError {
    /// Always true: the same answer is as large again.
    pub fn is_terminal(&self) -> bool {
        true
    }

    fn into_serde(self) -> serde_json::Error {
        match self {
            JsonError::Serialize(e) => e,
            // No limit was set.
            JsonError::TooLarge { .. } | JsonError::Exhausted(_) => {
                serde_json::Error::io(std::io::Error::other(self.to_string()))
            }
        }
    }
}

/// A buffer that refuses to grow past its limit, or once its meter runs out.
struct Bounded<'m> {
    out: Vec<u8>,
    limit: u64,
    over: bool,
    meter: &'m mut Meter,
    exhausted: Option<Exhausted>,
}

impl std::io::Write for Bounded<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if (self.out.len() + data.len()) as u64 > self.limit {
            self.over = true;
            return Err(std::io::Error::other("over the output limit"));
        }
        if let Err(e) = self.meter.charge(Work::Render, data.len() as u64) {
            self.exhausted = Some(e);
            return Err(std::io::Error::other(e.to_string()));
        }
        self.out.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn to_json<F: serde_json::ser::Formatter>(
    value: &impl serde::Serialize,
    formatter: F,
    limit: u64,
    meter: &mut Meter,
) -> Result<String, JsonError> {
    let mut out = Bounded {
        out: Vec::new(),
        limit,
        over: false,
        meter,
        exhausted: None,
    };
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, NoControls(formatter));
    if let Err(e) = value.serialize(&mut serializer) {
        return Err(match (out.over, out.exhausted) {
            (true, _) => JsonError::TooLarge { limit },
            (false, Some(exhausted)) => JsonError::Exhausted(exhausted),
            (false, None) => JsonError::Serialize(e),
        });
    }
    // The serializer writes only UTF-8 (strings are `str`, escapes are ASCII).
    Ok(String::from_utf8(out.out).expect("serde_json writes UTF-8"))
}

/// `value` as YAML whose strings survive the escaping of text output: a string holding a
/// character [`escape_text`] escapes is written double-quoted, where YAML reads the escapes it
/// becomes (`\x1b`, `\u202e`, `\U000e0001`) back as the characters. serde-saphyr quotes
/// control characters itself, but leaves most format characters (U+202E, U+200B) in plain and
/// block scalars, where an escape would change the value.
pub fn to_yaml(value: &serde_json::Value) -> Result<String, serde_saphyr::SerializeError> {
    serde_saphyr::to_string(&YamlSafe(value))
}

/// `objects` as a YAML stream: `---` before each, each with [`to_yaml`]'s quoting.
pub fn yaml_stream(objects: &[serde_json::Value]) -> Result<String, serde_saphyr::SerializeError> {
    let mut out = String::new();
    for object in objects {
        out.push_str("---\n");
        let doc = to_yaml(object)?;
        out.push_str(&doc);
        if !doc.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

/// A JSON value serialized with [`to_yaml`]'s quoting.
struct YamlSafe<'a>(&'a serde_json::Value);

impl serde::Serialize for YamlSafe<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        use serde_json::Value;
        match self.0 {
            Value::String(s) if s.chars().any(|c| is_escaped(c, true)) => {
                serde_saphyr::DoubleQuoted(s.as_str()).serialize(serializer)
            }
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&YamlSafe(item))?;
                }
                seq.end()
            }
            Value::Object(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    out.serialize_entry(k, &YamlSafe(v))?;
                }
                out.end()
            }
            other => other.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

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
            escape_value(HOSTILE),
            "a\\x1b]0;T\\x07\\x1b[31mR\\u009b2J\\u0085\\x7f\\x0d\\x0a\\x09z"
        );
        // Plain text, including non-ASCII letters, is untouched and not copied.
        assert!(matches!(escape_text("café-operator.v1"), Cow::Borrowed(_)));
        // Escaping twice changes nothing more.
        assert_eq!(escape_value(&escape_value(HOSTILE)), escape_value(HOSTILE));
    }

    /// The format characters the issue names, a tag character above U+FFFF among them.
    const FORMAT: [char; 22] = [
        '\u{00ad}',
        '\u{061c}',
        '\u{180e}',
        '\u{200b}',
        '\u{200c}',
        '\u{200d}',
        '\u{200e}',
        '\u{200f}',
        '\u{202a}',
        '\u{202b}',
        '\u{202c}',
        '\u{202d}',
        '\u{202e}',
        '\u{2060}',
        '\u{2064}',
        '\u{2066}',
        '\u{2069}',
        '\u{206f}',
        '\u{feff}',
        '\u{fff9}',
        '\u{e0001}',
        '\u{e007f}',
    ];

    #[test]
    fn newlines_and_format_characters_are_escaped() {
        // A name that would forge a plan line and reverse what follows it.
        let name = "green.v1\nred.v9.9.9 9.9.9 trusted\r\u{202e}1v.der";
        assert_eq!(
            escape_value(name),
            "green.v1\\x0ared.v9.9.9 9.9.9 trusted\\x0d\\u202e1v.der"
        );
        // The program's own layout stays in text; format characters never do.
        assert_eq!(escape_text("a\u{2066}\n\tb"), "a\\u2066\n\tb");
        for c in FORMAT {
            let text = format!("x{c}y");
            let n = c as u32;
            let shown = if n > 0xffff {
                format!("x\\U{n:08x}y")
            } else {
                format!("x\\u{n:04x}y")
            };
            assert_eq!(escape_text(&text), shown);
            assert_eq!(escape_value(&text), shown);
        }
        // Line and paragraph separators, which some renderers break lines at.
        assert_eq!(escape_text("a\u{2028}b\u{2029}"), "a\\u2028b\\u2029");
        // Every Cf of the table is escaped; letters, marks, symbols and spaces are not.
        for c in (0..=0x10ffff_u32).filter_map(char::from_u32) {
            let format = c.general_category() == GeneralCategory::Format;
            if format || c.is_control() {
                assert!(is_hidden(c), "{:04x}", c as u32);
            }
        }
        assert!(matches!(
            escape_text("Grüße ✓ 日本 e\u{301} a b"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn json_escapes_format_characters_and_decodes_to_the_same_strings() {
        let hostile: String = FORMAT.iter().chain(&['\u{2028}', '\u{2029}', 'é']).collect();
        let value = serde_json::json!({"name": hostile});
        for text in [to_json_pretty(&value).unwrap(), to_json_line(&value).unwrap()] {
            assert!(!text.chars().any(|c| is_hidden(c) && c != '\n'), "{text}");
            // Above U+FFFF as a surrogate pair.
            assert!(
                text.contains("\\u202e") && text.contains("\\udb40\\udc01"),
                "{text}"
            );
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(back, value);
        }
    }

    /// JSON is charged per byte as it is made; a meter too small refuses it, spending no more
    /// than its budget.
    #[test]
    fn json_is_charged_per_byte_and_refused_when_the_meter_runs_out() {
        let names: Vec<String> = (0..1000).map(|i| format!("b.v{i}")).collect();
        let value = serde_json::json!({ "bundles": names });
        let mut meter = Meter::unlimited();
        let text = to_json_pretty_within(&value, u64::MAX, &mut meter).unwrap();
        assert_eq!(text, to_json_pretty(&value).unwrap());
        let spent = meter.spent_on(Work::Render);
        assert!(
            spent >= text.len() as u64 && spent <= 2 * text.len() as u64,
            "{spent} units for {} bytes",
            text.len()
        );
        let budget = spent / 2;
        let mut short = Meter::new(budget);
        match to_json_pretty_within(&value, u64::MAX, &mut short) {
            Err(JsonError::Exhausted(Exhausted::Work { limit })) => assert_eq!(limit, budget),
            other => panic!("{other:?}"),
        }
        assert!(short.spent() <= budget);
        assert_eq!(
            JsonError::Exhausted(Exhausted::Work { limit: 10 }).to_string(),
            "rendering the output needs more than the budget of 10 work units"
        );
        // The output limit is still its own refusal.
        assert!(matches!(
            to_json_pretty_within(&value, 100, &mut Meter::unlimited()),
            Err(JsonError::TooLarge { limit: 100 })
        ));
    }

    #[test]
    fn yaml_read_after_escaping_gives_the_same_strings() {
        let hostile: String = FORMAT.iter().collect();
        let value = serde_json::json!({
            "name": format!("a{hostile}b"),
            "text": format!("line one\nline two {hostile}\n"),
            "plain": "x: y",
            "list": [HOSTILE, "\u{200b}", 1, true, null],
            "description": "two\nlines\n",
        });
        let yaml = to_yaml(&value).unwrap();
        let shown = escape_text(&yaml);
        assert!(!shown.chars().any(|c| is_hidden(c) && c != '\n'), "{shown}");
        let back: serde_json::Value = serde_saphyr::from_str(&shown).unwrap();
        assert_eq!(back, value);
        // Strings with nothing to escape keep serde-saphyr's own style (here a block scalar).
        assert_eq!(
            to_yaml(&serde_json::json!({"description": "two\nlines\n", "k": "v"})).unwrap(),
            serde_saphyr::to_string(&serde_json::json!({"description": "two\nlines\n", "k": "v"})).unwrap()
        );
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
