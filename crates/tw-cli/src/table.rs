//! Plain-text tables for terminal output: left-aligned columns sized to their widest cell, with
//! over-long cells cut so one verbose description cannot wrap the whole table.

/// A table under construction.
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    max_width: usize,
}

impl Table {
    pub(crate) fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
            max_width: 60,
        }
    }

    /// Cuts cells at `width` characters instead of 60 (for tables whose last column is prose).
    pub(crate) fn max_width(mut self, width: usize) -> Self {
        self.max_width = width.max(2);
        self
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(
            cells
                .into_iter()
                .map(|c| {
                    let c = c.replace(['\n', '\r', '\t'], " ");
                    if c.chars().count() > self.max_width {
                        let cut: String = c.chars().take(self.max_width - 1).collect();
                        format!("{cut}…")
                    } else {
                        c
                    }
                })
                .collect(),
        );
    }

    pub(crate) fn render(&self) -> String {
        self.render_with(true)
    }

    /// The rows alone, for a two-column list of facts.
    pub(crate) fn render_rows(&self) -> String {
        self.render_with(false)
    }

    fn render_with(&self, header: bool) -> String {
        let cols = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate().take(cols) {
                if i + 1 == cols {
                    s.push_str(c);
                } else {
                    let pad = widths[i] - c.chars().count();
                    s.push_str(c);
                    s.push_str(&" ".repeat(pad + 2));
                }
            }
            s.trim_end().to_owned()
        };
        let mut out = String::new();
        if header {
            out.push_str(&line(&self.header));
            out.push('\n');
        }
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}
