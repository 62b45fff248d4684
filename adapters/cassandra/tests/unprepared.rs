//! A prepared statement the server no longer knows (`UNPREPARED`: evicted from its cache, or a
//! restarted node), against the real node of `TERN_IT_CASSANDRA_URL` through a CQL proxy of
//! the test's own that answers `UNPREPARED` to the next N `EXECUTE`s instead of forwarding them.
//!
//! Evicting statements from a real node's cache is not reliable (its cache admits and evicts
//! by frequency, and a CI run saw it only under hundreds of keyspaces); the proxy makes the
//! answer happen exactly where the test wants it. The driver re-prepares and repeats once by
//! itself; the adapter repeats once more (the driver re-preparing again): three evictions in a
//! row still succeed, for reads, scans and lightweight transactions alike, and the fourth gives
//! a clear error naming the server setting to raise.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server;

use std::io::{Read, Write as _};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tern_core::model::{Key, Value};
use tern_core::store::{ErrorKind, ScanRequest, Store, Write, WriteOutcome};
use tern_testkit::battery::entity;

/// The CQL opcode of `EXECUTE` (a prepared statement's run).
const EXECUTE: u8 = 0x0A;
/// The error code of `UNPREPARED`.
const UNPREPARED: u32 = 0x2500;

/// A CQL proxy (protocol v4 frames, no compression: the driver's defaults) in front of `node`.
struct Proxy {
    port: u16,
    /// How many of the next `EXECUTE`s get `UNPREPARED`.
    armed: Arc<AtomicUsize>,
    /// How many `EXECUTE`s got `UNPREPARED` so far.
    answered: Arc<AtomicUsize>,
}

fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut header = [0u8; 9];
    stream.read_exact(&mut header).ok()?;
    let len = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) as usize;
    let mut frame = header.to_vec();
    frame.resize(9 + len, 0);
    stream.read_exact(&mut frame[9..]).ok()?;
    Some(frame)
}

/// The `UNPREPARED` error answering the `EXECUTE` request `frame`.
fn unprepared_answer(frame: &[u8]) -> Vec<u8> {
    let body = &frame[9..];
    let id_len = usize::from(u16::from_be_bytes([body[0], body[1]]));
    let id = &body[2..2 + id_len];
    let message = b"Prepared query not found (injected by the test proxy)";
    let mut answer_body = UNPREPARED.to_be_bytes().to_vec();
    answer_body.extend_from_slice(&u16::try_from(message.len()).unwrap().to_be_bytes());
    answer_body.extend_from_slice(message);
    answer_body.extend_from_slice(&u16::try_from(id_len).unwrap().to_be_bytes());
    answer_body.extend_from_slice(id);
    // Response of the request's protocol version, same stream, opcode ERROR.
    let mut answer = vec![frame[0] | 0x80, 0, frame[2], frame[3], 0x00];
    answer.extend_from_slice(&u32::try_from(answer_body.len()).unwrap().to_be_bytes());
    answer.extend_from_slice(&answer_body);
    answer
}

impl Proxy {
    fn start(node: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let armed = Arc::new(AtomicUsize::new(0));
        let answered = Arc::new(AtomicUsize::new(0));
        let (a, n, node) = (Arc::clone(&armed), Arc::clone(&answered), node.to_owned());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(upstream) = TcpStream::connect(&node) else {
                    continue;
                };
                Self::serve(client, upstream, Arc::clone(&a), Arc::clone(&n));
            }
        });
        Proxy {
            port,
            armed,
            answered,
        }
    }

    /// Forwards one connection frame by frame (both directions write whole frames to the
    /// client under one lock, so an injected answer never splits a forwarded one).
    fn serve(
        client: TcpStream,
        upstream: TcpStream,
        armed: Arc<AtomicUsize>,
        answered: Arc<AtomicUsize>,
    ) {
        let to_client = Arc::new(Mutex::new(client.try_clone().unwrap()));
        let mut from_client = client;
        let mut to_server = upstream.try_clone().unwrap();
        let mut from_server = upstream;
        let writer = Arc::clone(&to_client);
        std::thread::spawn(move || {
            while let Some(frame) = read_frame(&mut from_server) {
                if writer.lock().unwrap().write_all(&frame).is_err() {
                    break;
                }
            }
            let _ = writer.lock().unwrap().shutdown(Shutdown::Both);
        });
        std::thread::spawn(move || {
            while let Some(frame) = read_frame(&mut from_client) {
                let inject = frame[4] == EXECUTE
                    && armed
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok();
                let sent = if inject {
                    answered.fetch_add(1, Ordering::SeqCst);
                    to_client
                        .lock()
                        .unwrap()
                        .write_all(&unprepared_answer(&frame))
                } else {
                    to_server.write_all(&frame)
                };
                if sent.is_err() {
                    break;
                }
            }
            let _ = to_server.shutdown(Shutdown::Both);
        });
    }

    /// The next `n` `EXECUTE`s get `UNPREPARED`.
    fn arm(&self, n: usize) {
        self.answered.store(0, Ordering::SeqCst);
        self.armed.store(n, Ordering::SeqCst);
    }

    fn answered(&self) -> usize {
        self.answered.load(Ordering::SeqCst)
    }
}

