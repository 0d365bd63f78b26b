//! Serve the model API mock on a free loopback port until killed, for
//! trying a CLI by hand: prints `http://127.0.0.1:PORT` on its first line,
//! then one line per request (status, method, path, reported usage).
//! Arguments name faults: `401`, `429` (retry-after 2 s), `500-mid-stream`,
//! `never-complete`.
//!
//!   model-mock 429 &  ANTHROPIC_BASE_URL=URL ANTHROPIC_API_KEY=x claude -p hi

use std::io::Write;

use sanddune_model_mock::{Fault, ModelMock};

fn main() {
    let mock = ModelMock::start();
    for arg in std::env::args().skip(1) {
        mock.inject(match arg.as_str() {
            "401" => Fault::Unauthorized,
            "429" => Fault::RateLimited { retry_after: 2 },
            "500-mid-stream" => Fault::ServerErrorMidStream,
            "never-complete" => Fault::NeverComplete,
            other => panic!("unknown fault {other}"),
        });
    }
    println!("{}", mock.url());
    std::io::stdout().flush().unwrap();
    let mut shown = 0;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let all = mock.exchanges();
        for e in &all[shown..] {
            println!(
                "{} {} {} usage={:?} tool_call={}",
                e.status, e.method, e.path, e.usage, e.tool_call
            );
        }
        std::io::stdout().flush().unwrap();
        shown = all.len();
    }
}
