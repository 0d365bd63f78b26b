//! The dev container's image: `image` as it is, or `build` built once per
//! content (tagged by a hash of the build file, context, args and target,
//! so an unchanged one is never rebuilt), then, when the remote user's
//! UID/GID are not the host user's, a small derived image that changes
//! them (the Dev Containers CLI's `updateRemoteUserUID`).

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;

use bollard::Docker;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{DownloadFromContainerOptions, RemoveContainerOptionsBuilder};
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::spec::{DevContainer, quote};
use crate::capability::containers;
use crate::error::{Error, Result};
use crate::image_build;

/// The repository images sanddune builds for dev containers.
const REPOSITORY: &str = "sanddune-devcontainer";

/// What the image is and says about itself.
pub struct Image {
    pub name: String,
    /// `Config.User`, empty for root.
    pub user: String,
    /// `Config.Env` as a map, for `${containerEnv:VAR}`.
    pub env: BTreeMap<String, String>,
    /// Its `devcontainer.metadata` label (a built image inherits its
    /// base's).
    pub metadata: Option<String>,
}

/// An image name that never collides: `sanddune-devcontainer:<repo>-<what>-<hash>`.
pub(super) fn tag(repo: &str, what: &str, hash: &[u8]) -> String {
    let repo: String = repo
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '.' | '_' | '-') => c,
            _ => '-',
        })
        .collect();
    let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{REPOSITORY}:{}-{what}-{hex}",
        repo.trim_start_matches(['.', '-'])
    )
}

/// The image, or None when the engine does not have it.
async fn inspect(docker: &Docker, name: &str) -> Result<Option<Image>> {
    match docker.inspect_image(name).await {
        Ok(image) => {
            let config = image.config.unwrap_or_default();
            let env = config
                .env
                .unwrap_or_default()
                .iter()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let metadata = config
                .labels
                .and_then(|mut labels| labels.remove(super::merge::LABEL));
            Ok(Some(Image {
                name: name.to_string(),
                user: config.user.unwrap_or_default(),
                env,
                metadata,
            }))
        }
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(e) => Err(Error::Plugin(format!("cannot inspect image {name}: {e}"))),
    }
}

/// Build `dockerfile` with `context` as `name`, unless it exists; errors
/// carry the build's last lines of output.
pub(super) async fn build_once(
    docker: &Docker,
    name: &str,
    tar: Vec<u8>,
    args: &HashMap<String, String>,
    target: Option<&str>,
    from: &str,
) -> Result<Image> {
    if let Some(image) = inspect(docker, name).await? {
        return Ok(image);
    }
    eprintln!("sanddune: building dev container image {name} from {from}");
    let mut tail: Vec<String> = Vec::new();
    let mut progress = |text: &str| {
        tail.extend(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(String::from),
        );
        let excess = tail.len().saturating_sub(10);
        tail.drain(..excess);
    };
    if let Err(e) = image_build::build(docker, name, tar, args, target, &mut progress).await {
        return Err(Error::input(format!(
            "{e} (building {from}); its last output:\n{}",
            tail.join("\n")
        )));
    }
    inspect(docker, name)
        .await?
        .ok_or_else(|| Error::Plugin(format!("{name} was built but is not there")))
}

/// The devcontainer.json's image: `image` must be in the engine already (a
/// run never pulls); `build` is built from `dir` (the file's folder).
pub async fn base(
    docker: &Docker,
    dc: &DevContainer,
    dir: &Path,
    repo: &str,
    engine: &str,
) -> Result<Image> {
    let Some(dockerfile) = dc.dockerfile() else {
        let name = dc.image.clone().expect("parse checked image or dockerfile");
        return inspect(docker, &name).await?.ok_or_else(|| {
            Error::input(format!(
                "the dev container's image `{name}` is not in {engine}: pull it (`{engine} pull {name}`) or give the devcontainer.json a build.dockerfile (a run never pulls); nothing was created"
            ))
        });
    };
    let path = dir.join(dockerfile);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::input(format!(
            "the dev container's build.dockerfile {}: {e}",
            path.display()
        ))
    })?;
    let context = dir.join(dc.context());
    if !context.is_dir() {
        return Err(Error::input(format!(
            "the dev container's build.context {} is not a directory",
            context.display()
        )));
    }
    let tar = image_build::pack(&text, Some(&context)).await?;
    let build = dc.build.as_ref();
    let args: HashMap<String, String> = build
        .map(|b| b.args.clone().into_iter().collect())
        .unwrap_or_default();
    let target = build.and_then(|b| b.target.as_deref());
    // The content decides the tag: the packed context (build file inside),
    // the args in order, the target, and the id of each image it builds
    // FROM (a changed base rebuilds).
    let mut hash = Sha256::new();
    hash.update(&tar);
    for from in from_images(&text, &args) {
        let id = match docker.inspect_image(&from).await {
            Ok(image) => image.id.unwrap_or_default(),
            Err(_) => "absent".into(),
        };
        hash.update(format!("\0FROM {from}@{id}"));
    }
    for (k, v) in build.map(|b| &b.args).into_iter().flatten() {
        hash.update(format!("\0{k}={v}"));
    }
    hash.update(format!("\0target={}", target.unwrap_or_default()));
    let name = tag(repo, "build", &hash.finalize());
    build_once(
        docker,
        &name,
        tar,
        &args,
        target,
        &path.display().to_string(),
    )
    .await
}

