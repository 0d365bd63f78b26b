//! The `http` capability: standard `wasi:http/outgoing-handler` for sandbox
//! providers, so their usual HTTP clients work, to the origins they were
//! granted and nowhere else.
//!
//! Every request a guest sends passes through `Hooks::send_request`, the one
//! enforcement point: the origin must be granted, the addresses its host
//! resolves to must be public unless the origin names them, and the request
//! is registered with the instance's `Brokered` set so abort and the idle
//! timeout cancel it like a brokered process. wasi:http never follows a
//! redirect itself; a guest's client that follows one sends a new request,
//! which is checked here like any other.

mod option;
mod policy;
mod send;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use wasmtime::component::Linker;
use wasmtime_wasi_http::{
    Error, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

pub use option::origin_of_option;
pub use policy::{AddressClass, Origin, classify};
pub(crate) use send::tls_config;

use super::PluginState;
use super::process::{Brokered, Killer};

/// Largest response body a guest may read, by default.
pub const MAX_RESPONSE_BODY_BYTES: u64 = 64 << 20;

/// Refusal messages kept per instance, for the provider's failure message.
const KEPT_REFUSALS: usize = 8;

/// The origins one provider instance may reach.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpGrant {
    pub origins: Vec<Origin>,
}

impl HttpGrant {
    /// A grant of the origins a provider declared; a malformed one is an
    /// error naming it.
    pub fn parse<S: AsRef<str>>(origins: &[S]) -> Result<Self, String> {
        let origins = origins
            .iter()
            .map(|o| Origin::parse(o.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(Self { origins })
    }

    fn allows(&self, origin: &Origin) -> bool {
        self.origins.contains(origin)
    }

    /// What a refusal names as granted.
    fn granted(&self) -> String {
        if self.origins.is_empty() {
            return "granted no origins".into();
        }
        let list: Vec<String> = self.origins.iter().map(Origin::to_string).collect();
        format!("granted: {}", list.join(", "))
    }
}

/// Bounds on every request, used where the guest sets no timeout of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    pub connect_timeout: Duration,
    pub first_byte_timeout: Duration,
    pub between_bytes_timeout: Duration,
    /// Not overridable by the guest.
    pub max_response_body_bytes: u64,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(60),
            between_bytes_timeout: Duration::from_secs(60),
            max_response_body_bytes: MAX_RESPONSE_BODY_BYTES,
        }
    }
}

impl HttpLimits {
    fn with_options(mut self, options: Option<RequestOptions>) -> Self {
        if let Some(o) = options {
            self.connect_timeout = o.connect_timeout.unwrap_or(self.connect_timeout);
            self.first_byte_timeout = o.first_byte_timeout.unwrap_or(self.first_byte_timeout);
            self.between_bytes_timeout = o
                .between_bytes_timeout
                .unwrap_or(self.between_bytes_timeout);
        }
        self
    }
}

/// The http part of one plugin store.
pub struct HttpState {
    ctx: WasiHttpCtx,
    hooks: Hooks,
}

impl HttpState {
    /// `grant` None: every request is refused (agent providers, guests of
    /// the 0.1 contract, providers that did not ask).
    pub fn new(
        plugin: Arc<str>,
        grant: Option<HttpGrant>,
        limits: HttpLimits,
        brokered: Brokered,
    ) -> Self {
        Self {
            ctx: WasiHttpCtx::new(),
            hooks: Hooks {
                plugin,
                grant: grant.unwrap_or_default(),
                limits,
                brokered,
                refusals: Refusals::default(),
            },
        }
    }

    /// What the host refused since the current call began, oldest first, so
    /// the provider's failure message can say why (the guest only gets an
    /// error code).
    pub fn take_refusals(&self) -> Vec<String> {
        self.hooks.refusals.take()
    }

    pub(crate) fn begin_call(&self) {
        self.hooks.refusals.take();
    }
}

/// Link `wasi:http/outgoing-handler` and `wasi:http/types` (the sandbox
/// linker only: agent providers get no network).
pub fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
}

impl WasiHttpView for PluginState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http.ctx,
            table: &mut self.table,
            hooks: &mut self.http.hooks,
        }
    }
}

