//! The workflow file: `.sanddune/workflows/<name>.toml`, camelCase keys like
//! `.sanddune/config.toml`. Everything that can be wrong with it is refused
//! when it is loaded, naming the line or the step and key, before any
//! worktree or sandbox exists.
//!
//! ```toml
//! description = "Plan, implement each issue on its own branch, land them"
//!
//! [args]                       # defaults; --arg KEY=VALUE overrides
//! LABEL = "sanddune"
//!
//! [defaults]                   # every agent run, unless its step says otherwise
//! sandbox = "docker"
//! agent = "claude-code"
//!
//! [[steps]]
//! name = "plan"
//! promptFile = "prompts/plan.md"          # relative to .sanddune/
//! promptArgs = { LABEL = "{{args.LABEL}}" }
//! output = { tag = "plan", schemaFile = "plan.schema.json" }
//!
//! [[steps]]
//! name = "implement"
//! forEach = "plan.issues"                 # one branch per item
//! branch = "{{item.branch}}"
//! promptFile = "prompts/implement.md"
//! promptArgs = { TASK_ID = "{{item.id}}" }
//! maxIterations = 20
//!
//!   [[steps.then]]                        # then, in the same sandbox
//!   name = "review"
//!   promptFile = "prompts/review.md"
//!
//! [[steps]]
//! name = "land"
//! merge = "implement"                     # the merge queue
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::WORKFLOWS_DIR;
use super::refs::{self, RESERVED};
use super::{
    AgentRun, AgentStep, BestOfStep, Defaults, RunPrompt, Step, StepKind, StepStrategy, Workflow,
    best_of,
};
use crate::error::{Error, Result};
use crate::run::PushTo;
use crate::run::structured::StructuredOutput;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileWorkflow {
    #[serde(default)]
    description: String,
    #[serde(default)]
    args: BTreeMap<String, String>,
    #[serde(default)]
    defaults: FileDefaults,
    #[serde(default)]
    steps: Vec<FileStep>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileDefaults {
    sandbox: Option<String>,
    agent: Option<String>,
    model: Option<String>,
    max_iterations: Option<u32>,
    #[serde(default)]
    sandbox_options: BTreeMap<String, String>,
    #[serde(default)]
    agent_options: BTreeMap<String, String>,
}

// No deny_unknown_fields: serde ignores it with flatten; FileRun catches them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileStep {
    name: Spanned<String>,
    merge: Option<Spanned<String>>,
    for_each: Option<Spanned<String>>,
    branch: Option<Spanned<String>>,
    strategy: Option<Spanned<String>>,
    sandbox: Option<String>,
    #[serde(default)]
    sandbox_options: BTreeMap<String, String>,
    #[serde(flatten)]
    run: FileRun,
    #[serde(default)]
    then: Vec<FileThen>,
    best_of: Option<FileBestOf>,
    push: Option<FilePush>,
}

