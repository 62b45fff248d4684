//! Running async code to completion from synchronous test code (a fault hook,
//! a proptest case) that is itself called from inside a tokio runtime.

use std::future::Future;

/// Runs `fut` to completion on the current runtime and returns its output,
/// blocking the calling thread meanwhile.
///
/// The future is driven on a thread of its own, never on the caller's. The
/// plain `block_in_place(|| Handle::current().block_on(fut))` loses wakeups
/// when the caller is the thread that runs the runtime's own `block_on` (the
/// main thread of a `#[tokio::test]`): both `block_on`s park the same thread
/// on the same parker, so a wakeup meant for the outer future (a reply to a
/// write polled in the same `futures::join!` as the hook) is consumed by the
/// inner one, and once the inner future is done the outer one parks with no
/// wakeup left to come: the test hangs. The engine polls a checkpoint (and its
/// fault point) in one join with the next batch's writes, so a fault hook
/// that writes to the store must block here instead. Test
/// `a_future_run_aside_does_not_steal_the_callers_wakeup`.
///
/// # Panics
/// Outside a tokio runtime, or when `fut` panics (with its message).
pub fn block_on_aside<F>(fut: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    let handle = tokio::runtime::Handle::current();
    // On a worker thread, hand its other tasks to another thread first.
    tokio::task::block_in_place(|| {
        std::thread::scope(|s| match s.spawn(|| handle.block_on(fut)).join() {
            Ok(out) => out,
            Err(panic) => std::panic::resume_unwind(panic),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Runs `f` on a thread of its own and gives its result, or `None` when it
    /// has not returned within `limit` (the thread is then left running).
    ///
    /// For tests whose failure mode is a hang: they fail with a message instead.
    fn within<T: Send + 'static>(
        limit: Duration,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(limit).ok()
    }

    /// The shape of a fault hook polled in one `futures::join!` with a write:
    /// the hook blocks while the other branch's wakeup arrives.
    fn join_a_reply_with_a_blocking_hook() -> Option<u32> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .ok()?;
        rt.block_on(async {
            let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let _ = tx.send(7);
            });
            let hook = async {
                // Let the reply's branch register its waker first.
                tokio::task::yield_now().await;
                block_on_aside(async { tokio::time::sleep(Duration::from_millis(200)).await });
            };
            let (reply, ()) = futures::join!(rx, hook);
            reply.ok()
        })
    }

    #[test]
    fn a_future_run_aside_does_not_steal_the_callers_wakeup() {
        let reply = within(Duration::from_secs(30), join_a_reply_with_a_blocking_hook);
        assert_eq!(
            reply,
            Some(Some(7)),
            "the join never completed: the hook's blocking took the reply's wakeup"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_future_run_aside_gives_its_output_and_its_panic() {
        assert_eq!(block_on_aside(async { 6 * 7 }), 42);
        let panicked = std::panic::catch_unwind(|| block_on_aside(async { panic!("inner") }));
        assert!(panicked.is_err());
    }
}
