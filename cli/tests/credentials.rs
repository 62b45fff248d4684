//! The store's password kept out of the process list: `tern up` against a
//! Redis server of its own (an ACL user, the default user off) with the
//! password from a file; neither `/proc/<pid>/cmdline`, the logs (`-vv`),
//! the `--json` output nor anything tern wrote to the store holds it. Also
//! `TERN_STORE_PASSWORD`, `password_file` in tern.toml, the warning for a
//! password on the command line, a wrong password's error, and `tern init
//! --with-store` keeping a URL's password out of tern.toml.
//!
//! And the `tern` binary over `rediss://` with the `[tls]` files of
//! tern.toml: the binary links the rustls of the MongoDB driver (ring) and of
//! scylla (aws-lc-rs), so this is where a missing default crypto provider
//! would panic.
//!
//! Needs `redis-server` and `redis-cli` on the PATH (`scripts/servers.sh
//! install redis`); without them the test prints why and is skipped. The
//! servers listen on 127.0.0.1:6400 and 6405 and are stopped when the test ends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Project, RELEASE2};
use tern_testkit::server::LocalServer;
use tern_testkit::tls::{Leaf, TestPki, server_tls_args};

const PORT: u16 = 6400;
const USER: &str = "tern_it_credentials";

/// Why redis-server or redis-cli cannot run here, if so.
fn tools_missing() -> Option<String> {
    for tool in ["redis-server", "redis-cli"] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Some(format!("{tool} is not on the PATH"));
        }
    }
    None
}

/// Starts redis-server on [`PORT`] with only [`USER`] (password `password`)
/// enabled, or says why it cannot.
fn start_server(password: &str) -> Result<LocalServer, String> {
    if let Some(reason) = tools_missing() {
        return Err(reason);
    }
    let dir = tempfile::tempdir().unwrap();
    // The ACL rules in a file, not on the server's command line.
    let acl = dir.path().join("users.acl");
    std::fs::write(
        &acl,
        format!("user default off\nuser {USER} on >{password} ~* &* +@all\n"),
    )
    .unwrap();
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &PORT.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir.path())
        .arg("--aclfile")
        .arg(&acl);
    Ok(LocalServer::start(&mut cmd, PORT, Duration::from_secs(10)).keeping(dir))
}