/// `push = true` (the default remote) or `push = "REMOTE"`.
#[derive(Deserialize)]
#[serde(untagged)]
enum FilePush {
    On(bool),
    Remote(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileBestOf {
    candidates: Option<usize>,
    #[serde(default)]
    agents: Vec<String>,
    #[serde(default)]
    models: Vec<String>,
    check: Option<String>,
    check_timeout_seconds: Option<u64>,
    tie_break: Option<String>,
    judge: Option<FileJudge>,
    #[serde(default)]
    discard_losers: bool,
    timeout_seconds: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileJudge {
    agent: Option<String>,
    model: Option<String>,
    prompt: Option<String>,
}

/// The agent run of a step: flattened into it, so unknown keys are caught
/// by [`check_keys`] instead of serde.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileRun {
    agent: Option<String>,
    model: Option<String>,
    prompt: Option<String>,
    prompt_file: Option<String>,
    #[serde(default)]
    prompt_args: BTreeMap<String, String>,
    max_iterations: Option<u32>,
    idle_timeout_seconds: Option<u64>,
    #[serde(default)]
    completion_signals: Vec<String>,
    #[serde(default)]
    agent_options: BTreeMap<String, String>,
    output: Option<FileOutput>,
    /// Everything else: unknown keys.
    #[serde(flatten)]
    unknown: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
struct FileThen {
    name: Spanned<String>,
    #[serde(flatten)]
    run: FileRun,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileOutput {
    tag: String,
    schema_file: String,
}

const RUN_KEYS: &str = "agent, model, prompt, promptFile, promptArgs, maxIterations, idleTimeoutSeconds, completionSignals, agentOptions, output";

/// The workflows of a repository: (name, description), by name.
pub fn list(repo_root: &Path) -> Result<Vec<(String, String)>> {
    let dir = repo_root.join(WORKFLOWS_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(Error::input(format!("cannot read {}: {e}", dir.display()))),
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "toml")
            && let Some(name) = path.file_stem().and_then(|s| s.to_str())
        {
            let description = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| toml::from_str::<toml::Table>(&t).ok())
                .and_then(|t| t.get("description")?.as_str().map(String::from))
                .unwrap_or_default();
            found.push((name.to_string(), description));
        }
    }
    found.sort();
    Ok(found)
}

/// Load `.sanddune/workflows/<name>.toml`; without a name, the only one.
pub fn load(repo_root: &Path, name: Option<&str>) -> Result<Workflow> {
    let known = list(repo_root)?;
    let names = || {
        known
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let name = match name {
        Some(name) => name.to_string(),
        None => match known.as_slice() {
            [] => {
                return Err(Error::input(format!(
                    "no workflows in {}: run `sanddune init` or write one",
                    repo_root.join(WORKFLOWS_DIR).display()
                )));
            }
            [(only, _)] => only.clone(),
            _ => {
                return Err(Error::input(format!(
                    "{} workflows here; name one: {}",
                    known.len(),
                    names()
                )));
            }
        },
    };
    let path = repo_root.join(WORKFLOWS_DIR).join(format!("{name}.toml"));
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::input(format!(
                "no workflow `{name}` in {} (have: {})",
                repo_root.join(WORKFLOWS_DIR).display(),
                if known.is_empty() {
                    "none".into()
                } else {
                    names()
                }
            )));
        }
        Err(e) => return Err(Error::input(format!("cannot read {}: {e}", path.display()))),
    };
    parse(&text, &name, &path, &repo_root.join(".sanddune"))
}

