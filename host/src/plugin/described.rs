//! What a provider says of itself in `describe` reaches people: `plugin
//! inspect`, the approval prompt, run logs and error messages. A provider
//! that lies there could rewrite the terminal around its own text (escape
//! sequences that move the cursor and erase the capability list above an
//! approval question) or pass itself off under a name no one can type. So
//! at load a name must be a plain word and no text may hold a control
//! character; a provider that breaks either is refused, naming the field.

use super::api::{AgentInfo, ProviderInfo};
use crate::error::{Error, Result};

/// Longest name, and longest other text, a provider may describe itself
/// with.
const MAX_NAME: usize = 64;
const MAX_TEXT: usize = 4096;

/// Check a sandbox provider's `describe`.
pub fn check_provider(source: &str, info: &ProviderInfo) -> Result<()> {
    check_name(source, &info.name)?;
    let mut fields = vec![
        ("version".to_string(), info.version.as_str()),
        ("description".to_string(), info.description.as_str()),
    ];
    for option in &info.config {
        check_name(source, &option.name)?;
        let at = |field: &str| format!("option `{}`'s {field}", option.name);
        fields.push((at("description"), &option.description));
        if let Some(default) = &option.default_value {
            fields.push((at("default value"), default));
        }
    }
    check_texts(source, &fields)
}

/// Check an agent provider's `describe`.
pub fn check_agent(source: &str, info: &AgentInfo) -> Result<()> {
    check_name(source, &info.name)?;
    let mut fields = vec![
        ("version".to_string(), info.version.as_str()),
        ("description".to_string(), info.description.as_str()),
        ("program".to_string(), info.program.as_str()),
    ];
    if let Some(model) = &info.default_model {
        fields.push(("default model".into(), model));
    }
    for option in &info.options {
        check_name(source, &option.name)?;
        fields.push((
            format!("option `{}`'s description", option.name),
            &option.description,
        ));
        for value in &option.allowed_values {
            fields.push((format!("option `{}`'s values", option.name), value));
        }
    }
    for requirement in &info.env {
        fields.push(("env description".into(), &requirement.description));
        for key in &requirement.any_of {
            fields.push(("env key".into(), key));
        }
    }
    for key in &info.optional_env {
        fields.push(("optional env key".into(), key));
    }
    check_texts(source, &fields)
}

/// A name people type: 1-64 letters, digits, `-`, `_` or `.`, beginning
/// with a letter or digit.
fn check_name(source: &str, name: &str) -> Result<()> {
    let plain = name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if plain {
        return Ok(());
    }
    Err(Error::input(format!(
        "`{source}` is refused: it names itself or an option {name:?}, and a name must be 1-{MAX_NAME} letters, digits, `-`, `_` or `.`"
    )))
}

fn check_texts(source: &str, fields: &[(String, &str)]) -> Result<()> {
    for (field, text) in fields {
        if text.len() > MAX_TEXT {
            return Err(Error::input(format!(
                "`{source}` is refused: its {field} is {} bytes long, more than {MAX_TEXT}",
                text.len()
            )));
        }
        if let Some((at, c)) = text.char_indices().find(|(_, c)| c.is_control()) {
            return Err(Error::input(format!(
                "`{source}` is refused: its {field} holds the control character {c:?} at byte {at}, which could rewrite the terminal that shows it"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::api::{ConfigOption, SandboxKind};

    fn provider(name: &str, description: &str) -> ProviderInfo {
        ProviderInfo {
            name: name.into(),
            version: "1.0.0".into(),
            description: description.into(),
            kind: SandboxKind::Isolated,
            config: vec![ConfigOption {
                name: "image".into(),
                description: "The image.".into(),
                default_value: Some("debian:13".into()),
            }],
            capabilities: Default::default(),
            container_engine: None,
            snapshots: false,
        }
    }

    #[test]
    fn plain_names_and_text_pass() {
        check_provider("p.wasm", &provider("test-isolated", "A temp dir (v1.0).")).unwrap();
    }

    #[test]
    fn a_name_that_is_not_a_plain_word_is_refused() {
        for name in ["", "-x", "a b", "docker\u{1b}[2K", "ä", &"n".repeat(65)] {
            let err = check_provider("p.wasm", &provider(name, "ok")).unwrap_err();
            assert!(
                err.to_string().contains("a name must be"),
                "{name:?}: {err}"
            );
        }
    }

    #[test]
    fn control_characters_anywhere_are_refused_naming_the_field() {
        let err = check_provider("p.wasm", &provider("p", "fine\u{1b}[2A\u{1b}[2K"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("its description holds the control character '\\u{1b}' at byte 4"),
            "{err}"
        );
        let mut info = provider("p", "ok");
        info.config[0].description = "line\nfaked: none".into();
        let err = check_provider("p.wasm", &info).unwrap_err().to_string();
        assert!(err.contains("option `image`'s description"), "{err}");
    }

    #[test]
    fn endless_text_is_refused() {
        let err = check_provider("p.wasm", &provider("p", &"x".repeat(MAX_TEXT + 1)))
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than 4096"), "{err}");
    }
}
