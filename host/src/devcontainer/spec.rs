//! What sanddune reads of a devcontainer.json (the Dev Container
//! specification's single-container keys), what it refuses, and its
//! variables and lifecycle commands turned into shell lines.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use sha2::Digest;

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
    /// `mount`-syntax string naming where the repository is mounted.
    pub workspace_mount: Option<String>,
    /// Local ones are installed at build (see `features`); registry ones
    /// are refused.
    #[serde(default)]
    pub features: BTreeMap<String, Value>,
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
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Lifecycle {
    Line(String),
    Argv(Vec<String>),
    Parallel(BTreeMap<String, Lifecycle>),
}

/// Keys that change the container in ways the containers capability does
/// not grant, or that need what a run does not have: why each is refused.
const REFUSED: [(&str, &str); 6] = [
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
    /// Parse `text` (JSONC, perhaps after a byte-order mark) read from
    /// `path`, variables left as written: what is refused, and the host
    /// effects for workspace trust, do not depend on them.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        Self::from_value(json(text, path)?, path)
    }

    /// Parse `text` with the variables the host knows substituted in every
    /// string value, as the Dev Containers CLI reads the file;
    /// `${containerEnv:...}` waits for the container's env.
    pub fn parse_substituted(text: &str, path: &Path, local: &Local) -> Result<Self> {
        let mut value = json(text, path)?;
        let id = devcontainer_id(local.workspace_folder, path);
        let mut host = HostVars {
            local_env: local.env,
            local_workspace_folder: local.workspace_folder,
            container_workspace_folder: "",
            devcontainer_id: Some(&id),
        };
        let folder = match value.get("workspaceFolder").and_then(Value::as_str) {
            Some(folder) => Vars {
                host: Some(host),
                container_env: None,
            }
            .substitute(folder),
            None => format!("/workspaces/{}", basename(local.workspace_folder)),
        };
        host.container_workspace_folder = &folder;
        Vars {
            host: Some(host),
            container_env: None,
        }
        .substitute_value(&mut value);
        let mut dc = Self::from_value(value, path)?;
        dc.workspace_folder = Some(folder);
        Ok(dc)
    }

    fn from_value(value: Value, path: &Path) -> Result<Self> {
        let dc: Self = serde_json::from_value(value)
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
        // A local feature (a path) is installed at build (see `features`).
        if let Some(id) = self.features.keys().find(|id| !is_local_feature(id)) {
            return Err(Error::input(format!(
                "{}: `features` ({id}) cannot be honoured: {id} would come from a registry, which sanddune does not fetch from; install the tool in the Dockerfile (build.dockerfile), or vendor the feature's folder and name it as ./path; nothing was created",
                path.display()
            )));
        }
        for (key, why) in REFUSED {
            if let Some(value) = self.rest.get(key).filter(|v| asks(v)) {
                let detail = match (key, value) {
                    ("runArgs", Value::Array(args)) => {
                        format!(" (first: {})", args[0])
                    }
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

/// Is a `features` key a path (a local feature), not a registry reference?
pub fn is_local_feature(id: &str) -> bool {
    id.starts_with("./") || id.starts_with("../") || id.starts_with('/')
}

/// `s` as one single-quoted shell word.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `text` as JSON: a byte-order mark and JSONC's comments and trailing
/// commas go.
fn json(text: &str, path: &Path) -> Result<Value> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str(&jsonc::to_json(text))
        .map_err(|e| Error::input(format!("{} is not valid: {e}", path.display())))
}

/// What the file's variables stand for on the host.
pub struct Local<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The repository root.
    pub workspace_folder: &'a str,
}

fn basename(path: &str) -> String {
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// `${devcontainerId}` as the Dev Containers CLI computes it: the sha256
/// of its id labels as sorted JSON, in base 32, 52 digits.
pub fn devcontainer_id(local_folder: &str, config_file: &Path) -> String {
    let labels = BTreeMap::from([
        (
            "devcontainer.config_file",
            config_file.display().to_string(),
        ),
        ("devcontainer.local_folder", local_folder.to_string()),
    ]);
    let json = serde_json::to_string(&labels).expect("strings serialize");
    let hash = sha2::Sha256::digest(json.as_bytes());
    // 256 bits read as 52 five-bit digits from the top, after 4 zero bits.
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuv";
    let bit = |i: usize| i >= 4 && hash[(i - 4) / 8] & (0x80 >> ((i - 4) % 8)) != 0;
    (0..52)
        .map(|d| {
            let v = (0..5).fold(0, |v, b| v << 1 | usize::from(bit(d * 5 + b)));
            DIGITS[v] as char
        })
        .collect()
}

/// What `${...}` variables stand for.
pub struct Vars<'a> {
    /// What the host knows; None keeps those variables as they are.
    pub host: Option<HostVars<'a>>,
    /// The container's env (the image's, then containerEnv), for
    /// `${containerEnv:VAR}`; None keeps them for later.
    pub container_env: Option<&'a BTreeMap<String, String>>,
}

/// The variables whose values the host knows before the container.
#[derive(Clone, Copy)]
pub struct HostVars<'a> {
    pub local_env: &'a dyn Fn(&str) -> Option<String>,
    pub local_workspace_folder: &'a str,
    pub container_workspace_folder: &'a str,
    pub devcontainer_id: Option<&'a str>,
}

impl Vars<'_> {
    /// Every string in `value` (not the keys) substituted.
    pub fn substitute_value(&self, value: &mut Value) {
        match value {
            Value::String(s) => *s = self.substitute(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.substitute_value(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.substitute_value(v)),
            _ => {}
        }
    }

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
        let host = self.host.as_ref();
        match name {
            "localWorkspaceFolder" => Some(host?.local_workspace_folder.into()),
            "localWorkspaceFolderBasename" => Some(basename(host?.local_workspace_folder)),
            "containerWorkspaceFolder" => Some(host?.container_workspace_folder.into()),
            "containerWorkspaceFolderBasename" => Some(basename(host?.container_workspace_folder)),
            "devcontainerId" => host?.devcontainer_id.map(String::from),
            _ => {
                let (kind, rest) = name.split_once(':')?;
                let (var, default) = match rest.split_once(':') {
                    Some((var, default)) => (var, Some(default)),
                    None => (rest, None),
                };
                let found = match kind {
                    "localEnv" | "env" => (host?.local_env)(var),
                    "containerEnv" => self.container_env?.get(var).cloned(),
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
        assert_eq!(dc.remote_user.as_deref(), Some("dev"));
        assert_eq!(dc.remote_env["C"], None);
        assert_eq!(
            dc.post_create_command.unwrap().to_shell(),
            r"'echo' 'it'\''s'"
        );
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_by_key() {
        let cases = [
            (
                r#"{"image": "i", "features": {"ghcr.io/devcontainers/features/node:1": {}}}"#,
                "`features` (ghcr.io/devcontainers/features/node:1) cannot be honoured: ghcr.io/devcontainers/features/node:1 would come from a registry",
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
        // Asking for nothing is not refused; a local feature is read later.
        assert!(
            parse(r#"{"image": "i", "privileged": false, "runArgs": [], "features": {}}"#).is_ok()
        );
        assert!(parse(r#"{"image": "i", "features": {"./f": {}, "../g": {}}}"#).is_ok());
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
        let host = HostVars {
            local_env: &local,
            local_workspace_folder: "/src/app",
            container_workspace_folder: "/workspaces/app",
            devcontainer_id: Some("id"),
        };
        let vars = Vars {
            host: Some(host),
            container_env: Some(&container_env),
        };
        assert_eq!(
            vars.substitute(
                "${localEnv:HOME}/x:${localEnv:NOPE:dflt}:${localEnv:NOPE}:${containerEnv:PATH}"
            ),
            "/home/me/x:dflt::/usr/bin"
        );
        assert_eq!(
            vars.substitute("${containerWorkspaceFolder} ${localWorkspaceFolderBasename} ${containerWorkspaceFolderBasename} ${localWorkspaceFolder} ${devcontainerId}"),
            "/workspaces/app app app /src/app id"
        );
        assert_eq!(vars.substitute("${nope} ${unclosed"), "${nope} ${unclosed");
        // Each kind waits while its values are unknown.
        let later = Vars {
            host: None,
            container_env: Some(&container_env),
        };
        assert_eq!(
            later.substitute("${localEnv:HOME} ${containerEnv:PATH}"),
            "${localEnv:HOME} /usr/bin"
        );
    }

    #[test]
    fn the_whole_file_is_substituted_after_a_byte_order_mark() {
        let env = |k: &str| (k == "GID").then(|| "1001".to_string());
        let dc = DevContainer::parse_substituted(
            "\u{feff}{ \"build\": { \"dockerfile\": \"D\", \"args\": { \"G\": \"${localEnv:GID}\", \"TZ\": \"${localEnv:TZ:UTC}\" } },\n\
               \"remoteUser\": \"${localEnv:GID}\", \"workspaceFolder\": \"/w/${localWorkspaceFolderBasename}\",\n\
               \"containerEnv\": { \"F\": \"${containerWorkspaceFolder}\", \"P\": \"${containerEnv:PATH}\" } }",
            Path::new("/src/app/.devcontainer/devcontainer.json"),
            &Local {
                env: &env,
                workspace_folder: "/src/app",
            },
        )
        .unwrap();
        let args = &dc.build.as_ref().unwrap().args;
        assert_eq!((args["G"].as_str(), args["TZ"].as_str()), ("1001", "UTC"));
        assert_eq!(dc.remote_user.as_deref(), Some("1001"));
        assert_eq!(dc.workspace_folder.as_deref(), Some("/w/app"));
        assert_eq!(dc.container_env["F"], "/w/app");
        assert_eq!(dc.container_env["P"], "${containerEnv:PATH}");
    }

    #[test]
    fn the_devcontainer_id_is_the_reference_clis() {
        // What @devcontainers/cli 0.89 computes (its `getDevContainerId`).
        assert_eq!(
            devcontainer_id(
                "/tmp/dcx/proj",
                Path::new("/tmp/dcx/proj/.devcontainer/devcontainer.json")
            ),
            "0nolh0qc8rlfrorkdcrc1o0j7pemrf0og240p15hq4hiqgpc8nuf"
        );
    }
}