/// Parse and check a workflow file. `dir` is where its relative files live.
pub fn parse(text: &str, name: &str, path: &Path, dir: &Path) -> Result<Workflow> {
    let bad = |msg: String| Error::input(format!("{}: {msg}", path.display()));
    let file: FileWorkflow = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
    let line =
        |at: std::ops::Range<usize>| text[..at.start.min(text.len())].matches('\n').count() + 1;
    if file.steps.is_empty() {
        return Err(bad("no steps: add at least one [[steps]]".into()));
    }
    for key in file.args.keys() {
        check_name(key).map_err(|e| bad(format!("[args] {e}")))?;
    }
    let mut steps: Vec<Step> = Vec::new();
    // Steps whose structured output later steps may read.
    let mut outputs: Vec<String> = Vec::new();
    for s in file.steps {
        let name = s.name.get_ref().clone();
        let at = |span: std::ops::Range<usize>| format!("line {}, step `{name}`", line(span));
        let here = at(s.name.span());
        check_name(&name).map_err(|e| bad(format!("{here}: {e}")))?;
        if RESERVED.contains(&name.as_str()) {
            return Err(bad(format!(
                "{here}: `{name}` is reserved for value references; name the step otherwise"
            )));
        }
        if steps.iter().any(|p| p.name == name) {
            return Err(bad(format!("{here}: a second step named `{name}`")));
        }
        if let Some(from) = &s.merge {
            let here = at(from.span());
            let is_merge_only = s.for_each.is_none()
                && s.branch.is_none()
                && s.strategy.is_none()
                && s.sandbox.is_none()
                && s.sandbox_options.is_empty()
                && s.then.is_empty()
                && s.best_of.is_none()
                && s.run.is_empty();
            if !is_merge_only {
                return Err(bad(format!(
                    "{here}: a merge step takes only `name` and `merge`"
                )));
            }
            let target = steps.iter().find(|p| p.name == *from.get_ref());
            match target.map(|p| &p.kind) {
                Some(StepKind::Agent(a)) if a.for_each.is_some() => {}
                Some(_) => {
                    return Err(bad(format!(
                        "{here}: merge = \"{}\": only a step with forEach has branches to merge",
                        from.get_ref()
                    )));
                }
                None => {
                    return Err(bad(format!(
                        "{here}: merge = \"{}\": no earlier step has that name (earlier: {})",
                        from.get_ref(),
                        names_of(&steps)
                    )));
                }
            }
            steps.push(Step {
                name,
                kind: StepKind::Merge {
                    from: from.get_ref().clone(),
                },
            });
            continue;
        }
        if let Some(for_each) = &s.for_each {
            let root = for_each.get_ref().split('.').next().unwrap_or_default();
            if !outputs.iter().any(|o| o == root) {
                return Err(bad(format!(
                    "{}: forEach = \"{}\": `{root}` is not an earlier step with an output (have: {})",
                    at(for_each.span()),
                    for_each.get_ref(),
                    if outputs.is_empty() {
                        "none".into()
                    } else {
                        outputs.join(", ")
                    }
                )));
            }
        }
        let fan_out = s.for_each.is_some();
        let strategy = match (&s.branch, &s.strategy) {
            (Some(_), Some(st)) => {
                return Err(bad(format!(
                    "{}: `branch` already chooses the branch strategy; drop `strategy`",
                    at(st.span())
                )));
            }
            (Some(b), None) => StepStrategy::Branch(b.get_ref().clone()),
            (None, Some(st)) => match st.get_ref().as_str() {
                "head" => StepStrategy::Head,
                "merge-to-head" => StepStrategy::MergeToHead,
                other => {
                    return Err(bad(format!(
                        "{}: strategy = \"{other}\": use head or merge-to-head (or `branch = NAME`)",
                        at(st.span())
                    )));
                }
            },
            (None, None) if fan_out => {
                StepStrategy::Branch(format!("sanddune/{}/{name}-{{{{index}}}}", sanitize(path)))
            }
            (None, None) => StepStrategy::Default,
        };
        if fan_out && matches!(strategy, StepStrategy::Head | StepStrategy::MergeToHead) {
            return Err(bad(format!(
                "{here}: a step with forEach puts each item on its own branch: use `branch = \"...{{{{item...}}}}\"`, not a strategy"
            )));
        }
        if !s.then.is_empty() && strategy == StepStrategy::Head {
            return Err(bad(format!(
                "{here}: `then` runs in one sandbox on a worktree, which head has none of: use merge-to-head or a branch"
            )));
        }
        let best_of = match s.best_of {
            Some(_) if fan_out || !s.then.is_empty() || strategy == StepStrategy::Head => {
                return Err(bad(format!(
                    "{here}: bestOf runs one task as several candidates: not with forEach, then or strategy = \"head\""
                )));
            }
            Some(b) => Some(Box::new(
                best_of(b).map_err(|e| bad(format!("{here}: bestOf: {e}")))?,
            )),
            None => None,
        };
        let push = match s.push {
            Some(_) if best_of.is_some() => {
                return Err(bad(format!(
                    "{here}: push applies to a step's own runs, not a bestOf: push the winner's branch once it is picked"
                )));
            }
            Some(FilePush::Remote(remote)) if remote.is_empty() => {
                return Err(bad(format!(
                    "{here}: push = \"\": name a remote, or use push = true for the branch's upstream remote (else origin)"
                )));
            }
            Some(FilePush::Remote(remote)) => Some(PushTo::Remote(remote)),
            Some(FilePush::On(true)) => Some(PushTo::Default),
            Some(FilePush::On(false)) | None => None,
        };
        let mut runs = vec![run(s.run, &name, &here, dir).map_err(bad)?];
        for then in s.then {
            let then_name = then.name.get_ref().clone();
            let there = format!(
                "line {}, step `{name}`, then `{then_name}`",
                line(then.name.span())
            );
            check_name(&then_name).map_err(|e| bad(format!("{there}: {e}")))?;
            runs.push(run(then.run, &then_name, &there, dir).map_err(bad)?);
        }
        let step = AgentStep {
            sandbox: s.sandbox,
            sandbox_options: s.sandbox_options.into_iter().collect(),
            for_each: s.for_each.map(|f| f.into_inner()),
            strategy,
            runs,
            best_of,
            push,
        };
        // References are checked against what exists by this step.
        let mut texts: Vec<&str> = step
            .runs
            .iter()
            .flat_map(|r| r.prompt_args.iter().map(|(_, v)| v.as_str()))
            .collect();
        if let StepStrategy::Branch(b) = &step.strategy {
            texts.push(b);
        }
        for reference in texts.iter().flat_map(|t| refs::references(t)) {
            let mut parts = reference.split('.');
            let root = parts.next().unwrap_or_default();
            let problem = match root {
                "args" => match parts.next() {
                    Some(key) if file.args.contains_key(key) => None,
                    _ => Some("names no key declared in [args]".to_string()),
                },
                "item" | "index" if !fan_out => Some(format!("`{root}` exists only with forEach")),
                "item" | "index" => None,
                step if outputs.iter().any(|o| o == step) => None,
                _ => Some(format!(
                    "is not args, item, index or an earlier step with an output (have: {})",
                    if outputs.is_empty() {
                        "none".into()
                    } else {
                        outputs.join(", ")
                    }
                )),
            };
            if let Some(problem) = problem {
                return Err(bad(format!("{here}: `{{{{{reference}}}}}` {problem}")));
            }
        }
        if step.runs.iter().any(|r| r.output.is_some()) {
            outputs.push(name.clone());
        }
        steps.push(Step {
            name,
            kind: StepKind::Agent(step),
        });
    }
    let d = file.defaults;
    Ok(Workflow {
        name: name.to_string(),
        description: file.description,
        args: file.args.into_iter().collect(),
        defaults: Defaults {
            sandbox: d.sandbox,
            agent: d.agent,
            model: d.model,
            max_iterations: d.max_iterations,
            sandbox_options: d.sandbox_options.into_iter().collect(),
            agent_options: d.agent_options.into_iter().collect(),
        },
        steps,
        dir: dir.to_path_buf(),
    })
}