/// `redis-cli` as the test's user (the password in its environment).
fn redis_cli(password: &str, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &PORT.to_string(), "--user", USER, "--no-auth-warning"])
        .args(args)
        .env("REDISCLI_AUTH", password)
        .output()
        .unwrap();
    assert!(out.status.success(), "redis-cli {args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Everything the server holds, as text: every key and its content.
fn server_contents(password: &str) -> String {
    let mut all = String::new();
    for key in redis_cli(password, &["--scan"]).lines() {
        let kind = redis_cli(password, &["TYPE", key]);
        let content = match kind.trim() {
            "string" => redis_cli(password, &["GET", key]),
            "hash" => redis_cli(password, &["HGETALL", key]),
            "set" => redis_cli(password, &["SMEMBERS", key]),
            "list" => redis_cli(password, &["LRANGE", key, "0", "-1"]),
            "zset" => redis_cli(password, &["ZRANGE", key, "0", "-1", "WITHSCORES"]),
            other => panic!("key {key}: unexpected type {other}"),
        };
        all.push_str(&format!("{key}\n{content}\n"));
    }
    all
}

/// Runs `tern ARGS` in `p`, reading `/proc/<pid>/cmdline` while it runs;
/// returns the command line (arguments joined by spaces), stdout and stderr.
fn run_watched(p: &Project, args: &[&str]) -> (String, String, String) {
    // A run may end before its command line is read: run it again (a second
    // `tern up` finds nothing to do) until the read sees the live process.
    for _ in 0..20 {
        let child = p
            .cmd(args)
            .env_remove("TERN_STORE_PASSWORD")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Right after the spawn the new program's command line may not be
        // there yet: poll while the process lives.
        let proc_file = format!("/proc/{}/cmdline", child.id());
        let mut cmdline = Vec::new();
        for _ in 0..2000 {
            cmdline = std::fs::read(&proc_file).unwrap_or_default();
            if !cmdline.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "tern {args:?}:\n{stdout}\n{stderr}");
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !cmdline.is_empty() {
            return (cmdline, stdout, stderr);
        }
    }
    panic!("tern {args:?} always ended before its command line could be read");
}

fn set_mode(path: &std::path::Path, mode: u32) {
    let mut perms = std::fs::metadata(path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, mode);
    std::fs::set_permissions(path, perms).unwrap();
}

#[test]
fn the_password_from_a_file_is_never_shown() {
    let password = format!("Pw-{}-s3cr3t", std::process::id());
    let server = match start_server(&password) {
        Ok(server) => server,
        Err(reason) => {
            eprintln!("skipped: password kept out of the process list: {reason}");
            return;
        }
    };
    let url = format!("redis://{USER}@127.0.0.1:{PORT}/?prefix=tern_cred");
    let p = Project::on(&url, 5_000);
    p.write("pw.txt", &format!("{password}\n"));
    p.write("data.jsonl", &common::blog_lines(4, 2));
    set_mode(&p.path("pw.txt"), 0o644);

    // `--store-password-file`: import, then the migration.
    let (cmdline, _, stderr) = run_watched(
        &p,
        &["import", "data.jsonl", "--store-password-file", "pw.txt"],
    );
    assert!(cmdline.contains("--store-password-file"), "{cmdline}");
    assert!(!stderr.contains(&password), "{stderr}");
    // Others can read the file, which tern says.
    assert!(stderr.contains("chmod 600"), "{stderr}");
    set_mode(&p.path("pw.txt"), 0o600);
    p.write("migrations/0001_release2.tern", RELEASE2);
    let (cmdline, stdout, stderr) = run_watched(
        &p,
        &["up", "--json", "-vv", "--store-password-file", "pw.txt"],
    );
    assert!(cmdline.contains(" up --json"), "{cmdline}");
    assert!(!cmdline.contains(&password), "process list: {cmdline}");
    let up: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(up["applied"].is_array(), "{up}");
    assert!(!stdout.contains(&password), "--json output: {stdout}");
    // -vv: every debug line there is; none holds the password.
    assert!(stderr.contains("DEBUG"), "expected debug logs: {stderr}");
    assert!(!stderr.contains("chmod 600"), "{stderr}");
    for line in stderr.lines() {
        assert!(!line.contains(&password), "log line: {line}");
    }
    // The migration ran (the posts have `likes`), and tern's state document
    // and every other key hold no password.
    let contents = server_contents(&password);
    assert!(contents.contains("likes"), "{contents}");
    assert!(contents.contains("tern_cred"), "{contents}");
    assert!(!contents.contains(&password), "{contents}");

    // TERN_STORE_PASSWORD, and `password_file` in tern.toml.
    let status = p
        .cmd(&["status", "--json"])
        .env("TERN_STORE_PASSWORD", &password)
        .output()
        .unwrap();
    common::assert_success(&status);
    let status = String::from_utf8(status.stdout).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(parsed["migrations"][0]["state"], "applied", "{status}");
    assert!(!status.contains(&password), "{status}");
    let toml = std::fs::read_to_string(p.path("tern.toml")).unwrap();
    p.write("tern.toml", &format!("password_file = \"pw.txt\"\n{toml}"));
    let status = p.ok(&["status", "--json"]);
    assert!(status.contains("applied"), "{status}");

    // A wrong password: the error names the URL, never a password.
    p.write("wrong.txt", "not-the-password");
    let err = p.fails(&["status", "--store-password-file", "wrong.txt"], 1);
    assert!(err.contains(&format!("127.0.0.1:{PORT}")), "{err}");
    assert!(!err.contains("not-the-password"), "{err}");

    // A password in the URL on the command line works, with a warning.
    let in_argv = format!("redis://{USER}:{password}@127.0.0.1:{PORT}/?prefix=tern_cred");
    p.write("tern.toml", &toml);
    let out = p.cmd(&["status", "--store", &in_argv]).output().unwrap();
    common::assert_success(&out);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("process list"), "{stderr}");
    assert!(!stderr.contains(&password), "{stderr}");

    // `tern init --with-store` with that URL: tern.toml gets the URL without the password
    // and names a file of the owner's only that holds it; the project works as written.
    let dir = tempfile::tempdir().unwrap();
    let tern = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_tern"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = tern(&["init", "proj", "--with-store", &in_argv]);
    common::assert_success(&out);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("tern.password"), "{stderr}");
    assert!(!stderr.contains(&password), "{stderr}");
    let written = std::fs::read_to_string(dir.path().join("proj/tern.toml")).unwrap();
    assert!(!written.contains(&password), "{written}");
    assert!(
        written.contains(&format!(
            "store_url = \"redis://{USER}@127.0.0.1:{PORT}/?prefix=tern_cred\""
        )),
        "{written}"
    );
    assert!(
        written.contains("password_file = \"tern.password\""),
        "{written}"
    );
    let secret = dir.path().join("proj/tern.password");
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        format!("{password}\n")
    );
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&secret).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let out = tern(&["--config", "proj/tern.toml", "status", "--json"]);
    common::assert_success(&out);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.contains("chmod 600"), "{stderr}");
    // An existing password file is never overwritten.
    std::fs::remove_file(dir.path().join("proj/tern.toml")).unwrap();
    let out = tern(&["init", "proj", "--with-store", &in_argv]);
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("tern.password"), "{stderr}");
    assert!(!stderr.contains(&password), "{stderr}");
    assert!(!dir.path().join("proj/tern.toml").exists());
    drop(server);
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, in
/// `dir/certs` (`ca.pem`, `server.pem`/`.key`, `client.pem`/`.key`).
fn make_certs(dir: &std::path::Path) {
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let pki = TestPki::new(&certs);
    pki.issue("server", Leaf::SERVER);
    pki.issue("client", Leaf::CLIENT);
}

