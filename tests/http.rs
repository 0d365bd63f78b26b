//! The `http` capability end to end: the hostile-http provider sends the
//! requests its exec argv names to mock servers on the fixed loopback
//! addresses it declares as origins (127.77.0.N:8080, one per test), and the
//! host allows, refuses, cuts off and cancels them.

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sanddune::capability::logging::host_filter;
use sanddune::capability::{HttpLimits, Limits};
use sanddune::plugin::sandbox::{
    Command, ExecOutput, ExecRequest, Sandbox, SandboxProvider, SandboxSpec,
};
use sanddune::plugin::{FileApproval, PluginKind, PluginRef, PluginRuntime, RuntimeConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A redirect target no test grants.
const UNGRANTED: &str = "http://127.77.0.99:8080";

/// A tiny HTTP/1.1 server on 127.77.0.N:8080. It stops when dropped, and on
/// its own after a minute; each connection lives at most 30 s.
struct Mock {
    origin: String,
    /// The request heads it received.
    seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Mock {
    async fn start(n: u8) -> Mock {
        let addr: SocketAddr = format!("127.77.0.{n}:8080").parse().unwrap();
        let listener = TcpListener::bind(addr).await.unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let origin = format!("http://{addr}");
        let (o, s) = (origin.clone(), seen.clone());
        let task = tokio::spawn(async move {
            let stop = tokio::time::sleep(Duration::from_secs(60));
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    () = &mut stop => return,
                    Ok((stream, _)) = listener.accept() => {
                        let answer = answer(stream, o.clone(), s.clone());
                        tokio::spawn(tokio::time::timeout(Duration::from_secs(30), answer));
                    }
                }
            }
        });
        Mock { origin, seen, task }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin)
    }
}

async fn answer(mut stream: TcpStream, origin: String, seen: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 << 10 {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    seen.lock().unwrap().push(head.clone());
    let target = head.split_whitespace().nth(1).unwrap_or("/");
    let path = target.split('?').next().unwrap_or("/").to_string();
    let reply = |status: &str, extra: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n{body}",
            body.len()
        )
    };
    let response = match path.as_str() {
        "/hello" => reply("200 OK", "", "hello from mock"),
        "/redirect-in" => reply("302 Found", &format!("location: {origin}/hello\r\n"), ""),
        "/redirect-out" => reply("302 Found", &format!("location: {UNGRANTED}/hello\r\n"), ""),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            return;
        }
        "/stall" => {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-length: 100\r\nconnection: close\r\n\r\n0123456789";
            let _ = stream.write_all(head.as_bytes()).await;
            tokio::time::sleep(Duration::from_secs(30)).await;
            return;
        }
        big => {
            let n: usize = big
                .strip_prefix("/big/")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let head =
                format!("HTTP/1.1 200 OK\r\ncontent-length: {n}\r\nconnection: close\r\n\r\n");
            if stream.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![b'x'; 64 << 10];
            let mut left = n;
            while left > 0 {
                let take = left.min(chunk.len());
                if stream.write_all(&chunk[..take]).await.is_err() {
                    return;
                }
                left -= take;
            }
            return;
        }
    };
    let _ = stream.write_all(response.as_bytes()).await;
}

/// Everything the host logs at trace level, with the CLI's filter, for
/// checking that no credential reaches a log.
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        let _ = tracing_subscriber::fmt()
            .with_env_filter(host_filter(Some("trace")))
            .with_writer(move || Capture(sink.clone()))
            .try_init();
        logs
    })
    .clone()
}

struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged() -> String {
    String::from_utf8_lossy(&logs().lock().unwrap()).into_owned()
}

fn runtime(http: HttpLimits) -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: Some(common::cache_dir()),
        store_dir: None,
        limits: Limits {
            memory_bytes: 64 << 20,
            cpu_time_per_call: std::time::Duration::from_secs(30),
            http,
        },
        ..Default::default()
    })
    .unwrap()
}