/// A step's `[steps.bestOf]`: N from `candidates` or the longer list; each
/// list has one entry (every candidate's) or N.
fn best_of(b: FileBestOf) -> Result<BestOfStep, String> {
    let n = b.candidates.unwrap_or(b.agents.len().max(b.models.len()));
    if n < 2 {
        return Err(
            "needs at least 2 candidates (`candidates = N`, or lists of agents or models)".into(),
        );
    }
    let pick = |list: Vec<String>, what: &str| -> Result<Vec<Option<String>>, String> {
        match list.len() {
            0 => Ok(vec![None; n]),
            1 => Ok(vec![Some(list[0].clone()); n]),
            len if len == n => Ok(list.into_iter().map(Some).collect()),
            len => Err(format!(
                "{what} lists {len} for {n} candidates: give one, or one per candidate"
            )),
        }
    };
    let candidates = pick(b.agents, "agents")?
        .into_iter()
        .zip(pick(b.models, "models")?)
        .collect();
    let tie_break = match b.tie_break.as_deref() {
        None => best_of::TieBreak::FewestLines,
        Some(text) => best_of::TieBreak::parse(text).ok_or_else(|| {
            format!("tieBreak = \"{text}\": use fewest-lines, fewest-tokens, first or judge")
        })?,
    };
    if b.judge.is_some() && tie_break != best_of::TieBreak::Judge {
        return Err("`judge` needs tieBreak = \"judge\"".into());
    }
    let judge = b
        .judge
        .map_or_else(best_of::Judge::default, |j| best_of::Judge {
            agent: j.agent.as_deref().map(crate::plugin::PluginRef::parse),
            model: j.model,
            instructions: j.prompt,
        });
    let check = match b.check {
        Some(command) => {
            let mut check = crate::run::Check::new(command);
            if let Some(secs) = b.check_timeout_seconds {
                check.timeout = std::time::Duration::from_secs(secs);
            }
            check.validate().map_err(|e| e.to_string())?;
            Some(check)
        }
        None if b.check_timeout_seconds.is_some() => {
            return Err("checkTimeoutSeconds without a check".into());
        }
        None => None,
    };
    Ok(BestOfStep {
        candidates,
        check,
        tie_break,
        judge,
        discard_losers: b.discard_losers,
        timeout: b.timeout_seconds.map(std::time::Duration::from_secs),
    })
}

impl FileRun {
    fn is_empty(&self) -> bool {
        self.agent.is_none()
            && self.model.is_none()
            && self.prompt.is_none()
            && self.prompt_file.is_none()
            && self.prompt_args.is_empty()
            && self.max_iterations.is_none()
            && self.idle_timeout_seconds.is_none()
            && self.completion_signals.is_empty()
            && self.agent_options.is_empty()
            && self.output.is_none()
            && self.unknown.is_empty()
    }
}

