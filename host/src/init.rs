//! What `sanddune init` scaffolds: the config directory's files for a
//! choice of agent, sandbox provider, backlog manager and template, with
//! the template arguments substituted (`{{BACKLOG_MANAGER_TOOLS}}`, ...).
//! Pure: the CLI writes the files and builds the image.

use std::collections::BTreeMap;

/// The five templates: (name, description).
pub const TEMPLATES: [(&str, &str); 5] = [
    ("blank", "one agent run on a prompt you write"),
    ("simple-loop", "picks tasks one by one and closes them"),
    (
        "sequential-reviewer",
        "implements the next task, then reviews it in the same sandbox",
    ),
    (
        "parallel-planner",
        "plans parallel tasks, implements each on its own branch at once, lands them",
    ),
    (
        "parallel-planner-with-review",
        "like parallel-planner, with a review in each branch's sandbox",
    ),
];

/// Agents init can set up: (name, label, the image's install step).
pub const AGENTS: [(&str, &str, &str); 6] = [
    (
        "claude-code",
        "Claude Code",
        "RUN npm install -g @anthropic-ai/claude-code && npm cache clean --force",
    ),
    (
        "codex",
        "Codex",
        "RUN npm install -g @openai/codex && npm cache clean --force",
    ),
    (
        "opencode",
        "opencode",
        "RUN npm install -g opencode-ai && npm cache clean --force",
    ),
    (
        "pi",
        "pi",
        "RUN npm install -g @mariozechner/pi-coding-agent && npm cache clean --force",
    ),
    (
        "gemini",
        "Gemini CLI",
        "RUN npm install -g @google/gemini-cli && npm cache clean --force",
    ),
    (
        "qwen-code",
        "Qwen Code",
        "RUN npm install -g @qwen-code/qwen-code && npm cache clean --force",
    ),
];

pub const SANDBOXES: [&str; 2] = ["docker", "podman"];

/// A backlog manager: its label and the template arguments it fills.
pub struct BacklogManager {
    pub name: &'static str,
    pub label: &'static str,
    /// The env keys its CLI reads, for `.env.example`.
    pub env: &'static [&'static str],
    tools: &'static str,
    list: &'static str,
    view: &'static str,
    close: &'static str,
}

pub const BACKLOG_MANAGERS: [BacklogManager; 2] = [
    BacklogManager {
        name: "github-issues",
        label: "GitHub Issues",
        env: &["GH_TOKEN"],
        tools: "RUN curl -fsSL https://cli.github.com/packages/githubcli-archive-keyring.gpg \\\n      -o /usr/share/keyrings/githubcli-archive-keyring.gpg \\\n && echo \"deb [signed-by=/usr/share/keyrings/githubcli-archive-keyring.gpg] https://cli.github.com/packages stable main\" \\\n      > /etc/apt/sources.list.d/github-cli.list \\\n && apt-get update && apt-get install -y --no-install-recommends gh \\\n && rm -rf /var/lib/apt/lists/*",
        list: "gh issue list --state open --limit 50 --json number,title,labels --jq '[.[] | {id: (.number | tostring), title, labels: [.labels[].name]}]'",
        view: "gh issue view ID --comments",
        close: "gh issue close ID --comment \"Completed by sanddune\"",
    },
    BacklogManager {
        name: "beads",
        label: "Beads",
        env: &[],
        tools: "RUN npm install -g @beads/bd && npm cache clean --force",
        list: "bd ready --json",
        view: "bd show ID",
        close: "bd close ID --reason \"Completed by sanddune\"",
    },
];

/// What the user chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choices {
    pub agent: String,
    pub model: Option<String>,
    pub sandbox: String,
    pub backlog: String,
    pub template: String,
    /// Over the provider's default `sanddune:<repo-dir-name>`.
    pub image_name: Option<String>,
    /// The repository's devcontainer.json (relative to its root) as the
    /// sandbox definition, instead of a scaffolded build file.
    pub devcontainer: Option<String>,
}

const DOCKERFILE: &str = include_str!("../templates/Dockerfile");
const CONFIG: &str = include_str!("../templates/config.toml");
const GITIGNORE: &str = include_str!("../templates/gitignore");
const PLAN_SCHEMA: &str = include_str!("../templates/plan.schema.json");