#[test]
fn tern_up_over_rediss_with_the_tls_files_of_tern_toml() {
    const TLS_PORT: u16 = 6405;
    if let Some(reason) = tools_missing() {
        eprintln!("skipped: tern over rediss://: {reason}");
        return;
    }
    let password = format!("Tls-{}-pw", std::process::id());
    let p = Project::on(
        &format!("rediss://{USER}@127.0.0.1:{TLS_PORT}/?prefix=tern_cred_tls"),
        5_000,
    );
    make_certs(&p.path(""));
    let toml = std::fs::read_to_string(p.path("tern.toml")).unwrap();
    p.write(
        "tern.toml",
        &format!(
            "{toml}[tls]\nca_file = \"certs/ca.pem\"\ncert_file = \"certs/client.pem\"\nkey_file = \"certs/client.key\"\n"
        ),
    );
    p.write(
        "users.acl",
        &format!("user default off\nuser {USER} on >{password} ~* &* +@all\n"),
    );
    let certs = p.path("certs");
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", "0", "--tls-port", &TLS_PORT.to_string()])
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
    server_tls_args(&mut cmd, &certs, "--tls-ca-cert-file")
        .arg("--aclfile")
        .arg(p.path("users.acl"))
        .arg("--dir")
        .arg(p.path(""));
    let server = LocalServer::start(&mut cmd, TLS_PORT, Duration::from_secs(10));
    let run = |args: &[&str]| {
        let out = p
            .cmd(args)
            .env("TERN_STORE_PASSWORD", &password)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), stdout, stderr)
    };
    p.write("data.jsonl", &common::blog_lines(3, 2));
    let (code, _, stderr) = run(&["import", "data.jsonl"]);
    assert_eq!(code, Some(0), "{stderr}");
    p.write("migrations/0001_release2.tern", RELEASE2);
    let (code, stdout, stderr) = run(&["up", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let up: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(up["applied"].as_array().unwrap().len(), 1, "{up}");
    let (code, stdout, stderr) = run(&["export", "blogpost"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("\"likes\":0"), "{stdout}");
    // Without the CA the server's certificate is refused, with the URL named.
    p.write("tern.toml", &toml);
    let (code, _, stderr) = run(&["status"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("127.0.0.1:{TLS_PORT}")),
        "{stderr}"
    );
    assert!(stderr.contains("certificate"), "{stderr}");
    assert!(!stderr.contains(&password), "{stderr}");
    drop(server);
}
