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
