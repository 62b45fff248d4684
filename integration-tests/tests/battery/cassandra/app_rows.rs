//! Rows another program wrote, with the driver, in every CQL type tern maps (a JSON text column
//! with its own spacing and member order included), migrated on the client's path by the lazy
//! client: no conflict, every value kept (issue 34, item 14).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use proptest::prelude::*;
use scylla::value::{CqlTimestamp, CqlValue};
use tern_core::lazy::LazyClient;
use tern_core::model::{Key, Map, Value};
use tern_testkit::battery::report;

use super::backend_with;

const APP: &str = "app (id bigint PRIMARY KEY, tern_version bigint, likes bigint, t text, \
     a ascii, b bigint, i int, s smallint, ti tinyint, d double, f float, ok boolean, bl blob, \
     ts timestamp, u uuid, ip inet, l list<bigint>, st set<text>, m map<text, bigint>, j text)";

/// A JSON value of the shapes tern reads back exactly (no `$` keys, integers, no floats).
fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i32>().prop_map(|n| serde_json::Value::from(i64::from(n))),
        "[a-z é\"\\\\]{0,6}".prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map("[a-z]{1,3}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// JSON text as another program might write it: spaces around every token, object members
/// in reverse order.
fn foreign_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Array(items) => format!(
            "[ {} ]",
            items
                .iter()
                .map(foreign_text)
                .collect::<Vec<_>>()
                .join(" ,  ")
        ),
        serde_json::Value::Object(members) => format!(
            "{{ {} }}",
            members
                .iter()
                .rev()
                .map(|(k, v)| format!(
                    "{} :  {}",
                    serde_json::Value::from(k.as_str()),
                    foreign_text(v)
                ))
                .collect::<Vec<_>>()
                .join(" , ")
        ),
        other => other.to_string(),
    }
}

#[derive(Debug, Clone)]
struct AppRow {
    t: String,
    a: String,
    b: i64,
    i: i32,
    s: i16,
    ti: i8,
    d: f64,
    f: f32,
    ok: bool,
    bl: Vec<u8>,
    ts: i64,
    u: u128,
    ip: u32,
    l: Vec<i64>,
    st: BTreeSet<String>,
    m: BTreeMap<String, i64>,
    j: serde_json::Map<String, serde_json::Value>,
}

fn app_row() -> impl Strategy<Value = AppRow> {
    let scalars = (
        ".{0,8}",
        "[ -~]{0,8}",
        any::<i64>(),
        any::<i32>(),
        any::<i16>(),
        any::<i8>(),
        any::<f64>(),
        any::<f32>(),
        any::<bool>(),
    );
    let rest = (
        prop::collection::vec(any::<u8>(), 0..6),
        -62_135_596_800_000_i64..253_402_300_799_000,
        any::<u128>(),
        any::<u32>(),
        prop::collection::vec(any::<i64>(), 0..4),
        prop::collection::btree_set(".{0,4}", 0..4),
        prop::collection::btree_map("[a-z]{0,3}", any::<i64>(), 0..4),
        prop::collection::btree_map("[a-z]{1,3}", json(), 0..4),
    );
    (scalars, rest).prop_map(
        |((t, a, b, i, s, ti, d, f, ok), (bl, ts, u, ip, l, st, m, j))| AppRow {
            t,
            a,
            b,
            i,
            s,
            ti,
            d,
            f,
            ok,
            bl,
            ts,
            u,
            ip,
            l,
            st,
            m,
            j: j.into_iter().collect(),
        },
    )
}

impl AppRow {
    /// The values bound by the application's `INSERT` (columns `t` to `j`).
    fn cells(&self) -> Vec<CqlValue> {
        vec![
            CqlValue::Text(self.t.clone()),
            CqlValue::Ascii(self.a.clone()),
            CqlValue::BigInt(self.b),
            CqlValue::Int(self.i),
            CqlValue::SmallInt(self.s),
            CqlValue::TinyInt(self.ti),
            CqlValue::Double(self.d),
            CqlValue::Float(self.f),
            CqlValue::Boolean(self.ok),
            CqlValue::Blob(self.bl.clone()),
            CqlValue::Timestamp(CqlTimestamp(self.ts)),
            CqlValue::Uuid(uuid::Uuid::from_u128(self.u)),
            CqlValue::Inet(IpAddr::V4(Ipv4Addr::from(self.ip))),
            CqlValue::List(self.l.iter().map(|n| CqlValue::BigInt(*n)).collect()),
            CqlValue::Set(self.st.iter().map(|s| CqlValue::Text(s.clone())).collect()),
            CqlValue::Map(
                self.m
                    .iter()
                    .map(|(k, v)| (CqlValue::Text(k.clone()), CqlValue::BigInt(*v)))
                    .collect(),
            ),
            CqlValue::Text(foreign_text(&serde_json::Value::Object(self.j.clone()))),
        ]
    }

