//! The hardened HTTP surface of the real binary with real clients: a real Prometheus scrapes
//! it over HTTPS with basic auth; `curl` (OpenSSL) checks passwords, client certificates and
//! reloads; raw TCP checks the limits (head size, slow clients, request timeout); invalid
//! web configs stop start-up naming the key. Certificates are made at test time with the
//! `openssl` CLI, bcrypt hashes with the `bcrypt` crate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use railscope_tests::{Agent, Pki, binary, fixtures, free_port, get, require, tree_args};

const TREE: &str = "h100-cx7-ndr-ib";

fn hash(password: &str) -> String {
    bcrypt::hash(password, 4).unwrap()
}

/// The agent on the fixture tree with `web_config` and `extra`; started once its port accepts
/// connections (its listener may answer TLS only, or only with credentials).
fn web_agent(web_config: &Path, extra: &[&str]) -> Agent {
    let mut args = tree_args(&fixtures().join(TREE));
    args.push("--web.config.file".into());
    args.push(web_config.display().to_string());
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend_from_slice(extra);
    Agent::listening(&args)
}

/// What curl got: the HTTP status (0: no HTTP response), curl's exit code, the response
/// headers and body.
#[derive(Debug)]
struct Curl {
    status: u16,
    exit: i32,
    headers: String,
    body: String,
    stderr: String,
}

fn curl(url: &str, args: &[&str]) -> Curl {
    require("curl", "curl");
    let dir = tempfile::tempdir().unwrap();
    let headers = dir.path().join("headers");
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "20",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "-D",
        ])
        .arg(&headers)
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", "0"));
    Curl {
        status: status.trim().parse().unwrap_or(0),
        exit: out.status.code().unwrap_or(-1),
        headers: std::fs::read_to_string(&headers)
            .unwrap_or_default()
            .to_ascii_lowercase(),
        body: body.to_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    }
}

/// curl with the CA and optionally a user.
fn curl_tls(agent: &Agent, path: &str, ca: &Path, user: Option<&str>, extra: &[&str]) -> Curl {
    let ca = ca.display().to_string();
    let mut args = vec!["--cacert", ca.as_str()];
    if let Some(user) = user {
        args.extend(["-u", user]);
    }
    args.extend_from_slice(extra);
    curl(&agent.url(path), &args)
}

