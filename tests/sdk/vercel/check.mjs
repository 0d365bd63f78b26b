// Drives the official @vercel/sandbox SDK against sanddune's mock of the
// Vercel Sandbox API (tests/vercel-mock). The SDK validates every response
// with its own schemas (zod), so any shape the mock gets wrong fails here.
//
//   VERCEL_MOCK_URL=http://127.0.0.1:PORT node check.mjs
//
// Prints one `ok <step>` line per step; exits non-zero on the first failure.

import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { Sandbox } from "@vercel/sandbox";

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
