//! What the tests of the `tern` binary share: a scratch project folder that
//! runs the real binary, and the blog example's data and migrations.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The paper's release 2 (per-entity statements only).
pub const RELEASE2: &str =
    "-- release 2\nadd blogpost.likes = 0\nrename blogpost.text to content\n";
/// The paper's release 3 (a copy and a move with a join).
pub const RELEASE3: &str = "copy user.email to blogpost where user.name = blogpost.author\n\
                            move user.url to blogpost where user.name = blogpost.author\n";

/// A project folder with `tern.toml` and `migrations/`, removed on drop.
pub struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// A project on the embedded store `store.redb` in the folder.
    pub fn new(ttl_ms: u64) -> Project {
        Project::on("embedded:store.redb", ttl_ms)
    }

    /// A project on the embedded store holding the blog example's
    /// `blog_lines(users, posts)`, imported from `data.jsonl`.
    pub fn with_blog(ttl_ms: u64, users: usize, posts: usize) -> Project {
        let p = Project::new(ttl_ms);
        p.import_blog(users, posts);
        p
    }

    /// A project with a short lease (`ttl_ms` 300) holding the blog
    /// example's `lines`, imported from `data.jsonl`, and release 2 as its
    /// first migration.
    pub fn with_release2(lines: &str) -> Project {
        let p = Project::new(300);
        p.write("data.jsonl", lines);
        p.ok(&["import", "data.jsonl"]);
        p.write("migrations/0001_release2.tern", RELEASE2);
        p
    }

    /// A project on the store at `store_url`.
    pub fn on(store_url: &str, ttl_ms: u64) -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("migrations")).unwrap();
        std::fs::write(
            dir.path().join("tern.toml"),
            format!("store_url = {store_url:?}\n[run]\nbatch_size = 50\npushdown_batch_size = 50\n[lease]\nttl_ms = {ttl_ms}\n"),
        )
        .unwrap();
        Project { dir }
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    pub fn write(&self, p: &str, text: &str) {
        std::fs::write(self.path(p), text).unwrap();
    }

    /// Writes `blog_lines(users, posts)` to `data.jsonl` and imports it.
    pub fn import_blog(&self, users: usize, posts: usize) {
        self.write("data.jsonl", &blog_lines(users, posts));
        self.ok(&["import", "data.jsonl"]);
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tern"));
        c.current_dir(self.dir.path())
            .args(args)
            .env_remove("TERN_STORE_URL")
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Starts `tern ARGS` (its standard output and error captured), sends it
    /// `signal` (`INT`, `TERM`) after `after_ms`, and returns its output and
    /// how long it ran on after the signal.
    pub fn interrupt(&self, args: &[&str], signal: &str, after_ms: u64) -> (Output, Duration) {
        let child = self
            .cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(after_ms));
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -{signal}");
        let signalled = Instant::now();
        let out = child.wait_with_output().unwrap();
        (out, signalled.elapsed())
    }

    /// Starts `tern up --max-rate 1000`, sends it `signal` (`INT`, `TERM`)
    /// after `after_ms`, asserts it exits 130 and returns its standard error.
    pub fn up_interrupted(&self, signal: &str, after_ms: u64) -> String {
        let (out, _) = self.interrupt(&["up", "--max-rate", "1000"], signal, after_ms);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(130), "{stderr}");
        stderr
    }

    /// Writes `entities` (kind, integer id, version; no properties) straight
    /// into the embedded store `store.redb`, as no `tern` command would.
    pub fn put_raw(&self, entities: &[(&str, i64, u64)]) {
        use tern_core::store::Store as _;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let store =
                tern_core::store::embedded::EmbeddedStore::open(self.path("store.redb")).unwrap();
            let writes = entities
                .iter()
                .map(|(kind, id, version)| {
                    tern_core::store::Write::Put(tern_core::model::Entity {
                        key: tern_core::model::Key::new(*kind, tern_core::model::Value::Int(*id))
                            .unwrap(),
                        version: *version,
                        value: Default::default(),
                    })
                })
                .collect();
            store.write_batch(writes).await.unwrap();
        });
    }

    /// Runs `tern ARGS`, asserts it succeeds, returns its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "tern {args:?} failed ({:?}):\n{}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs `tern ARGS`, asserts it exits with `code`, returns its standard output.
    pub fn ok_or(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "tern {args:?}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs `tern ARGS`, asserts it exits with `code`, returns its standard error.
    pub fn fails(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "tern {args:?}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stderr).unwrap()
    }

    /// Runs `tern ARGS`, asserts it exits with `code` and that its standard
    /// error contains every one of `needles`; returns the standard error.
    pub fn fails_saying(&self, args: &[&str], code: i32, needles: &[&str]) -> String {
        let err = self.fails(args, code);
        for needle in needles {
            assert!(
                err.contains(needle),
                "tern {args:?}: no {needle:?} in:\n{err}"
            );
        }
        err
    }
}

/// Asserts the command behind `out` succeeded, showing its standard error
/// if not.
pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The blog example as JSON Lines: `users` users (every fourth without a url),
/// `posts` posts each.
pub fn blog_lines(users: usize, posts: usize) -> String {
    let mut s = String::new();
    for u in 0..users {
        let url = if u % 4 == 0 {
            String::new()
        } else {
            format!(",\"url\":\"http://u{u}.org\"")
        };
        s.push_str(&format!(
            "{{\"kind\":\"user\",\"id\":{u},\"value\":{{\"name\":\"user{u}\",\"email\":\"u{u}@x.org\"{url}}}}}\n"
        ));
        for p in 0..posts {
            s.push_str(&format!(
                "{{\"kind\":\"blogpost\",\"id\":\"{u}-{p}\",\"value\":{{\"title\":\"t{p}\",\"text\":\"x\",\"author\":\"user{u}\"}}}}\n"
            ));
        }
    }
    s
}
