//! Checks for sandbox providers, run in one real sandbox of a throwaway git
//! repository. Bind-mount providers get that repository as their worktree;
//! isolated ones are checked in their own `worktree-path` (the checks need
//! no repository inside). Every check sets up its own files with `exec`, so
//! one broken file operation fails one check, not the rest.

use std::path::{Path, PathBuf};
use std::process::Command as HostCommand;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;

use super::Report;
use crate::capability::HttpGrant;
use crate::capability::output::OutputLine;
use crate::plugin::PluginKind;
use crate::plugin::sandbox::{
    Command, ExecOutput, ExecRequest, Sandbox, SandboxKind, SandboxProvider, SandboxSpec,
};

type Checked = Result<String, String>;

/// Fail the check with a message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// What the checks share.
struct Ctx {
    sandbox: Sandbox,
    kind: SandboxKind,
    /// The worktree the kit made on the host (what a bind-mount provider mounts).
    host_worktree: PathBuf,
    /// A host directory outside the sandbox holding `OUTSIDE_FILE`, which no
    /// command or upload may reach.
    outside: PathBuf,
    token: String,
    /// Scratch space on the host for copies in and out.
    host_tmp: PathBuf,
}

const OUTSIDE_FILE: &str = "conformance-outside.txt";

/// Run every sandbox check against a fresh sandbox of `provider`.
pub async fn run(provider: &SandboxProvider, config: &[(String, String)]) -> Report {
    let mut report = Report {
        plugin: provider.name().to_string(),
        kind: PluginKind::Sandbox,
        checks: vec![],
    };
    report.push("describe", describe(provider));
    let caps = provider.capabilities();
    let asks_http = !caps.http.is_empty() || !caps.http_options.is_empty();
    const NO_HTTP: &str = "the provider asks for no outgoing HTTP";
    match asks_http {
        true => report.push("http-origins", http_origins(provider, config)),
        false => report.skip("http-origins", NO_HTTP),
    }
    let dirs = match HostDirs::new() {
        Ok(dirs) => dirs,
        Err(e) => {
            report.push("create", Err(format!("cannot prepare the host side: {e}")));
            return report;
        }
    };
    let token = format!("conformance-{}", unique());
    if let Err(e) = std::fs::write(dirs.outside.path().join(OUTSIDE_FILE), &token) {
        report.push("create", Err(format!("cannot prepare the host side: {e}")));
        return report;
    }
    let worktree = dirs.repo.path().to_path_buf();
    let spec = SandboxSpec {
        run_id: format!("conformance-{}", unique()),
        name: "conformance".into(),
        git_dir: worktree.join(".git"),
        worktree: worktree.clone(),
        branch: "main".into(),
        env: declared_env(provider),
        config: config.to_vec(),
    };
    let sandbox = match provider.create(&spec).await {
        Ok(sandbox) => sandbox,
        Err(e) => {
            report.push("create", Err(e.to_string()));
            return report;
        }
    };
    let mut ctx = Ctx {
        sandbox,
        kind: provider.info().kind,
        host_worktree: worktree,
        outside: dirs.outside.path().to_path_buf(),
        token,
        host_tmp: dirs.tmp.path().to_path_buf(),
    };
    report.push("create", create(&ctx));
    report.push("exec-output-and-exit-code", exec_output(&mut ctx).await);
    report.push("exec-argv-not-shell", exec_argv(&mut ctx).await);
    report.push("exec-env", exec_env(&mut ctx).await);
    // A provider may refuse `attach`: the host then runs hooks one after
    // another (ADR 0006), so that is a skip, not a failure.
    let attach_refused = match ctx.sandbox.lane().await {
        Ok(mut lane) => {
            let _ = lane.close().await;
            None
        }
        Err(e) => Some(e.to_string()),
    };
    match (&attach_refused, ctx.kind) {
        (Some(e), SandboxKind::Isolated) => report.skip(
            "exec-streams-lines",
            &format!("only a lane can create the marker inside an isolated sandbox, and attach was refused: {e}"),
        ),
        _ => report.push("exec-streams-lines", exec_streams(&mut ctx).await),
    }
    report.push("stdin-intact", stdin_intact(&mut ctx).await);
    report.push("stdin-empty", stdin_empty(&mut ctx).await);
    report.push("exec-timeout", exec_timeout(&mut ctx).await);
    report.push("cwd-inside", cwd_inside(&mut ctx).await);
    report.push("cwd-outside-refused", cwd_outside(&mut ctx).await);
    report.push("upload-traversal-refused", upload_traversal(&mut ctx).await);
    report.push("mkdir", mkdir(&mut ctx).await);
    report.push("write-read-file", write_read(&mut ctx).await);
    report.push("stat", stat(&mut ctx).await);
    report.push("read-dir", read_dir(&mut ctx).await);
    report.push("exists", exists(&mut ctx).await);
    report.push("remove", remove(&mut ctx).await);
    report.push("copy-file-round-trip", copy_round_trip(&mut ctx).await);
    match ctx.kind {
        SandboxKind::Isolated => report.push("copy-in", copy_in(&mut ctx).await),
        SandboxKind::BindMount => report.skip(
            "copy-in",
            "copy-in is for isolated providers; a bind-mount sandbox sees the host worktree itself",
        ),
    }
    match &attach_refused {
        Some(e) => report.skip(
            "attach",
            &format!("attach was refused ({e}); the host then runs hooks and shell expressions one after another"),
        ),
        None => report.push("attach", attach(&mut ctx).await),
    }
    let found = find(provider, &spec, true).await;
    report.push("close-idempotent", close(&mut ctx).await);
    match found {
        None => report.skip(
            "find",
            "the provider speaks a contract before 0.3, which has no find",
        ),
        Some(Err(e)) => report.push("find", Err(e)),
        Some(Ok(note)) => report.push(
            "find",
            find(provider, &spec, false)
                .await
                .unwrap_or(Ok(String::new()))
                .map(|_| note),
        ),
    }
    match asks_http {
        true => report.push("http-refusal-survived", http_refusal(provider, &spec).await),
        false => report.skip("http-refusal-survived", NO_HTTP),
    }
    report
}