    /// What tern reads: every property (an empty collection is no cell in CQL), `likes` added.
    fn expected(&self) -> Map {
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_owned(), v);
        };
        put("t", Value::String(self.t.clone()));
        put("a", Value::String(self.a.clone()));
        put("b", Value::Int(self.b));
        put("i", Value::Int(i64::from(self.i)));
        put("s", Value::Int(i64::from(self.s)));
        put("ti", Value::Int(i64::from(self.ti)));
        put("d", Value::Float(self.d));
        put("f", Value::Float(f64::from(self.f)));
        put("ok", Value::Bool(self.ok));
        put("bl", Value::Bytes(self.bl.clone()));
        put("ts", Value::Timestamp(self.ts));
        put(
            "u",
            Value::String(uuid::Uuid::from_u128(self.u).to_string()),
        );
        put("ip", Value::String(Ipv4Addr::from(self.ip).to_string()));
        if !self.l.is_empty() {
            put(
                "l",
                Value::Array(self.l.iter().map(|n| Value::Int(*n)).collect()),
            );
        }
        if !self.st.is_empty() {
            put(
                "st",
                Value::Array(self.st.iter().map(|s| Value::String(s.clone())).collect()),
            );
        }
        if !self.m.is_empty() {
            put(
                "m",
                Value::Map(
                    self.m
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::Int(*v)))
                        .collect(),
                ),
            );
        }
        let j = serde_json::Value::Object(self.j.clone());
        put(
            "j",
            tern_core::model::json::from_json(&j).expect("tern reads the JSON"),
        );
        put("likes", Value::Int(0));
        m
    }
}

/// Any row an application wrote migrates on the client's path without a conflict and keeps
/// its values (the JSON column compares by value, not by tern's re-encoding).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_rows_another_program_wrote_migrate_on_the_client_path() {
    let test = "cassandra_rows_another_program_wrote_migrate_on_the_client_path";
    let Some(backend) = backend_with(test).await else {
        return;
    };
    let (ks, url) = backend
        .native_keyspace(&[APP], "native=app&timeout_ms=30000")
        .await
        .unwrap();
    let session = backend.session().await.unwrap();
    // `j` holds JSON text: registered as tern registers the JSON columns it adds.
    let store = tern_cassandra::open(&url).await.unwrap();
    session
        .query_unpaged(
            format!("INSERT INTO {ks}.tern_json_columns (name) VALUES ('app.j')"),
            &[],
        )
        .await
        .unwrap();
    tern_testkit::lazy::up(&store, &[(1, "lazy\nadd app.likes = 0\n")])
        .await
        .unwrap();
    let client = LazyClient::builder(Arc::clone(&store))
        .declare("app", 1)
        .connect()
        .await
        .unwrap();
    let insert = session
        .prepare(format!(
            "INSERT INTO {ks}.app (id, t, a, b, i, s, ti, d, f, ok, bl, ts, u, ip, l, st, m, j) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        ))
        .await
        .unwrap();
    let next = AtomicI64::new(0);
    tern_testkit::prop::check(32, &app_row(), |row| {
        let (client, store, session, insert) = (&client, &store, &session, &insert);
        let id = next.fetch_add(1, Ordering::SeqCst);
        async move {
            let mut cells = vec![CqlValue::BigInt(id)];
            cells.extend(row.cells());
            session.execute_unpaged(insert, cells).await.unwrap();
            let key = Key::new("app", id).unwrap();
            let got = client
                .get(&key)
                .await
                .unwrap_or_else(|e| panic!("{key}: {e:?}"))
                .expect("the row");
            let want = row.expected();
            assert_eq!((got.version, &got.value), (1, &want), "{key}");
            let stored = store.get(&key).await.unwrap().expect("the row");
            assert_eq!((stored.version, &stored.value), (1, &want), "written back");
        }
    });
    report("cassandra", test, "passed");
}
