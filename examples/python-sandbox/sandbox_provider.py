"""One live python-sandbox sandbox: the `sandbox` resource."""

import os
import stat as stat_mode

from componentize_py_types import Err
from wit_world.exports import sandbox_provider
from wit_world.exports.sandbox_provider import (
    Command_Shell,
    ExecRequest,
    ExecResult,
    FileStat,
)
from wit_world.imports import process
from wit_world.imports.output import OutputSink
from wit_world.imports.process import SpawnOptions
from wit_world.imports.sanddune_plugin_types import EnvVar

from paths import confine, shell_quote

# Copies one file from $0 to $1, creating $1's parents. The paths arrive as
# arguments, never quoted into the script.
COPY_FILE = 'mkdir -p "$(dirname "$1")" && cp -- "$0" "$1"'
# A directory's contents land in $1 itself, never in $1/<name>.
COPY_TREE = (
    'if [ -d "$0" ]; then mkdir -p "$1" && cp -R -- "$0"/. "$1"; '
    'else mkdir -p "$(dirname "$1")" && cp -- "$0" "$1"; fi'
)


class Sandbox(sandbox_provider.Sandbox):
    def __init__(self, root: str, env: list[EnvVar]):
        self.root = root
        self.worktree = f"{root}/repo"
        self.home = f"{root}/home"
        self.env = env

    def resolve(self, path: str) -> str:
        """`path` (relative to the worktree) inside the sandbox, or refused."""
        full = confine(self.root, self.worktree, path)
        if full is None:
            raise Err(f"path confinement violation: {path} is outside the sandbox {self.root}")
        return full

    def spawn_options(self, request: ExecRequest, terminal: bool) -> SpawnOptions:
        cwd = self.worktree if request.cwd is None else self.resolve(request.cwd)
        if isinstance(request.command, Command_Shell):
            script = request.command.value
        elif not request.command.value:
            raise Err("empty argv")
        else:
            script = "exec " + " ".join(shell_quote(a) for a in request.command.value)
        args = ["-c"]
        if request.sudo:
            # The script travels as $0 so it is never re-quoted.
            args.append('if [ "$(id -u)" = 0 ]; then exec sh -c "$0"; else exec sudo -n sh -c "$0"; fi')
        args.append(script)
        return SpawnOptions(
            program="sh",
            args=args,
            cwd=cwd,
            env=[EnvVar("HOME", self.home), *self.env, *request.env],
            timeout_ms=request.timeout_ms,
            terminal=terminal,
        )

    def worktree_path(self) -> str:
        return self.worktree

    def state(self) -> str:
        return self.root

    def exec(self, request: ExecRequest, sink: OutputSink) -> ExecResult:
        child = process.spawn(self.spawn_options(request, terminal=False))
        if request.stdin:
            # Never run the command without its stdin: an agent would get
            # an empty prompt.
            try:
                child.write_stdin(request.stdin)
            except Err as e:
                child.kill()
                child.wait()
                raise Err(f"writing stdin: {e.value}")
        child.close_stdin()
        while (line := child.read_line()) is not None:
            sink.write(line)
        status = child.wait()
        return ExecResult(
            exit_code=-1 if status.code is None else status.code,
            timed_out=status.timed_out,
        )

    def interactive_exec(self, request: ExecRequest) -> int:
        if request.stdin:
            raise Err("interactive-exec cannot deliver stdin bytes: the terminal is stdin")
        status = process.spawn(self.spawn_options(request, terminal=True)).wait()
        return -1 if status.code is None else status.code

    def copy_in(self, host_path: str, sandbox_path: str) -> None:
        run_sh(COPY_TREE, host_path, self.resolve(sandbox_path))

    def copy_file_in(self, host_path: str, sandbox_path: str) -> None:
        run_sh(COPY_FILE, host_path, self.resolve(sandbox_path))

    def copy_file_out(self, sandbox_path: str, host_path: str) -> None:
        run_sh(COPY_FILE, self.resolve(sandbox_path), host_path)

    def read_file(self, path: str) -> bytes:
        full = self.resolve(path)
        with os_errors(f"reading {path}"):
            with open(full, "rb") as f:
                return f.read()

    def write_file(self, path: str, data: bytes) -> None:
        full = self.resolve(path)
        with os_errors(f"writing {path}"):
            with open(full, "wb") as f:
                f.write(data)

    def stat(self, path: str) -> FileStat:
        full = self.resolve(path)
        with os_errors(f"stat {path}"):
            link = os.lstat(full)
        # Follow a symlink for the rest; a dangling one reports itself.
        try:
            st = os.stat(full)
        except OSError:
            st = link
        return FileStat(
            is_file=stat_mode.S_ISREG(st.st_mode),
            is_directory=stat_mode.S_ISDIR(st.st_mode),
            is_symlink=stat_mode.S_ISLNK(link.st_mode),
            size=st.st_size,
            mtime_ms=st.st_mtime_ns // 1_000_000,
        )

    def read_dir(self, path: str) -> list[str]:
        full = self.resolve(path)
        with os_errors(f"reading {path}"):
            return sorted(os.listdir(full))

    def exists(self, path: str) -> bool:
        full = self.resolve(path)
        try:
            os.lstat(full)
            return True
        except FileNotFoundError:
            return False
        except OSError as e:
            raise Err(f"stat {path}: {e}")

    def mkdir(self, path: str, recursive: bool) -> None:
        full = self.resolve(path)
        with os_errors(f"mkdir {path}"):
            if recursive:
                os.makedirs(full, exist_ok=True)
            else:
                os.mkdir(full)

    def remove(self, path: str, recursive: bool, force: bool) -> None:
        full = self.resolve(path)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            if force:
                return
            raise Err(f"removing {path}: no such file or directory")
        with os_errors(f"removing {path}"):
            if not stat_mode.S_ISDIR(st.st_mode):
                # A symlink is removed itself, never followed.
                os.unlink(full)
            elif recursive:
                remove_tree(full)
            else:
                # Fails on a non-empty directory before removing anything.
                os.rmdir(full)

    def keep(self, name: str) -> str:
        raise Err("python-sandbox keeps no snapshots")

    def close(self) -> None:
        try:
            remove_tree(self.root)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise Err(f"removing sandbox {self.root}: {e}")


class os_errors:
    """Turns an OSError into the WIT error string instead of a trap."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if isinstance(error, OSError):
            raise Err(f"{self.what}: {error.strerror or error}")
        return False


def remove_tree(path: str) -> None:
    """Like shutil.rmtree, without following symlinks, in plain os calls."""
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                remove_tree(entry.path)
            else:
                os.unlink(entry.path)
    os.rmdir(path)


def run_sh(script: str, a0: str, a1: str) -> None:
    """Run `sh -c script a0 a1`, failing with its output unless it exits 0."""
    child = process.spawn(
        SpawnOptions(
            program="sh",
            args=["-c", script, a0, a1],
            cwd=None,
            env=[],
            timeout_ms=None,
            terminal=False,
        )
    )
    child.close_stdin()
    output = []
    while (line := child.read_line()) is not None:
        output.append(line.text)
    status = child.wait()
    if status.code != 0:
        detail = "\n".join(output)
        raise Err(f"copying {a0} to {a1} failed ({status.code}): {detail}")