/// The sandbox's env: the keys the provider declares (its credentials),
/// read from the process environment as a run reads them (ADR 0002), and a
/// marker the `exec-env` check looks for.
fn declared_env(provider: &SandboxProvider) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = provider
        .capabilities()
        .env_keys
        .into_iter()
        .filter_map(|key| std::env::var(&key).ok().map(|value| (key, value)))
        .collect();
    env.push(("SANDDUNE_CONFORMANCE_CREATE".into(), "from-create".into()));
    env
}

/// The host side: a throwaway repository with one commit, a directory
/// outside the sandbox, and scratch space. Removed on drop.
struct HostDirs {
    repo: tempfile::TempDir,
    outside: tempfile::TempDir,
    tmp: tempfile::TempDir,
}

impl HostDirs {
    fn new() -> Result<Self, String> {
        let dir = |prefix: &str| {
            tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .map_err(|e| format!("cannot create a temporary directory: {e}"))
        };
        let dirs = HostDirs {
            repo: dir("sanddune-conformance-repo-")?,
            outside: dir("sanddune-conformance-outside-")?,
            tmp: dir("sanddune-conformance-tmp-")?,
        };
        let repo = dirs.repo.path();
        std::fs::write(repo.join("README.md"), "conformance\n").map_err(|e| e.to_string())?;
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["add", "README.md"],
            &[
                "-c",
                "user.name=sanddune",
                "-c",
                "user.email=conformance@sanddune.invalid",
                "commit",
                "-q",
                "-m",
                "conformance",
            ],
        ] {
            let out = HostCommand::new("git")
                .arg("-C")
                .arg(repo)
                .args(args)
                .output()
                .map_err(|e| format!("cannot run git (is it installed?): {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "git {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        Ok(dirs)
    }
}

/// Unique enough for names in one machine's temp dir.
fn unique() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos:x}", std::process::id())
}

fn request(command: Command) -> ExecRequest {
    ExecRequest {
        command,
        cwd: None,
        env: vec![],
        stdin: None,
        sudo: false,
        timeout_ms: Some(60_000),
    }
}

fn shell(script: &str) -> ExecRequest {
    request(Command::Shell(script.into()))
}

/// Run `request`, turning a provider error into the check's failure.
async fn exec(ctx: &mut Ctx, request: ExecRequest) -> Result<ExecOutput, String> {
    ctx.sandbox
        .exec(request, |_| {})
        .await
        .map_err(|e| format!("exec failed: {e}"))
}

/// Run a setup script that must succeed.
async fn setup(ctx: &mut Ctx, script: &str) -> Result<(), String> {
    let out = exec(ctx, shell(script)).await?;
    ensure!(
        out.exit_code == 0,
        "setup `{script}` exited {}: {}",
        out.exit_code,
        out.stderr.trim()
    );
    Ok(())
}

/// Whether `path` (relative to the worktree) exists, asked of a command in
/// the sandbox rather than of the file operations under test.
async fn sh_exists(ctx: &mut Ctx, path: &str) -> Result<bool, String> {
    let out = exec(ctx, shell(&format!("[ -e {} ] || [ -L {0} ]", q(path)))).await?;
    Ok(out.exit_code == 0)
}

fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A relative path from the sandbox's worktree up past `/` and down into
/// the host's `outside` directory: where a `../` escape would land.
fn escape_path(ctx: &Ctx, leaf: &str) -> String {
    let depth = Path::new(ctx.sandbox.worktree_path()).components().count();
    format!(
        "{}{}/{leaf}",
        "../".repeat(depth + 1),
        ctx.outside.display().to_string().trim_start_matches('/')
    )
}

/// Bytes with every value, a NUL, invalid UTF-8 and no trailing newline.
fn binary(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 256) as u8).collect()
}