/// Retries `check` until it holds or `secs` pass.
fn eventually(secs: u64, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(Instant::now() < deadline, "not within {secs}s: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Rewrites a file so that its modification time certainly moves.
fn rewrite(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Writes to `path` a web config serving TLS with `server` and client auth type `auth`
/// against `client_ca`; returns `path`.
fn client_auth_config(
    path: &Path,
    server: (&Path, &Path),
    auth: &str,
    client_ca: &Path,
) -> PathBuf {
    let extra = format!(
        "  client_auth_type: {auth}\n  client_ca_file: {}\n",
        client_ca.display()
    );
    std::fs::write(path, web_config(Some(server), &extra, &[], "")).unwrap();
    path.to_path_buf()
}

fn web_config(
    tls: Option<(&Path, &Path)>,
    extra_tls: &str,
    users: &[(&str, &str)],
    headers: &str,
) -> String {
    let mut text = String::new();
    if let Some((cert, key)) = tls {
        text.push_str(&format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n{extra_tls}",
            cert.display(),
            key.display()
        ));
    }
    if !headers.is_empty() {
        text.push_str(&format!("http_server_config:\n  headers:\n{headers}"));
    }
    if !users.is_empty() {
        text.push_str("basic_auth_users:\n");
        for (user, hash) in users {
            text.push_str(&format!("  {user}: '{hash}'\n"));
        }
    }
    text
}

#[test]
fn prometheus_scrapes_over_https_with_basic_auth() {
    require("prometheus", "prometheus");
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "a");
    let (cert, key) = pki.issue("server", true);
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        web_config(
            Some((&cert, &key)),
            "",
            &[("prometheus", &hash("s3cret"))],
            "",
        ),
    )
    .unwrap();
    let agent = web_agent(&web, &[]);

    let prom_port = free_port();
    let prom_config = dir.path().join("prometheus.yml");
    let job = |name: &str, password: &str| {
        format!(
            "  - job_name: {name}\n    scheme: https\n    tls_config:\n      ca_file: {}\n    basic_auth:\n      username: prometheus\n      password: {password}\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
            pki.ca().display(),
            agent.addr.port()
        )
    };
    std::fs::write(
        &prom_config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{}{}",
            job("railscope", "s3cret"),
            job("railscope-wrong-password", "guess")
        ),
    )
    .unwrap();
    let mut prometheus = railscope_tests::prometheus_command(&prom_config, dir.path(), prom_port)
        .spawn()
        .unwrap();
    struct Kill<'a>(&'a mut Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _prometheus = Kill(&mut prometheus);
    let prom: SocketAddr = format!("127.0.0.1:{prom_port}").parse().unwrap();
    let query = |q: &str| railscope_tests::prometheus_query(prom, q);
    let up = |job: &str| -> Option<String> {
        query(&format!("up{{job=\"{job}\"}}"))["data"]["result"][0]["value"][1]
            .as_str()
            .map(str::to_owned)
    };
    let targets = || {
        get(prom, "/api/v1/targets", &[])
            .map(|r| r.text())
            .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while up("railscope").as_deref() != Some("1") || up("railscope-wrong-password").is_none() {
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped railscope over HTTPS: {}\nagent log:\n{}",
            targets(),
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(up("railscope-wrong-password").as_deref(), Some("0"));
    let targets = targets();
    assert!(
        targets.contains("401"),
        "the wrong password's scrape error should say 401: {targets}"
    );
    // The series arrived, not just a 200.
    let ports = query("count(railscope_ib_port_state{job=\"railscope\"})");
    let count: f64 = ports["data"]["result"][0]["value"][1]
        .as_str()
        .unwrap_or("0")
        .parse()
        .unwrap();
    assert!(
        count >= 8.0,
        "Prometheus stored {count} port states: {ports}"
    );
}

#[test]
fn basic_auth_rejects_wrong_passwords_and_unknown_users() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "a");
    let (cert, key) = pki.issue("server", true);
    let web = dir.path().join("web.yml");
    // carol's hash is an htpasswd -nBC 10 style `$2y$10$` hash (of "fakepassword", the hash
    // exporter-toolkit uses for unknown users; a user may still have it as theirs).
    let htpasswd_style = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";
    let alice = bcrypt::hash_with_result("alice-pw", 4)
        .unwrap()
        .format_for_version(bcrypt::Version::TwoY);
    std::fs::write(
        &web,
        web_config(
            Some((&cert, &key)),
            "",
            &[("alice", &alice), ("bob", &hash("bob-pw")), ("carol", htpasswd_style)],
            "    X-Content-Type-Options: nosniff\n    X-Frame-Options: deny\n    Strict-Transport-Security: max-age=31536000\n",
        ),
    )
    .unwrap();
    let agent = web_agent(&web, &[]);
    let ca = pki.ca();

    let ok = curl_tls(&agent, "/metrics", &ca, Some("alice:alice-pw"), &[]);
    assert_eq!(ok.status, 200, "{}", ok.stderr);
    assert!(
        ok.body.contains("railscope_ib_port_state"),
        "{}",
        &ok.body[..200.min(ok.body.len())]
    );
    assert!(
        ok.headers.contains("x-frame-options: deny"),
        "{}",
        ok.headers
    );
    assert!(
        ok.headers.contains("x-content-type-options: nosniff"),
        "{}",
        ok.headers
    );
    assert!(
        ok.headers
            .contains("strict-transport-security: max-age=31536000"),
        "{}",
        ok.headers
    );
    assert_eq!(
        curl_tls(&agent, "/-/healthy", &ca, Some("bob:bob-pw"), &[]).status,
        200
    );
    assert_eq!(
        curl_tls(&agent, "/", &ca, Some("carol:fakepassword"), &[]).status,
        200
    );

    for (user, what) in [
        (None, "no credentials"),
        (Some("alice:wrong"), "a wrong password"),
        (Some("alice:bob-pw"), "another user's password"),
        (Some("mallory:alice-pw"), "an unknown user"),
        (
            Some("mallory:fakepassword"),
            "an unknown user with the fake hash's password",
        ),
        (Some("carol:"), "an empty password"),
    ] {
        for path in ["/metrics", "/-/healthy", "/nope"] {
            let denied = curl_tls(&agent, path, &ca, user, &[]);
            assert_eq!(denied.status, 401, "{what} on {path}: {denied:?}");
            assert!(
                denied.headers.contains("www-authenticate: basic"),
                "{}",
                denied.headers
            );
            assert!(
                denied.headers.contains("x-frame-options: deny"),
                "{}",
                denied.headers
            );
            assert!(
                !denied.body.contains("railscope_"),
                "{what} on {path} leaked metrics"
            );
        }
    }
    // A second round is answered from the verdict cache, with the same answers.
    assert_eq!(
        curl_tls(&agent, "/metrics", &ca, Some("alice:wrong"), &[]).status,
        401
    );
    assert_eq!(
        curl_tls(&agent, "/metrics", &ca, Some("alice:alice-pw"), &[]).status,
        200
    );
    // A bearer token is not basic auth.
    let bearer = curl_tls(
        &agent,
        "/metrics",
        &ca,
        None,
        &["-H", "Authorization: Bearer alice-pw"],
    );
    assert_eq!(bearer.status, 401);
    // Methods other than GET and HEAD are refused once authenticated, unknown paths are 404.
    let post = curl_tls(
        &agent,
        "/metrics",
        &ca,
        Some("alice:alice-pw"),
        &["-X", "POST"],
    );
    assert_eq!(post.status, 405, "{post:?}");
    assert_eq!(
        curl_tls(&agent, "/nope", &ca, Some("alice:alice-pw"), &[]).status,
        404
    );
}