async fn store_behind_proxy(test: &str) -> Option<(Proxy, Arc<dyn Store>)> {
    let nodes = server::nodes(test)?;
    let node = nodes.split(',').next().unwrap().to_owned();
    let proxy = Proxy::start(&node);
    let ks = server::unique_keyspace("tern_unprep");
    let store = tern_cassandra::open(&format!("cassandra://127.0.0.1:{}/{ks}", proxy.port))
        .await
        .unwrap();
    Some((proxy, store))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_evicted_three_times_in_a_row_still_run_and_a_fourth_is_a_clear_error() {
    let Some((proxy, store)) = store_behind_proxy("unprepared").await else {
        return;
    };
    let e1 = entity("item", "o1", 0, &[("qty", Value::Int(1))]);
    // Every statement is prepared and known before the test evicts anything.
    assert_eq!(
        store
            .write_batch(vec![Write::Insert(e1.clone())])
            .await
            .unwrap(),
        [WriteOutcome::Applied]
    );
    let key = Key::new("item", "o1").unwrap();
    assert!(store.get(&key).await.unwrap().is_some());
    store
        .scan("item", ScanRequest::all(None, 10))
        .await
        .unwrap();

    // A lightweight transaction (IF NOT EXISTS): the server ran nothing, so it is repeated
    // (not settled as an unknown outcome) and applies once.
    let e2 = entity("item", "o2", 0, &[("qty", Value::Int(2))]);
    proxy.arm(3);
    assert_eq!(
        store
            .write_batch(vec![Write::Insert(e2.clone())])
            .await
            .unwrap(),
        [WriteOutcome::Applied]
    );
    assert_eq!(proxy.answered(), 3, "the driver's repeat and the adapter's");
    // A conditional replace of what is stored.
    let mut e2b = e2.clone();
    e2b.value.insert("qty".into(), Value::Int(3));
    e2b.version = 1;
    proxy.arm(3);
    assert_eq!(
        store
            .write_batch(vec![Write::Replace {
                expected: e2.clone(),
                new: e2b.clone(),
            }])
            .await
            .unwrap(),
        [WriteOutcome::Applied]
    );
    assert_eq!(proxy.answered(), 3);

    // A read.
    proxy.arm(3);
    let got = store
        .get(&Key::new("item", "o2").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.value, e2b.value);
    assert_eq!(proxy.answered(), 3);

    // A page of a scan.
    proxy.arm(3);
    let page = store
        .scan("item", ScanRequest::all(None, 10))
        .await
        .unwrap();
    assert_eq!(page.entities.len(), 2);
    assert_eq!(proxy.answered(), 3);

    // Evicted four times in a row: a temporary error that says what to change.
    proxy.arm(4);
    let err = store.get(&key).await.unwrap_err();
    assert_eq!(proxy.answered(), 4);
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.is_temporary(), "{err}");
    assert!(
        err.to_string().contains("prepared_statements_cache_size"),
        "{err}"
    );
    // And a lightweight transaction evicted four times is an error too, never "applied" or
    // "conflict" by guess; nothing was written.
    let e3 = entity("item", "o3", 0, &[("qty", Value::Int(3))]);
    proxy.arm(4);
    let err = store
        .write_batch(vec![Write::Insert(e3.clone())])
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("prepared_statements_cache_size"),
        "{err}"
    );
    assert_eq!(proxy.answered(), 4);
    assert!(
        store
            .get(&Key::new("item", "o3").unwrap())
            .await
            .unwrap()
            .is_none()
    );
}
