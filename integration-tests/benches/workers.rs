//! Issue #31's scaling measure: `tern up --workers N` (the engine's
//! partitioned stages, as `Migrator::up` runs them) against N = 1, 2, 4, 8,
//! 16 on Redis (one server and the 3-master cluster), MongoDB and Cassandra,
//! with and without a delay per round trip added by the test kit's fault
//! proxy (`tern_integration_tests::fault_proxy`, standing for a network
//! between hosts), next to each store's capacity alone: the same reads and
//! compare-and-set writes with no engine, 16 concurrent clients.
//!
//! Each point: a fresh store (own prefix, database, keyspace) loaded with
//! `--entities` posts, then one `up` of release 2 (`add blogpost.likes = 0`,
//! `rename blogpost.text to content`) on the client path in batches of 100
//! (`--workers 1`: today's unpartitioned runner; N > 1: 4 partitions per
//! worker; and one worker over 4 partitions, the partitioned path's own cost);
//! entities/s = entities / time of the `up`. Prints a table and a CSV
//! (`--csv`), and draws the PNG (`--plot`): measured curves against
//! min(N x one worker, capacity) per store and delay.
//!
//! `TERN_BENCH_PROXIED_CLUSTER_URL` names a Redis Cluster of the bench's own
//! (`redis-cluster-proxied`): for the delayed curve the bench puts a fault
//! proxy in front of each master and points the master's announced port
//! (`cluster-announce-port`) at it, so that the client's redirects and slot
//! map lead through the proxies; it sets the ports back afterwards. It
//! changes the cluster's configuration: never a cluster others use.
//!
//! ```sh
//! eval "$(scripts/servers.sh env)"
//! cargo bench -p tern-integration-tests --bench workers -- --entities 3000 --plot docs/workers-scaling.png
//! ```
//!
//! `--workers 1,4` measures only these worker counts; `--delays 0,1` the
//! delays (ms per round trip; default `0` and `--delay-ms`, 1).
//! `TERN_BENCH_SPANS=<file>` writes every batch's phase spans (`page`,
//! `batch`, `checkpoint`) as JSON lines, for a per-batch timeline;
//! `--probe-proxy <host:port>` only times PINGs through one fault proxy
//! (one at a time, 100 concurrent, a pipeline of 100) against the server
//! directly.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use plotters::prelude::*;
use tern_core::migrate::{Migrator, RunOptions};
use tern_core::store::{ScanRequest, Store, StoreExt, Write};
use tern_integration_tests::fault_proxy::FaultProxy;
use tern_testkit::battery::{RELEASE2, load, set};
use tern_testkit::partitions::posts;

/// The worker counts measured (`--workers 1,4` measures a subset).
const WORKERS: [usize; 5] = [1, 2, 4, 8, 16];

/// One store as the bench opens it.
struct Target {
    name: &'static str,
    /// The server URL, `{}` standing for host:port and `{ns}` for the namespace.
    url: String,
    upstream: Option<SocketAddr>,
    entities: usize,
}

fn env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())[..20].to_owned()
}

async fn open(target: &Target, hostport: Option<SocketAddr>) -> (Arc<dyn Store>, String) {
    let ns = unique("tern_wb");
    let host = hostport.map_or_else(String::new, |a| a.to_string());
    let url = target.url.replace("{}", &host).replace("{ns}", &ns);
    let store = match target.name {
        "mongodb" => tern_mongodb::open(&url).await.expect("mongodb"),
        "cassandra" => tern_cassandra::open(&url).await.expect("cassandra"),
        _ => tern_integration_tests::redis::open(&url)
            .await
            .expect("redis"),
    };
    (store, ns)
}