#[test]
fn client_certificates_are_required_and_verified() {
    let dir = tempfile::tempdir().unwrap();
    let server_pki = Pki::new(dir.path(), "server");
    let client_pki = Pki::new(dir.path(), "client");
    let other_pki = Pki::new(dir.path(), "other");
    let (cert, key) = server_pki.issue("server", true);
    let (client_cert, client_key) = client_pki.issue("prometheus", false);
    let (other_cert, other_key) = other_pki.issue("prometheus", false);
    let web = client_auth_config(
        &dir.path().join("web.yml"),
        (&cert, &key),
        "RequireAndVerifyClientCert",
        &client_pki.ca(),
    );
    let agent = web_agent(&web, &[]);
    let ca = server_pki.ca();
    let with = |cert: &Path, key: &Path, extra: &[&str]| {
        let (c, k) = (cert.display().to_string(), key.display().to_string());
        let mut args = vec!["--cert", c.as_str(), "--key", k.as_str()];
        args.extend_from_slice(extra);
        curl_tls(&agent, "/metrics", &ca, None, &args)
    };
    for version in ["--tlsv1.2", "--tlsv1.3"] {
        let max = if version == "--tlsv1.2" { "1.2" } else { "1.3" };
        let ok = with(&client_cert, &client_key, &[version, "--tls-max", max]);
        assert_eq!(ok.status, 200, "{version}: {ok:?}");
        let none = curl_tls(&agent, "/metrics", &ca, None, &[version, "--tls-max", max]);
        assert_eq!(
            none.status, 0,
            "{version}: no client certificate was served: {none:?}"
        );
        assert_ne!(none.exit, 0, "{none:?}");
        let other = with(&other_cert, &other_key, &[version, "--tls-max", max]);
        assert_eq!(
            other.status, 0,
            "{version}: a foreign client certificate was served: {other:?}"
        );
        assert_ne!(other.exit, 0, "{other:?}");
    }
    // Without the server's CA the client refuses the server.
    let untrusted = curl(
        &agent.url("/metrics"),
        &[
            "--cert",
            &client_cert.display().to_string(),
            "--key",
            &client_key.display().to_string(),
        ],
    );
    assert_eq!(untrusted.status, 0, "{untrusted:?}");
}

