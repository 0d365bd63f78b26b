//! sanddune's fuzz targets, defined once and driven twice: by cargo-fuzz
//! (`fuzz/`, nightly, libFuzzer) and by the bounded corpus run that
//! `cargo test` executes on stable (`tests/corpus.rs`: the checked-in seed
//! corpus under `fuzz/corpus/<target>/`, then seeded mutations of it).
//!
//! Each target takes arbitrary bytes, feeds them to one parser, and panics
//! when the parser panics or when its output is not well-formed; the
//! drivers turn a panic (or an input that takes too long) into a failure
//! that names the input.

pub mod driver;
mod targets;

pub use targets::*;

/// One fuzz target: its name (also the corpus directory and the cargo-fuzz
/// binary) and the function both drivers call.
#[derive(Clone, Copy)]
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
    /// Tokens the mutator splices in, besides the generic ones.
    pub dictionary: &'static [&'static str],
}

const JSON_TOKENS: &[&str] = &[
    "{", "}", "[", "]", ",", ":", "\"", "\\", "\\\"", "\\u0000", "\\ud800", "\\/", "null", "true",
    "false", "0", "-1", "1e400", "-0.0", "18446744073709551615", "18446744073709551616",
    "123456789012345678901234567890", "\"type\"", "\"session_id\"", "\"text\"", "\"usage\"",
    "\"input\"", "\"message\"", "\"content\"", "\"cwd\"", "\"id\"", "\"name\"", "\"error\"",
    "\"result\"", "\"data\"", "\"part\"", "\"payload\"", "\"tokens\"", "\n", "\r\n",
];

/// Every target, in the order the corpus run reports them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "prompt_template",
        run: prompt_template,
        dictionary: &[
            "{{", "}}", "!`", "`", "{{SOURCE_BRANCH}}", "{{TARGET_BRANCH}}", "{{KEY}}", "\0",
            "KEY=", "=", "\n", "!`!`", "{{{", "}}}",
        ],
    },
    Target {
        name: "project_config",
        run: project_config,
        dictionary: &[
            "copyToWorktree", "[env]", "[timeouts]", "copyToWorktreeMs", "[[hooks.host.onWorktreeReady]]",
            "[[hooks.host.onSandboxReady]]", "[[hooks.sandbox.onSandboxReady]]", "command = ",
            "timeoutMs", "sudo = true", "[git]", "agentName", "agentEmail", "coAuthoredBy",
            "\"user\"", "\"A <a@b>\"", "=", "[", "]", "[[", "]]", "\"\"\"", "'''", "{", "}",
            "18446744073709551615", "-1", "1979-05-27T07:32:00Z", "\n", "#", ".",
        ],
    },
    Target {
        name: "stream_claude_code",
        run: stream_claude_code,
        dictionary: &[
            "\"assistant\"", "\"result\"", "\"system\"", "\"user\"", "\"tool_use\"", "\"subtype\"",
            "\"success\"", "\"is_error\"", "\"errors\"", "\"input_tokens\"", "\"output_tokens\"",
        ],
    },
    Target {
        name: "stream_codex",
        run: stream_codex,
        dictionary: &[
            "\"thread.started\"", "\"thread_id\"", "\"item.started\"", "\"item.completed\"",
            "\"turn.completed\"", "\"turn.failed\"", "\"agent_message\"", "\"command_execution\"",
            "\"file_change\"", "\"mcp_tool_call\"", "\"web_search\"", "\"cached_input_tokens\"",
            "\"item\"", "\"changes\"", "\"command\"", "\"arguments\"",
        ],
    },
    Target {
        name: "stream_copilot",
        run: stream_copilot,
        dictionary: &[
            "\"assistant.message_delta\"", "\"assistant.message\"", "\"tool.execution_start\"",
            "\"assistant.usage\"", "\"session.error\"", "\"messageId\"", "\"deltaContent\"",
            "\"toolName\"", "\"arguments\"", "\"inputTokens\"", "\"sessionId\"", "\"exitCode\"",
        ],
    },
    Target {
        name: "stream_cursor",
        run: stream_cursor,
        dictionary: &[
            "\"assistant\"", "\"result\"", "\"tool_call\"", "\"thinking\"", "\"started\"",
            "\"completed\"", "\"subtype\"", "\"success\"", "\"is_error\"", "\"inputTokens\"",
            "\"shellToolCall\"", "\"args\"",
        ],
    },
    Target {
        name: "stream_opencode",
        run: stream_opencode,
        dictionary: &[
            "\"step_start\"", "\"step_finish\"", "\"tool_use\"", "\"sessionID\"", "\"reason\"",
            "\"stop\"", "\"tool-calls\"", "\"state\"", "\"status\"", "\"completed\"", "\"cache\"",
            "\"read\"", "\"write\"", "\"reasoning\"",
        ],
    },
    Target {
        name: "stream_pi",
        run: stream_pi,
        dictionary: &[
            "\"session\"", "\"agent_start\"", "\"agent_end\"", "\"message_start\"",
            "\"message_update\"", "\"message_end\"", "\"tool_execution_start\"", "\"turn_end\"",
            "\"assistant\"", "\"stopReason\"", "\"errorMessage\"", "\"auto_retry_start\"",
            "\"toolCall\"", "\"cacheRead\"", "\"role\"",
        ],
    },
    Target {
        name: "stream_demo",
        run: stream_demo,
        dictionary: &["\"text\"", "\"tool\"", "\"done\"", "\"error\"", "\"message\""],
    },
    Target {
        name: "session_cwd",
        run: session_cwd,
        dictionary: &[
            "\"cwd\"", "\"payload\"", "\"session\"", "\"session_meta\"", "\"turn_context\"",
            "\"\\u0063wd\"", "\"\\/w\"", "\"/w\"", "/w", "/", "..", ".", "\0", "\\",
            "\"assistant\"", "\"message\"", "\"event_msg\"", "\"token_count\"",
        ],
    },
    Target {
        name: "structured_output",
        run: structured_output,
        dictionary: &[
            "<result>", "</result>", "<plan>", "</plan>", "```", "```json", "\"verdict\"",
            "\"approve\"", "\"reject\"", "<", ">", "</", "\n",
        ],
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// The generic JSON tokens every mutator may splice in.
pub fn json_tokens() -> &'static [&'static str] {
    JSON_TOKENS
}
