//! The resolved configuration: the image's `devcontainer.metadata` label
//! and the file merged as the Dev Containers CLI merges them (its
//! `mergeConfiguration`): the image's entries first, the file last; users
//! and `updateRemoteUserUID` the last one set, env merged key by key (later
//! wins), lifecycle commands collected in that order.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::spec::{DevContainer, Lifecycle, Vars};

/// The label images carry their dev container metadata in.
pub const LABEL: &str = "devcontainer.metadata";

/// One entry of the merge: one of the image's metadata entries, or the file.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub remote_user: Option<String>,
    pub container_user: Option<String>,
    #[serde(rename = "updateRemoteUserUID")]
    pub update_remote_user_uid: Option<bool>,
    #[serde(default)]
    pub container_env: BTreeMap<String, String>,
    #[serde(default)]
    pub remote_env: BTreeMap<String, Option<String>>,
    pub on_create_command: Option<Lifecycle>,
    pub update_content_command: Option<Lifecycle>,
    pub post_create_command: Option<Lifecycle>,
    pub post_start_command: Option<Lifecycle>,
    /// Keys the containers capability never grants; from the image they
    /// are left out, and said so.
    #[serde(default)]
    pub privileged: bool,
    #[serde(default)]
    pub cap_add: Vec<String>,
    #[serde(default)]
    pub security_opt: Vec<String>,
    #[serde(default)]
    pub mounts: Vec<Value>,
}

impl Entry {
    /// The file's part of the merge.
    pub fn of_file(dc: &DevContainer) -> Self {
        Entry {
            remote_user: dc.remote_user.clone(),
            container_user: dc.container_user.clone(),
            update_remote_user_uid: dc.update_remote_user_uid,
            container_env: dc.container_env.clone(),
            remote_env: dc.remote_env.clone(),
            on_create_command: dc.on_create_command.clone(),
            update_content_command: dc.update_content_command.clone(),
            post_create_command: dc.post_create_command.clone(),
            post_start_command: dc.post_start_command.clone(),
            ..Default::default()
        }
    }
}

/// The image's metadata entries from its label's text (a JSON array of
/// entries, or one entry), substituted with `vars`. An image's label can
/// name `${localEnv:...}`, but the user approved the file's reads of their
/// environment, not the image's: the caller's `vars` read none.
pub fn image_entries(label: Option<&str>, vars: &Vars) -> Result<Vec<Entry>, String> {
    let Some(label) = label else {
        return Ok(vec![]);
    };
    let mut value: Value =
        serde_json::from_str(label).map_err(|e| format!("its {LABEL} label is not JSON: {e}"))?;
    vars.substitute_value(&mut value);
    let entries = match value {
        Value::Array(entries) => entries,
        entry => vec![entry],
    };
    entries
        .into_iter()
        .map(|e| serde_json::from_value(e).map_err(|e| format!("its {LABEL} label: {e}")))
        .collect()
}

/// The merged configuration (`sanddune devcontainer resolve` prints it).
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Merged {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_user: Option<String>,
    #[serde(
        rename = "updateRemoteUserUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub update_remote_user_uid: Option<bool>,
    pub container_env: BTreeMap<String, String>,
    pub remote_env: BTreeMap<String, Option<String>>,
    pub on_create_commands: Vec<Lifecycle>,
    pub update_content_commands: Vec<Lifecycle>,
    pub post_create_commands: Vec<Lifecycle>,
    pub post_start_commands: Vec<Lifecycle>,
    /// What the image's metadata asks for and the containers capability
    /// never grants: left out.
    pub not_applied: Vec<String>,
}