#[test]
fn plain_http_to_the_tls_port_gets_no_http_answer() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "a");
    let (cert, key) = pki.issue("server", true);
    let web = dir.path().join("web.yml");
    std::fs::write(&web, web_config(Some((&cert, &key)), "", &[], "")).unwrap();
    let agent = web_agent(&web, &[]);
    let plain = get(agent.addr, "/metrics", &[]);
    assert!(plain.is_err(), "plain HTTP got an HTTP answer: {plain:?}");
    let plain = curl(
        &format!("http://127.0.0.1:{}/metrics", agent.addr.port()),
        &[],
    );
    assert_eq!(plain.status, 0, "{plain:?}");
    // TLS on the same port still works.
    assert_eq!(
        curl_tls(&agent, "/metrics", &pki.ca(), None, &[]).status,
        200
    );
    // TLS 1.2 only when asked.
    std::fs::write(
        &web,
        web_config(Some((&cert, &key)), "  min_version: TLS13\n", &[], ""),
    )
    .unwrap();
    let strict = web_agent(&web, &[]);
    let old = curl_tls(
        &strict,
        "/metrics",
        &pki.ca(),
        None,
        &["--tlsv1.2", "--tls-max", "1.2"],
    );
    assert_eq!(
        old.status, 0,
        "TLS 1.2 was served with min_version TLS13: {old:?}"
    );
    assert_eq!(
        curl_tls(&strict, "/metrics", &pki.ca(), None, &["--tlsv1.3"]).status,
        200
    );
}

#[test]
fn passwords_and_certificates_reload_without_restart() {
    let dir = tempfile::tempdir().unwrap();
    let first = Pki::new(dir.path(), "first");
    let second = Pki::new(dir.path(), "second");
    let (cert1, key1) = first.issue("server", true);
    let (cert2, key2) = second.issue("server", true);
    let cert = dir.path().join("server.crt");
    let key = dir.path().join("server.key");
    std::fs::copy(&cert1, &cert).unwrap();
    std::fs::copy(&key1, &key).unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        web_config(Some((&cert, &key)), "", &[("prometheus", &hash("old"))], ""),
    )
    .unwrap();
    let agent = web_agent(&web, &[]);
    let pid = agent.child.id();
    assert_eq!(
        curl_tls(&agent, "/metrics", &first.ca(), Some("prometheus:old"), &[]).status,
        200
    );

    // A new password hash.
    rewrite(
        &web,
        &web_config(Some((&cert, &key)), "", &[("prometheus", &hash("new"))], ""),
    );
    eventually(15, "the new password works", || {
        curl_tls(
            &agent,
            "/-/healthy",
            &first.ca(),
            Some("prometheus:new"),
            &[],
        )
        .status
            == 200
    });
    assert_eq!(
        curl_tls(
            &agent,
            "/-/healthy",
            &first.ca(),
            Some("prometheus:old"),
            &[]
        )
        .status,
        401
    );

    // An invalid file is logged once and the previous config stays.
    rewrite(
        &web,
        "tls_server_config:\n  cert_file: nope\n  key_file: nope\n  client_auth_type: Foo\n",
    );
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(
        curl_tls(
            &agent,
            "/-/healthy",
            &first.ca(),
            Some("prometheus:new"),
            &[]
        )
        .status,
        200
    );
    let log = agent.log();
    assert_eq!(
        log.matches("Invalid web config").count(),
        1,
        "the invalid web config should be logged exactly once:\n{log}"
    );
    assert!(log.contains("tls_server_config.client_auth_type"), "{log}");
    rewrite(
        &web,
        &web_config(Some((&cert, &key)), "", &[("prometheus", &hash("new"))], ""),
    );

    // A new certificate and key, from another CA, in the same files.
    rewrite(&cert, &std::fs::read_to_string(&cert2).unwrap());
    rewrite(&key, &std::fs::read_to_string(&key2).unwrap());
    eventually(15, "the new certificate is served", || {
        curl_tls(
            &agent,
            "/-/healthy",
            &second.ca(),
            Some("prometheus:new"),
            &[],
        )
        .status
            == 200
    });
    let old = curl_tls(
        &agent,
        "/-/healthy",
        &first.ca(),
        Some("prometheus:new"),
        &[],
    );
    assert_eq!(
        old.status, 0,
        "the old certificate is still served: {old:?}"
    );
    assert_eq!(agent.child.id(), pid);
    assert!(
        agent.log().contains("Reloaded the web config"),
        "{}",
        agent.log()
    );
}

