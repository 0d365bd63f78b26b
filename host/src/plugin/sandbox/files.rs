//! Host files into and out of a sandbox, staged where the provider cannot
//! open them itself.

use std::path::Path;

use super::live::Sandbox;
use crate::error::{Error, Result};
use crate::plugin::staging::Staging;

impl Sandbox {
    /// Host files pass through a staging dir in the scratch dir (see
    /// `staging`) when the provider cannot open `host` itself: one granted
    /// neither `program` nor `containers` (a cloud provider) never can, a
    /// `containers` one only within its grant (a session file under the
    /// user's home is outside). `write`: the provider is to write it.
    fn staging(&self, host: &Path, write: bool) -> Result<Option<Staging>> {
        let grants = &self.origin.grants;
        let Some(dir) = &grants.scratch_dir else {
            return Ok(None);
        };
        let reachable = !grants.programs.is_empty()
            || grants.containers.as_ref().is_some_and(|grant| {
                if write {
                    grant.may_write(host)
                } else {
                    grant.may_read(host)
                }
            });
        if reachable {
            return Ok(None);
        }
        Staging::new(dir).map(Some).map_err(|e| {
            Error::Other(anyhow::anyhow!(
                "cannot stage host files for `{}` in {}: {e}",
                self.name,
                dir.display()
            ))
        })
    }

    /// `host` as the provider may open it: itself, or a staged copy.
    fn staged_in(&self, host: &Path) -> Result<(Option<Staging>, String)> {
        let staging = self.staging(host, false)?;
        let path = match &staging {
            Some(st) => st.stage_in(host).map_err(|e| {
                Error::Other(anyhow::anyhow!("cannot stage {}: {e}", host.display()))
            })?,
            None => host.to_path_buf(),
        };
        Ok((staging, path.display().to_string()))
    }

    pub async fn copy_file_in(&mut self, host: &Path, sandbox_path: &str) -> Result<()> {
        let (_staging, h) = self.staged_in(host)?;
        let (bindings, store, handle) = self.begin()?;
        let r = bindings.copy_file_in(store, handle, &h, sandbox_path).await;
        self.end("copy-file-in", r)
    }

    pub async fn copy_file_out(&mut self, sandbox_path: &str, host: &Path) -> Result<()> {
        let staging = self.staging(host, true)?;
        let h = match &staging {
            Some(st) => st.out_path().display().to_string(),
            None => host.display().to_string(),
        };
        let (bindings, store, handle) = self.begin()?;
        let r = bindings
            .copy_file_out(store, handle, sandbox_path, &h)
            .await;
        self.end("copy-file-out", r)?;
        if let Some(st) = staging {
            st.deliver(host).map_err(|e| {
                Error::Other(anyhow::anyhow!("cannot write {}: {e}", host.display()))
            })?;
        }
        Ok(())
    }

    /// Copy a host file or directory into the sandbox (a directory's
    /// contents land in `sandbox_path` itself).
    pub async fn copy_in(&mut self, host: &Path, sandbox_path: &str) -> Result<()> {
        let (_staging, h) = self.staged_in(host)?;
        let (bindings, store, handle) = self.begin()?;
        let r = bindings.copy_in(store, handle, &h, sandbox_path).await;
        self.end("copy-in", r)
    }
}