/// The images a Dockerfile builds FROM (not its own stages, not
/// `scratch`), their `$ARG`s filled from the build args, else the ARG's
/// default before the first FROM.
fn from_images(dockerfile: &str, args: &HashMap<String, String>) -> Vec<String> {
    let mut defaults: HashMap<String, String> = HashMap::new();
    let mut stages: Vec<String> = Vec::new();
    let mut images = Vec::new();
    let mut seen_from = false;
    for line in dockerfile.lines().map(str::trim) {
        let mut words = line.split_whitespace();
        let Some(instruction) = words.next() else {
            continue;
        };
        if instruction.eq_ignore_ascii_case("ARG") && !seen_from {
            if let Some((k, v)) = words.next().and_then(|a| a.split_once('=')) {
                defaults.insert(k.into(), v.trim_matches('"').into());
            }
        } else if instruction.eq_ignore_ascii_case("FROM") {
            seen_from = true;
            let words: Vec<&str> = words.filter(|w| !w.starts_with("--")).collect();
            let Some(image) = words.first() else { continue };
            let mut image = image.to_string();
            let mut values = defaults.clone();
            values.extend(args.iter().map(|(k, v)| (k.clone(), v.clone())));
            for (k, v) in &values {
                image = image
                    .replace(&format!("${{{k}}}"), v)
                    .replace(&format!("${k}"), v);
            }
            if !image.eq_ignore_ascii_case("scratch") && !stages.contains(&image) {
                images.push(image);
            }
            if let [_, as_, stage] = words[..]
                && as_.eq_ignore_ascii_case("AS")
            {
                stages.push(stage.to_string());
            }
        }
    }
    images
}

/// A user's entry in the image's /etc/passwd.
pub struct Account {
    pub uid: u32,
    pub gid: u32,
    pub home: String,
}

/// `user` (a name or a UID, perhaps with `:group`) in `image`'s
/// /etc/passwd, read from a container that is created, never started.
pub async fn account(docker: &Docker, image: &str, user: &str) -> Result<Option<Account>> {
    let who = user.split(':').next().unwrap_or(user);
    let passwd = read_file(docker, image, "/etc/passwd").await?;
    Ok(passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 6 && (f[0] == who || f[2] == who))
        .and_then(|f| {
            Some(Account {
                uid: f[2].parse().ok()?,
                gid: f[3].parse().ok()?,
                home: f[5].to_string(),
            })
        }))
}

async fn read_file(docker: &Docker, image: &str, path: &str) -> Result<String> {
    let fail = |e: bollard::errors::Error| {
        Error::Plugin(format!("cannot read {path} of image {image}: {e}"))
    };
    // Labelled as this process's, so `sanddune gc` removes it if a crash
    // leaves it behind.
    let labels = HashMap::from([
        (containers::OWNER_LABEL.to_string(), containers::owner_id()),
        (
            containers::PLUGIN_LABEL.to_string(),
            "devcontainer".to_string(),
        ),
    ]);
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        entrypoint: Some(vec!["true".into()]),
        labels: Some(labels),
        ..Default::default()
    };
    let id = docker.create_container(None, body).await.map_err(fail)?.id;
    let mut tar = Vec::new();
    let mut stream = docker.download_from_container(
        &id,
        Some(DownloadFromContainerOptions { path: path.into() }),
    );
    let mut failed = None;
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => tar.extend_from_slice(&bytes),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    drop(stream);
    let remove = RemoveContainerOptionsBuilder::default().force(true).build();
    let _ = docker.remove_container(&id, Some(remove)).await;
    if let Some(e) = failed {
        return Err(fail(e));
    }
    let mut archive = tar::Archive::new(tar.as_slice());
    let mut text = String::new();
    if let Some(entry) = archive
        .entries()
        .map_err(|e| Error::Other(e.into()))?
        .next()
    {
        entry
            .map_err(|e| Error::Other(e.into()))?
            .read_to_string(&mut text)
            .map_err(|e| Error::Other(e.into()))?;
    }
    Ok(text)
}