#[test]
fn invalid_web_config_stops_start_up_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "a");
    let (cert, key) = pki.issue("server", true);
    let missing = dir.path().join("missing.crt");
    let cases: Vec<(String, String)> = vec![
        (
            web_config(Some((&cert, &key)), "  client_auth_type: Foo\n", &[], ""),
            "tls_server_config.client_auth_type: unknown value \"Foo\"".into(),
        ),
        (
            web_config(Some((&missing, &key)), "", &[], ""),
            "tls_server_config.cert_file".into(),
        ),
        (
            web_config(Some((&cert, &cert)), "", &[], ""),
            "tls_server_config.key_file".into(),
        ),
        (
            web_config(
                Some((&cert, &key)),
                "  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n",
                &[],
                "",
            ),
            "tls_server_config.cipher_suites".into(),
        ),
        (
            web_config(None, "", &[("alice", "plaintext")], ""),
            "basic_auth_users.alice".into(),
        ),
        (
            web_config(None, "", &[], "    Server: railscope\n"),
            "http_server_config.headers.Server".into(),
        ),
        (
            "tls_server_config:\n  certfile: x\n".into(),
            "certfile".into(),
        ),
    ];
    for (text, expected) in cases {
        let web = dir.path().join("bad-web.yml");
        std::fs::write(&web, &text).unwrap();
        let config = dir.path().join("railscope.yml");
        std::fs::write(&config, format!("web:\n  config-file: {}\n", web.display())).unwrap();
        for args in [
            vec!["--web.config.file".to_owned(), web.display().to_string()],
            vec!["--config.file".to_owned(), config.display().to_string()],
        ] {
            let out = Command::new(binary())
                .args(&args)
                .args([
                    "--web.listen-address",
                    &format!("127.0.0.1:{}", free_port()),
                ])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{text}: started anyway");
            let prefix = format!("web config {}: ", web.display());
            assert!(
                stderr.contains(&prefix) && stderr.contains(&expected),
                "{args:?} {text}: expected {prefix}{expected}, got: {stderr}"
            );
            assert_eq!(stderr.matches(&prefix).count(), 1, "said once: {stderr}");
        }
    }
}

fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut got = Vec::new();
    let _ = stream.read_to_end(&mut got);
    got
}

