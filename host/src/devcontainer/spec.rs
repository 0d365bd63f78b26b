//! What sanddune reads of a devcontainer.json (the Dev Container
//! specification's single-container keys), what it refuses, and its
//! variables and lifecycle commands turned into shell lines.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::jsonc;
use crate::error::{Error, Result};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DevContainer {
    pub image: Option<String>,
    pub build: Option<BuildSpec>,
    /// The specification's older spelling of `build.dockerfile`.
    #[serde(rename = "dockerFile")]
    pub docker_file: Option<String>,
    /// The older spelling of `build.context`.
    pub context: Option<String>,
    #[serde(default)]
    pub container_env: BTreeMap<String, String>,
    /// A null value unsets a variable for the tools; here it is left out.
    #[serde(default)]
    pub remote_env: BTreeMap<String, Option<String>>,
    pub container_user: Option<String>,
    pub remote_user: Option<String>,
    #[serde(rename = "updateRemoteUserUID")]
    pub update_remote_user_uid: Option<bool>,
    pub workspace_folder: Option<String>,
    pub initialize_command: Option<Lifecycle>,
    pub on_create_command: Option<Lifecycle>,
    pub update_content_command: Option<Lifecycle>,
    pub post_create_command: Option<Lifecycle>,
    pub post_start_command: Option<Lifecycle>,
    /// Keys refused when set (see [`DevContainer::refuse_unsupported`]).
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildSpec {
    pub dockerfile: Option<String>,
    pub context: Option<String>,
    #[serde(default)]
    pub args: BTreeMap<String, String>,
    pub target: Option<String>,
}

/// A lifecycle command: a shell line, an argv run without a shell, or named
/// commands (each one of those) run in parallel.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Lifecycle {
    Line(String),
    Argv(Vec<String>),
    Parallel(BTreeMap<String, Lifecycle>),
}

/// Keys that change the container in ways the containers capability does
/// not grant, or that need what a run does not have: why each is refused.
const REFUSED: [(&str, &str); 7] = [
    (
        "features",
        "dev container features are fetched from an OCI registry and installed by the Dev Containers CLI; sanddune has neither. Install the tools in the Dockerfile (build.dockerfile) instead",
    ),
    (
        "privileged",
        "the containers capability never grants a privileged container",
    ),
    (
        "capAdd",
        "the containers capability grants no added capabilities",
    ),
    (
        "securityOpt",
        "the containers capability grants no security options",
    ),
    (
        "runArgs",
        "docker run arguments bypass what the containers capability grants; use --sandbox-opt mount=/network= for mounts and networks",
    ),
    (
        "mounts",
        "mounts are granted one by one; give each with --sandbox-opt mount=SOURCE:TARGET[:ro]",
    ),
    (
        "dockerComposeFile",
        "Docker Compose dev containers are not supported; point build.dockerfile or image at the service's image",
    ),
];

