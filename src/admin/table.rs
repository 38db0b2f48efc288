//! Aligned text tables for people; colour only when the output is a terminal; cells escaped
//! (`crate::escape`) and wrapped at a bounded width.

use std::fmt::Write as _;

use crate::escape::escape_value;

/// How a cell is highlighted (only on a terminal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// No colour.
    Plain,
    /// Good news (installable, reachable, chosen).
    Good,
    /// Attention (deprecated, excluded).
    Warn,
    /// Refusal (not installable, failed).
    Bad,
}

/// A table: a header and rows of cells, each with a tone.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<(String, Tone)>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row of plain cells.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows
            .push(cells.into_iter().map(|c| (c.into(), Tone::Plain)).collect());
    }

    /// Adds a row with a tone per cell.
    pub fn toned_row(&mut self, cells: Vec<(String, Tone)>) {
        self.rows.push(cells);
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, columns separated by three spaces; `colour` adds ANSI colours. Every
    /// cell is escaped ([`escape_value`]) before it is measured, so a hostile name can neither
    /// act on the terminal nor misalign a column; a cell wider than [`MAX_CELL_CHARS`] wraps
    /// onto the following lines of its column.
    pub fn render(&self, colour: bool) -> String {
        let columns = self.header.len();
        let header: Vec<(String, Tone)> = self.header.iter().map(|h| (h.clone(), Tone::Plain)).collect();
        // Per row, per cell: its lines.
        let rows: Vec<Vec<(Vec<String>, Tone)>> = std::iter::once(&header)
            .chain(&self.rows)
            .map(|row| {
                row.iter()
                    .take(columns)
                    .map(|(cell, tone)| (wrap(&escape_value(cell), MAX_CELL_CHARS), *tone))
                    .collect()
            })
            .collect();
        let mut widths = vec![0; columns];
        for row in &rows {
            for (i, (lines, _)) in row.iter().enumerate() {
                for line in lines {
                    widths[i] = widths[i].max(line.chars().count());
                }
            }
        }
        let mut out = String::new();
        for row in &rows {
            let height = row.iter().map(|(lines, _)| lines.len()).max().unwrap_or(1);
            for j in 0..height {
                let mut line = String::new();
                for (i, (lines, tone)) in row.iter().enumerate() {
                    let piece = lines.get(j).map(String::as_str).unwrap_or_default();
                    let last = i + 1 == row.len();
                    let pad = if last {
                        0
                    } else {
                        widths[i] - piece.chars().count() + 3
                    };
                    let _ = match (colour && !piece.is_empty(), tone) {
                        (true, Tone::Good) => write!(line, "\x1b[32m{piece}\x1b[0m"),
                        (true, Tone::Warn) => write!(line, "\x1b[33m{piece}\x1b[0m"),
                        (true, Tone::Bad) => write!(line, "\x1b[31m{piece}\x1b[0m"),
                        _ => write!(line, "{piece}"),
                    };
                    line.push_str(&" ".repeat(pad));
                }
                out.push_str(line.trim_end());
                out.push('\n');
            }
        }
        out
    }
}

/// The widest a cell may be, in characters of its escaped form; a wider one wraps.
pub const MAX_CELL_CHARS: usize = 64;

