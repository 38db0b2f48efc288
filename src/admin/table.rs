//! Aligned text tables for people; colour only when the output is a terminal; cells escaped
//! and cut (`crate::escape`); a cell too wide for its column shown after its row; rendering
//! charged to the command's meter (`Work::Render`).

use std::fmt::Write as _;

use crate::{
    escape::escape_value,
    meter::{Exhausted, Meter, Work},
};

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
    /// cell is escaped and cut ([`escape_value`]) before it is measured, so a hostile name can
    /// neither act on the terminal nor misalign a column.
    ///
    /// A cell wider than [`MAX_CELL_CHARS`] in any column but the last does not fit its column:
    /// the row shows [`BELOW`] there, and the cell follows the row on a line of its own,
    /// `  HEADER: cell`, which no column pads. The last column pads nothing, so its cells stay
    /// on their row whatever their length. So every line is at most the columns' widths plus one
    /// cell, and the text is linear in the cells' lengths.
    ///
    /// The work is charged to `meter` before it is done ([`Work::Render`]): each cell its bytes as
    /// the caller made them plus [`CELL_UNITS`], each row the bytes it writes; when the meter
    /// runs out, nothing is returned.
    pub fn render(&self, colour: bool, meter: &mut Meter) -> Result<String, Exhausted> {
        let columns = self.header.len();
        let last = columns.saturating_sub(1);
        let header: Vec<Cell<'_>> = self
            .header
            .iter()
            .enumerate()
            .map(|(i, h)| Cell::new(h, Tone::Plain, i == last))
            .collect();
        let mut rows: Vec<Vec<Cell<'_>>> = Vec::with_capacity(self.rows.len());
        for row in &self.rows {
            let mut cells = Vec::with_capacity(columns);
            for (i, (cell, tone)) in row.iter().take(columns).enumerate() {
                meter.charge(Work::Render, cell.len() as u64 + CELL_UNITS)?;
                cells.push(Cell::new(cell, *tone, i == last));
            }
            rows.push(cells);
        }
        let mut widths = vec![0; columns];
        for row in std::iter::once(&header).chain(&rows) {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.shown_width());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&rows) {
            meter.charge(Work::Render, row_bytes(row, &header, &widths))?;
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                push_toned(&mut line, cell.shown(), cell.tone, colour);
                if i + 1 < row.len() {
                    line.push_str(&" ".repeat(widths[i] - cell.shown_width() + 3));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
            for (i, cell) in row.iter().enumerate().filter(|(_, c)| !c.fits) {
                out.push_str("  ");
                out.push_str(&header[i].text);
                out.push_str(": ");
                push_toned(&mut out, &cell.text, cell.tone, colour);
                out.push('\n');
            }
        }
        Ok(out)
    }
}

/// Units a cell costs besides its bytes: escaping it (an allocation), measuring it and laying it
/// out (`cargo bench --bench meter`, "a table of a catalog's rows").
pub const CELL_UNITS: u64 = 32;

/// The bytes `row` writes (its line, padded, and the lines of the cells that follow it), colours
/// aside: what [`Table::render`] charges for it.
fn row_bytes(row: &[Cell<'_>], header: &[Cell<'_>], widths: &[usize]) -> u64 {
    let mut bytes = 1;
    for (i, cell) in row.iter().enumerate() {
        bytes += cell.shown().len();
        if i + 1 < row.len() {
            bytes += widths[i] - cell.shown_width() + 3;
        }
        if !cell.fits {
            bytes += header[i].text.len() + cell.text.len() + 5;
        }
    }
    bytes as u64
}

/// The widest a cell may be in its column, in characters of its escaped form; a wider one in
/// any column but the last is shown after its row ([`Table::render`]).
pub const MAX_CELL_CHARS: usize = 64;

/// What a row shows in a column whose cell is shown after the row.
pub const BELOW: &str = "(below)";

/// One cell, escaped and cut, and whether it fits its column.
struct Cell<'a> {
    text: std::borrow::Cow<'a, str>,
    width: usize,
    tone: Tone,
    fits: bool,
}

