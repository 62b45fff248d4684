//! `tern-cql-server`: runs the in-memory CQL v4 test server (see the library docs).
//!
//! Usage: `tern-cql-server [--host 127.0.0.1] [--port 9042] [--allow-non-loopback]`

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use tern_cql_server::CqlServer;
use tokio::net::TcpListener;

const USAGE: &str = "usage: tern-cql-server [--host 127.0.0.1] [--port 9042] [--allow-non-loopback]

In-memory single-node CQL v4 server (kassandra) for tern's integration tests.
Data lives in memory only. Lightweight transactions are serialized and evaluated by this server;
ALTER/DROP/TRUNCATE are not supported.";

/// Command-line options.
struct Args {
    host: IpAddr,
    port: u16,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>> {
    let mut host = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let mut port = 9042;
    let mut allow_non_loopback = false;
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
            None => (arg, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .with_context(|| format!("{name} needs a value\n{USAGE}"))
        };
        match name.as_str() {
            "--host" => {
                let v = value()?;
                host = if v == "localhost" {
                    IpAddr::V4(Ipv4Addr::LOCALHOST)
                } else {
                    v.parse()
                        .with_context(|| format!("--host: not an IP address: {v}"))?
                };
            }
            "--port" => {
                let v = value()?;
                port = v
                    .parse()
                    .with_context(|| format!("--port: not a port: {v}"))?;
            }
            "--allow-non-loopback" => allow_non_loopback = true,
            "-h" | "--help" => return Ok(None),
            other => bail!("unknown argument: {other}\n{USAGE}"),
        }
    }
    if !host.is_loopback() && !allow_non_loopback {
        bail!("refusing to listen on non-loopback address {host} (pass --allow-non-loopback)");
    }
    Ok(Some(Args { host, port }))
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // `{:#}` prints the context chain on one line, without a backtrace.
            eprintln!("tern-cql-server: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<()> {
    let Some(Args { host, port }) = parse_args(std::env::args().skip(1))? else {
        println!("{USAGE}");
        return Ok(());
    };
    let addr = SocketAddr::new(host, port);
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    println!(
        "tern-cql-server listening on {} (pid {})",
        listener.local_addr()?,
        std::process::id()
    );
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        () = CqlServer::new().serve(listener) => {}
        _ = tokio::signal::ctrl_c() => println!("tern-cql-server: interrupted, exiting"),
        _ = sigterm.recv() => println!("tern-cql-server: terminated, exiting"),
    }
    Ok(())
}
