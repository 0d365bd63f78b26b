//! The stable driver: every input of a target's checked-in corpus, then a
//! bounded number of seeded mutations of it, each run on a worker thread
//! with a time bound. A panic, a crash of the process or an input over the
//! time bound (the worker thread's CPU time, so a loaded machine does not
//! fail it; and a wall-clock bound for a hang) fails the run; the input is saved under
//! `fuzz/artifacts/<target>/` (where cargo-fuzz puts its own) so it can be
//! replayed and added to the corpus.
//!
//! Settings, from the environment:
//! - `SANDDUNE_FUZZ_SEED` (default 0x5A9D_D00E): the mutation seed; a
//!   failure prints it, so the run can be repeated exactly;
//! - `SANDDUNE_FUZZ_ITERATIONS` (default 1500): mutated inputs per target;
//! - `SANDDUNE_FUZZ_TIME_LIMIT_MS` (default 2000): the CPU time one input
//!   may take (a debug build takes up to about 0.3 s on the largest inputs;
//!   quadratic work takes far more); an input that has not returned after
//!   12 times as long in wall-clock time is a hang.: the bound for one input.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::{Target, json_tokens};

pub const DEFAULT_SEED: u64 = 0x5A9D_D00E;
pub const DEFAULT_ITERATIONS: usize = 1500;
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_millis(2000);
/// The largest input the mutator makes (libFuzzer's default is 4 KiB; this
/// leaves room for inputs big enough to show quadratic work).
pub const MAX_LEN: usize = 256 * 1024;

/// The directory of the checked-in corpora and of the failure artifacts.
pub fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

pub fn corpus_dir(target: &str) -> PathBuf {
    fuzz_dir().join("corpus").join(target)
}

/// The corpus of `target`, sorted by file name.
pub fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap();
            (p, data)
        })
        .collect()
}

/// splitmix64: small, seeded, the same everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// A new input from the corpus: one entry (or two, spliced), changed by a
/// few random edits: bit flips, byte changes, dictionary tokens, deletions,
/// duplicated ranges, line swaps, and now and then a range repeated many
/// times (long inputs find quadratic work).
pub fn mutate(rng: &mut Rng, corpus: &[Vec<u8>], dictionary: &[&str]) -> Vec<u8> {
    let pick = |rng: &mut Rng| -> Vec<u8> {
        if corpus.is_empty() {
            Vec::new()
        } else {
            corpus[rng.below(corpus.len())].clone()
        }
    };
    let mut data = pick(rng);
    let token = |rng: &mut Rng| -> &str {
        let generic = json_tokens();
        let n = dictionary.len() + generic.len();
        let i = rng.below(n);
        if i < dictionary.len() {
            dictionary[i]
        } else {
            generic[i - dictionary.len()]
        }
    };
    let edits = 1 + rng.below(8);
    for _ in 0..edits {
        let len = data.len();
        let at = if len == 0 { 0 } else { rng.below(len + 1) };
        match rng.below(11) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = rng.next_u64() as u8;
            }
            2 | 3 => {
                let t = token(rng).as_bytes().to_vec();
                data.splice(at..at, t);
            }
            4 if len > 0 => {
                let end = (at + 1 + rng.below(16)).min(len);
                data.drain(at.min(end)..end);
            }
            5 if len > 0 => {
                let start = rng.below(len);
                let end = (start + 1 + rng.below(64)).min(len);
                let piece = data[start..end].to_vec();
                data.splice(at..at, piece);
            }
            6 => {
                // Splice with another entry: this one's head, that one's tail.
                let other = pick(rng);
                let cut = if other.is_empty() {
                    0
                } else {
                    rng.below(other.len())
                };
                data.truncate(at);
                data.extend_from_slice(&other[cut..]);
            }
            7 if len > 0 => {
                data.truncate(rng.below(len));
            }
            8 => {
                // Swap two lines.
                let mut lines: Vec<Vec<u8>> =
                    data.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
                if lines.len() > 1 {
                    let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
                    lines.swap(a, b);
                    data = lines.join(&b'\n');
                }
            }
            9 if len > 0 && rng.chance(4) => {
                // A range repeated up to MAX_LEN.
                let start = rng.below(len);
                let end = (start + 1 + rng.below(128)).min(len);
                let piece = data[start..end].to_vec();
                let times = 1 + rng.below(MAX_LEN / piece.len().max(1));
                let mut grown = data[..at].to_vec();
                for _ in 0..times {
                    grown.extend_from_slice(&piece);
                }
                grown.extend_from_slice(&data[at..]);
                data = grown;
            }
            _ => {
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                data.splice(at..at, bytes);
            }
        }
        data.truncate(MAX_LEN);
    }
    data
}

/// Runs inputs on a thread of its own, so a hang can be noticed (and left
/// behind) and a panic caught.
struct Worker {
    send: mpsc::Sender<Vec<u8>>,
    recv: mpsc::Receiver<(Result<(), String>, Duration)>,
}