/// Is `value` set to something that asks for anything (not null, false,
/// an empty list or object)?
fn asks(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => false,
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

impl DevContainer {
    /// Parse `text` (JSONC) read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let dc: Self = serde_json::from_str(&jsonc::to_json(text))
            .map_err(|e| Error::input(format!("{} is not valid: {e}", path.display())))?;
        dc.refuse_unsupported(path)?;
        if dc.image.is_none() && dc.dockerfile().is_none() {
            return Err(Error::input(format!(
                "{} names no image: give `image` or `build.dockerfile`",
                path.display()
            )));
        }
        Ok(dc)
    }

    /// The first key that cannot be honoured here, as an input error.
    fn refuse_unsupported(&self, path: &Path) -> Result<()> {
        for (key, why) in REFUSED {
            if let Some(value) = self.rest.get(key).filter(|v| asks(v)) {
                let detail = match (key, value) {
                    ("runArgs", Value::Array(args)) => {
                        format!(" (first: {})", args[0])
                    }
                    ("features", Value::Object(features)) => format!(
                        " ({})",
                        features.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                    _ => String::new(),
                };
                return Err(Error::input(format!(
                    "{}: `{key}`{detail} cannot be honoured: {why}; nothing was created",
                    path.display()
                )));
            }
        }
        Ok(())
    }

    /// `build.dockerfile`, or the older top-level `dockerFile`.
    pub fn dockerfile(&self) -> Option<&str> {
        self.build
            .as_ref()
            .and_then(|b| b.dockerfile.as_deref())
            .or(self.docker_file.as_deref())
    }

    /// `build.context`, or the older top-level `context`; default `.`.
    pub fn context(&self) -> &str {
        self.build
            .as_ref()
            .and_then(|b| b.context.as_deref())
            .or(self.context.as_deref())
            .unwrap_or(".")
    }

    /// The user the agent and the lifecycle commands run as.
    pub fn user(&self) -> Option<&str> {
        self.remote_user
            .as_deref()
            .or(self.container_user.as_deref())
    }

    /// The commands run in the sandbox, in the specification's order, by
    /// key.
    pub fn in_sandbox(&self) -> Vec<(&'static str, &Lifecycle)> {
        [
            ("onCreateCommand", &self.on_create_command),
            ("updateContentCommand", &self.update_content_command),
            ("postCreateCommand", &self.post_create_command),
            ("postStartCommand", &self.post_start_command),
        ]
        .into_iter()
        .filter_map(|(key, command)| command.as_ref().map(|c| (key, c)))
        .collect()
    }
}

impl Lifecycle {
    /// One `sh -c` line: an argv quoted word by word; named commands in
    /// background subshells, failing when any of them fails, naming it.
    pub fn to_shell(&self) -> String {
        match self {
            Lifecycle::Line(line) => line.clone(),
            Lifecycle::Argv(argv) => argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" "),
            Lifecycle::Parallel(named) => {
                let mut script = String::new();
                for (i, command) in named.values().enumerate() {
                    script.push_str(&format!("( {} ) & p{i}=$!\n", command.to_shell()));
                }
                script.push_str("s=0\n");
                for (i, name) in named.keys().enumerate() {
                    let said = quote(&format!("`{name}` exited with code"));
                    script.push_str(&format!(
                        "wait $p{i} || {{ r=$?; s=1; echo {said} $r >&2; }}\n"
                    ));
                }
                script.push_str("exit $s");
                script
            }
        }
    }
}

/// `s` as one single-quoted shell word.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What `${...}` variables stand for.
pub struct Vars<'a> {
    pub local_env: &'a dyn Fn(&str) -> Option<String>,
    /// The container's env (the image's, then containerEnv), for
    /// `${containerEnv:VAR}` in remoteEnv.
    pub container_env: &'a BTreeMap<String, String>,
    pub local_workspace_folder: &'a str,
    pub container_workspace_folder: &'a str,
}

