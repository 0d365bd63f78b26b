// The SDK against the mock's injected faults (the Rust test injects them
// before this runs): it must take each the way it takes the real API's.
//   1. create answered 503 once        -> the SDK retries, create succeeds
//   2. a command answered 429 + Retry-After: 1 -> the SDK waits and retries
//   3. a command stream that ends before the exit code -> StreamError stream_ended_early
//   4. a read answered 500 three times -> APIError with status 500
//   5. a command answered 410 sandbox_stopped -> APIError 410, code sandbox_stopped
import assert from "node:assert/strict";
import { Sandbox, APIError } from "@vercel/sandbox";

const mock = process.env.VERCEL_MOCK_URL;
const credentials = { token: "mock-token", teamId: "team_mock", projectId: "prj_mock" };
const fetchToMock = (url, opts = {}) => {
  const { dispatcher, ...rest } = opts;
  return fetch(String(url).replace("https://vercel.com/api", mock), rest);
};
const ok = (step) => console.log(`ok ${step}`);

const sandbox = await Sandbox.create({ ...credentials, fetch: fetchToMock });
ok("create retried after 503");

const started = Date.now();
const rl = await sandbox.runCommand("echo", ["rate-limited"]);
assert.equal(await rl.stdout(), "rate-limited\n");
assert.ok(Date.now() - started >= 900, "Retry-After was not honoured");
ok("429 retried after Retry-After");

await assert.rejects(sandbox.runCommand("echo", ["early-end"]), (e) => {
  assert.equal(e.name, "StreamError");
  assert.equal(e.code, "stream_ended_early");
  return true;
});
ok("stream ended early");

await assert.rejects(sandbox.readFileToBuffer({ path: "x" }), (e) => {
  assert.ok(e instanceof APIError, String(e));
  assert.equal(e.response.status, 500);
  return true;
});
ok("500 after retries");
// The test injects the 410 now, and says so on stdin.
await new Promise((resolve) => process.stdin.once("data", resolve));
process.stdin.destroy();

await assert.rejects(sandbox.currentSession().runCommand("echo", ["stopped"]), (e) => {
  assert.ok(e instanceof APIError, String(e));
  assert.equal(e.response.status, 410);
  assert.equal(e.json.error.code, "sandbox_stopped");
  return true;
});
ok("410 sandbox_stopped");

await sandbox.stop();
ok("stop");
