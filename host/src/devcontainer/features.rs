//! Local dev container features (`"features": {"./path": {...}}`), installed
//! as the Dev Container features specification says: each folder's
//! `install.sh` run as root in a derived image, with its options as env
//! vars, in `dependsOn`/`installsAfter` order; its `containerEnv` in the
//! image's ENV and its metadata appended to the image's
//! `devcontainer.metadata` label, so it merges between the base image's
//! entries and the file, as the Dev Containers CLI merges it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use bollard::Docker;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::image::{self, Image};
use super::jsonc;
use super::spec::quote;
use crate::error::{Error, Result};

/// A feature's metadata that goes into the image's label (the CLI's
/// `pickFeatureProperties`); `containerEnv` goes into ENV instead.
const METADATA: [&str; 13] = [
    "id",
    "init",
    "privileged",
    "capAdd",
    "securityOpt",
    "entrypoint",
    "mounts",
    "customizations",
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
    "postStartCommand",
    "postAttachCommand",
];

/// One local feature, read from its folder.
pub struct Feature {
    /// The key as the file writes it (`./local-features/x`).
    key: String,
    folder: PathBuf,
    id: String,
    /// Its options as env vars: the user's values over the defaults.
    options: BTreeMap<String, String>,
    /// Ids (or keys) of features it comes after if the file names them
    /// (`installsAfter`).
    after: Vec<String>,
    /// Those it cannot do without (`dependsOn`): missing ones are an error.
    depends_on: Vec<String>,
    container_env: BTreeMap<String, String>,
    metadata: Map<String, Value>,
}

