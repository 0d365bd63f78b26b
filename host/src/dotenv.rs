//! `.sanddune/.env`: a repository's env file, read into a run's env layers
//! (its values may be secret references, see `crate::secrets`).

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// Where the file lives in a repository.
pub const FILE: &str = ".sanddune/.env";

/// Parse a `.env` file: `KEY=VALUE` lines, `#` comments, blank lines, an
/// optional `export ` prefix, values optionally in single or double quotes.
/// A line that is none of these is an error naming its number.
pub fn parse(text: &str, file: &str) -> Result<BTreeMap<String, String>> {
    let mut env = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            return Err(Error::input(format!(
                "{file}:{}: expected KEY=VALUE",
                n + 1
            )));
        };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Error::input(format!(
                "{file}:{}: `{key}` is not a valid env key",
                n + 1
            )));
        }
        let value = value.trim();
        let value = ['"', '\'']
            .iter()
            .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
            .unwrap_or(value);
        env.insert(key.to_string(), value.to_string());
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotenv_syntax() {
        let text = "# comment\n\nA=1\nexport B = two words \nC=\"quoted = yes\"\nD='single'\nE=\n";
        let env = parse(text, ".env").unwrap();
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(
            env,
            map(&[
                ("A", "1"),
                ("B", "two words"),
                ("C", "quoted = yes"),
                ("D", "single"),
                ("E", "")
            ])
        );
        let err = parse("A=1\nnot a pair\n", ".sanddune/.env").unwrap_err();
        assert!(err.to_string().contains(".sanddune/.env:2"), "{err}");
        assert!(parse("BAD-KEY=1", ".env").is_err());
    }
}