async fn sandbox(rt: &PluginRuntime) -> (Sandbox, tempfile::TempDir) {
    logs();
    let plugin = rt
        .load(
            &PluginRef::File(common::plugin_file("sanddune-test-plugin-hostile-http")),
            Some(PluginKind::Sandbox),
        )
        .unwrap();
    let mut provider = SandboxProvider::from_plugin(plugin).await.unwrap();
    provider.approve(&FileApproval::Yes).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = SandboxSpec {
        run_id: "test".into(),
        name: "test".into(),
        worktree: dir.path().to_path_buf(),
        git_dir: dir.path().join(".git"),
        branch: "main".into(),
        env: vec![],
        config: vec![],
        side_by_side: 1,
        git_shield: None,
        gateway: None,
        setup: vec![],
        pool: None,
        snapshot: None,
    };
    (provider.create(&spec).await.unwrap(), dir)
}

fn argv(words: &[&str]) -> ExecRequest {
    ExecRequest {
        command: Command::Argv(words.iter().map(|w| w.to_string()).collect()),
        cwd: None,
        env: vec![],
        stdin: None,
        sudo: false,
        timeout_ms: None,
    }
}

async fn run(sandbox: &mut Sandbox, words: &[&str]) -> ExecOutput {
    sandbox.exec(argv(words), |_| {}).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_origin_gets_its_response_and_credentials_stay_out_of_logs() {
    let mock = Mock::start(1).await;
    let rt = runtime(HttpLimits::default());
    let (mut sandbox, _dir) = sandbox(&rt).await;
    let url = mock.url("/hello?token=QUERY-SECRET");
    let out = run(
        &mut sandbox,
        &[
            "get",
            &url,
            "authorization=Bearer HEADER-SECRET",
            "x-api-key=KEY-SECRET",
        ],
    )
    .await;
    assert_eq!(out.exit_code, 0, "{}", out.stdout);
    assert!(out.stdout.contains("status 200\n"), "{}", out.stdout);
    assert!(
        out.stdout.contains("body hello from mock\n"),
        "{}",
        out.stdout
    );
    let seen = mock.seen.lock().unwrap().join("\n");
    assert!(
        seen.contains("authorization: Bearer HEADER-SECRET"),
        "{seen}"
    );
    let logs = logged();
    assert!(
        logs.contains("GET http://127.77.0.1:8080/hello"),
        "the request is logged"
    );
    for secret in ["HEADER-SECRET", "KEY-SECRET", "QUERY-SECRET"] {
        let leaked: Vec<&str> = logs.lines().filter(|l| l.contains(secret)).collect();
        assert!(leaked.is_empty(), "{secret} reached the log: {leaked:?}");
    }
    sandbox.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_hosts_ports_and_schemes_are_refused_naming_origin_and_grant() {
    let mock = Mock::start(2).await;
    let rt = runtime(HttpLimits::default());
    let (mut sandbox, _dir) = sandbox(&rt).await;
    let refused = [
        (format!("{UNGRANTED}/hello"), UNGRANTED.to_string()),
        (
            "http://127.77.0.2:8081/hello".into(),
            "http://127.77.0.2:8081".into(),
        ),
        (
            "https://127.77.0.2:8080/hello".into(),
            "https://127.77.0.2:8080".into(),
        ),
        (
            "http://localhost:8080/hello".into(),
            "http://localhost:8080".into(),
        ),
        ("https://example.com/".into(), "https://example.com".into()),
    ];
    for (url, origin) in &refused {
        let out = run(&mut sandbox, &["get", url]).await;
        assert_eq!(out.exit_code, 1, "{url}: {}", out.stdout);
        assert!(
            out.stdout.contains("error ErrorCode::HttpRequestDenied"),
            "{url}: {}",
            out.stdout
        );
        let logs = logged();
        assert!(
            logs.contains(&format!("may not reach {origin}: not a granted origin (granted: http://127.77.0.1:8080, http://127.77.0.2:8080")),
            "{url}: {logs}"
        );
    }
    assert!(
        mock.seen.lock().unwrap().is_empty(),
        "nothing reached the mock"
    );
    // A refusal that fails the provider's call carries the reason itself.
    let err = sandbox
        .exec(argv(&["get!", &format!("{UNGRANTED}/x")]), |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the host refused: plugin `hostile-http` may not reach http://127.77.0.99:8080: not a granted origin (granted: http://127.77.0.1:8080"),
        "{err}"
    );
    // The sandbox survives its refusals.
    let out = run(&mut sandbox, &["get", &mock.url("/hello")]).await;
    assert!(
        out.stdout.contains("body hello from mock"),
        "{}",
        out.stdout
    );
    sandbox.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_followed_within_the_origin_and_refused_outside_it() {
    let mock = Mock::start(3).await;
    let rt = runtime(HttpLimits::default());
    let (mut sandbox, _dir) = sandbox(&rt).await;
    let inside = run(&mut sandbox, &["follow", &mock.url("/redirect-in")]).await;
    assert_eq!(inside.exit_code, 0, "{}", inside.stdout);
    assert!(inside.stdout.contains("status 302\n"), "{}", inside.stdout);
    assert!(
        inside.stdout.contains("body hello from mock"),
        "{}",
        inside.stdout
    );

    let outside = run(&mut sandbox, &["follow", &mock.url("/redirect-out")]).await;
    assert_eq!(outside.exit_code, 1, "{}", outside.stdout);
    assert!(
        outside.stdout.contains(&format!("redirect {UNGRANTED}/hello\nsending {UNGRANTED}/hello\nerror ErrorCode::HttpRequestDenied")),
        "{}",
        outside.stdout
    );
    sandbox.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_body_over_the_cap_is_cut_off_naming_the_cap() {
    let mock = Mock::start(4).await;
    let rt = runtime(HttpLimits {
        max_response_body_bytes: 1 << 20,
        ..HttpLimits::default()
    });
    let (mut sandbox, _dir) = sandbox(&rt).await;
    let within = run(&mut sandbox, &["get", &mock.url("/big/1048576")]).await;
    assert!(
        within.stdout.contains("bytes 1048576\n"),
        "{}",
        within.stdout
    );

    let over = run(&mut sandbox, &["get", &mock.url("/big/3000000")]).await;
    assert_eq!(over.exit_code, 1, "{}", over.stdout);
    assert!(
        over.stdout.contains("exceeds limit: 1048576 bytes"),
        "{}",
        over.stdout
    );
    let err = sandbox
        .exec(argv(&["get!", &mock.url("/big/3000000")]), |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the response from http://127.77.0.4:8080 exceeded the response body cap of 1048576 bytes"),
        "{err}"
    );
    sandbox.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_cancels_a_request_in_flight_and_the_sandbox_stays_usable() {
    let mock = Mock::start(5).await;
    let rt = runtime(HttpLimits::default());
    let (mut sandbox, _dir) = sandbox(&rt).await;
    for path in ["/slow", "/stall"] {
        // What abort and the idle timeout do: kill what the provider brokered.
        let canceller = sandbox.canceller();
        let started = Instant::now();
        let out = sandbox
            .exec(argv(&["get", &mock.url(path)]), move |line| {
                if line.text.starts_with("sending") {
                    let canceller = canceller.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        canceller.kill_all();
                    });
                }
            })
            .await
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{path}: took {:?}",
            started.elapsed()
        );
        assert_eq!(out.exit_code, 1, "{path}: {}", out.stdout);
        assert!(
            out.stdout.contains("cancelled by the host"),
            "{path}: {}",
            out.stdout
        );
        let again = run(&mut sandbox, &["get", &mock.url("/hello")]).await;
        assert!(
            again.stdout.contains("body hello from mock"),
            "{path}: {}",
            again.stdout
        );
    }
    sandbox.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_timeouts_end_a_silent_server() {
    let mock = Mock::start(6).await;
    let rt = runtime(HttpLimits {
        first_byte_timeout: Duration::from_millis(500),
        between_bytes_timeout: Duration::from_millis(500),
        ..HttpLimits::default()
    });
    let (mut sandbox, _dir) = sandbox(&rt).await;
    for (path, code) in [
        ("/slow", "ConnectionReadTimeout"),
        ("/stall", "read timeout"),
    ] {
        let started = Instant::now();
        let out = run(&mut sandbox, &["get", &mock.url(path)]).await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{path}: took {:?}",
            started.elapsed()
        );
        assert_eq!(out.exit_code, 1, "{path}: {}", out.stdout);
        assert!(out.stdout.contains(code), "{path}: {}", out.stdout);
    }
    sandbox.close().await.unwrap();
}