fn run(r: FileRun, name: &str, here: &str, dir: &Path) -> Result<AgentRun, String> {
    if let Some(key) = r.unknown.keys().next() {
        return Err(format!(
            "{here}: unknown key `{key}`; a step takes name, forEach, branch, strategy, sandbox, sandboxOptions, then, merge, bestOf, {RUN_KEYS}"
        ));
    }
    let prompt = match (r.prompt, r.prompt_file) {
        (Some(text), None) => {
            if !r.prompt_args.is_empty() {
                return Err(format!(
                    "{here}: promptArgs need a promptFile: an inline prompt is passed literally"
                ));
            }
            RunPrompt::Inline(text)
        }
        (None, Some(file)) => {
            let resolved = dir.join(&file);
            if !resolved.is_file() {
                return Err(format!(
                    "{here}: promptFile = \"{file}\": no such file {}",
                    resolved.display()
                ));
            }
            RunPrompt::File(PathBuf::from(file))
        }
        (Some(_), Some(_)) => return Err(format!("{here}: give prompt or promptFile, not both")),
        (None, None) => return Err(format!("{here}: needs a prompt or a promptFile")),
    };
    if r.max_iterations == Some(0) {
        return Err(format!("{here}: maxIterations must be at least 1"));
    }
    let output = match r.output {
        Some(o) => {
            let file = dir.join(&o.schema_file);
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("{here}: output.schemaFile = \"{}\": {e}", o.schema_file))?;
            let schema = serde_json::from_str(&text).map_err(|e| {
                format!(
                    "{here}: output.schemaFile {} is not JSON: {e}",
                    file.display()
                )
            })?;
            let output = StructuredOutput { tag: o.tag, schema };
            output.check().map_err(|e| format!("{here}: {e}"))?;
            Some(output)
        }
        None => None,
    };
    Ok(AgentRun {
        name: name.to_string(),
        agent: r.agent,
        model: r.model,
        prompt,
        prompt_args: r.prompt_args.into_iter().collect(),
        max_iterations: r.max_iterations,
        idle_timeout_secs: r.idle_timeout_seconds,
        completion_signals: r.completion_signals,
        agent_options: r.agent_options.into_iter().collect(),
        output,
    })
}

/// Names of steps and arguments: letters, digits, `-` and `_`.
fn check_name(name: &str) -> Result<(), String> {
    if !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a usable name: use letters, digits, `-` and `_`"
        ))
    }
}

