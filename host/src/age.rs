//! Durations as the user writes them (`7d`, `10m`) and ages as sanddune
//! prints them: `gc --snapshot-max-age`, `pool-idle=`, `snapshot ls`.

use std::time::Duration;

/// `90s`, `5m`, `3h`, `2d`.
pub fn age(secs: i64) -> String {
    match secs.max(0) {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// A duration as the user writes it: a number and a unit (`s`, `m`, `h`,
/// `d`).
pub fn parse_age(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}`: expected a number and a unit, like 7d or 12h"))?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("`{text}`: the unit must be s, m, h or d")),
    };
    Ok(Duration::from_secs(number * secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse_with_a_unit_and_print_short() {
        assert_eq!(parse_age("7d").unwrap(), Duration::from_secs(7 * 86_400));
        assert_eq!(parse_age("0s").unwrap(), Duration::ZERO);
        assert_eq!(parse_age("90m").unwrap(), Duration::from_secs(5400));
        assert!(parse_age("7").unwrap_err().contains("unit"));
        assert!(parse_age("d").unwrap_err().contains("number"));
        assert!(parse_age("1w").unwrap_err().contains("s, m, h or d"));
        assert_eq!(age(30), "30s");
        assert_eq!(age(3 * 3600), "3h");
        assert_eq!(age(3 * 86_400), "3d");
    }
}
