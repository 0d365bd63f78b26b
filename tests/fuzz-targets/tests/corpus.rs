//! The bounded fuzz run `cargo test` executes on stable: for every target,
//! its checked-in corpus (`fuzz/corpus/<target>/`, regression inputs
//! included) and then seeded mutations of it, each input bounded in time.
//! `SANDDUNE_FUZZ_ITERATIONS`, `SANDDUNE_FUZZ_SEED` and
//! `SANDDUNE_FUZZ_TIME_LIMIT_MS` scale and reproduce it (see `driver`).

use sanddune_fuzz_targets::{TARGETS, driver, target};

fn fuzz(name: &str) {
    let target = *target(name).unwrap_or_else(|| panic!("no target {name}"));
    let (seed, iterations, limit) = driver::settings();
    match driver::run(target, seed, iterations, limit) {
        Ok(report) => {
            assert!(report.corpus_inputs > 0, "{name} has no corpus");
            assert_eq!(report.mutated_inputs, iterations);
            println!("{report}");
        }
        Err(failure) => panic!("{failure}"),
    }
}

#[test]
fn prompt_template() {
    fuzz("prompt_template");
}

#[test]
fn project_config() {
    fuzz("project_config");
}

#[test]
fn stream_claude_code() {
    fuzz("stream_claude_code");
}

#[test]
fn stream_codex() {
    fuzz("stream_codex");
}

#[test]
fn stream_copilot() {
    fuzz("stream_copilot");
}

#[test]
fn stream_gemini() {
    fuzz("stream_gemini");
}

#[test]
fn stream_qwen_code() {
    fuzz("stream_qwen_code");
}

#[test]
fn stream_cursor() {
    fuzz("stream_cursor");
}

#[test]
fn stream_opencode() {
    fuzz("stream_opencode");
}

#[test]
fn stream_pi() {
    fuzz("stream_pi");
}

#[test]
fn stream_demo() {
    fuzz("stream_demo");
}

#[test]
fn session_cwd() {
    fuzz("session_cwd");
}

#[test]
fn structured_output() {
    fuzz("structured_output");
}

/// Both drivers know the same targets: each has a cargo-fuzz binary in
/// fuzz/Cargo.toml and fuzz/fuzz_targets/, and a corpus.
#[test]
fn every_target_has_a_cargo_fuzz_binary_and_a_corpus() {
    let dir = driver::fuzz_dir();
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let mut binaries: Vec<String> = std::fs::read_dir(dir.join("fuzz_targets"))
        .unwrap()
        .map(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned()
        })
        .collect();
    binaries.sort();
    let mut names: Vec<String> = TARGETS.iter().map(|t| t.name.to_owned()).collect();
    names.sort();
    assert_eq!(binaries, names, "fuzz/fuzz_targets/ and TARGETS differ");
    for t in TARGETS {
        let source =
            std::fs::read_to_string(dir.join(format!("fuzz_targets/{}.rs", t.name))).unwrap();
        assert!(
            source.contains(&format!("sanddune_fuzz_targets::{}(", t.name)),
            "fuzz_targets/{}.rs does not call the shared target",
            t.name
        );
        assert!(
            manifest.contains(&format!("name = \"{}\"", t.name)),
            "{} is not a [[bin]]",
            t.name
        );
        assert!(
            !driver::corpus(t.name).is_empty(),
            "{} has no corpus",
            t.name
        );
    }
}

/// The mutator is a pure function of its seed.
#[test]
fn mutations_are_reproducible() {
    let corpus = vec![b"{\"type\":\"result\"}".to_vec(), b"hello {{KEY}}".to_vec()];
    let run = |seed| {
        let mut rng = driver::Rng::new(seed);
        (0..200)
            .map(|_| driver::mutate(&mut rng, &corpus, &["{{"]))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

/// Replays one input: `SANDDUNE_FUZZ_REPLAY=<target>:<file> cargo test -p
/// sanddune-fuzz-targets --test corpus replay -- --ignored --nocapture`
/// (cargo-fuzz does the same with `cargo +nightly fuzz run <target> <file>`).
#[test]
#[ignore = "needs SANDDUNE_FUZZ_REPLAY=<target>:<file>"]
fn replay() {
    let spec = std::env::var("SANDDUNE_FUZZ_REPLAY").expect("SANDDUNE_FUZZ_REPLAY=<target>:<file>");
    let (name, file) = spec.split_once(':').expect("<target>:<file>");
    let target = target(name).unwrap_or_else(|| panic!("no target {name}"));
    // Relative to the repository root (cargo runs tests in the package dir).
    let path = driver::fuzz_dir().join("..").join(file);
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let start = std::time::Instant::now();
    (target.run)(&data);
    println!("{name}: {} bytes in {:.2?}", data.len(), start.elapsed());
}