/// A template's workflow file and the prompts it uses.
fn template_files(template: &str) -> Option<(&'static str, Vec<(&'static str, &'static str)>)> {
    let plan = (
        "prompts/plan.md",
        include_str!("../templates/prompts/plan.md"),
    );
    let implement = (
        "prompts/implement.md",
        include_str!("../templates/prompts/implement.md"),
    );
    let review = (
        "prompts/review.md",
        include_str!("../templates/prompts/review.md"),
    );
    let schema = ("plan.schema.json", PLAN_SCHEMA);
    Some(match template {
        "blank" => (
            include_str!("../templates/workflows/blank.toml"),
            vec![(
                "prompts/prompt.md",
                include_str!("../templates/prompts/prompt.md"),
            )],
        ),
        "simple-loop" => (
            include_str!("../templates/workflows/simple-loop.toml"),
            vec![(
                "prompts/loop.md",
                include_str!("../templates/prompts/loop.md"),
            )],
        ),
        "sequential-reviewer" => (
            include_str!("../templates/workflows/sequential-reviewer.toml"),
            vec![
                (
                    "prompts/implement-next.md",
                    include_str!("../templates/prompts/implement-next.md"),
                ),
                review,
            ],
        ),
        "parallel-planner" => (
            include_str!("../templates/workflows/parallel-planner.toml"),
            vec![plan, implement, schema],
        ),
        "parallel-planner-with-review" => (
            include_str!("../templates/workflows/parallel-planner-with-review.toml"),
            vec![plan, implement, review, schema],
        ),
        _ => return None,
    })
}

/// Check the choices against what exists; the message lists the options.
pub fn check(c: &Choices) -> Result<(), String> {
    let one_of = |what: &str, value: &str, options: Vec<&str>| {
        if options.contains(&value) {
            Ok(())
        } else {
            Err(format!(
                "unknown {what} `{value}`: use one of {}",
                options.join(", ")
            ))
        }
    };
    one_of("agent", &c.agent, AGENTS.iter().map(|a| a.0).collect())?;
    one_of("sandbox", &c.sandbox, SANDBOXES.to_vec())?;
    one_of(
        "backlog manager",
        &c.backlog,
        BACKLOG_MANAGERS.iter().map(|b| b.name).collect(),
    )?;
    one_of(
        "template",
        &c.template,
        TEMPLATES.iter().map(|t| t.0).collect(),
    )
}

/// The image build file's name for a sandbox provider.
pub fn build_file(sandbox: &str) -> &'static str {
    if sandbox == "podman" {
        "Containerfile"
    } else {
        "Dockerfile"
    }
}

