//! Aligned text tables for people; colour only when the output is a terminal.

use std::fmt::Write as _;

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

    /// The table as text, columns separated by three spaces; `colour` adds ANSI colours.
    pub fn render(&self, colour: bool) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, (cell, _)) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let header: Vec<(String, Tone)> = self.header.iter().map(|h| (h.clone(), Tone::Plain)).collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (i, (cell, tone)) in row.iter().enumerate().take(columns) {
                let last = i + 1 == row.len().min(columns);
                let pad = if last {
                    0
                } else {
                    widths[i] - cell.chars().count() + 3
                };
                let _ = match (colour, tone) {
                    (true, Tone::Good) => write!(line, "\x1b[32m{cell}\x1b[0m"),
                    (true, Tone::Warn) => write!(line, "\x1b[33m{cell}\x1b[0m"),
                    (true, Tone::Bad) => write!(line, "\x1b[31m{cell}\x1b[0m"),
                    _ => write!(line, "{cell}"),
                };
                line.push_str(&" ".repeat(pad));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
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
}