/// `base` with `user`'s UID/GID changed to `uid:gid` and its home chowned,
/// built once (tagged by the base's id, the user and the ids). /etc/passwd
/// and /etc/group are edited with awk, so images without usermod work too;
/// `-o` semantics: another user may share the ids.
pub async fn with_ids(
    docker: &Docker,
    base: &Image,
    user: &str,
    uid: u32,
    gid: u32,
    repo: &str,
) -> Result<Image> {
    let id = docker
        .inspect_image(&base.name)
        .await
        .map_err(|e| Error::Plugin(format!("cannot inspect image {}: {e}", base.name)))?
        .id
        .unwrap_or_default();
    let who = user.split(':').next().unwrap_or(user);
    let dockerfile = format!(
        "FROM {base}\nUSER root\nRUN {script}\nUSER {user}\nLABEL sanddune.agent-ids=\"{uid}:{gid}\"\n",
        base = base.name,
        script = ids_script(who, uid, gid),
        user = if base.user.is_empty() {
            "root"
        } else {
            &base.user
        },
    );
    let mut hash = Sha256::new();
    hash.update(format!("{id}\0{dockerfile}"));
    let name = tag(repo, "uid", &hash.finalize());
    let tar = image_build::pack(&dockerfile, None).await?;
    let from = format!("{} with {who} as UID:GID {uid}:{gid}", base.name);
    build_once(docker, &name, tar, &HashMap::new(), None, &from).await
}

/// The shell step that gives `user` the ids and its home to them.
fn ids_script(user: &str, uid: u32, gid: u32) -> String {
    let script = r#"set -e
u="$1"; uid="$2"; gid="$3"
old_gid=$(awk -F: -v u="$u" '$1==u {print $4}' /etc/passwd)
home=$(awk -F: -v u="$u" '$1==u {print $6}' /etc/passwd)
[ -n "$old_gid" ] || { echo "no user $u in /etc/passwd" >&2; exit 1; }
awk -F: -v OFS=: -v u="$u" -v uid="$uid" -v gid="$gid" '$1==u {$3=uid; $4=gid} {print}' /etc/passwd > /tmp/passwd
awk -F: -v OFS=: -v g="$old_gid" -v gid="$gid" '$3==g {$3=gid} {print}' /etc/group > /tmp/group
cat /tmp/passwd > /etc/passwd; cat /tmp/group > /etc/group; rm -f /tmp/passwd /tmp/group
if [ -d "$home" ]; then chown -R "$uid:$gid" "$home"; fi"#;
    // One line: a Dockerfile's RUN ends at the newline.
    let script = script.lines().collect::<Vec<_>>().join("; ");
    format!("sh -c {} sh {} {uid} {gid}", quote(&script), quote(user))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_images_built_from_are_found_with_their_args() {
        let dockerfile = "ARG VARIANT=3.12\nARG BASE\nFROM --platform=linux/amd64 python:${VARIANT} AS build\nRUN x\nfrom build as final\nFROM $BASE\nFROM scratch\n";
        let args = HashMap::from([("BASE".to_string(), "debian:12".to_string())]);
        assert_eq!(from_images(dockerfile, &args), ["python:3.12", "debian:12"]);
        let args = HashMap::from([("VARIANT".to_string(), "3.13".to_string())]);
        assert_eq!(from_images(dockerfile, &args)[0], "python:3.13");
    }

    #[test]
    fn tags_are_valid_image_names() {
        let name = tag(".My Repo", "build", &[0xab; 32]);
        assert_eq!(name, "sanddune-devcontainer:my-repo-build-abababababababab");
    }

    #[test]
    fn the_ids_script_edits_passwd_and_group() {
        let dir = tempfile::tempdir().unwrap();
        let etc = dir.path();
        std::fs::write(
            etc.join("passwd"),
            "root:x:0:0:root:/root:/bin/sh\ndev:x:1000:1000::/nonexistent:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(etc.join("group"), "root:x:0:\ndev:x:1000:\n").unwrap();
        // The RUN line's script, pointed at the temporary files.
        // /tmp first: the temporary directory is under it.
        let line = ids_script("dev", 4242, 4343)
            .replace("/tmp/", &format!("{}/new-", etc.display()))
            .replace("/etc/", &format!("{}/", etc.display()));
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(&line)
            .status()
            .unwrap();
        assert!(status.success());
        let passwd = std::fs::read_to_string(etc.join("passwd")).unwrap();
        assert!(
            passwd.contains("dev:x:4242:4343::/nonexistent:/bin/sh"),
            "{passwd}"
        );
        assert!(passwd.starts_with("root:x:0:0:"), "{passwd}");
        let group = std::fs::read_to_string(etc.join("group")).unwrap();
        assert_eq!(group, "root:x:0:\ndev:x:4343:\n");
    }
}