fn names_of(steps: &[Step]) -> String {
    if steps.is_empty() {
        return "none".into();
    }
    steps
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The workflow file's stem, for default branch names.
fn sanitize(path: &Path) -> String {
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("workflow")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::tests::choices;
    use crate::init::{BACKLOG_MANAGERS, Choices, TEMPLATES};

    fn parse_in(dir: &Path, text: &str) -> Result<Workflow> {
        std::fs::write(dir.join("p.md"), "do it").unwrap();
        parse(text, "w", Path::new("/r/.sanddune/workflows/w.toml"), dir)
    }

    #[test]
    fn a_fan_out_with_then_and_a_merge_parses() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.json"), r#"{"type":"object"}"#).unwrap();
        let w = parse_in(
            dir.path(),
            r#"
[args]
N = "3"
[defaults]
sandbox = "docker"
[[steps]]
name = "plan"
promptFile = "p.md"
promptArgs = { N = "{{args.N}}" }
output = { tag = "plan", schemaFile = "s.json" }
[[steps]]
name = "work"
forEach = "plan.items"
promptFile = "p.md"
promptArgs = { ID = "{{item.id}}", FIRST = "{{plan.items.0}}" }
  [[steps.then]]
  name = "review"
  prompt = "review it"
[[steps]]
name = "land"
merge = "work"
"#,
        )
        .unwrap();
        assert_eq!(w.steps.len(), 3);
        let StepKind::Agent(work) = &w.steps[1].kind else {
            panic!()
        };
        assert_eq!(work.runs.len(), 2);
        assert_eq!(
            work.strategy,
            StepStrategy::Branch("sanddune/w/work-{{index}}".into())
        );
        assert!(matches!(&w.steps[2].kind, StepKind::Merge { from } if from == "work"));
    }

    #[test]
    fn mistakes_name_the_line_and_the_step() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("", "no steps"),
            (
                "[[steps]]\nname = \"item\"\nprompt = \"x\"",
                "line 2, step `item`: `item` is reserved",
            ),
            (
                "[[steps]]\nname = \"a\"\nprompt = \"x\"\n[[steps]]\nname = \"a\"\nprompt = \"y\"",
                "line 5, step `a`: a second step named `a`",
            ),
            (
                "[[steps]]\nname = \"a\"\nstrategy = \"sideways\"\nprompt = \"x\"",
                "line 3, step `a`: strategy = \"sideways\"",
            ),
            (
                "[[steps]]\nname = \"a\"\nprompt = \"x\"\nprompt-file = \"p.md\"",
                "unknown key `prompt-file`",
            ),
            (
                "[[steps]]\nname = \"a\"\nprompt = \"x\"\npromptArgs = { A = \"1\" }",
                "promptArgs need a promptFile",
            ),
            (
                "[[steps]]\nname = \"a\"\nstrategy = \"head\"\npromptFile = \"p.md\"\n[[steps.then]]\nname = \"b\"\nprompt = \"y\"",
                "which head has none of",
            ),
            (
                "[[steps]]\nname = \"a\"\npromptFile = \"p.md\"\npromptArgs = { X = \"{{item.id}}\" }",
                "`item` exists only with forEach",
            ),
            (
                "[[steps]]\nname = \"m\"\nmerge = \"a\"",
                "no earlier step has that name",
            ),
            ("[[step]]\nname = \"a\"", "line 1"),
            (
                "[[steps]]\nname = \"a\"\nprompt = \"x\"\npush = \"\"",
                "line 2, step `a`: push = \"\": name a remote",
            ),
            (
                "[[steps]]\nname = \"a\"\nprompt = \"x\"\npush = true\n[steps.bestOf]\ncandidates = 2",
                "push applies to a step's own runs, not a bestOf",
            ),
        ];
        for (text, want) in cases {
            let e = parse_in(dir.path(), text).unwrap_err().to_string();
            assert!(e.contains(want) && e.contains("w.toml"), "{text}\n=> {e}");
        }
    }

    // What `sanddune init` writes is a workflow this module loads.
    #[test]
    fn every_init_template_renders_a_workflow_that_loads() {
        for (template, _) in TEMPLATES {
            for backlog in BACKLOG_MANAGERS.iter().map(|b| b.name) {
                let files = crate::init::render(&choices(template, backlog)).unwrap();
                let dir = tempfile::tempdir().unwrap();
                for (path, text) in &files {
                    let path = dir.path().join(path);
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(&path, text).unwrap();
                }
                let (path, text) = files
                    .iter()
                    .find(|(p, _)| p.starts_with("workflows/"))
                    .unwrap();
                let w = parse(text, template, std::path::Path::new(path), dir.path())
                    .unwrap_or_else(|e| panic!("{template}: {e}"));
                assert_eq!(w.defaults.sandbox.as_deref(), Some("podman"));
                assert_eq!(w.defaults.model.as_deref(), Some("claude-sonnet-4-5"));
                assert_eq!(
                    w.defaults.sandbox_options,
                    vec![("image".into(), "me/img:1".into())]
                );
                // Only prompt arguments and built-ins are left for later.
                for (path, text) in &files {
                    for key in [
                        "BACKLOG_MANAGER_TOOLS",
                        "AGENT_INSTALL",
                        "LIST_TASKS_COMMAND",
                        "DEFAULTS",
                        "ENGINE",
                    ] {
                        assert!(
                            !text.contains(&format!("{{{{{key}}}}}")),
                            "{template} {path}: {key}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn an_init_devcontainer_is_the_sandbox_definition_and_no_build_file_is_written() {
        let c = Choices {
            sandbox: "docker".into(),
            image_name: None,
            devcontainer: Some(".devcontainer/devcontainer.json".into()),
            ..choices("blank", "github-issues")
        };
        let files = crate::init::render(&c).unwrap();
        assert!(files.iter().all(|(p, _)| p != "Dockerfile"), "{files:?}");
        let (_, workflow) = files
            .iter()
            .find(|(p, _)| p == "workflows/blank.toml")
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
        std::fs::write(dir.path().join("prompts/prompt.md"), "p").unwrap();
        let w = parse(
            workflow,
            "blank",
            std::path::Path::new("w.toml"),
            dir.path(),
        )
        .unwrap();
        assert_eq!(
            w.defaults.sandbox_options,
            vec![(
                "devcontainer".into(),
                ".devcontainer/devcontainer.json".into()
            )]
        );
        let both = Choices {
            image_name: Some("i".into()),
            ..c
        };
        assert!(crate::init::render(&both).unwrap_err().contains("give one"));
    }
}
