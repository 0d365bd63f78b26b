// The official @daytonaio/sdk meets the mock's faults: its errors carry the
// statuses and messages the mock answered, as they would Daytona's.
//
//   DAYTONA_MOCK_URL=http://127.0.0.1:PORT node faults.mjs
//
// The test injects: 401 is answered to a wrong key by the mock itself; a
// 503 on create; a 429 on the first log read; a lost session for the
// command containing `lose-me`.

import assert from "node:assert/strict";
import { Daytona, DaytonaError } from "@daytonaio/sdk";

const mock = process.env.DAYTONA_MOCK_URL;
const ok = (step) => console.log(`ok ${step}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const config = { apiUrl: `${mock}/api`, target: "us" };

const wrong = new Daytona({ ...config, apiKey: "expired" });
await assert.rejects(wrong.create({}, { timeout: 10 }), (e) => {
  assert.ok(e instanceof DaytonaError, String(e));
  assert.equal(e.statusCode, 401);
  return true;
});
ok("401 unauthorized");

const daytona = new Daytona({ ...config, apiKey: "mock-api-key" });
await assert.rejects(daytona.create({}, { timeout: 10 }), (e) => {
  assert.equal(e.statusCode, 503);
  return true;
});
ok("503 on create");

const sandbox = await daytona.create({}, { timeout: 30 });
await sandbox.process.createSession("s");
const cmd = await sandbox.process.executeSessionCommand("s", {
  command: "echo x",
  runAsync: true,
});
await assert.rejects(sandbox.process.getSessionCommandLogs("s", cmd.cmdId), (e) => {
  assert.equal(e.statusCode, 429);
  return true;
});
ok("429 rate limited");

const lost = await sandbox.process.executeSessionCommand("s", {
  command: "echo lose-me; echo 2; sleep 30",
  runAsync: true,
});
for (let i = 0; ; i++) {
  try {
    await sandbox.process.getSessionCommand("s", lost.cmdId);
  } catch (e) {
    assert.equal(e.statusCode, 404);
    break;
  }
  assert.ok(i < 200, "the session was not lost");
  await sleep(50);
}
ok("session lost");

await sandbox.delete();
ok("delete");