/// `cell` cut into lines of at most `width` characters, after a comma or a space when the line
/// has one (`versions`' SKIPS, messages), else at the width. Linear in the cell's length: each
/// line looks back at most `width` characters from where it would end, and nothing is moved (a
/// `replaces` of 500 KB, or 250,000 skips, is one cell).
fn wrap(cell: &str, width: usize) -> Vec<String> {
    // A zero width would cut nothing and never end.
    let width = width.max(1);
    let chars: Vec<char> = cell.chars().collect();
    let mut lines = Vec::new();
    let mut start = 0;
    while chars.len() - start > width {
        let rest = &chars[start..];
        let cut = (1..width)
            .rev()
            .find(|&i| matches!(rest[i - 1], ',' | ' '))
            .unwrap_or(width);
        let line: String = rest[..cut].iter().collect();
        lines.push(line.trim_end().to_string());
        start += cut;
        while chars.get(start) == Some(&' ') {
            start += 1;
        }
    }
    lines.push(chars[start..].iter().collect());
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_colour_is_opt_in() {
        let mut t = Table::new(&["NAME", "VERSION"]);
        t.row(["a", "1.0.0"]);
        t.toned_row(vec![
            ("longer-name".into(), Tone::Plain),
            ("2.0.0".into(), Tone::Good),
        ]);
        assert_eq!(
            t.render(false),
            "NAME          VERSION\na             1.0.0\nlonger-name   2.0.0\n"
        );
        assert!(t.render(true).contains("\x1b[32m2.0.0\x1b[0m"));
    }

    #[test]
    fn hostile_cells_are_escaped_and_measured_escaped() {
        let mut t = Table::new(&["NAME", "VERSION"]);
        t.row(["evil\x1b]0;PWNED\x07\x1b[31mRED\u{9b}\n", "1.0.0"]);
        t.row(["ok", "2.0.0"]);
        let text = t.render(false);
        assert_eq!(
            text,
            "NAME                                        VERSION\n\
             evil\\x1b]0;PWNED\\x07\\x1b[31mRED\\u009b\\x0a   1.0.0\n\
             ok                                          2.0.0\n"
        );
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'));
    }

    #[test]
    fn wide_cells_wrap_in_their_column_after_a_comma_or_space() {
        let skips: Vec<String> = (0..12).map(|i| format!("example.v1.{i}.0")).collect();
        let mut t = Table::new(&["BUNDLE", "SKIPS", "END"]);
        t.row(["example.v2.0.0".to_string(), skips.join(","), "x".to_string()]);
        let text = t.render(false);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() > 2, "{text}");
        for line in &lines {
            assert!(
                line.chars().count() <= "example.v2.0.0".len() + 3 + MAX_CELL_CHARS + 3 + 3,
                "{line}"
            );
        }
        // Every skip is there, whole, and the continuation lines leave the other columns empty.
        let joined: String = lines[1..]
            .iter()
            .map(|l| {
                l.trim_start_matches("example.v2.0.0")
                    .trim()
                    .trim_end_matches(" x")
                    .trim()
            })
            .collect();
        assert_eq!(joined, skips.join(","));
        assert!(
            lines[2].starts_with(&" ".repeat("example.v2.0.0".len() + 3)),
            "{text}"
        );
        // A cell with no comma or space is cut at the width.
        assert_eq!(wrap(&"a".repeat(10), 4), ["aaaa", "aaaa", "aa"]);
    }

    /// The wrapping before it was made linear (it moved the rest of the cell on every line):
    /// the output must not change.
    fn quadratic_wrap(cell: &str, width: usize) -> Vec<String> {
        let mut rest: Vec<char> = cell.chars().collect();
        let mut lines = Vec::new();
        while rest.len() > width {
            let cut = (1..width)
                .rev()
                .find(|&i| matches!(rest[i - 1], ',' | ' '))
                .unwrap_or(width);
            let line: String = rest.drain(..cut).collect();
            lines.push(line.trim_end().to_string());
            while rest.first() == Some(&' ') {
                rest.remove(0);
            }
        }
        lines.push(rest.into_iter().collect());
        lines
    }

    proptest::proptest! {
        #[test]
        fn wrapping_is_unchanged(cell in "[a-c, .é]{0,300}", width in 1usize..80) {
            proptest::prop_assert_eq!(wrap(&cell, width), quadratic_wrap(&cell, width));
        }
    }

    /// A 1 MB cell (what made `versions` take over 10 CPU seconds on a 500 KB `replaces`): every
    /// line is within the width, cut after a comma, and the lines put together are the cell.
    /// The old wrapping moved up to 1 MB per line for some 16,000 lines; this finishes at once.
    #[test]
    fn a_one_megabyte_cell_wraps_whole() {
        let skips: Vec<String> = (0..100_000).map(|i| format!("pkg.v{i}")).collect();
        let cell = skips.join(",");
        assert!(cell.len() > 1_000_000);
        let lines = wrap(&cell, MAX_CELL_CHARS);
        assert!(lines.len() > cell.len() / MAX_CELL_CHARS);
        for line in &lines[..lines.len() - 1] {
            assert!(line.chars().count() <= MAX_CELL_CHARS, "{line}");
            assert!(line.ends_with(','), "{line}");
        }
        assert_eq!(lines.concat(), cell);

        // With no place to cut: lines of exactly the width.
        let cell = "r".repeat(1 << 20);
        let lines = wrap(&cell, MAX_CELL_CHARS);
        assert_eq!(lines.len(), (1 << 20) / MAX_CELL_CHARS);
        assert!(lines.iter().all(|l| l.len() == MAX_CELL_CHARS));

        // In a table: one line per piece, the other columns empty on continuation lines.
        let mut t = Table::new(&["BUNDLE", "REPLACES"]);
        t.row(["b.v2", cell.as_str()]);
        let text = t.render(false);
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 1 + (1 << 20) / MAX_CELL_CHARS);
        assert_eq!(rows[1], format!("b.v2     {}", "r".repeat(MAX_CELL_CHARS)));
        assert_eq!(rows[2], format!("         {}", "r".repeat(MAX_CELL_CHARS)));
    }

    #[test]
    fn newlines_and_format_characters_stay_in_their_cell_escaped() {
        let mut t = Table::new(&["NAME", "VERSION"]);
        t.row(["a\nb.v9 9.9.9\r\u{202e}c\u{2066}\u{200b}\u{feff}", "1.0.0"]);
        let text = t.render(false);
        assert_eq!(
            text,
            "NAME                                           VERSION\n\
             a\\x0ab.v9 9.9.9\\x0d\\u202ec\\u2066\\u200b\\ufeff   1.0.0\n"
        );
    }
}