/// Removes what a point left on the shared server: the database or keyspace
/// (MongoDB, Cassandra); on Redis the posts (tern's few state keys under the
/// point's prefix stay).
async fn clean(target: &Target, store: &dyn Store, ns: &str) {
    match target.name {
        "mongodb" => {
            if let Some(url) = env("TERN_IT_MONGODB_URL")
                && let Ok(c) = mongodb::Client::with_uri_str(&url).await
            {
                let _ = c.database(ns).drop().await;
            }
        }
        "cassandra" => {
            if let Ok(b) = tern_integration_tests::cassandra::backend().await
                && let Ok(s) = b.session().await
            {
                let _ = s
                    .query_unpaged(format!("DROP KEYSPACE IF EXISTS {ns}"), ())
                    .await;
            }
        }
        _ => {
            let keys: Vec<Write> = posts(target.entities)
                .into_iter()
                .map(|e| Write::Delete(e.key))
                .collect();
            for chunk in keys.chunks(1000) {
                let _ = store.write_batch(chunk.to_vec()).await;
            }
        }
    }
}

/// The `up` of release 2 over a fresh loaded store with `workers`: entities/s.
async fn engine_point(
    target: &Target,
    via: Option<SocketAddr>,
    (workers, partitions): (usize, Option<usize>),
) -> f64 {
    let (store, ns) = open(target, via.or(target.upstream)).await;
    let entities = posts(target.entities);
    for chunk in entities.chunks(1000) {
        load(store.as_ref(), chunk).await;
    }
    let migrator =
        Migrator::new(Arc::clone(&store), set(&[(1, RELEASE2)])).with_run_options(RunOptions {
            batch_size: 100,
            pushdown_batch_size: 100,
            pushdown: false,
            workers,
            partitions,
            ..RunOptions::default()
        });
    tracing::info!(store = target.name, workers, partitions, "point");
    let started = Instant::now();
    migrator.up(None).await.expect("up");
    let rate = target.entities as f64 / started.elapsed().as_secs_f64();
    let migrated = store
        .count("blogpost", tern_core::store::Filter::all())
        .await
        .unwrap();
    assert_eq!(migrated, target.entities as u64);
    clean(target, store.as_ref(), &ns).await;
    rate
}

/// The store alone: 16 clients, each taking the next of 64 partitions and
/// doing what a worker's batch does (a scan page of 100, a compare-and-set
/// write of each entity), with no engine: entities/s.
async fn capacity(target: &Target, via: Option<SocketAddr>) -> f64 {
    let (store, ns) = open(target, via.or(target.upstream)).await;
    let entities = posts(target.entities);
    for chunk in entities.chunks(1000) {
        load(store.as_ref(), chunk).await;
    }
    let facet = store.features().partitions.expect("partitions facet");
    let parts = Arc::new(facet.split("blogpost", 64).await.unwrap());
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (store, parts, next) = (Arc::clone(&store), Arc::clone(&parts), Arc::clone(&next));
            tokio::spawn(async move {
                let facet = store.features().partitions.unwrap();
                let mut done = 0u64;
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(part) = parts.get(i) else {
                        return done;
                    };
                    let mut cursor = None;
                    loop {
                        let page = facet
                            .scan_partition(
                                "blogpost",
                                part,
                                ScanRequest {
                                    filter: tern_core::store::Filter::all(),
                                    cursor: cursor.clone(),
                                    limit: 100,
                                },
                            )
                            .await
                            .unwrap();
                        let writes: Vec<Write> = page
                            .entities
                            .iter()
                            .map(|e| {
                                let mut new = e.clone();
                                new.version += 1;
                                Write::Replace {
                                    expected: e.clone(),
                                    new,
                                }
                            })
                            .collect();
                        done += writes.len() as u64;
                        store.write_checked(writes).await.unwrap();
                        match page.cursor {
                            Some(c) => cursor = Some(c),
                            None => break,
                        }
                    }
                }
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    let rate = total as f64 / started.elapsed().as_secs_f64();
    assert_eq!(total, target.entities as u64, "every entity once");
    clean(target, store.as_ref(), &ns).await;
    rate
}

/// The masters of the cluster at `url` (`host:port` of each, as announced).
async fn masters(url: &str) -> Vec<SocketAddr> {
    let client = redis::Client::open(url.replace("/?cluster=1", "/")).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let text: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut c)
        .await
        .unwrap();
    text.lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(2)
                .is_some_and(|f| f.contains("master"))
        })
        .filter_map(|l| l.split_whitespace().nth(1)?.split('@').next()?.parse().ok())
        .collect()
}

