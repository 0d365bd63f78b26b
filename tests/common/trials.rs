//! The harness of the suites whose tests need something a machine may lack
//! (an engine and its test image, tmux, root, a toolchain): they are built
//! with `harness = false` and list their tests in `main` with [`trial!`].
//! A test that calls [`skip`] is counted as ignored, with the reason on its
//! line, instead of passing after a message the output capture would hide.
//! Under `CI`, which installs everything, a skip is a failure.
//!
//! ```ignore
//! fn main() -> std::process::ExitCode {
//!     trials::run(vec![trial!(a_sync_test), trial!(async an_async_test)])
//! }
//! ```

use std::future::Future;
use std::process::ExitCode;

pub use libtest_mimic::Trial;
use libtest_mimic::{Arguments, Completion, Failed};

/// The reason a test stopped in [`skip`], carried by its unwinding.
struct Skip(String);

/// Stop this test as one that cannot run here; `why` says what is missing
/// and how to get it. Under `CI` the test fails instead: CI installs what
/// every test needs, so a missing piece there is a broken set-up. Call it
/// on the test's own thread (or in its async body): elsewhere it is a panic.
pub fn skip(why: impl Into<String>) -> ! {
    let why = why.into();
    if std::env::var_os("CI").is_some() {
        panic!("CI must run every test, but: {why}");
    }
    std::panic::panic_any(Skip(why))
}

/// Stop this test as one whose subject the target it runs against cannot
/// have: a fault only a mock stages, on a real cluster. Unlike [`skip`],
/// nothing is missing from the machine, so it is ignored under `CI` too.
pub fn not_here(why: impl Into<String>) -> ! {
    std::panic::panic_any(Skip(why.into()))
}

/// `function`'s test name in `module` (a `module_path!()`): its path
/// without the crate's name.
pub fn name(module: &str, function: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{function}"),
        None => function.to_string(),
    }
}

/// `body` as a test named `name`. It runs on a thread of that name, as
/// under the built-in harness: passed, failed (it panicked) or ignored (it
/// called [`skip`]).
pub fn test(name: String, body: impl FnOnce() + Send + 'static) -> Trial {
    let thread = std::thread::Builder::new().name(name.clone());
    Trial::ignorable_test(name, move || {
        let payload = match thread.spawn(body).expect("a test thread").join() {
            Ok(()) => return Ok(Completion::Completed),
            Err(payload) => payload,
        };
        match payload.downcast::<Skip>() {
            Ok(skip) => Ok(Completion::ignored_with(skip.0)),
            Err(panic) => Err(match panic.downcast::<String>() {
                Ok(message) => Failed::from(message),
                Err(panic) => match panic.downcast::<&str>() {
                    Ok(message) => Failed::from(message),
                    Err(_) => Failed::from("the test panicked"),
                },
            }),
        }
    })
}

/// Run `test` on a multi-threaded tokio runtime, as
/// `#[tokio::test(flavor = "multi_thread")]` does.
pub fn block_on(test: impl Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(test)
}

/// A test function as a trial named as the built-in harness names it
/// (`module::name` below the crate root): `trial!(name)`, or
/// `trial!(async name)` for an `async fn`.
macro_rules! trial {
    (async $name:ident) => {
        $crate::common::trials::test(
            $crate::common::trials::name(module_path!(), stringify!($name)),
            || $crate::common::trials::block_on($name()),
        )
    };
    ($name:ident) => {
        $crate::common::trials::test(
            $crate::common::trials::name(module_path!(), stringify!($name)),
            $name,
        )
    };
}
pub(crate) use trial;

/// The suite's `main`: run `trials` with cargo test's arguments (filters,
/// `--ignored`, `--exact`, `--test-threads`, ...).
pub fn run(trials: Vec<Trial>) -> ExitCode {
    // A skip unwinds like a panic, but is no failure: the hook stays quiet.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.payload().is::<Skip>() {
            report(info)
        }
    }));
    libtest_mimic::run(&Arguments::from_args(), trials).exit_code()
}