/// Refusal messages shared with the request tasks, which outlive the call
/// that started them.
#[derive(Clone, Default)]
struct Refusals(Arc<Mutex<VecDeque<String>>>);

impl Refusals {
    fn record(&self, plugin: &str, message: String) {
        tracing::warn!(plugin, "{message}");
        let mut kept = self.0.lock().unwrap();
        if kept.len() == KEPT_REFUSALS {
            kept.pop_front();
        }
        kept.push_back(message);
    }

    fn take(&self) -> Vec<String> {
        self.0.lock().unwrap().drain(..).collect()
    }
}

/// Cancels one request from outside the plugin call (abort, idle timeout).
struct Cancel(CancellationToken);

impl Killer for Cancel {
    fn kill(&self) {
        self.0.cancel();
    }
}

/// Keeps a request in the instance's `Brokered` set while any part of it
/// (the response future, its body, the connection) is alive.
struct Registration {
    brokered: Brokered,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.brokered.unregister(self.id);
    }
}

/// What a cancelled request's guest sees. wasi:http has no code for "the
/// host cancelled this", so the message travels in `internal-error`.
fn cancelled() -> Error {
    Error::InternalError(Some(
        "request cancelled by the host: the run was aborted or timed out".into(),
    ))
}

type BoxFuture<T> = Box<dyn Future<Output = Result<T, Error>> + Send>;

struct Hooks {
    plugin: Arc<str>,
    grant: HttpGrant,
    limits: HttpLimits,
    brokered: Brokered,
    refusals: Refusals,
}

impl Hooks {
    /// A refusal: recorded with its reason, answered with the standard
    /// `http-request-denied`. The guest gets the code its HTTP client knows
    /// (a client can tell "denied" from a network failure and not retry);
    /// the reason, naming the origin and the grant, goes to the plugin log
    /// and into the provider's failure message, where the user sees it
    /// whatever the guest does with the error. (`internal-error(msg)` would
    /// carry the text to the guest but hide what kind of failure it is.)
    fn refuse<T: 'static>(&self, message: String) -> BoxFuture<T> {
        self.refusals.record(&self.plugin, message);
        Box::new(async { Err(Error::HttpRequestDenied) })
    }
}

