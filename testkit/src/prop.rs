//! Property tests whose cases run async code against a store: [`check`].

use std::future::Future;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestRunner};

/// Runs `test` on `cases` values drawn from `strategy` (shrunk on failure),
/// each case's future to completion on the current tokio runtime, which must
/// be multi-threaded (`#[tokio::test(flavor = "multi_thread")]`): the case
/// blocks its worker while the others serve the driver. No failure file is
/// written; a failure panics with proptest's message and minimal input.
///
/// # Panics
/// When a case panics (its message, with the minimal failing input), or
/// outside a multi-threaded tokio runtime.
pub fn check<S, F, Fut>(cases: u32, strategy: &S, test: F)
where
    S: Strategy,
    F: Fn(S::Value) -> Fut,
    Fut: Future<Output = ()> + Send,
{
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(strategy, |value| {
        crate::blocking::block_on_aside(test(value));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
