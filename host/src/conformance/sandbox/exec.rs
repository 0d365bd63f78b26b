//! `exec`: output and exit code, argv, env, streaming, stdin, timeouts.

use tokio::sync::mpsc;

use super::support::{binary, exec, request, shell};
use super::{Checked, Ctx};
use crate::capability::output::OutputLine;
use crate::plugin::sandbox::{Command, SandboxKind};

pub(super) async fn exec_output(ctx: &mut Ctx) -> Checked {
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

pub(super) async fn exec_argv(ctx: &mut Ctx) -> Checked {
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

pub(super) async fn exec_env(ctx: &mut Ctx) -> Checked {
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
pub(super) async fn exec_streams(ctx: &mut Ctx) -> Checked {
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
pub(super) const STDIN_HEX: &str = "od -An -tx1 -v | tr -d ' \\n'; echo";

pub(super) async fn stdin_intact(ctx: &mut Ctx) -> Checked {
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

pub(super) async fn stdin_empty(ctx: &mut Ctx) -> Checked {
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

pub(super) async fn exec_timeout(ctx: &mut Ctx) -> Checked {
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
