//! A loaded agent provider. Agent providers are pure: their store gets no
//! capability at all, so one instance serves the whole run.

use wasmtime::Store;

use super::wit::AgentBindings;
use super::{Plugin, PluginKind, PluginRef, PluginRuntime, one_line};
use crate::capability::{Grants, PluginState};
use crate::error::{Error, Result};

pub use super::api::{
    AgentCommand, AgentEvent, AgentInfo, AgentResult, CommandRequest, ToolCall, Usage,
};

pub struct AgentProvider {
    plugin: Plugin,
    info: AgentInfo,
    store: Store<PluginState>,
    bindings: AgentBindings,
}

/// A stream parser living in the agent provider's instance.
pub struct StreamParser(wasmtime::component::ResourceAny);

impl AgentProvider {
    pub async fn load(runtime: &PluginRuntime, plugin: &PluginRef) -> Result<Self> {
        let plugin = runtime.load(plugin, Some(PluginKind::Agent))?;
        Self::from_plugin(plugin).await
    }

    pub async fn from_plugin(plugin: Plugin) -> Result<Self> {
        let mut store = plugin.runtime().store(&plugin.source, Grants::default())?;
        super::begin_call(&mut store);
        let bindings = AgentBindings::instantiate(plugin.api, &plugin.pre, &mut store)
            .await
            .map_err(|e| plugin.instantiate_error(e))?;
        let info = bindings.describe(&mut store).await.map_err(|e| {
            Error::Plugin(format!(
                "`{}` failed in describe: {}",
                plugin.source,
                one_line(&e.into())
            ))
        })?;
        super::described::check_agent(&plugin.source, &info)?;
        Ok(Self {
            plugin,
            info,
            store,
            bindings,
        })
    }

    pub fn info(&self) -> &AgentInfo {
        &self.info
    }

    pub fn plugin(&self) -> &Plugin {
        &self.plugin
    }

    pub fn name(&self) -> &str {
        &self.info.name
    }

    fn begin(&mut self) -> (&AgentBindings, &mut Store<PluginState>) {
        super::begin_call(&mut self.store);
        (&self.bindings, &mut self.store)
    }

    fn trap(&self, what: &str, e: wasmtime::Error) -> Error {
        Error::Plugin(format!(
            "agent provider `{}` stopped in {what}: {}",
            self.info.name,
            one_line(&e.into())
        ))
    }

    /// A refusal (bad option, empty prompt) is bad input.
    fn command(
        &self,
        what: &str,
        r: wasmtime::Result<std::result::Result<AgentCommand, String>>,
    ) -> Result<AgentCommand> {
        match r {
            Ok(Ok(cmd)) => Ok(cmd),
            Ok(Err(msg)) => Err(Error::Input(format!("{}: {msg}", self.info.name))),
            Err(e) => Err(self.trap(what, e)),
        }
    }

    /// The command for one unattended iteration.
    pub async fn build_print_command(&mut self, request: &CommandRequest) -> Result<AgentCommand> {
        let (b, s) = self.begin();
        let r = b.build_print_command(s, request).await;
        self.command("build-print-command", r)
    }

    /// The command for the agent's terminal UI.
    pub async fn build_interactive_command(
        &mut self,
        request: &CommandRequest,
    ) -> Result<AgentCommand> {
        let (b, s) = self.begin();
        let r = b.build_interactive_command(s, request).await;
        self.command("build-interactive-command", r)
    }

    /// Where the agent keeps the session file of `session_id` for a home
    /// and working directory; None when it keeps none.
    pub async fn session_file_path(
        &mut self,
        home: &str,
        cwd: &str,
        session_id: &str,
    ) -> Result<Option<String>> {
        let (b, s) = self.begin();
        let r = b.session_file_path(s, home, cwd, session_id).await;
        r.map_err(|e| self.trap("session-file-path", e))
    }

    /// A session file with its working directories rewritten.
    pub async fn rewrite_session_cwd(
        &mut self,
        content: &str,
        from: &str,
        to: &str,
    ) -> Result<String> {
        let (b, s) = self.begin();
        let r = b.rewrite_session_cwd(s, content, from, to).await;
        r.map_err(|e| self.trap("rewrite-session-cwd", e))
    }

    /// Token usage recorded in a session file.
    pub async fn usage_from_session(&mut self, content: &str) -> Result<Option<Usage>> {
        let (b, s) = self.begin();
        let r = b.usage_from_session(s, content).await;
        r.map_err(|e| self.trap("usage-from-session", e))
    }

    /// A parser for the output of the command built for `request`.
    pub async fn new_parser(&mut self, request: &CommandRequest) -> Result<StreamParser> {
        let (b, s) = self.begin();
        let r = b.new_parser(s, request).await;
        r.map(StreamParser)
            .map_err(|e| self.trap("stream-parser", e))
    }

    pub async fn push_line(
        &mut self,
        parser: &StreamParser,
        line: &str,
    ) -> Result<Vec<AgentEvent>> {
        let (b, s) = self.begin();
        let r = b.push_line(s, parser.0, line).await;
        r.map_err(|e| self.trap("push-line", e))
    }

    /// Events for several lines in one call.
    pub async fn push_lines(
        &mut self,
        parser: &StreamParser,
        lines: &[String],
    ) -> Result<Vec<AgentEvent>> {
        let (b, s) = self.begin();
        let r = b.push_lines(s, parser.0, lines).await;
        r.map_err(|e| self.trap("push-lines", e))
    }

    /// Final events, then the parser is gone.
    pub async fn finish(&mut self, parser: StreamParser) -> Result<Vec<AgentEvent>> {
        let (b, s) = self.begin();
        let r = b.finish(s, parser.0).await;
        let events = r.map_err(|e| self.trap("finish", e))?;
        let _ = parser.0.resource_drop_async(&mut self.store).await;
        Ok(events)
    }
}
