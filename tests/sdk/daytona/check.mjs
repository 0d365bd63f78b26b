// Drives the official @daytonaio/sdk against sanddune's mock of the Daytona
// API and toolbox (tests/daytona-mock). The SDK reads the answers the way
// it reads Daytona's; a shape the mock gets wrong fails a step here.
//
//   DAYTONA_MOCK_URL=http://127.0.0.1:PORT node check.mjs
//
// Prints one `ok <step>` line per step; exits non-zero on the first failure.

import assert from "node:assert/strict";
import { Daytona } from "@daytonaio/sdk";

const mock = process.env.DAYTONA_MOCK_URL;
if (!mock) throw new Error("set DAYTONA_MOCK_URL");
const ok = (step) => console.log(`ok ${step}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const daytona = new Daytona({
  apiKey: process.env.DAYTONA_MOCK_KEY ?? "mock-api-key",
  apiUrl: `${mock}/api`,
  target: "us",
});

// Create: the SDK waits until the sandbox is started.
const sandbox = await daytona.create(
  {
    labels: { "sanddune-run": "sdk-check" },
    autoStopInterval: 30,
    autoDeleteInterval: 0,
    envVars: { FROM_CREATE: "yes" },
  },
  { timeout: 30 },
);
assert.equal(sandbox.state, "started");
assert.ok(sandbox.id);
assert.equal(sandbox.labels["sanddune-run"], "sdk-check");
assert.ok(sandbox.toolboxProxyUrl.startsWith(mock));
ok("create");

// List by label, a page per sandbox with limit 1: the SDK follows nextCursor.
const second = await daytona.create({ labels: { "sanddune-run": "sdk-check" } }, { timeout: 30 });
const listed = [];
for await (const s of daytona.list({ labels: { "sanddune-run": "sdk-check" }, limit: 1 })) listed.push(s.id);
assert.deepEqual(listed.sort(), [sandbox.id, second.id].sort());
await second.delete();
const left = [];
for await (const s of daytona.list({ labels: { "sanddune-run": "sdk-check" } })) left.push(s.id);
assert.deepEqual(left, [sandbox.id]);
ok("list");

const workDir = await sandbox.getWorkDir();
const home = await sandbox.getUserHomeDir();
assert.ok(workDir.startsWith("/") && home.startsWith("/"), `${workDir} ${home}`);
ok("dirs");

// A session, an async command in it, and its state and log followed until
// the exit code: stdout and stderr apart, output before the end. (A
// session sources its commands: `exit` would end the session's shell.)
const session = "sdk-session";
await sandbox.process.createSession(session);
const started = await sandbox.process.executeSessionCommand(session, {
  command: "echo first; echo oops >&2; sleep 1; echo second; (exit 4)",
  runAsync: true,
});
assert.ok(started.cmdId);
let sawEarly = false;
let command;
for (;;) {
  command = await sandbox.process.getSessionCommand(session, started.cmdId);
  const logs = await sandbox.process.getSessionCommandLogs(session, started.cmdId);
  if (command.exitCode === undefined && logs.stdout === "first\n") sawEarly = true;
  if (command.exitCode !== undefined && command.exitCode !== null) {
    assert.equal(logs.stdout, "first\nsecond\n");
    assert.equal(logs.stderr, "oops\n");
    break;
  }
  await sleep(50);
}
assert.equal(command.exitCode, 4);
assert.equal(command.id, started.cmdId);
assert.ok(sawEarly, "the first line was in the log before the command ended");
ok("exec streamed");

// A synchronous command in the session sees the session's state (cd) and
// the create's env.
await sandbox.process.executeSessionCommand(session, { command: "cd /tmp" });
const sync = await sandbox.process.executeSessionCommand(session, {
  command: 'pwd; echo "$FROM_CREATE" >&2',
});
assert.equal(sync.exitCode, 0);
assert.equal(sync.stdout, "/tmp\n");
assert.equal(sync.stderr, "yes\n");
const info = await sandbox.process.getSession(session);
assert.equal(info.sessionId, session);
assert.equal(info.commands.length, 3);
ok("exec sync");

// stdin of an async command stays open until input ends it.
const reader = await sandbox.process.executeSessionCommand(session, {
  command: "read line; echo got:$line",
  runAsync: true,
});
await sandbox.process.sendSessionCommandInput(session, reader.cmdId, "hello\n");
for (;;) {
  const c = await sandbox.process.getSessionCommand(session, reader.cmdId);
  if (c.exitCode !== undefined && c.exitCode !== null) break;
  await sleep(50);
}
const readLogs = await sandbox.process.getSessionCommandLogs(session, reader.cmdId);
assert.equal(readLogs.stdout, "got:hello\n");
ok("input");

// One-shot execute: combined output.
const exec = await sandbox.process.executeCommand("echo out; echo err >&2; exit 2");
assert.equal(exec.exitCode, 2);
assert.equal(exec.result, "out\nerr\n");
ok("execute");

// Files: bulk upload (parents made), download, folder, delete.
await sandbox.fs.uploadFiles([
  { source: Buffer.from("hello from the sdk\n"), destination: `${home}/up/a/one.txt` },
  { source: Buffer.from([0, 1, 2, 255]), destination: `${home}/up/two.bin` },
]);
const one = await sandbox.fs.downloadFile(`${home}/up/a/one.txt`);
assert.equal(one.toString(), "hello from the sdk\n");
const two = await sandbox.fs.downloadFile(`${home}/up/two.bin`);
assert.deepEqual([...two], [0, 1, 2, 255]);
await assert.rejects(sandbox.fs.downloadFile(`${home}/up/missing.txt`));
await sandbox.fs.createFolder(`${home}/made/deep`, "755");
const check = await sandbox.process.executeCommand(`test -d ${home}/made/deep && echo dir`);
assert.equal(check.result.trim(), "dir");
await sandbox.fs.deleteFile(`${home}/up`, true);
await assert.rejects(sandbox.fs.downloadFile(`${home}/up/two.bin`));
ok("files");

// Snapshot: the sandbox's tree becomes a snapshot. The sandbox is
// `snapshotting` meanwhile and the SDK polls it until it is back; the
// snapshot is then active, by name or by id, and listed.
await sandbox.fs.uploadFiles([
  { source: Buffer.from("kept in the snapshot\n"), destination: `${home}/kept/note.txt` },
]);
const snapName = "sdk-check-snapshot";
await sandbox._experimental_createSnapshot(snapName, 30);
assert.equal(sandbox.state, "started");
const snap = await daytona.snapshot.get(snapName);
assert.equal(snap.name, snapName);
assert.equal(snap.state, "active");
assert.equal((await daytona.snapshot.get(snap.id)).name, snapName);
const snaps = await daytona.snapshot.list();
assert.deepEqual(snaps.items.map((s) => s.id), [snap.id]);
assert.equal(snaps.total, 1);
assert.equal(snaps.page, 1);
assert.equal(snaps.totalPages, 1);
// Later changes are not in it.
await sandbox.fs.uploadFiles([
  { source: Buffer.from("changed after\n"), destination: `${home}/kept/note.txt` },
]);
ok("snapshot");

// A sandbox created from it has the tree as it was, under its own home.
const copy = await daytona.create({ snapshot: snapName }, { timeout: 30 });
assert.equal(copy.state, "started");
assert.equal(copy.snapshot, snapName);
const copyHome = await copy.getUserHomeDir();
const note = await copy.fs.downloadFile(`${copyHome}/kept/note.txt`);
assert.equal(note.toString(), "kept in the snapshot\n");
await copy.delete();
ok("create from snapshot");

// Deleted, it can no longer be created from (400, naming it).
await daytona.snapshot.delete(snap);
await assert.rejects(daytona.create({ snapshot: snapName }, { timeout: 10 }), (e) => {
  assert.equal(e.statusCode, 400, String(e));
  assert.ok(e.message.includes(snapName), e.message);
  return true;
});
ok("snapshot delete");

// Kill: deleting the session kills what runs in it; its commands are gone.
const long = await sandbox.process.executeSessionCommand(session, {
  command: "sleep 30",
  runAsync: true,
});
await sandbox.process.deleteSession(session);
await assert.rejects(sandbox.process.getSessionCommand(session, long.cmdId));
ok("kill");

// Stop (the SDK waits until stopped), then delete.
await sandbox.stop();
assert.equal(sandbox.state, "stopped");
ok("stop");
await sandbox.delete();
await assert.rejects(daytona.get(sandbox.id));
ok("delete");