#[test]
fn oversized_heads_get_431_and_slow_clients_are_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(&web, "").unwrap();
    let agent = web_agent(
        &web,
        &[
            "--web.read-header-timeout",
            "1s",
            "--web.request-timeout",
            "5s",
        ],
    );
    let ok = get(
        agent.addr,
        "/-/healthy",
        &[("X-Filler", &"a".repeat(8 * 1024))],
    )
    .unwrap();
    assert_eq!(ok.status, 200, "an 8 KiB header is fine");
    let big = get(
        agent.addr,
        "/-/healthy",
        &[("X-Filler", &"a".repeat(20 * 1024))],
    )
    .unwrap();
    assert_eq!(big.status, 431, "a 20 KiB head");
    let names: Vec<String> = (0..80).map(|i| format!("X-H{i}")).collect();
    let many: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "1")).collect();
    assert_eq!(
        get(agent.addr, "/-/healthy", &many).unwrap().status,
        431,
        "80 headers"
    );

    // A client that sends half a head and stops is disconnected after the header timeout.
    let mut slow = TcpStream::connect(agent.addr).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let start = Instant::now();
    let got = read_until_closed(&mut slow);
    let waited = start.elapsed();
    assert!(
        waited < Duration::from_secs(15),
        "a stalled head held the connection {waited:?}"
    );
    assert!(!String::from_utf8_lossy(&got).contains(" 200 "), "{got:?}");
    // So is an idle keep-alive connection, and one that never starts.
    let mut idle = TcpStream::connect(agent.addr).unwrap();
    let start = Instant::now();
    read_until_closed(&mut idle);
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "an idle connection was held"
    );
    // The agent still serves.
    assert_eq!(get(agent.addr, "/-/healthy", &[]).unwrap().status, 200);
}

#[test]
fn a_stalled_tls_handshake_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "a");
    let (cert, key) = pki.issue("server", true);
    let web = dir.path().join("web.yml");
    std::fs::write(&web, web_config(Some((&cert, &key)), "", &[], "")).unwrap();
    let agent = web_agent(&web, &["--web.read-header-timeout", "1s"]);
    let mut stream = TcpStream::connect(agent.addr).unwrap();
    // The first bytes of a ClientHello record, then nothing.
    stream.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).unwrap();
    let start = Instant::now();
    read_until_closed(&mut stream);
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "a stalled handshake held the connection"
    );
    assert_eq!(
        curl_tls(&agent, "/-/healthy", &pki.ca(), None, &[]).status,
        200
    );
}

#[test]
fn a_request_over_the_request_timeout_gets_503() {
    let dir = tempfile::tempdir().unwrap();
    let web = dir.path().join("web.yml");
    // A valid bcrypt hash of cost 16: any check against it takes seconds (65536 rounds), far
    // over the 1 s request timeout.
    let slow_hash = "$2y$16$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";
    std::fs::write(&web, web_config(None, "", &[("slow", slow_hash)], "")).unwrap();
    let agent = web_agent(&web, &["--web.request-timeout", "1s"]);
    let start = Instant::now();
    let resp = get(
        agent.addr,
        "/metrics",
        &[("Authorization", "Basic c2xvdzpwYXNzd29yZA==")],
    )
    .unwrap();
    assert_eq!(resp.status, 503, "{}", resp.text());
    assert_eq!(resp.text(), "Request timed out\n");
    assert!(start.elapsed() < Duration::from_secs(15));
    // Without credentials there is nothing to check: 401 at once.
    assert_eq!(get(agent.addr, "/metrics", &[]).unwrap().status, 401);
}

#[test]
fn a_client_that_stops_reading_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let web = dir.path().join("web.yml");
    std::fs::write(&web, "").unwrap();
    let agent = web_agent(&web, &["--web.request-timeout", "2s"]);
    let size = get(agent.addr, "/metrics", &[]).unwrap().body.len();
    // Far more pipelined responses than the socket buffers hold, and no reading: the
    // agent's writes stall, and after the request timeout it gives the connection up.
    let requests = 200;
    let mut stream = TcpStream::connect(agent.addr).unwrap();
    let one = "GET /metrics HTTP/1.1\r\nHost: railscope\r\n\r\n";
    stream.write_all(one.repeat(requests).as_bytes()).unwrap();
    std::thread::sleep(Duration::from_secs(12));
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut got = Vec::new();
    let result = stream.read_to_end(&mut got);
    // Closed: an end of stream, or a reset (the agent had unread pipelined requests).
    assert!(
        result.is_ok()
            || result
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the agent kept the stalled connection open ({} bytes read, then {result:?})",
        got.len()
    );
    assert!(
        got.len() < requests * size,
        "all {requests} responses arrived ({} bytes): the writes never stalled",
        got.len()
    );
    assert_eq!(get(agent.addr, "/-/healthy", &[]).unwrap().status, 200);
}

