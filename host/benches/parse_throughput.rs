//! Stream-parse throughput of the claude-code agent provider: through the
//! wasm boundary (one `push-line` call per line, and `push-lines` batches
//! of 256 as the host sends queued lines) against the same parser
//! compiled natively, on a 1,000,000-line recorded stream.
//! Run: cargo bench -p sanddune --bench parse_throughput

use std::time::Instant;

use sanddune::plugin::agent::{AgentProvider, CommandRequest};
use sanddune::plugin::{PluginRef, PluginRuntime, RuntimeConfig};

const LINES: usize = 1_000_000;

/// Claude Code stream-json lines in the proportions of a real session.
fn recorded_stream() -> Vec<String> {
    let sid = "5805de68-1c2d-4c4e-9a53-0b6f3f0e8c11";
    let samples = [
        format!(
            r#"{{"type":"assistant","message":{{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"text","text":"Let me run the tests first."}},{{"type":"tool_use","id":"toolu_1","name":"Bash","input":{{"command":"npm test"}}}}],"stop_reason":"tool_use","usage":{{"input_tokens":2,"cache_creation_input_tokens":0,"cache_read_input_tokens":9600,"output_tokens":58}}}},"parent_tool_use_id":null,"session_id":"{sid}"}}"#
        ),
        format!(
            r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_1","content":"PASS src/a.test.ts (4 tests)"}}]}},"session_id":"{sid}"}}"#
        ),
        format!(r#"{{"type":"system","subtype":"task_progress","session_id":"{sid}"}}"#),
        format!(r#"{{"type":"rate_limit_event","session_id":"{sid}"}}"#),
    ];
    (0..LINES)
        .map(|i| samples[i % samples.len()].clone())
        .collect()
}

fn main() {
    let lines = recorded_stream();

    let t = Instant::now();
    let mut parser = sanddune_plugin_claude_code::parser::Parser::new();
    let mut native_events = 0;
    for line in &lines {
        native_events += parser.push_line(line).len();
    }
    let native = t.elapsed();

    let rt = tokio::runtime::Runtime::new().unwrap();
    let (per_line, batched, wasm_events) = rt.block_on(async {
        let runtime = PluginRuntime::new(RuntimeConfig::default()).unwrap();
        let mut agent = AgentProvider::load(&runtime, &PluginRef::Builtin("claude-code".into()))
            .await
            .unwrap();
        let request = CommandRequest {
            prompt: "parse".into(),
            model: None,
            options: vec![],
            resume_session: None,
            skip_permissions: true,
            env: vec![],
        };
        let parser = agent.new_parser(&request).await.unwrap();
        let t = Instant::now();
        let mut events = 0;
        for line in &lines {
            events += agent.push_line(&parser, line).await.unwrap().len();
        }
        let per_line = t.elapsed();
        let parser = agent.new_parser(&request).await.unwrap();
        let t = Instant::now();
        let mut batched_events = 0;
        for batch in lines.chunks(256) {
            batched_events += agent.push_lines(&parser, batch).await.unwrap().len();
        }
        assert_eq!(
            events, batched_events,
            "batched and per-line parsing must agree"
        );
        (per_line, t.elapsed(), events)
    });
    assert_eq!(native_events, wasm_events, "both parsers must agree");

    let rate = |d: std::time::Duration| LINES as f64 / d.as_secs_f64();
    let ratio = |d: std::time::Duration| d.as_secs_f64() / native.as_secs_f64();
    println!("{LINES} lines, {native_events} events");
    println!("native:                {:>10.0} lines/s", rate(native));
    println!(
        "wasm, push-line:       {:>10.0} lines/s ({:.1}x native)",
        rate(per_line),
        ratio(per_line)
    );
    println!(
        "wasm, push-lines x256: {:>10.0} lines/s ({:.1}x native; goal >= 200000)",
        rate(batched),
        ratio(batched)
    );
}
