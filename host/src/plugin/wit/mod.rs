//! One binding module per supported version of the WIT package, each
//! converting to and from the host-owned types of `plugin::api`. The
//! capability imports are implemented once, by `host_imports!`, for every
//! version whose import interfaces share their shape.
//!
//! Adding a version: freeze the released `wit/` as `wit/vX.Y/` (its `deps`
//! a link, `ln -s ../deps`, not a copy: ADR 0028), add a module here for
//! it, and list it in `ApiVersion`. See ADR 0009.

#[macro_use]
mod imports;
#[macro_use]
mod convert;
mod dispatch;
pub mod v0_1;
pub mod v0_2;
pub mod v0_3;
pub mod v0_4;
pub mod v0_5;
pub mod v0_6;
pub mod v0_7;
pub mod v0_8;

use wasmtime::component::Linker;

pub(crate) use dispatch::each;
pub use dispatch::{AgentBindings, SandboxBindings};

use crate::capability::PluginState;

/// The package every version shares.
pub const PACKAGE: &str = "sanddune:plugin";

/// The supported versions of the contract, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ApiVersion {
    V0_1,
    V0_2,
    V0_3,
    V0_4,
    V0_5,
    V0_6,
    V0_7,
    V0_8,
}

impl ApiVersion {
    pub const ALL: [ApiVersion; 8] = [
        ApiVersion::V0_1,
        ApiVersion::V0_2,
        ApiVersion::V0_3,
        ApiVersion::V0_4,
        ApiVersion::V0_5,
        ApiVersion::V0_6,
        ApiVersion::V0_7,
        ApiVersion::V0_8,
    ];
    /// What `sanddune plugin new` scaffolds and the built-ins use.
    pub const CURRENT: ApiVersion = ApiVersion::V0_8;

    /// (major, minor); any patch of it loads.
    pub fn number(self) -> (u64, u64) {
        match self {
            ApiVersion::V0_1 => (0, 1),
            ApiVersion::V0_2 => (0, 2),
            ApiVersion::V0_3 => (0, 3),
            ApiVersion::V0_4 => (0, 4),
            ApiVersion::V0_5 => (0, 5),
            ApiVersion::V0_6 => (0, 6),
            ApiVersion::V0_7 => (0, 7),
            ApiVersion::V0_8 => (0, 8),
        }
    }

    /// The version a component exports, from `x.y.z`; None when unsupported.
    pub fn of(version: &str) -> Option<ApiVersion> {
        let mut parts = version.split('.').map(|p| p.parse::<u64>().ok());
        let (major, minor) = (parts.next().flatten()?, parts.next().flatten()?);
        Self::ALL.into_iter().find(|v| v.number() == (major, minor))
    }

    /// `0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8` for messages.
    pub fn supported() -> String {
        Self::ALL
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl std::fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor) = self.number();
        write!(f, "{major}.{minor}")
    }
}

/// The linkers of one version: its imports (and WASI) for each world.
pub struct Linkers {
    pub sandbox: Linker<PluginState>,
    pub agent: Linker<PluginState>,
}

impl Linkers {
    pub fn new(engine: &wasmtime::Engine, version: ApiVersion) -> wasmtime::Result<Self> {
        let mut sandbox = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut sandbox)?;
        let mut agent = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut agent)?;
        match version {
            ApiVersion::V0_1 => v0_1::add_to_linkers(&mut sandbox, &mut agent)?,
            ApiVersion::V0_2 => v0_2::add_to_linkers(&mut sandbox, &mut agent)?,
            ApiVersion::V0_3 => v0_3::add_to_linkers(&mut sandbox, &mut agent)?,
            ApiVersion::V0_4 => v0_4::add_to_linkers(&mut sandbox, &mut agent)?,
            ApiVersion::V0_5 => v0_5::add_to_linkers(&mut sandbox, &mut agent)?,
            ApiVersion::V0_6 => v0_6::add_to_linkers(&mut sandbox, &mut agent)?,
            ApiVersion::V0_7 => v0_7::add_to_linkers(&mut sandbox, &mut agent)?,
            ApiVersion::V0_8 => v0_8::add_to_linkers(&mut sandbox, &mut agent)?,
        }
        Ok(Self { sandbox, agent })
    }
}
