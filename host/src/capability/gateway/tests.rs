use std::collections::BTreeMap;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

fn env_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn declared(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

/// An API that answers each request with what it received, then closes.
async fn echo_api() -> (String, tokio::task::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Ok(Ok((mut s, _))) =
            tokio::time::timeout(std::time::Duration::from_secs(2), listener.accept()).await
        {
            let mut buf = vec![0u8; 8192];
            let n = s.read(&mut buf).await.unwrap();
            let got = String::from_utf8_lossy(&buf[..n]).to_string();
            let body = format!("seen {} bytes", got.len());
            s.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .await
            .unwrap();
            seen.push(got);
        }
        seen
    });
    (url, task)
}

#[tokio::test]
async fn a_declared_key_is_swapped_for_a_placeholder_and_the_api_gets_the_real_one() {
    let (api, seen) = echo_api().await;
    let mut env = env_of(&[
        ("ANTHROPIC_API_KEY", "sk-ant-real-secret"),
        ("ANTHROPIC_BASE_URL", &format!("{api}/proxy")),
        ("OPENAI_API_KEY", "sk-openai-real"),
    ]);
    // The agent declares Anthropic's base URL, not OpenAI's.
    let planned = Gateway::plan(
        &declared(&["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY"]),
        &mut env,
        Some(Reach::Loopback),
    )
    .unwrap();
    assert_eq!(
        planned.kept_out,
        [("ANTHROPIC_API_KEY".to_string(), format!("{api}/proxy"))]
    );
    let placeholder = env["ANTHROPIC_API_KEY"].clone();
    assert!(
        placeholder.starts_with("sk-ant-sanddune-placeholder-"),
        "{placeholder}"
    );
    assert_eq!(
        env["OPENAI_API_KEY"], "sk-openai-real",
        "not declared: left as it is"
    );
    let base = env["ANTHROPIC_BASE_URL"].clone();
    assert!(
        base.starts_with("http://127.0.0.1:") && base.ends_with("/proxy"),
        "{base}"
    );
    assert!(!env.values().any(|v| v.contains("sk-ant-real-secret")));

    let gateway_addr = base
        .trim_start_matches("http://")
        .trim_end_matches("/proxy")
        .to_string();
    let send = |head: String| {
        let addr = gateway_addr.clone();
        async move {
            let mut c = TcpStream::connect(addr).await.unwrap();
            c.write_all(head.as_bytes()).await.unwrap();
            let mut got = String::new();
            c.read_to_string(&mut got).await.unwrap();
            got
        }
    };
    let got = send(format!(
        "POST /proxy/v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {placeholder}\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{{}}"
    ))
    .await;
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
    assert!(
        got.contains("Connection: close\r\n") && !got.contains("keep-alive"),
        "{got}"
    );
    // A wrong placeholder, and none at all, are refused at the gateway.
    for key in ["sk-ant-sanddune-placeholder-0000", ""] {
        let got = send(format!(
            "POST /proxy/v1/messages HTTP/1.1\r\nx-api-key: {key}\r\n\r\n"
        ))
        .await;
        assert!(got.starts_with("HTTP/1.1 401"), "{got}");
    }
    drop(planned);
    let seen = seen.await.unwrap();
    assert_eq!(
        seen.len(),
        1,
        "the refused requests reached the API: {seen:?}"
    );
    let request = &seen[0];
    assert!(
        request.starts_with("POST /proxy/v1/messages HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(
        request.contains("x-api-key: sk-ant-real-secret\r\n"),
        "{request}"
    );
    assert!(!request.contains("placeholder"), "{request}");
    assert!(
        request.contains(&format!("Host: {}\r\n", api.trim_start_matches("http://"))),
        "{request}"
    );
    assert!(
        request.contains("Connection: close\r\n") && request.ends_with("\r\n\r\n{}"),
        "{request}"
    );
}

#[tokio::test]
async fn an_api_without_a_default_needs_its_url_and_an_agent_that_reads_none_keeps_its_key() {
    let mut env = env_of(&[("COPILOT_PROVIDER_API_KEY", "k")]);
    let planned = Gateway::plan(
        &declared(&["COPILOT_PROVIDER_API_KEY", "COPILOT_PROVIDER_BASE_URL"]),
        &mut env,
        Some(Reach::Link),
    )
    .unwrap();
    assert!(planned.gateway.is_none() && env["COPILOT_PROVIDER_API_KEY"] == "k");

    let mut env = env_of(&[("OPENAI_API_KEY", "sk-x")]);
    let planned = Gateway::plan(
        &declared(&["OPENAI_API_KEY", "OPENAI_BASE_URL"]),
        &mut env,
        Some(Reach::Link),
    )
    .unwrap();
    assert!(planned.gateway.is_some());
    assert_eq!(env["OPENAI_BASE_URL"], "http://127.0.0.1:3129/v1");
    assert_eq!(
        planned.kept_out,
        [(
            "OPENAI_API_KEY".to_string(),
            "https://api.openai.com/v1".to_string()
        )]
    );

    let mut env = env_of(&[("ANTHROPIC_API_KEY", "sk-ant-k")]);
    let planned = Gateway::plan(&declared(&["ANTHROPIC_BASE_URL"]), &mut env, None).unwrap();
    assert!(planned.gateway.is_none());
    assert_eq!(planned.kept_in, ["ANTHROPIC_API_KEY"]);
    assert_eq!(
        env["ANTHROPIC_API_KEY"], "sk-ant-k",
        "no reach: the key goes in"
    );

    let mut env = env_of(&[
        ("GEMINI_API_KEY", "g"),
        ("GOOGLE_GEMINI_BASE_URL", "ftp://x"),
    ]);
    let err = Gateway::plan(
        &declared(&["GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"]),
        &mut env,
        Some(Reach::Link),
    )
    .err()
    .unwrap();
    assert!(err.starts_with("GOOGLE_GEMINI_BASE_URL=ftp://x: "), "{err}");
}

#[tokio::test]
async fn an_unreachable_api_closes_the_connection_unanswered() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut env = env_of(&[
        ("ANTHROPIC_API_KEY", "sk-ant-k"),
        ("ANTHROPIC_BASE_URL", &format!("http://127.0.0.1:{port}")),
    ]);
    let _planned = Gateway::plan(
        &declared(&["ANTHROPIC_BASE_URL"]),
        &mut env,
        Some(Reach::Loopback),
    )
    .unwrap();
    let addr = env["ANTHROPIC_BASE_URL"]
        .trim_start_matches("http://")
        .to_string();
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(
        format!(
            "GET / HTTP/1.1\r\nx-api-key: {}\r\n\r\n",
            env["ANTHROPIC_API_KEY"]
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut got = String::new();
    let _ = c.read_to_string(&mut got).await;
    assert_eq!(got, "", "as an unreachable API: no answer");
    let inside = env["ANTHROPIC_BASE_URL"].clone();
    assert_eq!(
        _planned
            .urls
            .as_the_user_set_them(&format!("HTTP 401 from {inside}/v1/messages")),
        format!("HTTP 401 from http://127.0.0.1:{port}/v1/messages")
    );
}

#[test]
fn urls_parse_into_their_parts() {
    let u = server::Upstream::parse("https://api.openai.com/v1/").unwrap();
    assert_eq!(u.path(), "/v1");
    assert!(server::Upstream::parse("https://user:pw@x.com").is_err());
    assert!(server::Upstream::parse("x.com").is_err());
    assert!(server::Upstream::parse("http://x.com:http").is_err());
}
