// Drives the official @vercel/sandbox SDK against sanddune's mock of the
// Vercel Sandbox API (tests/vercel-mock). The SDK validates every response
// with its own schemas (zod), so any shape the mock gets wrong fails here.
//
//   VERCEL_MOCK_URL=http://127.0.0.1:PORT node check.mjs
//
// Prints one `ok <step>` line per step; exits non-zero on the first failure.
// The snapshot steps come last, with sandboxes of their own.

import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { APIError, Sandbox, Snapshot } from "@vercel/sandbox";

const mock = process.env.VERCEL_MOCK_URL;
if (!mock) throw new Error("set VERCEL_MOCK_URL");
const credentials = {
  token: process.env.VERCEL_MOCK_TOKEN ?? "mock-token",
  teamId: process.env.VERCEL_MOCK_TEAM ?? "team_mock",
  projectId: process.env.VERCEL_MOCK_PROJECT ?? "prj_mock",
};
// The SDK talks to https://vercel.com/api; send the same requests to the mock.
const fetchToMock = (url, opts = {}) => {
  const { dispatcher, ...rest } = opts;
  const target = String(url).replace("https://vercel.com/api", mock);
  assert.notEqual(target, String(url), `unexpected URL ${url}`);
  return fetch(target, rest);
};
const ok = (step) => console.log(`ok ${step}`);

const sandbox = await Sandbox.create({
  ...credentials,
  fetch: fetchToMock,
  timeout: 120_000,
  resources: { vcpus: 2 },
  ports: [3000],
  tags: { "sanddune-run": "sdk-check" },
});
assert.equal(sandbox.status, "running");
assert.ok(sandbox.name);
assert.equal(sandbox.domain(3000).startsWith("https://"), true);
ok("create");

// Streamed output: the first chunk arrives before the command ends.
const chunks = [];
const started = Date.now();
const sink = (stream) =>
  new Writable({
    write(chunk, _enc, done) {
      chunks.push({ stream, data: chunk.toString(), at: Date.now() - started });
      done();
    },
  });
const finished = await sandbox.runCommand({
  cmd: "sh",
  args: ["-c", "echo first; sleep 0.5; echo second >&2; exit 4"],
  env: { GREETING: "hi" },
  stdout: sink("stdout"),
  stderr: sink("stderr"),
});
assert.equal(finished.exitCode, 4);
assert.equal(await finished.stdout(), "first\n");
assert.equal(await finished.stderr(), "second\n");
const first = chunks.find((c) => c.data === "first\n");
const second = chunks.find((c) => c.data === "second\n");
assert.ok(first && second, JSON.stringify(chunks));
assert.ok(second.at - first.at >= 400, `not streamed: ${JSON.stringify(chunks)}`);
ok("exec streamed");

const env = await sandbox.runCommand({ cmd: "sh", args: ["-c", 'printf %s "$GREETING"'], env: { GREETING: "hello" } });
assert.equal(await env.stdout(), "hello");
ok("exec env");

// Files: write (gzipped tar), read back, missing file, mkdir.
const bytes = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 251));
await sandbox.writeFiles([
  { path: "hello.txt", content: Buffer.from("hello from the sdk\n") },
  { path: "nested/deep/bin.dat", content: bytes },
  { path: "run.sh", content: Buffer.from("#!/bin/sh\necho ran\n"), mode: 0o755 },
]);
assert.equal((await sandbox.readFileToBuffer({ path: "hello.txt" })).toString(), "hello from the sdk\n");
assert.deepEqual(await sandbox.readFileToBuffer({ path: "nested/deep/bin.dat" }), bytes);
assert.equal(await sandbox.readFileToBuffer({ path: "no-such-file" }), null);
const ran = await sandbox.runCommand("./run.sh");
assert.equal(await ran.stdout(), "ran\n");
await sandbox.mkDir("made");
const isDir = await sandbox.runCommand("test", ["-d", "made"]);
assert.equal(isDir.exitCode, 0);
ok("files");

// Detached command, its logs, kill, wait.
const detached = await sandbox.runCommand({ cmd: "sh", args: ["-c", "echo tick; sleep 30"], detached: true });
for await (const log of detached.logs()) {
  assert.equal(log.stream, "stdout");
  assert.equal(log.data, "tick\n");
  break;
}
await detached.kill("SIGKILL");
const killed = await detached.wait();
assert.notEqual(killed.exitCode, 0);
ok("kill");

const listed = await Sandbox.list({ ...credentials, fetch: fetchToMock, tags: { "sanddune-run": "sdk-check" } });
assert.ok(listed.sandboxes.some((s) => s.name === sandbox.name), JSON.stringify(listed.sandboxes));
// A page per sandbox with limit 1: the SDK follows pagination.next.
const another = await Sandbox.create({ ...credentials, fetch: fetchToMock, tags: { "sanddune-run": "sdk-check" } });
const paged = await Sandbox.list({ ...credentials, fetch: fetchToMock, tags: { "sanddune-run": "sdk-check" }, limit: 1 });
assert.equal(paged.sandboxes.length, 1);
const all = (await paged.toArray()).map((s) => s.name).sort();
assert.deepEqual(all, [sandbox.name, another.name].sort());
await another.stop();
await another.delete();
ok("list");

