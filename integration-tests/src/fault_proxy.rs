//! A fault-injecting TCP proxy on 127.0.0.1, for tests of tern against a
//! server whose connections fail mid-run.
//!
//! Clients connect to [`FaultProxy::addr`]; every connection is forwarded to
//! the upstream server until a fault is injected:
//! - [`FaultProxy::drop_connections`]: every open connection is closed at once
//!   (a server restart or a network reset, as the client sees it); new
//!   connections are forwarded again;
//! - [`FaultProxy::set_delay`]: every chunk is forwarded this long after it
//!   was read, while later chunks are read meanwhile (a network's latency:
//!   pipelined requests overlap their waits);
//! - [`FaultProxy::blackhole`]: nothing is forwarded any more, in either
//!   direction, and new connections are accepted but stall (a partition); a
//!   later [`FaultProxy::heal`] closes the stalled connections and forwards
//!   again.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mode {
    delay: Duration,
    blackhole: bool,
    /// Bumped by every drop: connections of an older generation close.
    generation: u64,
}

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    accept: JoinHandle<()>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl FaultProxy {
    /// Starts a proxy on a free port of 127.0.0.1 forwarding to `upstream`.
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (mode, _) = watch::channel(Mode {
            delay: Duration::ZERO,
            blackhole: false,
            generation: 0,
        });
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = {
            let mode = mode.clone();
            let connections = Arc::clone(&connections);
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let rx = mode.subscribe();
                    let task = tokio::spawn(forward(client, upstream, rx));
                    if let Ok(mut list) = connections.lock() {
                        list.retain(|t| !t.is_finished());
                        list.push(task);
                    }
                }
            })
        };
        Ok(FaultProxy {
            addr,
            mode,
            accept,
            connections,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every open connection; later ones are forwarded again.
    pub fn drop_connections(&self) {
        self.mode.send_modify(|m| m.generation += 1);
        if let Ok(mut list) = self.connections.lock() {
            for t in list.drain(..) {
                t.abort();
            }
        }
    }

    /// Delays every forwarded chunk by `delay` (zero: no delay), as a
    /// network's latency: chunks in flight overlap their delays.
    pub fn set_delay(&self, delay: Duration) {
        self.mode.send_modify(|m| m.delay = delay);
    }

    /// Stops forwarding anything, on open and new connections.
    pub fn blackhole(&self) {
        self.mode.send_modify(|m| m.blackhole = true);
    }

    /// Ends a blackhole: the stalled connections are closed, new ones forwarded.
    pub fn heal(&self) {
        self.mode.send_modify(|m| m.blackhole = false);
        self.drop_connections();
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        if let Ok(mut list) = self.connections.lock() {
            for t in list.drain(..) {
                t.abort();
            }
        }
    }
}

async fn forward(client: TcpStream, upstream: SocketAddr, mode: watch::Receiver<Mode>) {
    let generation = mode.borrow().generation;
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let up = pump(cr, sw, mode.clone(), generation);
    let down = pump(sr, cw, mode, generation);
    tokio::select! {
        () = up => {},
        () = down => {},
    }
}

/// Waits while the proxy is blackholed; `false` when a drop happened
/// meanwhile (or the proxy is gone), so the connection is to close.
async fn through_blackhole(mode: &mut watch::Receiver<Mode>, generation: u64) -> bool {
    loop {
        let m = *mode.borrow();
        if m.generation != generation {
            return false;
        }
        if !m.blackhole {
            return true;
        }
        if mode.changed().await.is_err() {
            return false;
        }
    }
}

/// One direction of a connection: a delay line. A reader reads chunks and
/// stamps each with the time it is due (read time + the delay); a writer
/// forwards each when it is due, in order. The reader goes on reading while
/// earlier chunks wait, so the delay is latency only, as on a network: requests
/// pipelined on one connection (a multiplexed client) overlap their waits
/// instead of waiting one after the other.
async fn pump(
    from: tokio::net::tcp::OwnedReadHalf,
    to: tokio::net::tcp::OwnedWriteHalf,
    mode: watch::Receiver<Mode>,
    generation: u64,
) {
    let (line, due) = mpsc::channel(1024);
    tokio::join!(
        read_into(from, line, mode.clone(), generation),
        deliver(due, to, mode, generation)
    );
}

/// A chunk and when it is due.
type Chunk = (Instant, Vec<u8>);

/// The reading end of [`pump`]: ends at the end of the stream, on a drop, or
/// when the writer is gone (dropping `line` lets the writer drain and end).
async fn read_into(
    mut from: tokio::net::tcp::OwnedReadHalf,
    line: mpsc::Sender<Chunk>,
    mut mode: watch::Receiver<Mode>,
    generation: u64,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // Stall while blackholed; close when a drop happened meanwhile.
        if !through_blackhole(&mut mode, generation).await {
            return;
        }
        let n = tokio::select! {
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            changed = mode.changed() => {
                if changed.is_err() {
                    return;
                }
                continue;
            }
        };
        let due = Instant::now() + mode.borrow().delay;
        if line.send((due, buf[..n].to_vec())).await.is_err() {
            return;
        }
    }
}