fn describe(provider: &SandboxProvider) -> Checked {
    let info = provider.info();
    ensure!(
        !info.name.trim().is_empty(),
        "describe returned an empty name"
    );
    ensure!(
        !info.version.trim().is_empty(),
        "describe returned an empty version"
    );
    let kind = match info.kind {
        SandboxKind::BindMount => "bind-mount",
        SandboxKind::Isolated => "isolated",
    };
    Ok(kind.into())
}

/// Every origin it declares, or that its `http-option` options hold under
/// the kit's `--sandbox-opt`s, is one the host can grant:
/// `https://host[:port]` (plain http for loopback only), nothing after the
/// authority.
fn http_origins(provider: &SandboxProvider, config: &[(String, String)]) -> Checked {
    let origins = provider.http_origins(config)?;
    HttpGrant::parse(&origins)?;
    Ok(origins.join(", "))
}

/// How long a provider may take to give up when its requests are refused.
const REFUSAL_WAIT: Duration = Duration::from_secs(60);

/// With every request refused, the provider returns errors rather than
/// trapping or hanging: a sandbox it still creates answers or fails cleanly.
async fn http_refusal(provider: &SandboxProvider, spec: &SandboxSpec) -> Checked {
    let trapped = |e: &crate::Error| e.to_string().contains(" stopped in ");
    let created = tokio::time::timeout(REFUSAL_WAIT, provider.create_refusing_http(spec))
        .await
        .map_err(|_| format!("create did not return within {REFUSAL_WAIT:?} with HTTP refused"))?;
    let mut sandbox = match created {
        Err(e) if trapped(&e) => {
            return Err(format!("it trapped instead of returning an error: {e}"));
        }
        Err(e) => return Ok(format!("create failed cleanly: {e}")),
        Ok(sandbox) => sandbox,
    };
    let ran = tokio::time::timeout(REFUSAL_WAIT, sandbox.exec(shell("true"), |_| {})).await;
    let _ = sandbox.close().await;
    match ran {
        Err(_) => Err(format!(
            "exec did not return within {REFUSAL_WAIT:?} with HTTP refused"
        )),
        Ok(Err(e)) if trapped(&e) => {
            Err(format!("exec trapped instead of returning an error: {e}"))
        }
        Ok(Err(e)) => Ok(format!("exec failed cleanly: {e}")),
        Ok(Ok(_)) => Ok("it needs no HTTP to create and exec".into()),
    }
}

fn create(ctx: &Ctx) -> Checked {
    let wt = ctx.sandbox.worktree_path();
    ensure!(
        wt.starts_with('/'),
        "worktree-path must be absolute, got {wt:?}"
    );
    if ctx.kind == SandboxKind::BindMount {
        // The host side of a bind mount is the worktree the kit made.
        ensure!(
            ctx.host_worktree.join(".git").exists(),
            "create removed the host worktree"
        );
    }
    Ok(format!("worktree-path {wt}"))
}

async fn exec_output(ctx: &mut Ctx) -> Checked {
    let out = exec(
        ctx,
        shell("printf 'out 1\\nout 2\\n'; printf 'err\\n' >&2; exit 3"),
    )
    .await?;
    ensure!(
        out.stdout == "out 1\nout 2\n",
        "stdout should be \"out 1\\nout 2\\n\", got {:?}",
        out.stdout
    );
    ensure!(
        out.stderr == "err\n",
        "stderr should be \"err\\n\", got {:?}",
        out.stderr
    );
    ensure!(
        out.exit_code == 3,
        "exit code should be 3, got {}",
        out.exit_code
    );
    ensure!(
        !out.timed_out,
        "reported timed-out for a command that exited"
    );
    let ok = exec(ctx, shell("true")).await?;
    ensure!(ok.exit_code == 0, "`true` exited {}", ok.exit_code);
    Ok(String::new())
}