await sandbox.stop();
assert.equal(sandbox.status, "stopped");
ok("stop");
await sandbox.delete();
ok("delete");

// ---- Snapshots --------------------------------------------------------
// A snapshot stops its sandbox; a new sandbox starts from its files (modes,
// symlinks and HOME too); a deleted snapshot can no longer be started from.
const source = await Sandbox.create({ ...credentials, fetch: fetchToMock, tags: { "sanddune-run": "sdk-check" } });
await source.writeFiles([
  { path: "kept.txt", content: Buffer.from("kept by the snapshot\n") },
  { path: "tool.sh", content: Buffer.from("#!/bin/sh\necho tool\n"), mode: 0o755 },
]);
const linked = await source.runCommand("sh", ["-c", 'ln -s kept.txt link.txt && echo home > "$HOME/.in-home"']);
assert.equal(linked.exitCode, 0, await linked.stderr());
const sleeper = await source.runCommand({ cmd: "sleep", args: ["30"], detached: true });
const sourceSession = source.currentSession().sessionId;
const snapshot = await source.snapshot();
assert.match(snapshot.snapshotId, /^snap_/);
assert.equal(snapshot.status, "created");
assert.equal(snapshot.sourceSessionId, sourceSession);
assert.ok(snapshot.sizeBytes > 0, String(snapshot.sizeBytes));
assert.ok(snapshot.expiresAt > snapshot.createdAt, String(snapshot.expiresAt));
assert.equal(source.status, "stopped");
assert.ok(source.currentSession().snapshottedAt instanceof Date);
// The snapshot stopped the session, and its commands with it.
assert.notEqual((await sleeper.wait()).exitCode, 0);
ok("snapshot");

const got = await Snapshot.get({ ...credentials, fetch: fetchToMock, snapshotId: snapshot.snapshotId });
assert.equal(got.snapshotId, snapshot.snapshotId);
assert.equal(got.status, "created");
assert.equal(got.sizeBytes, snapshot.sizeBytes);
const snapshots = await Snapshot.list({ ...credentials, fetch: fetchToMock, name: source.name });
assert.deepEqual(snapshots.snapshots.map((s) => s.id), [snapshot.snapshotId]);
ok("snapshot get and list");

// A stopped session cannot be snapshotted (the session object, not the
// sandbox, so the SDK does not try to resume it).
await assert.rejects(source.currentSession().snapshot(), (e) => {
  assert.ok(e instanceof APIError, String(e));
  assert.equal(e.response.status, 410);
  assert.equal(e.json.error.code, "sandbox_stopped");
  return true;
});
ok("snapshot of a stopped session");

const restored = await Sandbox.create({
  ...credentials,
  fetch: fetchToMock,
  source: { type: "snapshot", snapshotId: snapshot.snapshotId },
  tags: { "sanddune-run": "sdk-check" },
});
assert.equal(restored.status, "running");
assert.notEqual(restored.name, source.name);
assert.equal(restored.sourceSnapshotId, snapshot.snapshotId);
assert.equal((await restored.readFileToBuffer({ path: "kept.txt" })).toString(), "kept by the snapshot\n");
assert.equal(await (await restored.runCommand("./tool.sh")).stdout(), "tool\n");
assert.equal(await (await restored.runCommand("readlink", ["link.txt"])).stdout(), "kept.txt\n");
assert.equal(await (await restored.runCommand("sh", ["-c", 'cat "$HOME/.in-home"'])).stdout(), "home\n");
ok("create from snapshot");

await snapshot.delete();
assert.equal(snapshot.status, "deleted");
const gone = await Snapshot.get({ ...credentials, fetch: fetchToMock, snapshotId: snapshot.snapshotId });
assert.equal(gone.status, "deleted");
const after = await Snapshot.list({ ...credentials, fetch: fetchToMock, name: source.name });
assert.deepEqual(after.snapshots, []);
await assert.rejects(
  Sandbox.create({ ...credentials, fetch: fetchToMock, source: { type: "snapshot", snapshotId: snapshot.snapshotId } }),
  (e) => {
    assert.ok(e instanceof APIError, String(e));
    assert.equal(e.response.status, 410);
    assert.equal(e.json.error.code, "snapshot_not_found");
    return true;
  },
);
await assert.rejects(Snapshot.get({ ...credentials, fetch: fetchToMock, snapshotId: "snap_unknown" }), (e) => {
  assert.ok(e instanceof APIError, String(e));
  assert.equal(e.response.status, 404);
  return true;
});
ok("snapshot delete");

await restored.stop();
await restored.delete();
await source.delete();
ok("snapshot cleanup");
