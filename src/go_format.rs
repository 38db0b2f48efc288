//! Go's `fmt` renderings (one helper for each, used by every module) that upstream's messages contain (`%q`, `%v` of a float64 or a
//! `[]string`), so that this project's messages read exactly like upstream's.

use std::fmt::Write;

/// A string as Go's `%q` (strconv.Quote) prints it: double-quoted, with `"` and `\` escaped and
/// control characters written as escapes.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_escaped(&mut out, c, false);
    }
    out.push('"');
    out
}

/// How many characters of catalog text a message quotes ([`go_quote_cut`]): enough for a Kubernetes
/// name up to a DNS label's 63 and the start of anything longer, while a message naming a 10 MB
/// value stays one short line.
pub const QUOTE_CHARS: usize = 128;

/// `text` quoted as [`go_quote`] does, cut so that the quoted part holds at most `max_chars`
/// characters (escapes included), followed by `... (N more bytes)` when something was left out.
/// Unicode characters that are not printable (format characters such as U+202E, line and
/// paragraph separators, unassigned code points) are escaped too, as Go's `%q` escapes them, so a
/// quoted name cannot reorder or break the line it is printed in (combining marks are escaped
/// too, where Go prints them as they are). The work is bounded by `max_chars`, whatever the
/// length of `text`.
pub fn go_quote_cut(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(max_chars.min(text.len()) + 24);
    out.push('"');
    let mut shown = 0usize;
    let mut used = 0usize;
    let mut escaped = String::new();
    for (i, c) in text.char_indices() {
        escaped.clear();
        push_escaped(&mut escaped, c, true);
        let width = escaped.chars().count();
        if shown + width > max_chars {
            break;
        }
        out.push_str(&escaped);
        shown += width;
        used = i + c.len_utf8();
    }
    out.push('"');
    if used < text.len() {
        let _ = write!(out, "... ({} more bytes)", text.len() - used);
    }
    out
}

/// One character as Go's `strconv.Quote` writes it; `unicode` also escapes the non-ASCII
/// characters that are not printable (Rust's own `escape_debug` decides which).
fn push_escaped(out: &mut String, c: char, unicode: bool) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\u{b}' => out.push_str("\\v"),
        c if (c as u32) < 0x20 || c == '\u{7f}' => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if c.is_control() || (unicode && !c.is_ascii() && c.escape_debug().next() == Some('\\')) => {
            if (c as u32) <= 0xffff {
                let _ = write!(out, "\\u{:04x}", c as u32);
            } else {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
        c => out.push(c),
    }
}

/// A float64 as Go's `%v` prints it: `%g` with the shortest precision, which uses exponent form
/// (`1e+06`) when the decimal exponent is below -4 or at least 6.
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".to_string()
        } else {
            "-Inf".to_string()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".to_string()
        } else {
            "0".to_string()
        };
    }
    // Rust's `{:e}` is the shortest round-tripping mantissa, e.g. `1.5e6`.
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        // Rust's `{}` is the shortest round-tripping decimal without exponent.
        format!("{f}")
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

/// A list as Go's `%v` prints a `[]string`: `[a b c]`.
pub fn go_string_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_like_strconv_quote() {
        assert_eq!(go_quote(""), r#""""#);
        assert_eq!(go_quote("Namespaced"), r#""Namespaced""#);
        assert_eq!(go_quote(r#""a"\b"#), r#""\"a\"\\b""#);
        assert_eq!(go_quote("a\nb\u{1}"), r#""a\nb\x01""#);
        assert_eq!(go_quote("é"), "\"é\"");
    }

    #[test]
    fn quotes_cut_to_a_number_of_characters_saying_what_was_left_out() {
        assert_eq!(go_quote_cut("short", 128), r#""short""#);
        assert_eq!(go_quote_cut("abcdef", 3), r#""abc"... (3 more bytes)"#);
        // Escapes count as the characters they print.
        assert_eq!(go_quote_cut("a\nbc", 3), r#""a\n"... (2 more bytes)"#);
        assert_eq!(go_quote_cut("ééé", 2), r#""éé"... (2 more bytes)"#);
        // Unicode format characters and separators are escaped, as Go's %q escapes them.
        assert_eq!(
            go_quote_cut("a\u{202e}b\u{2028}c\u{feff}\u{e0001}", 128),
            r#""a\u202eb\u2028c\ufeff\U000e0001""#
        );
        // The work and the result are bounded whatever the length of the text.
        let huge = "k".repeat(10 << 20);
        let quoted = go_quote_cut(&huge, 128);
        assert_eq!(
            quoted,
            format!(r#""{}"... ({} more bytes)"#, "k".repeat(128), (10 << 20) - 128)
        );
        // go_quote is unchanged: it escapes control characters only.
        assert_eq!(go_quote("\u{202e}"), "\"\u{202e}\"");
    }

    #[test]
    fn floats_print_like_go_percent_v() {
        assert_eq!(go_float(10.0), "10");
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(-3.25), "-3.25");
        assert_eq!(go_float(1_000_000.0), "1e+06");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(100_000.0), "100000");
        assert_eq!(go_float(123_456_789.0), "1.23456789e+08");
        assert_eq!(go_float(0.0), "0");
    }

    #[test]
    fn string_lists_print_like_go() {
        assert_eq!(
            go_string_list(&["v1alpha1".into(), "v1beta1".into()]),
            "[v1alpha1 v1beta1]"
        );
        assert_eq!(go_string_list(&[]), "[]");
    }
}
