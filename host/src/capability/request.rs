//! What a plugin asks for and what the user approves: one type and one
//! syntax for both. A plugin's `describe` lists `capability-request`s
//! (`kind` + `value`); the user approves the same items as `--grant
//! kind=value`; an installed plugin's record keeps them. At run time a
//! plugin gets what it asks for cut down to what was approved.

use serde::{Deserialize, Serialize};

/// How a directory is exposed to a plugin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirectoryAccess {
    #[default]
    None,
    ReadOnly,
    ReadWrite,
}

impl DirectoryAccess {
    pub fn name(self) -> &'static str {
        match self {
            DirectoryAccess::None => "none",
            DirectoryAccess::ReadOnly => "read-only",
            DirectoryAccess::ReadWrite => "read-write",
        }
    }
}

/// A set of capabilities: what a plugin asks for, or what was approved.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Capabilities {
    /// Host programs, by bare name or absolute path.
    #[serde(default)]
    pub programs: Vec<String>,
    #[serde(default)]
    pub scratch_dir: bool,
    #[serde(default)]
    pub worktree: DirectoryAccess,
    /// Origins for outgoing HTTP, `scheme://host[:port]`. Records written
    /// before 0.2 call it `hosts`; nothing was ever granted under it.
    #[serde(default, alias = "hosts")]
    pub http: Vec<String>,
    /// Config options whose URL's origin the plugin may reach (`http-option`:
    /// a cloud API's base URL, which the user may point elsewhere). Left out
    /// of a record when empty, so records without it read as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http_options: Vec<String>,
    #[serde(default)]
    pub env_keys: Vec<String>,
    #[serde(default)]
    pub containers: bool,
    /// The confined Kubernetes namespace (0.5). Left out of a record when
    /// false, so records without it read as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pods: bool,
    /// Programs in a bubblewrap jail the host builds (0.7). Left out of a
    /// record when false, so records without it read as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub jail: bool,
}

/// The syntax of one item, for errors.
pub const ITEM_SYNTAX: &str = "program=NAME, scratch-dir, worktree=read-only|read-write, env=KEY, containers, pods, jail, http=https://HOST[:PORT] or http-option=OPTION";

impl Capabilities {
    /// The set a plugin's requests describe; an unknown kind or a malformed
    /// value is an error naming it.
    pub fn from_requests<'a>(
        requests: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, String> {
        let mut caps = Self::default();
        for (kind, value) in requests {
            caps.add(kind, value)?;
        }
        Ok(caps)
    }

    /// Add one item in the `--grant` syntax: `kind` or `kind=value`.
    pub fn add_item(&mut self, item: &str) -> Result<(), String> {
        let (kind, value) = item.split_once('=').unwrap_or((item, ""));
        self.add(kind, value)
    }

    fn add(&mut self, kind: &str, value: &str) -> Result<(), String> {
        let bad = || {
            format!(
                "`{}` is not a capability: use {ITEM_SYNTAX}",
                item(kind, value)
            )
        };
        match (kind, value) {
            ("program", p) if !p.is_empty() => push_new(&mut self.programs, p),
            ("env", k) if !k.is_empty() => push_new(&mut self.env_keys, k),
            ("http", o) => push_new(
                &mut self.http,
                &check_origin(o).map_err(|e| format!("`http={o}`: {e}"))?,
            ),
            ("http-option", o) if !o.is_empty() => push_new(&mut self.http_options, o),
            ("worktree", "read-only") => {
                self.worktree = self.worktree.max(DirectoryAccess::ReadOnly)
            }
            ("worktree", "read-write") => self.worktree = DirectoryAccess::ReadWrite,
            ("scratch-dir", "") => self.scratch_dir = true,
            ("containers", "") => self.containers = true,
            ("pods", "") => self.pods = true,
            ("jail", "") => self.jail = true,
            (
                "program" | "env" | "worktree" | "scratch-dir" | "containers" | "pods" | "jail"
                | "http-option",
                _,
            ) => {
                return Err(bad());
            }
            _ => {
                return Err(format!(
                    "unknown capability `{kind}`: this sanddune knows {ITEM_SYNTAX}; a newer sanddune may know it"
                ));
            }
        }
        Ok(())
    }

    /// Every item, in the `--grant` syntax.
    pub fn items(&self) -> Vec<String> {
        let mut items: Vec<String> = self.programs.iter().map(|p| item("program", p)).collect();
        if self.scratch_dir {
            items.push("scratch-dir".into());
        }
        if self.worktree != DirectoryAccess::None {
            items.push(item("worktree", self.worktree.name()));
        }
        items.extend(self.env_keys.iter().map(|k| item("env", k)));
        if self.containers {
            items.push("containers".into());
        }
        if self.pods {
            items.push("pods".into());
        }
        if self.jail {
            items.push("jail".into());
        }
        items.extend(self.http.iter().map(|o| item("http", o)));
        items.extend(self.http_options.iter().map(|o| item("http-option", o)));
        items
    }

    pub fn is_empty(&self) -> bool {
        self.items().is_empty()
    }

    /// What `asked` wants beyond this approval, as items; empty when nothing.
    pub fn missing(&self, asked: &Capabilities) -> Vec<String> {
        let have = self.items();
        let mut more: Vec<String> = asked
            .items()
            .into_iter()
            .filter(|i| !have.contains(i))
            .collect();
        // read-write approved covers read-only asked.
        if asked.worktree <= self.worktree {
            more.retain(|i| !i.starts_with("worktree="));
        }
        more
    }