/// `entries` merged, in order (the image's, then the file).
pub fn merge(entries: Vec<Entry>) -> Merged {
    let mut merged = Merged::default();
    for e in entries {
        merged.remote_user = e.remote_user.or(merged.remote_user);
        merged.container_user = e.container_user.or(merged.container_user);
        merged.update_remote_user_uid = e.update_remote_user_uid.or(merged.update_remote_user_uid);
        merged.container_env.extend(e.container_env);
        merged.remote_env.extend(e.remote_env);
        for (list, command) in [
            (&mut merged.on_create_commands, e.on_create_command),
            (
                &mut merged.update_content_commands,
                e.update_content_command,
            ),
            (&mut merged.post_create_commands, e.post_create_command),
            (&mut merged.post_start_commands, e.post_start_command),
        ] {
            list.extend(command);
        }
        if e.privileged {
            merged.not_applied.push("privileged".into());
        }
        for (key, values) in [("capAdd", e.cap_add), ("securityOpt", e.security_opt)] {
            merged
                .not_applied
                .extend(values.iter().map(|v| format!("{key} {v}")));
        }
        merged
            .not_applied
            .extend(e.mounts.iter().map(|m| format!("mounts {m}")));
    }
    merged
}

impl Merged {
    /// The lifecycle commands run in the sandbox, in the specification's
    /// order, each named by its key (and its place, when a key has more
    /// than one).
    pub fn in_sandbox(&self) -> Vec<(String, &Lifecycle)> {
        let mut out = Vec::new();
        for (key, list) in [
            ("onCreateCommand", &self.on_create_commands),
            ("updateContentCommand", &self.update_content_commands),
            ("postCreateCommand", &self.post_create_commands),
            ("postStartCommand", &self.post_start_commands),
        ] {
            for (i, command) in list.iter().enumerate() {
                let name = match list.len() {
                    1 => key.to_string(),
                    n => format!("{key} {}/{n}", i + 1),
                };
                out.push((name, command));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::spec::HostVars;
    use super::*;

    fn vars() -> Vars<'static> {
        Vars {
            host: Some(HostVars {
                local_env: &|_| None,
                local_workspace_folder: "/src/app",
                container_workspace_folder: "/workspaces/app",
                devcontainer_id: None,
            }),
            container_env: None,
        }
    }

    #[test]
    fn the_file_comes_last_and_commands_are_collected_image_first() {
        let image = image_entries(Some(
            r#"[{"id": "feature"}, {"remoteUser": "vscode", "containerEnv": {"A": "img", "B": "img"},
                 "postCreateCommand": "echo img", "capAdd": ["SYS_PTRACE"]},
                {"remoteEnv": {"R": "${localEnv:HOME}", "S": "${localEnv:NOPE:d}"}}]"#,
        ), &vars())
        .unwrap();
        let file = Entry {
            container_env: BTreeMap::from([("B".into(), "file".into())]),
            post_create_command: Some(Lifecycle::Argv(vec!["echo".into(), "file".into()])),
            container_user: Some("root".into()),
            ..Default::default()
        };
        let merged = merge(image.into_iter().chain([file]).collect());
        assert_eq!(merged.remote_user.as_deref(), Some("vscode"));
        assert_eq!(merged.container_user.as_deref(), Some("root"));
        assert_eq!(merged.container_env["A"], "img");
        assert_eq!(merged.container_env["B"], "file");
        // The image's ${localEnv:...} is not read: its default, else empty.
        assert_eq!(merged.remote_env["R"].as_deref(), Some(""));
        assert_eq!(merged.remote_env["S"].as_deref(), Some("d"));
        assert_eq!(
            merged.post_create_commands,
            vec![
                Lifecycle::Line("echo img".into()),
                Lifecycle::Argv(vec!["echo".into(), "file".into()])
            ]
        );
        let names: Vec<_> = merged.in_sandbox().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["postCreateCommand 1/2", "postCreateCommand 2/2"]);
        assert_eq!(merged.not_applied, ["capAdd SYS_PTRACE"]);
    }

    #[test]
    fn a_label_of_one_entry_or_none_and_a_broken_one() {
        let one = image_entries(Some(r#"{"remoteUser": "node"}"#), &vars()).unwrap();
        assert_eq!(one[0].remote_user.as_deref(), Some("node"));
        assert!(image_entries(None, &vars()).unwrap().is_empty());
        let e = image_entries(Some("[{"), &vars()).unwrap_err();
        assert!(e.contains("not JSON"), "{e}");
    }
}