async fn exec_argv(ctx: &mut Ctx) -> Checked {
    let argv = ["printf", "%s|", "a b", "$HOME", "it's", "*"];
    let out = exec(
        ctx,
        request(Command::Argv(argv.iter().map(|a| a.to_string()).collect())),
    )
    .await?;
    ensure!(
        out.stdout.trim_end() == "a b|$HOME|it's|*|",
        "each argv element must arrive as one argument, uninterpreted: expected \"a b|$HOME|it's|*|\", got {:?} (stderr {:?})",
        out.stdout,
        out.stderr.trim()
    );
    Ok(String::new())
}

async fn exec_env(ctx: &mut Ctx) -> Checked {
    let mut req =
        shell(r#"printf '%s %s' "$SANDDUNE_CONFORMANCE_CREATE" "$SANDDUNE_CONFORMANCE_EXEC""#);
    req.env = crate::plugin::sandbox::env_vars(&[(
        "SANDDUNE_CONFORMANCE_EXEC".into(),
        "from-exec".into(),
    )]);
    let out = exec(ctx, req).await?;
    ensure!(
        out.stdout.trim_end() == "from-create from-exec",
        "create-options env and exec-request env must both reach the command: got {:?}",
        out.stdout.trim_end()
    );
    Ok(String::new())
}

/// The command prints a line, then waits for a file the kit creates only
/// once that line has reached the host: a provider that buffers output
/// until the command ends makes it give up and exit 7.
async fn exec_streams(ctx: &mut Ctx) -> Checked {
    const MARKER: &str = ".sanddune-conformance-go";
    let script = format!(
        "echo first; i=0; while [ ! -e {MARKER} ]; do i=$((i+1)); [ $i -gt 300 ] && exit 7; sleep 0.1; done; echo second"
    );
    let out = match ctx.kind {
        // The host worktree is the sandbox's: the kit creates the marker
        // on the host.
        SandboxKind::BindMount => {
            let marker = ctx.host_worktree.join(MARKER);
            let on_line = move |line: &OutputLine| {
                if line.text == "first" {
                    let _ = std::fs::write(&marker, "");
                }
            };
            let r = ctx.sandbox.exec(shell(&script), on_line).await;
            r.map_err(|e| format!("exec failed: {e}"))?
        }
        // Only the sandbox can create it: a lane (see `attach`) does.
        SandboxKind::Isolated => {
            let mut lane = ctx
                .sandbox
                .lane()
                .await
                .map_err(|e| format!("attach, for the lane that creates the marker: {e}"))?;
            let (tx, mut rx) = mpsc::unbounded_channel::<()>();
            let on_line = move |line: &OutputLine| {
                if line.text == "first" {
                    let _ = tx.send(());
                }
            };
            // `rx` ends when the exec (and with it `tx`) is done.
            let helper = async {
                match rx.recv().await {
                    Some(()) => lane
                        .exec(shell(&format!(": > {MARKER}")), |_| {})
                        .await
                        .map(drop),
                    None => Ok(()),
                }
            };
            let (out, helped) = tokio::join!(ctx.sandbox.exec(shell(&script), on_line), helper);
            let _ = lane.close().await;
            helped.map_err(|e| format!("the lane could not create the marker: {e}"))?;
            out.map_err(|e| format!("exec failed: {e}"))?
        }
    };
    ensure!(
        out.exit_code != 7,
        "the first line reached the host only after the command ended: send each line to the sink as it arrives"
    );
    ensure!(
        out.exit_code == 0 && out.stdout == "first\nsecond\n",
        "expected \"first\\nsecond\\n\" and exit 0, got {:?}, exit {} (stderr {:?})",
        out.stdout,
        out.exit_code,
        out.stderr.trim()
    );
    Ok(String::new())
}

/// Hex digits of what the command read on stdin.
const STDIN_HEX: &str = "od -An -tx1 -v | tr -d ' \\n'; echo";

async fn stdin_intact(ctx: &mut Ctx) -> Checked {
    // Larger than a pipe buffer, so a provider must keep reading output
    // while it writes stdin.
    let data = binary(200 * 1024);
    let mut req = shell(STDIN_HEX);
    req.stdin = Some(data.clone());
    let out = exec(ctx, req).await?;
    let expected: String = data.iter().map(|b| format!("{b:02x}")).collect();
    let got = out.stdout.trim();
    if got != expected {
        let read = got.len() / 2;
        let first_diff = got
            .as_bytes()
            .chunks(2)
            .zip(expected.as_bytes().chunks(2))
            .position(|(a, b)| a != b)
            .unwrap_or(read.min(data.len()));
        return Err(format!(
            "sent {} bytes on stdin, the command read {read}, first difference at byte {first_diff}: dropping stdin hands an agent an empty prompt (stderr {:?})",
            data.len(),
            out.stderr.trim()
        ));
    }
    ensure!(out.exit_code == 0, "exited {}", out.exit_code);
    Ok(format!("{} bytes", data.len()))
}

async fn stdin_empty(ctx: &mut Ctx) -> Checked {
    for (stdin, what) in [(Some(vec![]), "empty stdin"), (None, "no stdin")] {
        let mut req = shell("wc -c | tr -d ' '");
        req.stdin = stdin;
        let out = exec(ctx, req).await?;
        ensure!(
            out.exit_code == 0 && out.stdout.trim() == "0",
            "with {what} the command must read end-of-file at once: got {:?}, exit {}",
            out.stdout.trim(),
            out.exit_code
        );
    }
    Ok(String::new())
}

async fn exec_timeout(ctx: &mut Ctx) -> Checked {
    let mut req = shell("echo started; sleep 20; echo late");
    req.timeout_ms = Some(1_000);
    let out = exec(ctx, req).await?;
    ensure!(
        out.timed_out,
        "timeout-ms 1000 on `sleep 20`: not reported as timed-out (exit {}, stdout {:?})",
        out.exit_code,
        out.stdout
    );
    ensure!(
        !out.stdout.contains("late"),
        "reported timed-out but the command ran to the end"
    );
    ensure!(out.exit_code != 0, "a killed command must not exit 0");
    Ok(String::new())
}

async fn cwd_inside(ctx: &mut Ctx) -> Checked {
    setup(ctx, "mkdir -p cwd-sub").await?;
    let wt = ctx.sandbox.worktree_path().to_string();
    for cwd in ["cwd-sub".to_string(), format!("{wt}/cwd-sub")] {
        let mut req = shell("pwd");
        req.cwd = Some(cwd.clone());
        let out = exec(ctx, req).await?;
        ensure!(
            out.exit_code == 0 && out.stdout.trim_end().ends_with("/cwd-sub"),
            "cwd {cwd:?} should run in the worktree's cwd-sub, `pwd` said {:?} (exit {}, stderr {:?})",
            out.stdout.trim(),
            out.exit_code,
            out.stderr.trim()
        );
    }
    let out = exec(ctx, shell("pwd")).await?;
    ensure!(
        out.stdout.trim_end() == wt,
        "without a cwd the command must run in worktree-path {wt}, `pwd` said {:?}",
        out.stdout.trim()
    );
    Ok(String::new())
}

/// Seed 001: a cwd outside the sandbox is refused. Passing means the
/// command never ran in the kit's host directory outside the sandbox.
async fn cwd_outside(ctx: &mut Ctx) -> Checked {
    let outside = ctx.outside.display().to_string();
    let mut refused = 0;
    for cwd in [outside.clone(), escape_path(ctx, "")] {
        let mut req = shell(&format!("cat {OUTSIDE_FILE}"));
        req.cwd = Some(cwd.clone());
        match ctx.sandbox.exec(req, |_| {}).await {
            Err(_) => refused += 1,
            Ok(out) => ensure!(
                !out.stdout.contains(&ctx.token),
                "cwd {cwd:?} ran the command in the host directory {outside}, outside the sandbox: refuse a cwd outside the sandbox (seed 001)"
            ),
        }
    }
    Ok(if refused == 2 {
        String::new()
    } else {
        "not refused, but the host directory was not reachable".into()
    })
}

/// Seed 001: uploads to a `../` path that climbs out of the sandbox are
/// refused, and nothing lands on the host.
async fn upload_traversal(ctx: &mut Ctx) -> Checked {
    let src = ctx.host_tmp.join("upload.txt");
    std::fs::write(&src, "escaped").map_err(|e| e.to_string())?;
    let src_dir = ctx.host_tmp.join("upload-dir");
    std::fs::create_dir_all(&src_dir).map_err(|e| e.to_string())?;
    std::fs::write(src_dir.join("f.txt"), "escaped").map_err(|e| e.to_string())?;
    let mut problems = vec![];
    let mut attempts: Vec<(&str, &str)> = vec![
        ("write-file", "escaped-write.txt"),
        ("copy-file-in", "escaped-copy.txt"),
    ];
    if ctx.kind == SandboxKind::Isolated {
        attempts.push(("copy-in", "escaped-dir"));
    }
    for (op, leaf) in attempts {
        let target = escape_path(ctx, leaf);
        let r = match op {
            "write-file" => ctx.sandbox.write_file(&target, b"escaped").await,
            "copy-file-in" => ctx.sandbox.copy_file_in(&src, &target).await,
            _ => ctx.sandbox.copy_in(&src_dir, &target).await,
        };
        if ctx.outside.join(leaf).exists() {
            problems.push(format!(
                "{op} to {target:?} wrote {} on the host",
                ctx.outside.join(leaf).display()
            ));
        } else if r.is_ok() {
            problems.push(format!(
                "{op} accepted {target:?}, a `../` path that climbs out of the sandbox"
            ));
        }
    }
    ensure!(
        problems.is_empty(),
        "{}; refuse such paths (seed 001)",
        problems.join("; ")
    );
    Ok(String::new())
}

async fn mkdir(ctx: &mut Ctx) -> Checked {
    ensure!(
        ctx.sandbox.mkdir("mk/a/b", false).await.is_err(),
        "mkdir mk/a/b without recursive must fail when mk/a is missing"
    );
    ensure!(
        !sh_exists(ctx, "mk").await?,
        "mkdir mk/a/b without recursive failed but created mk: refuse before any change"
    );
    ctx.sandbox
        .mkdir("mk", false)
        .await
        .map_err(|e| format!("mkdir mk: {e}"))?;
    ctx.sandbox
        .mkdir("mk/a/b", true)
        .await
        .map_err(|e| format!("mkdir mk/a/b recursive: {e}"))?;
    ensure!(
        exec(ctx, shell("[ -d mk/a/b ]")).await?.exit_code == 0,
        "mkdir mk/a/b recursive succeeded but mk/a/b is not a directory in the sandbox"
    );
    ctx.sandbox
        .mkdir("mk/a/b", true)
        .await
        .map_err(|e| format!("mkdir recursive on an existing directory must succeed: {e}"))?;
    Ok(String::new())
}

async fn write_read(ctx: &mut Ctx) -> Checked {
    setup(ctx, "mkdir -p rw").await?;
    let data = binary(1024);
    ctx.sandbox
        .write_file("rw/bytes.bin", &data)
        .await
        .map_err(|e| format!("write-file rw/bytes.bin: {e}"))?;
    let size = exec(ctx, shell("wc -c < rw/bytes.bin | tr -d ' '")).await?;
    ensure!(
        size.stdout.trim() == "1024",
        "wrote 1024 bytes, a command in the sandbox sees {:?}",
        size.stdout.trim()
    );
    let back = ctx
        .sandbox
        .read_file("rw/bytes.bin")
        .await
        .map_err(|e| format!("read-file rw/bytes.bin: {e}"))?;
    ensure!(
        back == data,
        "read-file returned other bytes than were written ({} bytes)",
        back.len()
    );
    let wt = ctx.sandbox.worktree_path().to_string();
    let abs = ctx
        .sandbox
        .read_file(&format!("{wt}/rw/bytes.bin"))
        .await
        .map_err(|e| format!("read-file by absolute path: {e}"))?;
    ensure!(
        abs == data,
        "read-file by absolute path returned other bytes"
    );
    ctx.sandbox
        .write_file("rw/bytes.bin", b"short")
        .await
        .map_err(|e| format!("overwriting: {e}"))?;
    let back = ctx
        .sandbox
        .read_file("rw/bytes.bin")
        .await
        .map_err(|e| e.to_string())?;
    ensure!(
        back == b"short",
        "overwriting with 5 bytes must truncate, read back {} bytes",
        back.len()
    );
    ensure!(
        ctx.sandbox.read_file("rw/missing").await.is_err(),
        "read-file of a missing file must fail"
    );
    Ok(String::new())
}

/// Seed 002: stat never makes fields up. A field is either absent or true.
async fn stat(ctx: &mut Ctx) -> Checked {
    setup(
        ctx,
        "mkdir -p st/dir && printf 0123456789 > st/file && ln -s file st/link && : > st/old && touch -t 200001020304 st/old",
    )
    .await?;
    let s = &mut ctx.sandbox;
    let file = s
        .stat("st/file")
        .await
        .map_err(|e| format!("stat st/file: {e}"))?;
    ensure!(
        file.is_file && !file.is_directory,
        "a regular file: is-file {} is-directory {}",
        file.is_file,
        file.is_directory
    );
    ensure!(
        file.size.is_none_or(|n| n == 10),
        "a 10-byte file reported size {:?}: report the real size or none",
        file.size
    );
    ensure!(
        file.is_symlink != Some(true),
        "a regular file reported is-symlink true"
    );
    let dir = s
        .stat("st/dir")
        .await
        .map_err(|e| format!("stat st/dir: {e}"))?;
    ensure!(
        dir.is_directory && !dir.is_file,
        "a directory: is-file {} is-directory {}",
        dir.is_file,
        dir.is_directory
    );
    let link = s
        .stat("st/link")
        .await
        .map_err(|e| format!("stat st/link: {e}"))?;
    ensure!(
        link.is_symlink != Some(false),
        "a symlink reported is-symlink false: report it, or leave it absent when unknown"
    );
    let old = s
        .stat("st/old")
        .await
        .map_err(|e| format!("stat st/old: {e}"))?;
    // 2000-01-02 03:04 in any time zone.
    let (lo, hi) = (946_598_400_000u64, 946_857_600_000u64);
    ensure!(
        old.mtime_ms.is_none_or(|t| (lo..=hi).contains(&t)),
        "a file touched to 2000-01-02 reported mtime-ms {:?}: report the real time or none, never a made-up one",
        old.mtime_ms
    );
    ensure!(
        s.stat("st/missing").await.is_err(),
        "stat of a missing path must fail, not describe something"
    );
    let absent: Vec<&str> = [
        ("size", file.size.is_none()),
        ("mtime", old.mtime_ms.is_none()),
        ("is-symlink", link.is_symlink.is_none()),
    ]
    .iter()
    .filter(|(_, none)| *none)
    .map(|(name, _)| *name)
    .collect();
    Ok(if absent.is_empty() {
        String::new()
    } else {
        format!("leaves {} absent", absent.join(", "))
    })
}

async fn read_dir(ctx: &mut Ctx) -> Checked {
    setup(ctx, "mkdir -p rd/sub && : > rd/a && : > 'rd/b c'").await?;
    let mut names = ctx
        .sandbox
        .read_dir("rd")
        .await
        .map_err(|e| format!("read-dir rd: {e}"))?;
    names.sort();
    ensure!(
        names == ["a", "b c", "sub"],
        "read-dir rd should list the names [\"a\", \"b c\", \"sub\"] (names, not paths; no . or ..), got {names:?}"
    );
    ensure!(
        ctx.sandbox.read_dir("rd/missing").await.is_err(),
        "read-dir of a missing directory must fail"
    );
    Ok(String::new())
}

async fn exists(ctx: &mut Ctx) -> Checked {
    setup(ctx, "mkdir -p ex && : > ex/f").await?;
    for (path, want) in [("ex/f", true), ("ex", true), ("ex/missing", false)] {
        let got =
            ctx.sandbox.exists(path).await.map_err(|e| {
                format!("exists {path}: {e} (a missing path is false, not an error)")
            })?;
        ensure!(got == want, "exists {path} should be {want}, got {got}");
    }
    Ok(String::new())
}

/// Seed 002: `recursive` and `force` are honoured exactly, and a refused
/// removal changes nothing.
async fn remove(ctx: &mut Ctx) -> Checked {
    setup(
        ctx,
        "mkdir -p rm/full/inner rm/target && : > rm/full/inner/f && : > rm/file && : > rm/target/keep && ln -s target rm/link",
    )
    .await?;
    ensure!(
        ctx.sandbox
            .remove("rm/missing", false, false)
            .await
            .is_err(),
        "removing a missing path without force must fail"
    );
    ctx.sandbox
        .remove("rm/missing", false, true)
        .await
        .map_err(|e| format!("removing a missing path with force must succeed: {e}"))?;
    for force in [false, true] {
        ensure!(
            ctx.sandbox.remove("rm/full", false, force).await.is_err(),
            "removing a non-empty directory without recursive (force {force}) must fail"
        );
        ensure!(
            sh_exists(ctx, "rm/full/inner/f").await?,
            "a refused non-recursive removal (force {force}) deleted rm/full/inner/f: refuse before removing anything"
        );
    }
    ctx.sandbox
        .remove("rm/file", false, false)
        .await
        .map_err(|e| format!("removing a file: {e}"))?;
    ensure!(!sh_exists(ctx, "rm/file").await?, "rm/file is still there");
    ctx.sandbox
        .remove("rm/link", true, false)
        .await
        .map_err(|e| format!("removing a symlink to a directory: {e}"))?;
    ensure!(!sh_exists(ctx, "rm/link").await?, "rm/link is still there");
    ensure!(
        sh_exists(ctx, "rm/target/keep").await?,
        "removing the symlink rm/link recursively deleted what it points to: remove the link itself"
    );
    ctx.sandbox
        .remove("rm/full", true, false)
        .await
        .map_err(|e| format!("removing a directory recursively: {e}"))?;
    ensure!(!sh_exists(ctx, "rm/full").await?, "rm/full is still there");
    Ok(String::new())
}

async fn copy_round_trip(ctx: &mut Ctx) -> Checked {
    let data = binary(64 * 1024);
    let src = ctx.host_tmp.join("in.bin");
    std::fs::write(&src, &data).map_err(|e| e.to_string())?;
    ctx.sandbox
        .copy_file_in(&src, "cp/deep/in.bin")
        .await
        .map_err(|e| format!("copy-file-in (creating parents): {e}"))?;
    let inside = ctx
        .sandbox
        .read_file("cp/deep/in.bin")
        .await
        .map_err(|e| format!("read-file after copy-file-in: {e}"))?;
    ensure!(inside == data, "copy-file-in changed the bytes");
    let dest = ctx.host_tmp.join("out/nested/out.bin");
    ctx.sandbox
        .copy_file_out("cp/deep/in.bin", &dest)
        .await
        .map_err(|e| format!("copy-file-out (creating parents): {e}"))?;
    let out = std::fs::read(&dest).map_err(|e| format!("reading {}: {e}", dest.display()))?;
    ensure!(out == data, "the round trip changed the bytes");
    Ok(format!("{} bytes", data.len()))
}

async fn copy_in(ctx: &mut Ctx) -> Checked {
    let tree = ctx.host_tmp.join("tree");
    std::fs::create_dir_all(tree.join("sub")).map_err(|e| e.to_string())?;
    std::fs::write(tree.join("a.txt"), "a").map_err(|e| e.to_string())?;
    std::fs::write(tree.join("sub/b.bin"), binary(300)).map_err(|e| e.to_string())?;
    ctx.sandbox
        .copy_in(&tree, "ci/tree")
        .await
        .map_err(|e| format!("copy-in of a directory: {e}"))?;
    let a = ctx.sandbox.read_file("ci/tree/a.txt").await;
    let b = ctx.sandbox.read_file("ci/tree/sub/b.bin").await;
    ensure!(
        a.as_deref().ok() == Some(b"a".as_slice()) && b.ok() == Some(binary(300)),
        "copy-in of a directory must put its contents in ci/tree itself (ci/tree/a.txt, ci/tree/sub/b.bin)"
    );
    ensure!(
        !sh_exists(ctx, "ci/tree/tree").await?,
        "copy-in nested the directory as ci/tree/tree"
    );
    ctx.sandbox
        .copy_in(&tree.join("a.txt"), "ci/one.txt")
        .await
        .map_err(|e| format!("copy-in of a file: {e}"))?;
    let one = ctx
        .sandbox
        .read_file("ci/one.txt")
        .await
        .map_err(|e| e.to_string())?;
    ensure!(one == b"a", "copy-in of a file changed its bytes");
    Ok(String::new())
}

/// The host attaches lanes to run hooks side by side: a lane sees the same
/// sandbox, and closing it leaves the sandbox up.
async fn attach(ctx: &mut Ctx) -> Checked {
    setup(ctx, "mkdir -p at && printf main > at/from-main").await?;
    let mut lane = ctx
        .sandbox
        .lane()
        .await
        .map_err(|e| format!("attach: {e}"))?;
    let seen = lane.exec(shell("cat at/from-main"), |_| {}).await;
    let _ = lane.close().await;
    let seen = seen.map_err(|e| format!("exec in the lane: {e}"))?;
    ensure!(
        seen.stdout == "main\n",
        "the lane does not see the sandbox's files: `cat at/from-main` gave {:?}",
        seen.stdout
    );
    let after = exec(ctx, shell("cat at/from-main")).await?;
    ensure!(
        after.stdout == "main\n",
        "closing the lane tore the sandbox down"
    );
    Ok(String::new())
}

/// `find` (0.3) for the run, which has one sandbox: while it is open, one
/// state, or none from a provider whose sandboxes cannot outlive the
/// host's process; once it is closed, none. (A found state need not equal
/// the sandbox's own: it only has to reach the sandbox for `close`.) None
/// before 0.3.
async fn find(
    provider: &SandboxProvider,
    spec: &SandboxSpec,
    open: bool,
) -> Option<Result<String, String>> {
    let found = match provider.find(spec).await {
        Ok(None) => return None,
        Ok(Some(found)) => found,
        Err(e) => return Some(Err(format!("find: {e}"))),
    };
    Some(match (open, found.len()) {
        (true, 0) => Ok("finds nothing: its sandboxes do not outlive the host's process".into()),
        (true, 1) | (false, 0) => Ok(String::new()),
        (true, _) => Err(format!(
            "find returned {} states for a run with one sandbox: {found:?}",
            found.len()
        )),
        (false, _) => Err(format!(
            "find still returns {found:?} for the run after its sandbox was closed"
        )),
    })
}

async fn close(ctx: &mut Ctx) -> Checked {
    ctx.sandbox
        .close()
        .await
        .map_err(|e| format!("close: {e}"))?;
    ctx.sandbox
        .close_again()
        .await
        .map_err(|e| format!("a second close must succeed too: {e}"))?;
    if ctx.kind == SandboxKind::BindMount {
        ensure!(
            ctx.host_worktree.join("README.md").exists(),
            "closing a bind-mount sandbox removed the host worktree"
        );
    }
    Ok(String::new())
}
