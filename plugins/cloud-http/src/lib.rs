//! What sanddune's cloud sandbox providers (`vercel`, `daytona`) share:
//!
//! - `transport`: the HTTP seam their API code is written against, with
//!   `wasi_http` (the component's `wasi:http/outgoing-handler`, which the
//!   host allows to the granted origins only) and `native` (plain
//!   `std::net`, so the same code runs natively against a loopback mock in
//!   tests and benchmarks);
//! - `exec`: the exec request and outcome, in plain types;
//! - `retry`: when an answer is worth another attempt, and after how long;
//! - `shell_fs`: the POSIX `sh` scripts behind `stat`, `read-dir`, `exists`
//!   and `remove`, for APIs that have no such calls of their own.

pub mod exec;
#[cfg(not(target_arch = "wasm32"))]
pub mod native;
pub mod retry;
pub mod shell_fs;
pub mod transport;
#[cfg(target_arch = "wasm32")]
pub mod wasi_http;

#[cfg(target_arch = "wasm32")]
mod bindings {
    // A world of its own: the provider crate generates (and exports) the
    // sandbox-plugin world, and two crates embedding the same world's type
    // section cannot be linked into one component.
    wit_bindgen::generate!({
        inline: "package sanddune:cloud-http; world http-client { import wasi:http/outgoing-handler@0.2.12; import wasi:clocks/monotonic-clock@0.2.12; }",
        path: [
            "../../wit/deps/io.wit",
            "../../wit/deps/clocks.wit",
            "../../wit/deps/random.wit",
            "../../wit/deps/filesystem.wit",
            "../../wit/deps/sockets.wit",
            "../../wit/deps/cli.wit",
            "../../wit/deps/http.wit",
        ],
        world: "sanddune:cloud-http/http-client",
        generate_all,
    });
}