impl Vars<'_> {
    /// `text` with every known variable replaced; an unknown one is kept.
    pub fn substitute(&self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let Some(len) = rest[start..].find('}') else {
                rest = &rest[start..];
                break;
            };
            let inner = &rest[start + 2..start + len];
            match self.value(inner) {
                Some(value) => out.push_str(&value),
                None => out.push_str(&rest[start..=start + len]),
            }
            rest = &rest[start + len + 1..];
        }
        out.push_str(rest);
        out
    }

    fn value(&self, name: &str) -> Option<String> {
        let basename = |p: &str| p.trim_end_matches('/').rsplit('/').next().map(String::from);
        match name {
            "localWorkspaceFolder" => Some(self.local_workspace_folder.into()),
            "localWorkspaceFolderBasename" => basename(self.local_workspace_folder),
            "containerWorkspaceFolder" => Some(self.container_workspace_folder.into()),
            "containerWorkspaceFolderBasename" => basename(self.container_workspace_folder),
            _ => {
                let (kind, rest) = name.split_once(':')?;
                let (var, default) = match rest.split_once(':') {
                    Some((var, default)) => (var, Some(default)),
                    None => (rest, None),
                };
                let found = match kind {
                    "localEnv" | "env" => (self.local_env)(var),
                    "containerEnv" => self.container_env.get(var).cloned(),
                    _ => return None,
                };
                // An unset variable without a default is empty, as the
                // Dev Containers CLI makes it.
                Some(found.or(default.map(String::from)).unwrap_or_default())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<DevContainer> {
        DevContainer::parse(text, Path::new("/r/.devcontainer/devcontainer.json"))
    }

    #[test]
    fn a_jsonc_file_with_a_build_parses() {
        let dc = parse(
            r#"{
  // the name is ignored
  "name": "dev",
  "build": { "dockerfile": "Dockerfile", "context": "..", "args": { "V": "1", }, },
  "remoteUser": "dev", "containerUser": "root",
  "containerEnv": { "A": "a" },
  "remoteEnv": { "B": "${containerEnv:A}", "C": null },
  "postCreateCommand": ["echo", "it's"],
  "customizations": { "vscode": { "extensions": [] } },
  "features": {},
}"#,
        )
        .unwrap();
        assert_eq!(dc.dockerfile(), Some("Dockerfile"));
        assert_eq!(dc.context(), "..");
        assert_eq!(dc.build.as_ref().unwrap().args["V"], "1");
        assert_eq!(dc.user(), Some("dev"), "remoteUser wins");
        assert_eq!(dc.remote_env["C"], None);
        let commands = dc.in_sandbox();
        assert_eq!(commands.len(), 1);
        assert_eq!(commands[0].1.to_shell(), r"'echo' 'it'\''s'");
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_by_key() {
        let cases = [
            (
                r#"{"image": "i", "features": {"ghcr.io/devcontainers/features/node:1": {}}}"#,
                "`features` (ghcr.io/devcontainers/features/node:1)",
            ),
            (r#"{"image": "i", "privileged": true}"#, "`privileged`"),
            (r#"{"image": "i", "capAdd": ["SYS_PTRACE"]}"#, "`capAdd`"),
            (
                r#"{"image": "i", "runArgs": ["--cap-add=ALL", "-v"]}"#,
                "`runArgs` (first: \"--cap-add=ALL\")",
            ),
            (
                r#"{"image": "i", "mounts": ["source=/,target=/h,type=bind"]}"#,
                "`mounts`",
            ),
            (
                r#"{"dockerComposeFile": "c.yml", "service": "s"}"#,
                "`dockerComposeFile`",
            ),
            (r#"{"name": "no image"}"#, "names no image"),
        ];
        for (text, expected) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{text}");
            assert!(e.to_string().contains(expected), "{text}: {e}");
        }
        // Asking for nothing is not refused.
        assert!(
            parse(r#"{"image": "i", "privileged": false, "runArgs": [], "features": {}}"#).is_ok()
        );
    }

    #[test]
    fn named_commands_run_in_parallel_and_any_failure_fails() {
        let parallel = Lifecycle::Parallel(BTreeMap::from([
            ("a".to_string(), Lifecycle::Line("exit 0".into())),
            ("b".to_string(), Lifecycle::Argv(vec!["false".into()])),
        ]));
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(parallel.to_shell())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "`b` exited with code 1\n"
        );
    }

    #[test]
    fn variables_are_substituted() {
        let local = |k: &str| (k == "HOME").then(|| "/home/me".to_string());
        let container_env = BTreeMap::from([("PATH".to_string(), "/usr/bin".to_string())]);
        let vars = Vars {
            local_env: &local,
            container_env: &container_env,
            local_workspace_folder: "/src/app",
            container_workspace_folder: "/workspaces/app",
        };
        assert_eq!(
            vars.substitute(
                "${localEnv:HOME}/x:${localEnv:NOPE:dflt}:${localEnv:NOPE}:${containerEnv:PATH}"
            ),
            "/home/me/x:dflt::/usr/bin"
        );
        assert_eq!(
            vars.substitute("${containerWorkspaceFolder} ${localWorkspaceFolderBasename} ${containerWorkspaceFolderBasename} ${localWorkspaceFolder}"),
            "/workspaces/app app app /src/app"
        );
        assert_eq!(
            vars.substitute("${devcontainerId} ${unclosed"),
            "${devcontainerId} ${unclosed"
        );
    }
}