impl<'a> Cell<'a> {
    fn new(text: &'a str, tone: Tone, last: bool) -> Cell<'a> {
        let text = escape_value(text);
        let width = text.chars().count();
        Cell {
            fits: last || width <= MAX_CELL_CHARS,
            text,
            width,
            tone,
        }
    }

    /// What the row shows in the cell's column.
    fn shown(&self) -> &str {
        if self.fits { &self.text } else { BELOW }
    }

    fn shown_width(&self) -> usize {
        if self.fits { self.width } else { BELOW.len() }
    }
}

/// Appends `text`, in the colour of `tone` when `colour`.
fn push_toned(out: &mut String, text: &str, tone: Tone, colour: bool) {
    let _ = match (colour && !text.is_empty(), tone) {
        (true, Tone::Good) => write!(out, "\x1b[32m{text}\x1b[0m"),
        (true, Tone::Warn) => write!(out, "\x1b[33m{text}\x1b[0m"),
        (true, Tone::Bad) => write!(out, "\x1b[31m{text}\x1b[0m"),
        _ => write!(out, "{text}"),
    };
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
            t.render(false, &mut Meter::unlimited()).unwrap(),
            "NAME          VERSION\na             1.0.0\nlonger-name   2.0.0\n"
        );
        assert!(
            t.render(true, &mut Meter::unlimited())
                .unwrap()
                .contains("\x1b[32m2.0.0\x1b[0m")
        );
    }

    /// Rendering is charged before it is done: every cell its bytes and [`CELL_UNITS`], every
    /// row the bytes it writes; a meter one unit short refuses, having spent no more than it had.
    #[test]
    fn rendering_is_charged_per_cell_and_byte_and_refused_past_the_budget() {
        let mut t = Table::new(&["BUNDLE", "SKIPS", "END"]);
        for i in 0..100 {
            let skips = "s".repeat(i * 2);
            t.row([format!("b.v{i}"), skips, "x".to_string()]);
        }
        let mut meter = Meter::unlimited();
        let text = t.render(false, &mut meter).unwrap();
        let cells: u64 = t
            .rows
            .iter()
            .flatten()
            .map(|(c, _)| c.len() as u64 + CELL_UNITS)
            .sum();
        assert_eq!(meter.spent_on(Work::Render), cells + text.len() as u64);
        assert_eq!(meter.spent(), meter.spent_on(Work::Render));
        let needed = meter.spent();
        let mut short = Meter::new(needed - 1);
        assert_eq!(
            t.render(false, &mut short),
            Err(Exhausted::Work { limit: needed - 1 })
        );
        assert!(short.spent() < needed);
        // Twice the rows, twice the units (linear in what is rendered).
        let mut twice = t.clone();
        twice.rows.extend(t.rows.iter().cloned());
        let mut meter = Meter::unlimited();
        twice.render(false, &mut meter).unwrap();
        let header = text.lines().next().unwrap().len() as u64 + 1;
        assert_eq!(meter.spent(), 2 * needed - header);
    }

    #[test]
    fn hostile_cells_are_escaped_and_measured_escaped() {
        let mut t = Table::new(&["NAME", "VERSION"]);
        t.row(["evil\x1b]0;PWNED\x07\x1b[31mRED\u{9b}\n", "1.0.0"]);
        t.row(["ok", "2.0.0"]);
        let text = t.render(false, &mut Meter::unlimited()).unwrap();
        assert_eq!(
            text,
            "NAME                                        VERSION\n\
             evil\\x1b]0;PWNED\\x07\\x1b[31mRED\\u009b\\x0a   1.0.0\n\
             ok                                          2.0.0\n"
        );
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'));
    }

    #[test]
    fn a_cell_too_wide_for_its_column_follows_its_row_unpadded() {
        let skips: Vec<String> = (0..12).map(|i| format!("example.v1.{i}.0")).collect();
        let mut t = Table::new(&["BUNDLE", "SKIPS", "END"]);
        t.row(["example.v2.0.0".to_string(), skips.join(","), "x".to_string()]);
        t.row(["example.v1.0.0", "-", "y"]);
        assert_eq!(
            t.render(false, &mut Meter::unlimited()).unwrap(),
            format!(
                "BUNDLE           SKIPS     END\n\
                 example.v2.0.0   (below)   x\n  \
                 SKIPS: {}\n\
                 example.v1.0.0   -         y\n",
                skips.join(",")
            )
        );
        // The last column pads nothing: its cells stay on their row.
        let mut t = Table::new(&["BUNDLE", "REQUIRES"]);
        t.row(["b", &"r".repeat(200)]);
        assert_eq!(
            t.render(false, &mut Meter::unlimited()).unwrap(),
            format!("BUNDLE   REQUIRES\nb        {}\n", "r".repeat(200))
        );
        // Coloured as the cell.
        let mut t = Table::new(&["A", "B"]);
        t.toned_row(vec![("a".repeat(65), Tone::Bad), ("b".into(), Tone::Plain)]);
        assert!(
            t.render(true, &mut Meter::unlimited())
                .unwrap()
                .contains(&format!("  A: \x1b[31m{}\x1b[0m\n", "a".repeat(65)))
        );
    }

    /// A 1 MB cell (what made `versions` take over 10 CPU seconds when wrapping was quadratic,
    /// and print 38 MB when every continuation line was padded): shown once, cut with how much
    /// was left out, and no line is padded past the columns' widths.
    #[test]
    fn a_one_megabyte_cell_is_cut_and_follows_its_row() {
        let cell = "r".repeat(1 << 20);
        let mut t = Table::new(&["BUNDLE", "REPLACES", "SKIPS"]);
        t.row(["b.v2", cell.as_str(), "-"]);
        let text = t.render(false, &mut Meter::unlimited()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1], "b.v2     (below)    -");
        assert_eq!(
            lines[2],
            format!(
                "  REPLACES: {}... ({} more bytes)",
                "r".repeat(crate::escape::MAX_SHOWN_CHARS),
                (1 << 20) - crate::escape::MAX_SHOWN_CHARS
            )
        );
    }

    #[test]
    fn newlines_and_format_characters_stay_in_their_cell_escaped() {
        let mut t = Table::new(&["NAME", "VERSION"]);
        t.row(["a\nb.v9 9.9.9\r\u{202e}c\u{2066}\u{200b}\u{feff}", "1.0.0"]);
        let text = t.render(false, &mut Meter::unlimited()).unwrap();
        assert_eq!(
            text,
            "NAME                                           VERSION\n\
             a\\x0ab.v9 9.9.9\\x0d\\u202ec\\u2066\\u200b\\ufeff   1.0.0\n"
        );
    }
}
