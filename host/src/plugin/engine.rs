//! The wasmtime engine every plugin runs on, and the epoch ticker that lets
//! the host bound how long a plugin computes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use wasmtime::{Config, Engine};

/// One epoch tick. A plugin in wasm code yields to tokio every tick and is
/// charged one tick of its per-call CPU budget.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

pub fn new_engine() -> anyhow::Result<Engine> {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.wasm_component_model(true);
    Ok(Engine::new(&config)?)
}

/// Increments the engine's epoch every `EPOCH_TICK` until dropped.
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
    epoch: Epoch,
}

/// The engine's epoch as the ticker counts it. wasmtime keeps its own
/// counter to itself; the store's hooks read this one.
#[derive(Clone, Default)]
pub struct Epoch(Arc<AtomicU64>);

impl Epoch {
    pub fn now(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl EpochTicker {
    pub fn start(engine: &Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let epoch = Epoch::default();
        let (engine, flag, counter) = (engine.clone(), stop.clone(), epoch.0.clone());
        std::thread::Builder::new()
            .name("sanddune-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            })
            .expect("cannot start the epoch thread");
        Self { stop, epoch }
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch.clone()
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