/// An option's env var name, as the specification makes it.
fn env_name(option: &str) -> String {
    let word: String = option
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let rest = word.trim_start_matches(|c: char| c.is_ascii_digit() || c == '_');
    let name = if rest.len() < word.len() {
        format!("_{rest}")
    } else {
        word
    };
    name.to_ascii_uppercase()
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The local features the devcontainer.json at `path` (in the repository at
/// `root`) names in `features`, in the order they install. `text` is the
/// file's text: its keys' order breaks ties (a JSON map here is sorted). A
/// folder outside the repository, or without `install.sh` or a readable
/// `devcontainer-feature.json`, is an error naming it.
pub fn read(
    root: &Path,
    path: &Path,
    text: &str,
    features: &BTreeMap<String, Value>,
) -> Result<Vec<Feature>> {
    let dir = path.parent().unwrap_or(root);
    let refuse = |key: &str, why: String| {
        Error::input(format!(
            "{}: the feature {key} {why}; nothing was created",
            path.display()
        ))
    };
    let mut keys: Vec<&String> = features.keys().collect();
    keys.sort_by_key(|k| text.find(&format!("\"{k}\"")));
    let mut read = Vec::new();
    for key in keys {
        let folder = dir.join(key);
        if !crate::repo_path::inside(root, &folder) {
            return Err(refuse(
                key,
                format!(
                    "is outside the repository ({}): only a folder in it is installed",
                    root.display()
                ),
            ));
        }
        if !folder.join("install.sh").is_file() {
            return Err(refuse(
                key,
                format!("has no install.sh in {}", folder.display()),
            ));
        }
        let json = folder.join("devcontainer-feature.json");
        let meta: Map<String, Value> = std::fs::read_to_string(&json)
            .map_err(|e| e.to_string())
            .and_then(|t| {
                let t = t.strip_prefix('\u{feff}').unwrap_or(&t).to_string();
                serde_json::from_str(&jsonc::to_json(&t)).map_err(|e| e.to_string())
            })
            .map_err(|e| refuse(key, format!("has no valid {}: {e}", json.display())))?;
        let Some(id) = meta.get("id").and_then(Value::as_str).map(String::from) else {
            return Err(refuse(key, format!("{} has no id", json.display())));
        };
        // Defaults, then the user's values (a non-object asks for the
        // defaults).
        let mut options = BTreeMap::new();
        if let Some(Value::Object(declared)) = meta.get("options") {
            for (name, option) in declared {
                if let Some(default) = option.get("default") {
                    options.insert(env_name(name), scalar(default));
                }
            }
        }
        if let Some(Value::Object(given)) = features.get(key) {
            for (name, value) in given {
                options.insert(env_name(name), scalar(value));
            }
        }
        let depends_on: Vec<String> = match meta.get("dependsOn") {
            Some(Value::Object(deps)) => deps.keys().cloned().collect(),
            _ => vec![],
        };
        let after = match meta.get("installsAfter") {
            Some(Value::Array(ids)) => ids
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            _ => vec![],
        };
        let container_env = match meta.get("containerEnv") {
            Some(Value::Object(env)) => env.iter().map(|(k, v)| (k.clone(), scalar(v))).collect(),
            _ => BTreeMap::new(),
        };
        let metadata = meta
            .iter()
            .filter(|(k, _)| METADATA.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        read.push(Feature {
            key: key.clone(),
            folder,
            id,
            options,
            after,
            depends_on,
            container_env,
            metadata,
        });
    }
    order(read)
        .map_err(|why| Error::input(format!("{}: {why}; nothing was created", path.display())))
}

/// `features` in install order: each after those it names in `dependsOn`
/// and `installsAfter` (by id or key; one the file does not name is not
/// waited for), else in the file's order.
fn order(mut features: Vec<Feature>) -> std::result::Result<Vec<Feature>, String> {
    let named = |f: &Feature, name: &str| f.id == name || f.key == name;
    for f in &features {
        if let Some(missing) = f
            .depends_on
            .iter()
            .find(|d| !features.iter().any(|g| named(g, d)))
        {
            return Err(format!(
                "the feature {} dependsOn {missing}, which the file does not name (sanddune installs only local features)",
                f.key
            ));
        }
    }
    // In rounds, as the specification orders them: each round installs,
    // in the file's order, every feature whose predecessors are done.
    let mut ordered: Vec<Feature> = Vec::new();
    while !features.is_empty() {
        let waits: Vec<bool> = features
            .iter()
            .map(|f| {
                (f.depends_on.iter().chain(&f.after)).any(|a| features.iter().any(|g| named(g, a)))
            })
            .collect();
        if waits.iter().all(|w| *w) {
            let keys: Vec<&str> = features.iter().map(|f| f.key.as_str()).collect();
            return Err(format!(
                "the features {} wait for each other (dependsOn/installsAfter)",
                keys.join(", ")
            ));
        }
        let (round, rest): (Vec<_>, Vec<_>) = features
            .into_iter()
            .zip(waits)
            .partition(|(_, waits)| !waits);
        ordered.extend(round.into_iter().map(|(f, _)| f));
        features = rest.into_iter().map(|(f, _)| f).collect();
    }
    Ok(ordered)
}

/// Who the features install for (the CLI's `_REMOTE_USER` and friends).
pub struct Users {
    pub remote: String,
    pub container: String,
}

/// `base` with `features` installed, built once: tagged by the base's id,
/// the build file and the features' folders.
pub async fn install(
    docker: &Docker,
    base: &Image,
    features: &[Feature],
    users: &Users,
    repo: &str,
) -> Result<Image> {
    let mut homes = Vec::new();
    for user in [&users.remote, &users.container] {
        let account = image::account(docker, &base.name, user).await?;
        homes.push(account.map(|a| a.home).unwrap_or_default());
    }
    let builtin = [
        ("_REMOTE_USER", users.remote.clone()),
        ("_REMOTE_USER_HOME", homes[0].clone()),
        ("_CONTAINER_USER", users.container.clone()),
        ("_CONTAINER_USER_HOME", homes[1].clone()),
    ];
    let context = tempfile::tempdir().map_err(|e| Error::Other(e.into()))?;
    let mut dockerfile = format!("FROM {}\nUSER root\n", base.name);
    let mut entries: Vec<Value> = match base.metadata.as_deref().map(serde_json::from_str) {
        Some(Ok(Value::Array(entries))) => entries,
        Some(Ok(entry)) => vec![entry],
        Some(Err(e)) => {
            return Err(Error::input(format!(
                "the image {}: its {} label is not JSON: {e}",
                base.name,
                super::merge::LABEL
            )));
        }
        None => vec![],
    };
    // The content decides the tag: the base's id, the build file, and
    // each folder as packed from the repository (a touched file rebuilds).
    let mut hash = Sha256::new();
    for (i, f) in features.iter().enumerate() {
        let packed = copy_folder(&f.folder, &context.path().join(format!("f{i}")))
            .map_err(|e| Error::input(format!("cannot read the feature {}: {e}", f.key)))?;
        hash.update(&packed);
        let env: Vec<String> = builtin
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .chain(f.options.clone())
            .map(|(k, v)| format!("{k}={}", quote(&v)))
            .collect();
        // Before its install.sh, which sees it, as the Dev Containers CLI
        // writes it: `"` and `\` escaped, `${VAR}` expanded (features that
        // extend PATH expect it).
        for (k, v) in &f.container_env {
            let v = v.replace('\\', "\\\\").replace('"', "\\\"");
            dockerfile.push_str(&format!("ENV {k}=\"{v}\"\n"));
        }
        dockerfile.push_str(&format!(
            "COPY f{i} /tmp/sanddune-features/f{i}\n\
             RUN cd /tmp/sanddune-features/f{i} && chmod +x install.sh && env {} ./install.sh\n",
            env.join(" ")
        ));
        entries.push(Value::Object(f.metadata.clone()));
    }
    let label = serde_json::to_string(&entries).map_err(|e| Error::Other(e.into()))?;
    // LABEL would substitute the entries' ${...}.
    let label = label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('$', "\\$");
    dockerfile.push_str(&format!(
        "RUN rm -rf /tmp/sanddune-features\nUSER {}\nLABEL {}=\"{label}\"\n",
        if base.user.is_empty() {
            "root"
        } else {
            &base.user
        },
        super::merge::LABEL
    ));
    let tar = crate::image_build::pack(&dockerfile, Some(context.path())).await?;
    let id = docker
        .inspect_image(&base.name)
        .await
        .map_err(|e| Error::Plugin(format!("cannot inspect image {}: {e}", base.name)))?
        .id
        .unwrap_or_default();
    hash.update(format!("\0{id}\0{dockerfile}"));
    let name = image::tag(repo, "features", &hash.finalize());
    let keys: Vec<&str> = features.iter().map(|f| f.key.as_str()).collect();
    let from = format!("{} with the features {}", base.name, keys.join(", "));
    image::build_once(docker, &name, tar, &HashMap::new(), None, &from).await
}

/// `from` copied to `to`, symlinks as symlinks (none is followed out of
/// the repository), modes and times kept; returns it packed.
fn copy_folder(from: &Path, to: &Path) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    tar.follow_symlinks(false);
    tar.append_dir_all(".", from)?;
    let bytes = tar.into_inner()?;
    std::fs::create_dir_all(to)?;
    tar::Archive::new(bytes.as_slice()).unpack(to)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_names_become_env_names_as_the_specification_says() {
        assert_eq!(env_name("version"), "VERSION");
        assert_eq!(env_name("install-tools.now"), "INSTALL_TOOLS_NOW");
        assert_eq!(env_name("3d_mode"), "_D_MODE");
        assert_eq!(env_name("_x"), "_X");
    }

    fn feature(key: &str, id: &str, after: &[&str], depends_on: &[&str]) -> Feature {
        Feature {
            key: key.into(),
            folder: PathBuf::new(),
            id: id.into(),
            options: BTreeMap::new(),
            after: after.iter().map(|s| s.to_string()).collect(),
            depends_on: depends_on.iter().map(|s| s.to_string()).collect(),
            container_env: BTreeMap::new(),
            metadata: Map::new(),
        }
    }

    #[test]
    fn features_install_after_what_they_name_else_in_the_files_order() {
        let keys = |fs: Vec<Feature>| fs.into_iter().map(|f| f.key).collect::<Vec<_>>();
        let fs = vec![
            feature("./a", "a", &["b", "ghcr.io/elsewhere"], &[]),
            feature("./b", "b", &[], &[]),
            feature("./c", "c", &[], &["./a"]),
            feature("./d", "d", &[], &[]),
        ];
        // Round one: b and d; two: a; three: c.
        assert_eq!(keys(order(fs).unwrap()), ["./b", "./d", "./a", "./c"]);
        let e = order(vec![feature("./a", "a", &[], &["x"])]).err().unwrap();
        assert!(e.contains("dependsOn x"), "{e}");
        let cycle = vec![
            feature("./a", "a", &["b"], &[]),
            feature("./b", "b", &["a"], &[]),
        ];
        let e = order(cycle).err().unwrap();
        assert!(e.contains("./a, ./b wait for each other"), "{e}");
    }
}