    /// `asked` cut down to this approval: what the plugin really gets.
    pub fn restrict(&self, asked: &Capabilities) -> Capabilities {
        Capabilities {
            programs: keep(&asked.programs, &self.programs),
            scratch_dir: asked.scratch_dir && self.scratch_dir,
            worktree: asked.worktree.min(self.worktree),
            http: keep(&asked.http, &self.http),
            http_options: keep(&asked.http_options, &self.http_options),
            env_keys: keep(&asked.env_keys, &self.env_keys),
            containers: asked.containers && self.containers,
            pods: asked.pods && self.pods,
            jail: asked.jail && self.jail,
        }
    }
}

fn item(kind: &str, value: &str) -> String {
    if value.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}={value}")
    }
}

fn push_new(list: &mut Vec<String>, value: &str) {
    if !list.iter().any(|v| v == value) {
        list.push(value.to_string());
    }
}

fn keep(asked: &[String], approved: &[String]) -> Vec<String> {
    asked
        .iter()
        .filter(|a| approved.contains(a))
        .cloned()
        .collect()
}

/// An origin as a request names it, in its one written form (so
/// `HTTPS://Api.Example.com/` and `https://api.example.com` are one item).
fn check_origin(origin: &str) -> Result<String, String> {
    let origin = origin.strip_suffix('/').unwrap_or(origin);
    super::http::Origin::parse(origin).map(|o| o.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked() -> Capabilities {
        Capabilities::from_requests([
            ("program", "sh"),
            ("program", "git"),
            ("scratch-dir", ""),
            ("worktree", "read-write"),
            ("env", "TOKEN"),
            ("http", "https://api.example.com"),
        ])
        .unwrap()
    }

    #[test]
    fn requests_and_grant_items_are_one_syntax() {
        let caps = asked();
        let mut again = Capabilities::default();
        for i in caps.items() {
            again.add_item(&i).unwrap();
        }
        assert_eq!(again, caps);
        assert_eq!(
            caps.items(),
            [
                "program=sh",
                "program=git",
                "scratch-dir",
                "worktree=read-write",
                "env=TOKEN",
                "http=https://api.example.com"
            ]
        );
    }

    #[test]
    fn an_approval_cuts_requests_down_and_names_what_is_missing() {
        let mut approved = Capabilities::default();
        for g in ["program=sh", "worktree=read-only", "env=TOKEN"] {
            approved.add_item(g).unwrap();
        }
        let got = approved.restrict(&asked());
        assert_eq!(got.programs, ["sh"]);
        assert!(!got.scratch_dir);
        assert_eq!(got.worktree, DirectoryAccess::ReadOnly);
        assert_eq!(got.env_keys, ["TOKEN"]);
        assert!(got.http.is_empty());
        assert_eq!(
            approved.missing(&asked()),
            [
                "program=git",
                "scratch-dir",
                "worktree=read-write",
                "http=https://api.example.com"
            ]
        );
        assert!(asked().missing(&asked()).is_empty());
    }

    #[test]
    fn bad_items_are_refused_with_the_reason() {
        let table: &[(&str, &str)] = &[
            ("programs=sh", "unknown capability `programs`"),
            ("program", "`program` is not a capability"),
            ("worktree=all", "`worktree=all` is not a capability"),
            ("containers=yes", "`containers=yes` is not a capability"),
            ("http=api.example.com", "no scheme"),
            ("http=https://api.example.com/v1", "no path"),
            ("http=https://user@api.example.com", "no user info"),
            (
                "http=http://api.example.com",
                "plain http is allowed only for localhost",
            ),
            ("gpu=1", "a newer sanddune may know it"),
        ];
        for (item, expected) in table {
            let err = Capabilities::default().add_item(item).unwrap_err();
            assert!(err.contains(expected), "{item}: {err}");
        }
    }

    #[test]
    fn origins_are_normalised() {
        let mut caps = Capabilities::default();
        caps.add_item("http=HTTPS://Api.Example.com/").unwrap();
        caps.add_item("http=https://api.example.com").unwrap();
        assert_eq!(caps.http, ["https://api.example.com"]);
    }

    #[test]
    fn records_from_before_0_2_still_read() {
        let old = "programs = [\"sh\"]\nscratch-dir = true\nworktree = \"none\"\nhosts = []\nenv-keys = []\ncontainers = false\n";
        let caps: Capabilities = toml::from_str(old).unwrap();
        assert_eq!(caps.programs, ["sh"]);
        assert!(caps.scratch_dir);
    }

    #[test]
    fn http_option_names_a_config_option() {
        let caps =
            Capabilities::from_requests([("http-option", "api-url"), ("scratch-dir", "")]).unwrap();
        assert_eq!(caps.http_options, ["api-url"]);
        assert_eq!(caps.items(), ["scratch-dir", "http-option=api-url"]);
        assert!(Capabilities::from_requests([("http-option", "")]).is_err());
        let none = Capabilities::default();
        assert_eq!(none.missing(&caps), ["scratch-dir", "http-option=api-url"]);
        assert!(none.restrict(&caps).http_options.is_empty());
        let mut approved = Capabilities::default();
        approved.add_item("http-option=api-url").unwrap();
        assert_eq!(approved.restrict(&caps).http_options, ["api-url"]);
    }
}