/// The scaffold: paths relative to `.sanddune/` and their contents.
pub fn render(c: &Choices) -> Result<Vec<(String, String)>, String> {
    check(c)?;
    let agent = AGENTS.iter().find(|a| a.0 == c.agent).expect("checked");
    let backlog = BACKLOG_MANAGERS
        .iter()
        .find(|b| b.name == c.backlog)
        .expect("checked");
    let (workflow, prompts) = template_files(&c.template).expect("checked");
    let mut defaults = format!("sandbox = \"{}\"\nagent = \"{}\"", c.sandbox, c.agent);
    match &c.model {
        Some(model) => defaults.push_str(&format!("\nmodel = {}", toml_string(model))),
        None => defaults.push_str("\n# model = \"...\"  (the agent's default when unset)"),
    }
    match (&c.image_name, &c.devcontainer) {
        (Some(_), Some(_)) => {
            return Err(
                "an image name and a devcontainer.json both name the image: give one".into(),
            );
        }
        (Some(image), None) => defaults.push_str(&format!(
            "\nsandboxOptions = {{ image = {} }}",
            toml_string(image)
        )),
        (None, Some(path)) => defaults.push_str(&format!(
            "\nsandboxOptions = {{ devcontainer = {} }}",
            toml_string(path)
        )),
        (None, None) => {}
    }
    let args = BTreeMap::from([
        ("BACKLOG_MANAGER_TOOLS", backlog.tools.to_string()),
        ("AGENT_INSTALL", agent.2.to_string()),
        ("ENGINE", c.sandbox.clone()),
        ("DEFAULTS", defaults),
        ("LIST_TASKS_COMMAND", backlog.list.to_string()),
        ("VIEW_TASK_COMMAND", backlog.view.replace("ID", "$ID")),
        ("CLOSE_TASK_COMMAND", backlog.close.replace("ID", "$ID")),
        (
            "VIEW_TASK_COMMAND_FOR_ID",
            backlog.view.replace("ID", "{{TASK_ID}}"),
        ),
        (
            "CLOSE_TASK_COMMAND_FOR_ID",
            backlog.close.replace("ID", "{{TASK_ID}}"),
        ),
    ]);
    let mut env_example = format!(
        "# Copy to .env (never committed). sanddune passes a key only to the\n# provider that declares it.\n# {}: {}\n",
        agent.1,
        agent_env(&c.agent)
    );
    for key in backlog.env {
        env_example.push_str(&format!("# {}\n{key}=\n", backlog.label));
    }
    let mut files = vec![];
    // A dev container defines the image; there is no build file to write.
    if c.devcontainer.is_none() {
        files.push((
            build_file(&c.sandbox).to_string(),
            substitute(DOCKERFILE, &args),
        ));
    }
    files.extend([
        ("config.toml".to_string(), CONFIG.to_string()),
        (".gitignore".to_string(), GITIGNORE.to_string()),
        (".env.example".to_string(), env_example),
        (
            format!("workflows/{}.toml", c.template),
            substitute(workflow, &args),
        ),
    ]);
    for (path, text) in prompts {
        files.push((path.to_string(), substitute(text, &args)));
    }
    Ok(files)
}

fn agent_env(agent: &str) -> &'static str {
    match agent {
        "claude-code" => "ANTHROPIC_API_KEY= (or CLAUDE_CODE_OAUTH_TOKEN=)",
        "codex" => "OPENAI_API_KEY= (or CODEX_API_KEY=)",
        _ => "ANTHROPIC_API_KEY=, OPENAI_API_KEY= or another key its provider reads",
    }
}

/// Template argument substitution: only the given keys; every other
/// `{{KEY}}` (a prompt argument for later) stays as it is.
pub fn substitute(text: &str, args: &BTreeMap<&str, String>) -> String {
    let mut out = text.to_string();
    for (key, value) in args {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    out
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn choices(template: &str, backlog: &str) -> Choices {
        Choices {
            agent: "claude-code".into(),
            model: Some("claude-sonnet-4-5".into()),
            sandbox: "podman".into(),
            backlog: backlog.into(),
            template: template.into(),
            image_name: Some("me/img:1".into()),
            devcontainer: None,
        }
    }

    #[test]
    fn the_build_file_carries_the_backlog_managers_tools() {
        let files = render(&choices("parallel-planner", "beads")).unwrap();
        let (name, text) = &files[0];
        assert_eq!(name, "Containerfile");
        assert!(text.contains("@beads/bd") && text.contains("@anthropic-ai/claude-code"));
        let files = render(&Choices {
            sandbox: "docker".into(),
            ..choices("blank", "github-issues")
        })
        .unwrap();
        assert_eq!(files[0].0, "Dockerfile");
        assert!(
            files[0]
                .1
                .contains("apt-get install -y --no-install-recommends gh")
        );
        let implement = render(&choices("parallel-planner", "github-issues"))
            .unwrap()
            .into_iter()
            .find(|(p, _)| p == "prompts/implement.md")
            .unwrap()
            .1;
        assert!(
            implement.contains("!`gh issue view {{TASK_ID}} --comments`"),
            "{implement}"
        );
    }

    #[test]
    fn unknown_choices_list_the_options() {
        let mut c = choices("blank", "github-issues");
        c.template = "fancy".into();
        let e = render(&c).unwrap_err();
        assert!(
            e.contains("unknown template `fancy`") && e.contains("parallel-planner-with-review"),
            "{e}"
        );
        c.template = "blank".into();
        c.backlog = "jira".into();
        assert!(render(&c).unwrap_err().contains("github-issues, beads"));
    }
}
