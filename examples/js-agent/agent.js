// js-agent: an example agent provider in JavaScript (componentize-js).
//
// The agent it drives is a small deterministic `sh` script, like the demo
// agent: it reads the prompt on stdin, writes it byte for byte to
// JS_AGENT.md, commits, and reports in its own JSON-lines format, which the
// StreamParser below turns into agent events. No model, no API key.

// Prints only fixed JSON (escaping prompt text into JSON in sh is fragile);
// its usage lines count the prompt's bytes as input and a fixed output.
const SCRIPT = `cat > JS_AGENT.md
bytes=$(wc -c < JS_AGENT.md | tr -d ' ')
if [ "$bytes" = 0 ]; then
  echo '{"type":"error","message":"the prompt arrived empty"}'
  exit 1
fi
echo '{"type":"say","text":"Writing the prompt to JS_AGENT.md"}'
echo '{"type":"usage","input":'"$bytes"',"output":0}'
echo '{"type":"tool","name":"Bash","input":{"command":"git commit"}}'
if git add JS_AGENT.md >&2 &&
  git commit -q -m "js-agent: the prompt" >&2
then
  echo '{"type":"usage","input":0,"output":12}'
  echo '{"type":"done","text":"Committed. <promise>COMPLETE</promise>"}'
else
  echo '{"type":"error","message":"git commit failed"}'
  exit 1
fi
`;

function describe() {
  return {
    name: "js-agent",
    version: "0.1.0",
    description:
      "An example agent provider in JavaScript: a deterministic sh script writes the prompt to JS_AGENT.md and commits (no model, no API key)",
    program: "sh",
    defaultModel: undefined,
    options: [],
    env: [],
    optionalEnv: [],
    sessionFiles: false,
    egressHosts: [],
  };
}

function buildPrintCommand(request) {
  if (request.prompt.trim() === "") {
    // A thrown string is the WIT `result`'s error.
    throw "the prompt is empty";
  }
  if (request.options.length > 0) {
    throw `js-agent has no option ${JSON.stringify(request.options[0][0])}`;
  }
  return {
    argv: ["sh", "-c", SCRIPT],
    stdin: new TextEncoder().encode(request.prompt),
    env: [],
    files: [],
  };
}

function buildInteractiveCommand(_request) {
  return {
    argv: ["sh", "-c", "echo 'js-agent has no interactive mode' >&2; exit 1"],
    stdin: undefined,
    env: [],
    files: [],
  };
}

// u64 fields arrive and leave as BigInt.
const ZERO = { inputTokens: 0n, cacheCreationInputTokens: 0n, cacheReadInputTokens: 0n, outputTokens: 0n };

class StreamParser {
  constructor(_request) {
    this.finished = false;
    // The script reports usage per step; events carry the running total.
    this.usage = { ...ZERO };
  }

  pushLine(line) {
    let event;
    try {
      event = JSON.parse(line);
    } catch {
      return []; // not JSON: the WIT says malformed lines yield nothing
    }
    if (event === null || typeof event !== "object") return [];
    const str = (v) => (typeof v === "string" ? v : undefined);
    switch (event.type) {
      case "say":
        return str(event.text) === undefined ? [] : [{ tag: "text", val: event.text }];
      case "tool":
        return str(event.name) === undefined
          ? []
          : [{ tag: "tool-call", val: { name: event.name, input: JSON.stringify(event.input ?? null) } }];
      case "usage": {
        const count = (v) => (Number.isSafeInteger(v) && v >= 0 ? BigInt(v) : 0n);
        this.usage = {
          ...this.usage,
          inputTokens: this.usage.inputTokens + count(event.input),
          outputTokens: this.usage.outputTokens + count(event.output),
        };
        return [{ tag: "usage", val: { ...this.usage } }];
      }
      case "done":
        this.finished = true;
        return [{ tag: "result", val: { isError: false, text: str(event.text) ?? "" } }];
      case "error": {
        this.finished = true;
        const message = str(event.message) ?? "js-agent failed";
        return [
          { tag: "error", val: message },
          { tag: "result", val: { isError: true, text: message } },
        ];
      }
      default:
        return [];
    }
  }

  pushLines(lines) {
    return lines.flatMap((line) => this.pushLine(line));
  }

  finish() {
    if (this.finished) return [];
    this.finished = true;
    return [{ tag: "error", val: "js-agent ended without a result" }];
  }
}

export const agentProvider = {
  describe,
  buildPrintCommand,
  buildInteractiveCommand,
  StreamParser,
  sessionFilePath: (_home, _cwd, _sessionId) => undefined,
  rewriteSessionCwd: (content, _from, _to) => content,
  usageFromSession: (_content) => undefined,
};
