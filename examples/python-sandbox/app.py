"""python-sandbox: an isolated sandbox provider written in Python.

Each sandbox is a directory `sbx-<hex>/` under the scratch dir the host
grants: `repo/` is the worktree the host syncs the repository into, `home/`
is HOME for every command. Commands run on the host through `sh`, the only
program this provider asks for, so like test-isolated it isolates nothing
beyond the directory: an example of the contract, not a security boundary.

The resource class lives in `sandbox_provider.py`, the module name
componentize-py expects for resources of the `sandbox-provider` interface.
"""

import os

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.sandbox_provider import (
    CreateOptions,
    PreflightError_Options,
    PreflightOptions,
    ProviderInfo,
    SandboxKind,
)
from wit_world.imports.sanddune_plugin_types import CapabilityRequest

from paths import normalize
from sandbox_provider import Sandbox


class SandboxProvider(exports.SandboxProvider):
    def describe(self) -> ProviderInfo:
        return ProviderInfo(
            name="python-sandbox",
            version="0.1.0",
            description="An example isolated sandbox provider in Python: a directory "
            "under its scratch dir, commands run by sh (no isolation beyond the directory)",
            kind=SandboxKind.ISOLATED,
            config=[],
            capabilities=[
                CapabilityRequest(kind="program", value="sh"),
                CapabilityRequest(kind="scratch-dir", value=""),
            ],
            container_engine=None,
            # It keeps no snapshots: the host never calls keep or remove_snapshot.
            snapshots=False,
        )

    def preflight(self, options: PreflightOptions) -> None:
        # Checked before the host creates anything: this provider takes no options.
        if options.config:
            raise Err(PreflightError_Options(f"python-sandbox has no option {options.config[0][0]!r}"))

    def create(self, options: CreateOptions) -> Sandbox:
        scratch = scratch_dir(options)
        root = f"{scratch}/sbx-{os.urandom(8).hex()}"
        try:
            # mkdir, not makedirs: a sandbox directory is never reused.
            os.mkdir(root)
            sandbox = Sandbox(root, options.env)
            # Empty: the host fills it with `git init` and a bundle.
            os.mkdir(sandbox.worktree)
            os.mkdir(sandbox.home)
        except OSError as e:
            raise Err(f"creating sandbox {root}: {e}")
        return sandbox

    def find(self, options: CreateOptions) -> list[str]:
        # Empty: a sandbox is a directory in the run's scratch dir, which the host removes by run id.
        return []

    def remove_snapshot(self, options: CreateOptions, id: str) -> None:
        raise Err(f"python-sandbox keeps no snapshots, so it has no {id}")

    def attach(self, state: str, options: CreateOptions) -> Sandbox:
        scratch = scratch_dir(options)
        root = normalize(state)
        name = root[len(scratch) + 1 :] if root.startswith(scratch + "/") else ""
        if not name.startswith("sbx-") or "/" in name:
            raise Err(f"not a python-sandbox sandbox under {scratch}: {state}")
        if not os.path.isdir(root):
            raise Err(f"sandbox {state} does not exist")
        return Sandbox(root, options.env)


def scratch_dir(options: CreateOptions) -> str:
    if options.config:
        raise Err(f"python-sandbox has no option {options.config[0][0]!r}")
    if options.scratch_dir is None:
        raise Err("python-sandbox needs the scratch-dir capability")
    return normalize(options.scratch_dir)
