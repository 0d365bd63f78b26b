//! Serve the Vercel Sandbox API mock on a free loopback port until killed:
//! prints `http://127.0.0.1:PORT` on its first line. For benchmarks and
//! trying the provider by hand:
//!
//!   vercel-mock &  sanddune run --sandbox vercel --sandbox-opt api-url=URL ...
//!   (with VERCEL_TOKEN=mock-token VERCEL_TEAM_ID=team_mock VERCEL_PROJECT_ID=prj_mock)

use std::io::Write;

fn main() {
    let mock = sanddune_vercel_mock::VercelMock::start();
    println!("{}", mock.url());
    std::io::stdout().flush().unwrap();
    loop {
        std::thread::park();
    }
}