impl WasiHttpHooks for Hooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _request_body_errors: BoxFuture<()>,
    ) -> BoxFuture<(http::Response<WasiBody>, BoxFuture<()>)> {
        let plugin = &self.plugin;
        let uri = request.uri();
        let scheme = uri.scheme_str().unwrap_or("");
        let authority = uri.authority().map_or("", |a| a.as_str());
        let origin = match Origin::of_request(scheme, authority) {
            Ok(origin) if self.grant.allows(&origin) => origin,
            Ok(origin) => {
                return self.refuse(format!(
                    "plugin `{plugin}` may not reach {origin}: not a granted origin ({})",
                    self.grant.granted()
                ));
            }
            Err(e) => {
                return self.refuse(format!(
                    "plugin `{plugin}` may not send this request: {e} ({})",
                    self.grant.granted()
                ));
            }
        };
        if self.brokered.is_cancelled() {
            return Box::new(async { Err(cancelled()) });
        }
        // Never the query or the headers: they may carry credentials.
        tracing::debug!(plugin = %plugin, "{} {origin}{}", request.method(), uri.path());

        let cancel = CancellationToken::new();
        let registration = Arc::new(Registration {
            id: self.brokered.register(Arc::new(Cancel(cancel.clone()))),
            brokered: self.brokered.clone(),
        });
        let limits = self.limits.with_options(options);
        let (plugin, refusals, granted) = (
            self.plugin.clone(),
            self.refusals.clone(),
            self.grant.granted(),
        );
        Box::new(async move {
            let exchange = async {
                let addresses = send::resolve(&origin, limits.connect_timeout).await?;
                for ip in &addresses {
                    if let Err(class) = policy::address_allowed(&origin, *ip) {
                        refusals.record(&plugin, format!(
                            "plugin `{plugin}` may not reach {origin}: it resolves to {ip}, a {class} address, which only an origin naming that address (or localhost, for loopback) may reach ({granted})"
                        ));
                        return Err(Error::HttpRequestDenied);
                    }
                }
                let shown = origin.to_string();
                let watch = send::Watch {
                    cancel: cancel.clone(),
                    registration: registration.clone(),
                    on_cap: Box::new(move |cap| {
                        refusals.record(&plugin, format!(
                            "plugin `{plugin}`: the response from {shown} exceeded the response body cap of {cap} bytes and was cut off"
                        ))
                    }),
                };
                send::exchange(request, &origin, &addresses, limits, watch).await
            };
            tokio::select! {
                () = cancel.cancelled() => Err(cancelled()),
                r = exchange => r,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;

    use http_body_util::{BodyExt, Empty};

    use super::*;

    fn hooks(origins: &[&str]) -> Hooks {
        Hooks {
            plugin: "p".into(),
            grant: HttpGrant::parse(origins).unwrap(),
            limits: HttpLimits::default(),
            brokered: Brokered::default(),
            refusals: Refusals::default(),
        }
    }

    async fn send(hooks: &mut Hooks, url: &str) -> Result<u16, Error> {
        let body = Empty::new().map_err(|never| match never {}).boxed_unsync();
        let request = http::Request::get(url).body(body).unwrap();
        let sent = hooks.send_request(request, None, Box::new(async { Ok(()) }));
        let (response, _io) = Pin::from(sent).await?;
        Ok(response.status().as_u16())
    }

    #[tokio::test]
    async fn requests_outside_the_grant_are_denied_with_the_reason() {
        let granted = ["https://api.example.com", "http://127.0.0.1:8080"];
        let refused = [
            ("https://evil.example.com/x", "https://evil.example.com"),
            (
                "https://api.example.com:8443/",
                "https://api.example.com:8443",
            ),
            ("http://api.example.com/", "http://api.example.com"),
            ("http://localhost:8080/", "http://localhost:8080"),
            ("http://127.0.0.1:8081/", "http://127.0.0.1:8081"),
        ];
        for (url, origin) in refused {
            let mut hooks = hooks(&granted);
            let err = send(&mut hooks, url).await.unwrap_err();
            assert!(matches!(err, Error::HttpRequestDenied), "{url}: {err}");
            let why = hooks.refusals.take().join("\n");
            assert!(
                why.contains(&format!("may not reach {origin}: not a granted origin"))
                    && why.contains("granted: https://api.example.com, http://127.0.0.1:8080"),
                "{url}: {why}"
            );
        }
        let mut nothing = hooks(&[]);
        send(&mut nothing, "https://api.example.com/")
            .await
            .unwrap_err();
        assert!(nothing.refusals.take()[0].contains("granted no origins"));
    }

    /// A name other than localhost that this machine resolves to a loopback
    /// or private address, from /etc/hosts (so the test needs no network).
    fn local_name() -> Option<(String, std::net::IpAddr)> {
        let hosts = std::fs::read_to_string("/etc/hosts").ok()?;
        hosts.lines().find_map(|line| {
            let mut words = line.split('#').next()?.split_whitespace();
            let ip: std::net::IpAddr = words.next()?.parse().ok()?;
            let name = words
                .find(|w| *w != "localhost" && Origin::parse(&format!("https://{w}")).is_ok())?;
            (policy::classify(ip) != policy::AddressClass::Public).then(|| (name.to_string(), ip))
        })
    }

    #[tokio::test]
    async fn a_granted_name_that_resolves_to_a_local_address_is_denied() {
        let Some((name, ip)) = local_name() else {
            eprintln!("SKIPPED: no name but localhost resolves locally in /etc/hosts");
            return;
        };
        let mut hooks = hooks(&[&format!("https://{name}:9")]);
        let err = send(&mut hooks, &format!("https://{name}:9/"))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::HttpRequestDenied), "{name}: {err}");
        let why = hooks.refusals.take().join("\n");
        assert!(
            why.contains(&format!("may not reach https://{name}:9: it resolves to")),
            "{why}"
        );
        assert!(
            why.contains(&ip.to_string()) || why.contains("address"),
            "{why}"
        );
    }

    #[tokio::test]
    async fn a_cancelled_instance_starts_no_request() {
        let mut hooks = hooks(&["http://127.0.0.1:9"]);
        hooks.brokered.kill_all();
        let err = send(&mut hooks, "http://127.0.0.1:9/").await.unwrap_err();
        assert!(err.to_string().contains("cancelled"), "{err}");
    }
}
