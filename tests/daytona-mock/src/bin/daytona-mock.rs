//! Serve the Daytona API mock on a free loopback port until killed: prints
//! `http://127.0.0.1:PORT` on its first line. For benchmarks and trying the
//! provider by hand:
//!
//!   daytona-mock &  sanddune run --sandbox daytona \
//!     --sandbox-opt api-url=URL/api --sandbox-opt toolbox-url=URL/toolbox ...
//!   (with DAYTONA_API_KEY=mock-api-key)

use std::io::Write;

fn main() {
    let mock = sanddune_daytona_mock::DaytonaMock::start();
    println!("{}", mock.url());
    std::io::stdout().flush().unwrap();
    loop {
        std::thread::park();
    }
}
