//! Ctrl-C (SIGINT) and SIGTERM (what systemd, `docker stop` and Kubernetes
//! send) stop a run the same way: the current batch finishes, its checkpoint
//! is written, the lock is released, and tern exits 130 (resumable). A second
//! signal stops at once; the last checkpoint still holds.

use tern_core::migrate::CancelFlag;

/// Spawns the task that turns the first signal into `cancel` and the second
/// into an immediate exit 130.
pub fn watch(cancel: CancelFlag) {
    tokio::spawn(async move {
        let Some(first) = next_signal().await else {
            return;
        };
        let (stopping, stopped) = MESSAGES.get().copied().unwrap_or((
            "finishing the current batch and writing its checkpoint",
            "stopped; the last checkpoint holds, run the command again (`tern up`, `tern sweep`) to resume from it",
        ));
        crate::errln!("{first}: {stopping} (send it again to stop at once)");
        cancel.cancel();
        if next_signal().await.is_some() {
            crate::errln!("{stopped}");
            std::process::exit(130);
        }
    });
}

/// What the first and the second signal print, for commands that are not
/// migrations (the default speaks of batches and checkpoints).
static MESSAGES: std::sync::OnceLock<(&'static str, &'static str)> = std::sync::OnceLock::new();

/// Sets what the first signal (`stopping`) and the second (`stopped`)
/// print; the first call wins.
pub fn set_messages(stopping: &'static str, stopped: &'static str) {
    let _ = MESSAGES.set((stopping, stopped));
}

/// Waits for Ctrl-C or SIGTERM and names it; `None` if neither can be watched.
#[cfg(unix)]
async fn next_signal() -> Option<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok()?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.ok().map(|()| "interrupt"),
        r = term.recv() => r.map(|()| "SIGTERM"),
    }
}

#[cfg(not(unix))]
async fn next_signal() -> Option<&'static str> {
    tokio::signal::ctrl_c().await.ok().map(|()| "interrupt")
}