/// Points each master's announced port at `ports` (`0`: its own), and
/// waits until every master's slot map shows them.
async fn announce(nodes: &[SocketAddr], ports: &[u16]) {
    for (node, port) in nodes.iter().zip(ports) {
        let client = redis::Client::open(format!("redis://{node}/")).unwrap();
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-announce-port")
            .arg(*port)
            .query_async(&mut c)
            .await
            .unwrap();
    }
    let want: Vec<u16> = nodes
        .iter()
        .zip(ports)
        .map(|(n, p)| if *p == 0 { n.port() } else { *p })
        .collect();
    for _ in 0..200 {
        let mut agreed = true;
        for node in nodes {
            let seen = masters(&format!("redis://{node}/?cluster=1")).await;
            let mut seen: Vec<u16> = seen.iter().map(SocketAddr::port).collect();
            let mut w = want.clone();
            seen.sort_unstable();
            w.sort_unstable();
            agreed &= seen == w;
        }
        if agreed {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the cluster's masters did not agree on the announced ports {want:?}");
}

/// One curve: a store, a delay, its measured points and its capacity.
struct Curve {
    store: &'static str,
    delay_ms: f64,
    points: Vec<(usize, f64)>,
    capacity: f64,
}

fn plot(curves: &[Curve], path: &str) {
    tern_core::plot::register_font().expect("font");
    let root = BitMapBackend::new(path, (1400, 900)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let panels = root.split_evenly((2, curves.len().div_ceil(2).max(1)));
    for (curve, area) in curves.iter().zip(panels.iter()) {
        let one = curve.points.first().map_or(1.0, |p| p.1);
        let ideal: Vec<(f64, f64)> = curve
            .points
            .iter()
            .map(|&(n, _)| (n as f64, (n as f64 * one).min(curve.capacity)))
            .collect();
        let top = curve
            .points
            .iter()
            .map(|p| p.1)
            .chain(ideal.iter().map(|p| p.1))
            .fold(0.0, f64::max)
            * 1.15;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{} (+{} ms per round trip)", curve.store, curve.delay_ms),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d((1f64..16f64).log_scale(), 0f64..top.max(1.0))
            .unwrap();
        chart
            .configure_mesh()
            .x_desc("workers")
            .y_desc("entities/s")
            .label_style(("sans-serif", 14))
            .draw()
            .unwrap();
        chart
            .draw_series(LineSeries::new(
                curve.points.iter().map(|&(n, r)| (n as f64, r)),
                BLUE.stroke_width(2),
            ))
            .unwrap()
            .label("measured")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLUE.stroke_width(2)));
        chart
            .draw_series(
                curve
                    .points
                    .iter()
                    .map(|&(n, r)| Circle::new((n as f64, r), 4, BLUE.filled())),
            )
            .unwrap();
        chart
            .draw_series(LineSeries::new(ideal, RED.stroke_width(1)))
            .unwrap()
            .label("min(N x one worker, capacity)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .unwrap();
    }
    root.present().unwrap();
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let entities: usize = arg(&args, "--entities").map_or(3000, |v| v.parse().unwrap());
    let slow_entities: usize =
        arg(&args, "--slow-entities").map_or(entities / 3, |v| v.parse().unwrap());
    let delay_ms: f64 = arg(&args, "--delay-ms").map_or(1.0, |v| v.parse().unwrap());
    let delays: Vec<f64> = arg(&args, "--delays").map_or(vec![0.0, delay_ms], |v| {
        v.split(',').map(|d| d.parse().unwrap()).collect()
    });
    let only = arg(&args, "--stores");
    if let Some(server) = arg(&args, "--probe-proxy") {
        probe_proxy(server.parse().unwrap(), delay_ms).await;
        return;
    }
    // `TERN_BENCH_SPANS=<file>`: every span of a batch's phases (`page`,
    // `batch`, `checkpoint`) as a JSON line with its time when it closed
    // (`time.busy` + `time.idle` is its duration), for a per-batch timeline.
    if let Some(path) = env("TERN_BENCH_SPANS") {
        let file = std::fs::File::create(&path).unwrap();
        tracing_subscriber::fmt()
            .json()
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .with_env_filter("tern_core::migrate=debug,tern_redis=debug,workers=info")
            .with_writer(std::sync::Mutex::new(file))
            .init();
    }
    // The fault proxies (the network between the workers and the servers)
    // run on a runtime of their own, so that the engine's CPU work does not
    // delay their deliveries (a real network is not scheduled by the
    // client). Shut down in the background at the end: a runtime may not be
    // dropped inside another's async context.
    let network = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("network")
        .enable_all()
        .build()
        .unwrap();
    let counts: Vec<usize> = arg(&args, "--workers").map_or(WORKERS.to_vec(), |v| {
        v.split(',').map(|n| n.parse().unwrap()).collect()
    });
    let addr = |url: &str| -> Option<SocketAddr> {
        let rest = url.split("://").nth(1)?;
        let hostport = rest.split(['/', '?']).next()?;
        hostport.parse().ok()
    };
    let mut targets = Vec::new();
    if let Some(url) = env("TERN_IT_REDIS_URL") {
        targets.push((
            Target {
                name: "redis",
                url: "redis://{}/?prefix={ns}".to_owned(),
                upstream: addr(&url),
                entities,
            },
            true,
        ));
    }
    if let Some(url) = env("TERN_IT_REDIS_CLUSTER_URL") {
        // Cluster redirects name the masters' own addresses: no proxy.
        targets.push((
            Target {
                name: "redis-cluster",
                url: format!("{url}&prefix={{ns}}").replace("127.0.0.1:7001", "{}"),
                upstream: addr(&url),
                entities,
            },
            false,
        ));
    }
    let proxied_cluster = env("TERN_BENCH_PROXIED_CLUSTER_URL");
    if let Some(url) = &proxied_cluster {
        targets.push((
            Target {
                name: "redis-cluster-proxied",
                url: format!(
                    "{}&prefix={{ns}}",
                    url.replace(&addr(url).unwrap().to_string(), "{}")
                ),
                upstream: addr(url),
                entities,
            },
            true,
        ));
    }
    if let Some(url) = env("TERN_IT_MONGODB_URL") {
        targets.push((
            Target {
                name: "mongodb",
                url: "mongodb://{}/{ns}".to_owned(),
                upstream: addr(&url),
                entities: slow_entities,
            },
            true,
        ));
    }
    if let Some(url) = env("TERN_IT_CASSANDRA_URL") {
        // The driver learns the node's address from the node: no proxy.
        targets.push((
            Target {
                name: "cassandra",
                url: "cassandra://{}/{ns}".to_owned(),
                upstream: addr(&url),
                entities,
            },
            false,
        ));
    }
    let mut curves = Vec::new();
    let heads: Vec<String> = counts.iter().map(|n| format!("workers {n}")).collect();
    println!(
        "| store | added per round trip | entities | capacity alone | {} | 1 worker, 4 partitions |",
        heads.join(" | ")
    );
    println!("|---|---|---:|---:|{}---:|", "---:|".repeat(counts.len()));
    let mut csv = String::from("store,delay_ms,entities,workers,entities_per_s,capacity\n");
    for (target, proxied) in &targets {
        if only
            .as_ref()
            .is_some_and(|o| !o.split(',').any(|s| s == target.name))
        {
            continue;
        }
        let delays: Vec<f64> = delays
            .iter()
            .copied()
            .filter(|d| *proxied || *d == 0.0)
            .collect();
        for delay in delays {
            let cluster = target.name == "redis-cluster-proxied" && delay > 0.0;
            let nodes = if cluster {
                masters(
                    &target
                        .url
                        .replace("{}", &target.upstream.unwrap().to_string())
                        .replace("&prefix={ns}", ""),
                )
                .await
            } else {
                target.upstream.into_iter().collect()
            };
            let mut proxies = Vec::new();
            if delay > 0.0 {
                for node in &nodes {
                    // On the network's own threads: a chunk is delivered when
                    // due, not when the engine's runtime gets to it.
                    let p = network
                        .spawn(FaultProxy::start(*node))
                        .await
                        .unwrap()
                        .unwrap();
                    // Half each way: `delay` per round trip.
                    p.set_delay(Duration::from_secs_f64(delay / 2000.0));
                    proxies.push(p);
                }
            }
            if cluster {
                let ports: Vec<u16> = proxies.iter().map(|p| p.addr().port()).collect();
                announce(&nodes, &ports).await;
            }
            // The proxy of the first node (the one the URL names).
            let via = nodes
                .iter()
                .position(|n| Some(*n) == target.upstream)
                .and_then(|i| proxies.get(i))
                .map(FaultProxy::addr);
            let cap = capacity(target, via).await;
            let mut points = Vec::new();
            for &n in &counts {
                let rate = engine_point(target, via, (n, (n > 1).then_some(n * 4))).await;
                csv.push_str(&format!(
                    "{},{delay},{},{n},{rate:.0},{cap:.0}\n",
                    target.name, target.entities
                ));
                points.push((n, rate));
            }
            // One worker through the partitioned path (4 partitions): its
            // cost against today's runner (`--workers 1`, unpartitioned).
            let one_split = engine_point(target, via, (1, Some(4))).await;
            csv.push_str(&format!(
                "{},{delay},{},1p,{one_split:.0},{cap:.0}\n",
                target.name, target.entities
            ));
            let one = points[0].1;
            let cells: Vec<String> = points
                .iter()
                .map(|(_, r)| format!("{r:.0} ({:.2}x)", r / one))
                .collect();
            println!(
                "| {} | {delay} ms | {} | {cap:.0} | {} | {one_split:.0} ({:.2}x) |",
                target.name,
                target.entities,
                cells.join(" | "),
                one_split / one
            );
            if cluster {
                announce(&nodes, &vec![0; nodes.len()]).await;
            }
            drop(proxies);
            curves.push(Curve {
                store: target.name,
                delay_ms: delay,
                points,
                capacity: cap,
            });
        }
    }
    if let Some(path) = arg(&args, "--csv") {
        std::fs::write(&path, &csv).unwrap();
    }
    if let Some(path) = arg(&args, "--plot") {
        plot(&curves, &path);
        println!("plot: {path}");
    }
    network.shutdown_background();
}

/// `--probe-proxy <host:port>`: round trips of PING through a fault proxy
/// at `--delay-ms`, alone and 100 at a time (one connection), against the
/// server directly: what one "round trip" costs through the proxy.
async fn probe_proxy(server: SocketAddr, delay_ms: f64) {
    let proxy = FaultProxy::start(server).await.unwrap();
    proxy.set_delay(Duration::from_secs_f64(delay_ms / 2000.0));
    for (name, addr, buffer) in [
        ("direct", server, None),
        ("proxy", proxy.addr(), None),
        ("proxy, pipeline buffer 1000", proxy.addr(), Some(1000)),
    ] {
        let client = redis::Client::open(format!("redis://{addr}")).unwrap();
        let mut config = redis::AsyncConnectionConfig::new();
        if let Some(b) = buffer {
            config = config.set_pipeline_buffer_size(b);
        }
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap();
        let started = Instant::now();
        for _ in 0..200 {
            let _: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
        }
        let one = started.elapsed().as_secs_f64() * 1000.0 / 200.0;
        let started = Instant::now();
        for _ in 0..50 {
            let pings = (0..100).map(|_| {
                let mut c = conn.clone();
                async move { redis::cmd("PING").query_async::<String>(&mut c).await }
            });
            futures::future::try_join_all(pings).await.unwrap();
        }
        let many = started.elapsed().as_secs_f64() * 1000.0 / 50.0;
        let started = Instant::now();
        for _ in 0..50 {
            let mut pipe = redis::pipe();
            for _ in 0..100 {
                pipe.cmd("PING");
            }
            let _: Vec<String> = pipe.query_async(&mut conn).await.unwrap();
        }
        let piped = started.elapsed().as_secs_f64() * 1000.0 / 50.0;
        println!(
            "{name}: one PING {one:.3} ms, 100 concurrent PINGs {many:.3} ms, a pipeline of 100 {piped:.3} ms"
        );
    }
}