#[test]
fn the_other_client_auth_types() {
    let dir = tempfile::tempdir().unwrap();
    let server_pki = Pki::new(dir.path(), "server");
    let client_pki = Pki::new(dir.path(), "client");
    let other_pki = Pki::new(dir.path(), "other");
    let (cert, key) = server_pki.issue("server", true);
    let (client_cert, client_key) = client_pki.issue("prometheus", false);
    let (other_cert, other_key) = other_pki.issue("prometheus", false);
    let ca = server_pki.ca();
    // (client_auth_type, served without a certificate, with the CA's, with a foreign one)
    let cases = [
        ("RequestClientCert", true, true, true),
        ("RequireAnyClientCert", false, true, true),
        ("VerifyClientCertIfGiven", true, true, false),
    ];
    for (auth, none_ok, valid_ok, foreign_ok) in cases {
        let web = client_auth_config(
            &dir.path().join(format!("{auth}.yml")),
            (&cert, &key),
            auth,
            &client_pki.ca(),
        );
        let agent = web_agent(&web, &[]);
        let with = |cert: &Path, key: &Path| {
            let (c, k) = (cert.display().to_string(), key.display().to_string());
            curl_tls(&agent, "/metrics", &ca, None, &["--cert", &c, "--key", &k]).status == 200
        };
        let none = curl_tls(&agent, "/metrics", &ca, None, &[]).status == 200;
        assert_eq!(none, none_ok, "{auth} without a certificate");
        assert_eq!(
            with(&client_cert, &client_key),
            valid_ok,
            "{auth} with the CA's certificate"
        );
        assert_eq!(
            with(&other_cert, &other_key),
            foreign_ok,
            "{auth} with a foreign certificate"
        );
    }
}

#[test]
fn cipher_suites_and_curves_restrict_the_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "a");
    let (cert, key) = pki.issue("server", true);
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        web_config(
            Some((&cert, &key)),
            "  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]\n  curve_preferences: [CurveP384]\n",
            &[],
            "",
        ),
    )
    .unwrap();
    let agent = web_agent(&web, &[]);
    let ca = pki.ca();
    let tls12 = ["--tlsv1.2", "--tls-max", "1.2"];
    // In TLS 1.2 the client must also list the certificate's curve (P-256); the key exchange
    // then uses the one curve the agent allows.
    let ok = curl_tls(
        &agent,
        "/-/healthy",
        &ca,
        None,
        &[
            &tls12[..],
            &[
                "--ciphers",
                "ECDHE-ECDSA-AES256-GCM-SHA384",
                "--curves",
                "P-384:P-256",
            ],
        ]
        .concat(),
    );
    assert_eq!(ok.status, 200, "{}", ok.stderr);
    let cipher = curl_tls(
        &agent,
        "/-/healthy",
        &ca,
        None,
        &[&tls12[..], &["--ciphers", "ECDHE-ECDSA-AES128-GCM-SHA256"]].concat(),
    );
    assert_eq!(
        cipher.status, 0,
        "a suite left out was negotiated: {cipher:?}"
    );
    let curve = curl_tls(
        &agent,
        "/-/healthy",
        &ca,
        None,
        &[&tls12[..], &["--curves", "X25519:P-256"]].concat(),
    );
    assert_eq!(
        curve.status, 0,
        "a curve left out was negotiated: {curve:?}"
    );
    let tls13 = curl_tls(&agent, "/-/healthy", &ca, None, &["--tlsv1.3"]);
    assert_eq!(
        tls13.status, 0,
        "TLS 1.3 was served with max_version TLS12: {tls13:?}"
    );
}
