//! Aligned columns and short durations, for `ps`, the workflow live view
//! and its summary.

use crate::terminal_text::visible_line;

/// The rows as lines, each cell padded to its column's widest, two spaces
/// apart; trailing blanks trimmed.
pub fn columns(rows: &[Vec<String>]) -> Vec<String> {
    // Cells hold names and text an agent may have written: one line each,
    // no escapes.
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|c| visible_line(c).into_owned()).collect())
        .collect();
    let count = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..count)
        .map(|c| {
            rows.iter()
                .filter_map(|row| row.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:w$}"))
                .collect();
            cells.join("  ").trim_end().to_string()
        })
        .collect()
}

/// `1h02m`, `3m05s`, `42s`.
pub fn elapsed(secs: u64) -> String {
    match secs {
        s if s >= 3600 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

/// `950`, `12.3k`, `4.1M`.
pub fn tokens(n: u64) -> String {
    match n {
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1}k", n as f64 / 1e3),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_line_up_and_trailing_blanks_go() {
        let rows = vec![
            vec!["NAME".to_string(), "STATE".into(), "".into()],
            vec!["a-long-name".into(), "running".into(), "".into()],
        ];
        assert_eq!(
            columns(&rows),
            ["NAME         STATE", "a-long-name  running"]
        );
    }

    #[test]
    fn cells_show_control_characters_as_escapes_and_stay_one_line() {
        let rows = vec![
            vec!["NAME".to_string(), "ACTIVITY".into()],
            vec!["a\x1b]52;c;aGk=\x07".into(), "two\nlines".into()],
        ];
        assert_eq!(
            columns(&rows),
            [
                "NAME             ACTIVITY",
                "a\\e]52;c;aGk=\\a  two\\nlines"
            ]
        );
    }

    #[test]
    fn durations_and_token_counts_are_short() {
        assert_eq!(elapsed(42), "42s");
        assert_eq!(elapsed(185), "3m05s");
        assert_eq!(elapsed(3720), "1h02m");
        assert_eq!(tokens(950), "950");
        assert_eq!(tokens(12_345), "12.3k");
        assert_eq!(tokens(4_100_000), "4.1M");
    }
}