impl Worker {
    fn new(target: Target) -> Worker {
        let (send, inputs) = mpsc::channel::<Vec<u8>>();
        let (results, recv) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("fuzz-{}", target.name))
            // libFuzzer runs on a main thread's 8 MiB.
            .stack_size(8 << 20)
            .spawn(move || {
                for input in inputs {
                    let cpu = thread_cpu_time();
                    let outcome =
                        catch_unwind(AssertUnwindSafe(|| (target.run)(&input))).map_err(|panic| {
                            panic
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_else(|| "a panic".into())
                        });
                    let cpu = thread_cpu_time().saturating_sub(cpu);
                    if results.send((outcome, cpu)).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn a fuzz worker");
        Worker { send, recv }
    }
}

/// CPU time of the calling thread.
fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// What a bounded run did.
#[derive(Debug)]
pub struct Report {
    pub target: &'static str,
    pub seed: u64,
    pub corpus_inputs: usize,
    pub mutated_inputs: usize,
    pub elapsed: Duration,
    pub slowest: Duration,
    pub slowest_len: usize,
    pub largest: usize,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} corpus + {} mutated inputs in {:.2?} (seed {:#x}); slowest {:.2?} of CPU on {} bytes; largest {} bytes",
            self.target,
            self.corpus_inputs,
            self.mutated_inputs,
            self.elapsed,
            self.seed,
            self.slowest,
            self.slowest_len,
            self.largest
        )
    }
}

fn env_u64(key: &str, default: u64) -> u64 {
    let Ok(v) = std::env::var(key) else {
        return default;
    };
    let v = v.trim();
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    parsed.unwrap_or_else(|_| panic!("{key}={v} is not a number"))
}

/// The settings from the environment (see the module docs).
pub fn settings() -> (u64, usize, Duration) {
    (
        env_u64("SANDDUNE_FUZZ_SEED", DEFAULT_SEED),
        env_u64("SANDDUNE_FUZZ_ITERATIONS", DEFAULT_ITERATIONS as u64) as usize,
        Duration::from_millis(env_u64(
            "SANDDUNE_FUZZ_TIME_LIMIT_MS",
            DEFAULT_TIME_LIMIT.as_millis() as u64,
        )),
    )
}

/// Saves a failing input where cargo-fuzz keeps its artifacts.
fn save(target: &str, kind: &str, input: &[u8]) -> PathBuf {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in input {
        hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    let dir = fuzz_dir().join("artifacts").join(target);
    std::fs::create_dir_all(&dir).expect("create the artifacts directory");
    let path = dir.join(format!("{kind}-{hash:016x}"));
    std::fs::write(&path, input).expect("write the artifact");
    path
}

fn preview(input: &[u8]) -> String {
    let text = String::from_utf8_lossy(&input[..input.len().min(400)]);
    format!("{text:?}{}", if input.len() > 400 { " ..." } else { "" })
}

/// Runs the corpus of `target`, then `iterations` mutations of it from
/// `seed`; Err names the failing input (also saved to a file).
pub fn run(
    target: Target,
    seed: u64,
    iterations: usize,
    limit: Duration,
) -> Result<Report, String> {
    let corpus = corpus(target.name);
    let seeds: Vec<Vec<u8>> = corpus.iter().map(|(_, d)| d.clone()).collect();
    // One seed per target, so targets do not share a sequence.
    let mut rng = Rng::new(
        seed ^ target
            .name
            .bytes()
            .fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(b)),
    );
    let worker = Worker::new(target);
    let start = Instant::now();
    let mut report = Report {
        target: target.name,
        seed,
        corpus_inputs: corpus.len(),
        mutated_inputs: 0,
        elapsed: Duration::ZERO,
        slowest: Duration::ZERO,
        slowest_len: 0,
        largest: 0,
    };
    let inputs = corpus
        .iter()
        .map(|(path, data)| (Some(path.clone()), data.clone()))
        .chain((0..iterations).map(|_| (None, mutate(&mut rng, &seeds, target.dictionary))));
    for (i, (path, input)) in inputs.enumerate() {
        let origin = match &path {
            Some(p) => format!("corpus file {}", p.display()),
            None => format!("mutated input #{} (seed {seed:#x})", i - corpus.len()),
        };
        worker
            .send
            .send(input.clone())
            .map_err(|_| format!("{}: the worker died", target.name))?;
        let (took, over) = match worker.recv.recv_timeout(limit * 12) {
            Ok((Ok(()), cpu)) => (cpu, cpu > limit),
            Ok((Err(panic), _)) => {
                let saved = save(target.name, "crash", &input);
                return Err(format!(
                    "{}: {origin} panicked: {panic}\n  input ({} bytes, saved to {}): {}",
                    target.name,
                    input.len(),
                    saved.display(),
                    preview(&input)
                ));
            }
            Err(_) => (limit * 12, true),
        };
        if over {
            let saved = save(target.name, "timeout", &input);
            return Err(format!(
                "{}: {origin} took {took:.2?} (the bound is {limit:?} of CPU time)\n  input ({} bytes, saved to {}): {}",
                target.name,
                input.len(),
                saved.display(),
                preview(&input)
            ));
        }
        if took > report.slowest {
            report.slowest = took;
            report.slowest_len = input.len();
        }
        report.largest = report.largest.max(input.len());
        if path.is_none() {
            report.mutated_inputs += 1;
        }
    }
    report.elapsed = start.elapsed();
    Ok(report)
}
