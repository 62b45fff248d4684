//! What every backend fixture shares.

use std::sync::atomic::{AtomicU64, Ordering};

/// The value of an environment variable, if set and not empty.
pub fn env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// A name no other test of any run uses: `prefix_<random>_<counter>`, made of
/// lowercase letters, digits and `_` (valid as a MongoDB database, a Redis key
/// prefix and a Cassandra keyspace).
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}_{}_{n}", &random[..10])
}

/// A TCP port on 127.0.0.1 that was free a moment ago (the OS picked it).
///
/// # Errors
/// When no port can be bound.
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

/// Why a local container image cannot be used here, or `Ok` when it is present.
///
/// Nothing is pulled: no container registry is reachable from the build
/// machines, so images are built locally (`scripts/redis-image.sh`).
///
/// # Errors
/// The skip reason: docker missing or not running, or the image not built.
pub fn local_image_present(image: &str) -> Result<(), String> {
    let out = std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", image])
        .output()
        .map_err(|e| format!("docker is not available ({e})"))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("No such image") {
        Err(format!(
            "image {image} is not present locally and cannot be pulled here"
        ))
    } else {
        Err(format!(
            "docker cannot inspect image {image}: {}",
            stderr.trim()
        ))
    }
}

/// Starts `name:tag` with host networking (the container shares 127.0.0.1),
/// with the command `cmd` (if not empty), and waits for `ready_line` on its stdout.
///
/// testcontainers' `get_host()` answers the docker bridge address on these
/// machines, which tests must never use: callers connect to 127.0.0.1 on a
/// port they chose and passed in `cmd`.
///
/// # Errors
/// The skip reason: the image is missing, or the container did not start.
pub async fn start_host_network_container(
    image: &str,
    cmd: &[String],
    ready_line: &str,
) -> Result<testcontainers::ContainerAsync<testcontainers::GenericImage>, String> {
    use testcontainers::core::WaitFor;
    use testcontainers::runners::AsyncRunner;
    use testcontainers::{GenericImage, ImageExt};

    local_image_present(image)?;
    let (name, tag) = image.rsplit_once(':').unwrap_or((image, "latest"));
    let mut request = GenericImage::new(name, tag)
        .with_wait_for(WaitFor::message_on_stdout(ready_line))
        .with_network("host")
        .with_startup_timeout(std::time::Duration::from_secs(60));
    if !cmd.is_empty() {
        request = request.with_cmd(cmd.iter().cloned());
    }
    request
        .start()
        .await
        .map_err(|e| format!("container {image} did not start: {e}"))
}