/// The writing end of [`pump`]: each chunk when it is due.
async fn deliver(
    mut due: mpsc::Receiver<Chunk>,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
    generation: u64,
) {
    let timer = KernelTimer::new().ok();
    while let Some((at, bytes)) = due.recv().await {
        wait_until(timer.as_ref(), at).await;
        // Data read just before a blackhole began is held until it ends.
        if !through_blackhole(&mut mode, generation).await {
            return;
        }
        if to.write_all(&bytes).await.is_err() {
            return;
        }
    }
}

/// Waits until `at`, to a fraction of a millisecond: Tokio's timer ticks in
/// milliseconds (a sleep of 0.5 ms lasts up to 1.5 ms), so the last stretch
/// is waited on a kernel timer (`timerfd`, through Tokio's reactor: no
/// thread hand-off per chunk, which under load made every "0.5 ms" last
/// about 0.8 ms and queued a burst's chunks behind one another), or where
/// there is none on a blocking thread.
async fn wait_until(timer: Option<&KernelTimer>, at: Instant) {
    let coarse = Duration::from_millis(2);
    let left = at.saturating_duration_since(Instant::now());
    if left > coarse {
        tokio::time::sleep_until((at - coarse).into()).await;
    }
    let left = at.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return;
    }
    if let Some(timer) = timer
        && timer.sleep(left).await.is_ok()
    {
        return;
    }
    let left = at.saturating_duration_since(Instant::now());
    let _ = tokio::task::spawn_blocking(move || std::thread::sleep(left)).await;
}

/// A one-shot kernel timer (`timerfd`, monotonic clock) read through
/// Tokio's reactor: wakes the task at its deadline to a few microseconds.
struct KernelTimer(tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>);

impl KernelTimer {
    fn new() -> std::io::Result<KernelTimer> {
        use rustix::time::{TimerfdClockId, TimerfdFlags, timerfd_create};
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // `new` is deprecated for descriptors the caller could close
        // meanwhile (its replacement is `unsafe`, which this workspace
        // forbids); an `OwnedFd` moved into the `AsyncFd` is open until it
        // is dropped, so the registration is sound.
        #[allow(deprecated)]
        let fd = tokio::io::unix::AsyncFd::new(fd)?;
        Ok(KernelTimer(fd))
    }

    /// Sleeps `left` (more than zero).
    async fn sleep(&self, left: Duration) -> std::io::Result<()> {
        use rustix::time::{Itimerspec, TimerfdTimerFlags, Timespec, timerfd_settime};
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let value = Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let spec = Itimerspec {
            it_interval: zero,
            it_value: value,
        };
        timerfd_settime(self.0.get_ref(), TimerfdTimerFlags::empty(), &spec)?;
        loop {
            let mut ready = self.0.readable().await?;
            let mut expirations = [0u8; 8];
            match rustix::io::read(ready.get_inner(), &mut expirations) {
                Ok(_) => return Ok(()),
                Err(rustix::io::Errno::AGAIN) => ready.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on 127.0.0.1.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_delayed_proxy_delivers_every_byte_in_order_no_sooner_than_the_delay_each_way() {
        let proxy = FaultProxy::start(echo().await).await.unwrap();
        let delay = Duration::from_millis(15);
        proxy.set_delay(delay);
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        let started = Instant::now();
        // Two writes in a row: both in flight at once, neither reordered.
        s.write_all(b"first;").await.unwrap();
        s.write_all(b"second").await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        while got.len() < 12 {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "the proxy closed the connection");
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, b"first;second");
        assert!(
            started.elapsed() >= 2 * delay,
            "an echo came back after {:?}, before the delay of {delay:?} each way",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn the_kernel_timer_never_wakes_early() {
        let timer = KernelTimer::new().unwrap();
        for micros in [300, 1_500, 4_000] {
            let left = Duration::from_micros(micros);
            let started = Instant::now();
            timer.sleep(left).await.unwrap();
            assert!(
                started.elapsed() >= left,
                "woke after {:?} of {left:?}",
                started.elapsed()
            );
        }
    }
}
