//! `tern advise`: the hotel example end to end, JSON output, bad input, and the emitted migration
//! run by `tern up` on the embedded store.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

mod common;

use common::Project;

fn example(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/advisor")
        .join(name)
        .display()
        .to_string()
}

/// The first line of `text` that starts with `prefix`.
fn line_starting<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{text}"))
}

/// Runs `tern advise` through `run` on the example `name` (its `.model` and
/// `.workload`) with the `extra` arguments.
fn advise<T>(p: &Project, name: &str, extra: &[&str], run: impl Fn(&Project, &[&str]) -> T) -> T {
    let model = example(&format!("{name}.model"));
    let workload = example(&format!("{name}.workload"));
    let mut args = vec!["advise", model.as_str(), workload.as_str()];
    args.extend_from_slice(extra);
    run(p, &args)
}

#[test]
fn advise_hotel_prints_the_schema_the_plans_and_the_costs() {
    let p = Project::new(5_000);
    let out = advise(&p, "hotel", &[], Project::ok);
    assert!(out.contains("CREATE TABLE cf1 ("), "{out}");
    assert!(out.contains("PRIMARY KEY (("), "{out}");
    assert!(out.contains("-- query plans"), "{out}");
    assert!(out.contains("-- update plans"), "{out}");
    for q in [
        "GuestsByCityAmenityRate",
        "RoomsByCityAmenityRate",
        "POIsOfGuest",
        "HotelsInCity",
        "NewReservation",
        "ExtendStay",
    ] {
        assert!(out.contains(&format!("{q} (weight")), "{q} missing:\n{out}");
    }
    assert!(out.contains("    get cf"), "{out}");
    assert!(out.contains("-- weighted cost: queries"), "{out}");
}

#[test]
fn advise_json_has_the_costs_and_one_plan_per_statement() {
    let p = Project::new(5_000);
    let out = advise(&p, "eac", &["--json"], Project::ok);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let q = r["query_cost"].as_f64().unwrap();
    let u = r["update_cost"].as_f64().unwrap();
    assert!((r["total_cost"].as_f64().unwrap() - q - u).abs() < 1e-9);
    assert_eq!(r["queries"].as_array().unwrap().len(), 5);
    assert_eq!(r["updates"].as_array().unwrap().len(), 2);
    assert_eq!(r["column_families"].as_array().unwrap().len(), 5);
}

#[test]
fn exact_space_keeps_the_cost_and_count_and_never_takes_more_space() {
    let p = Project::new(5_000);
    let run = |extra: &[&str]| -> serde_json::Value {
        let out = advise(&p, "hotel", &[&["--json"], extra].concat(), Project::ok);
        serde_json::from_str(&out).unwrap()
    };
    let default = run(&[]);
    let exact = run(&["--exact-space"]);
    let f = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap();
    let cost = f(&default, "total_cost");
    assert!((f(&exact, "total_cost") - cost).abs() <= 1e-6 * cost.max(1.0));
    assert_eq!(
        exact["column_families"].as_array().unwrap().len(),
        default["column_families"].as_array().unwrap().len()
    );
    assert!(f(&exact, "total_size_bytes") <= f(&default, "total_size_bytes") * (1.0 + 1e-9));
    assert_eq!(exact["optimal"], serde_json::Value::Bool(true));
}

#[test]
fn advise_bad_input_names_file_line_and_column() {
    let p = Project::new(5_000);
    p.write(
        "bad.workload",
        "group G default=1\n  Q: SELECT Server.Nope FROM Server WHERE Server.ServerID = ?;\n",
    );
    p.fails_saying(
        &["advise", &example("eac.model"), "bad.workload"],
        1,
        &["bad.workload:2:20: `Server` has no field `Nope`"],
    );
    advise(&p, "eac", &["--space-budget", "1"], |p, args| {
        p.fails_saying(args, 1, &["no solution"])
    });
    advise(&p, "eac", &["--mix", "browsing"], |p, args| {
        p.fails_saying(args, 1, &["unknown workload mix `browsing`"])
    });
}

/// Normalized EasyAntiCheat data: one kind per entity, ids as properties, foreign keys by relationship name.
fn eac_data() -> String {
    let mut s = String::new();
    for v in 0..2 {
        s.push_str(&format!(
            "{{\"kind\":\"Server\",\"id\":{v},\"value\":{{\"ServerID\":{v},\"ServerName\":\"s{v}\",\"ServerIP\":\"10.0.0.{v}\"}}}}\n"
        ));
    }
    for pl in 0..3 {
        s.push_str(&format!(
            "{{\"kind\":\"Player\",\"id\":{pl},\"value\":{{\"PlayerID\":{pl},\"PlayerName\":\"p{pl}\",\"IsAdmin\":{}}}}}\n",
            pl == 0
        ));
    }
    for se in 0..4 {
        s.push_str(&format!(
            "{{\"kind\":\"Session\",\"id\":{se},\"value\":{{\"SessionID\":{se},\"SessionStart\":{se},\"player\":{},\"server\":{}}}}}\n",
            se % 3,
            se % 2
        ));
    }
    for st in 0..8 {
        s.push_str(&format!(
            "{{\"kind\":\"PlayerState\",\"id\":{st},\"value\":{{\"StateID\":{st},\"PosX\":1.5,\"PosY\":2.5,\"PosZ\":3.5,\"ServerTimestamp\":{st},\"session\":{}}}}}\n",
            st % 4
        ));
    }
    s
}

#[test]
fn the_emitted_migration_fills_the_column_families_with_tern_up() {
    let p = Project::new(5_000);
    p.write("data.jsonl", &eac_data());
    p.ok(&["import", "data.jsonl"]);
    advise(&p, "eac", &["--emit-migration", "migrations"], Project::ok);
    assert!(p.path("migrations/advise_schema.cql").exists());
    let script = std::fs::read_to_string(p.path("migrations/0001_advise.tern")).unwrap();
    // One `build` per recommended column family (cf1, cf2, ...), each once.
    let builds: Vec<&str> = script.lines().filter(|l| l.starts_with("build ")).collect();
    assert!(!builds.is_empty(), "{script}");
    let unique: std::collections::BTreeSet<&&str> = builds.iter().collect();
    assert_eq!(builds.len(), unique.len(), "{script}");
    let sessions = p.ok(&["export", "Session"]);
    p.ok(&["check"]);
    p.ok(&["up"]);
    // Rows joined right: state s belongs to session s % 4, session s to player s % 3; player 0
    // is the only admin.
    let mut joined = 0;
    for (i, b) in builds.iter().enumerate() {
        let kind = format!("cf{}", i + 1);
        assert!(b.starts_with(&format!("build {kind} from ")), "{script}");
        let out = p.ok(&["export", &kind]);
        assert!(
            !out.trim().is_empty(),
            "{kind} is empty after `tern up`: {b}"
        );
        for line in out.lines() {
            let e: serde_json::Value = serde_json::from_str(line).unwrap();
            let rows = e["value"]["rows"]
                .as_array()
                .unwrap_or_else(|| panic!("{line}"));
            assert!(
                !rows.is_empty() && rows.iter().all(|r| r.is_object()),
                "{line}"
            );
            for r in rows {
                if let (Some(st), Some(se)) = (
                    r["playerstate_stateid"].as_i64(),
                    r["session_sessionid"].as_i64(),
                ) {
                    assert_eq!(se, st % 4, "{kind}: {r}");
                    joined += 1;
                }
                if let (Some(pl), Some(admin)) =
                    (r["player_playerid"].as_i64(), r["player_isadmin"].as_bool())
                {
                    assert_eq!(admin, pl == 0, "{kind}: {r}");
                    joined += 1;
                }
            }
        }
    }
    assert!(joined > 0, "no row joins two entities: {script}");
    // The normalized kinds are only read.
    assert_eq!(p.ok(&["export", "Session"]), sessions);
    // Nothing pending; running advise again numbers the next file after the applied one.
    advise(&p, "eac", &["--emit-migration", "migrations"], Project::ok);
    assert!(p.path("migrations/0002_advise.tern").exists());
}

#[test]
fn advise_calibrate_fits_the_cost_model_on_the_embedded_store_and_uses_it() {
    let p = Project::new(5_000);
    let out = advise(
        &p,
        "eac",
        &[
            "--json",
            "--calibrate",
            "embedded:calibration.redb",
            "--create-store",
        ],
        Project::run,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // "T(n, w) = a + b*n + c*n*w ms": three finite, non-negative constants, not the defaults.
    let line = line_starting(
        &stderr,
        "calibrated on embedded:calibration.redb (12 samples",
    );
    let fitted: Vec<f64> = line
        .split("T(n, w) = ")
        .nth(1)
        .unwrap()
        .split(" ms")
        .next()
        .unwrap()
        .split(" + ")
        .map(|t| t.split('*').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(fitted.len(), 3, "{line}");
    assert!(fitted.iter().all(|c| c.is_finite() && *c >= 0.0), "{line}");
    assert_ne!(fitted, vec![0.5, 0.2, 0.005], "{line}");
    // The sort penalty is measured, not the default's 0.05 ms.
    let sort: f64 = line
        .split("sort penalty ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(sort.is_finite() && sort >= 0.0 && sort != 0.05, "{line}");
    // The scratch kind is gone again.
    let left = p.ok(&[
        "--store",
        "embedded:calibration.redb",
        "export",
        "tern_advise_calibration",
    ]);
    assert!(left.trim().is_empty(), "{left}");
    // The recommendation's costs are in the calibrated model: an embedded get costs far less than
    // the Cassandra default's 0.7 ms for one partition.
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let step = &r["queries"][0]["steps"][0];
    let expected = fitted[0]
        + fitted[1] * step["gets"].as_f64().unwrap()
        + fitted[2] * step["gets"].as_f64().unwrap() * step["width"].as_f64().unwrap();
    let cost = step["cost"].as_f64().unwrap();
    assert!(
        (cost - expected).abs() <= 1e-5 + 1e-3 * expected || step["sort"].as_bool().unwrap(),
        "{cost} vs {expected}: {line}"
    );
}

#[test]
fn advise_execute_times_the_recommended_schema_against_the_normalized_baseline() {
    let p = Project::new(5_000);
    for name in ["eac", "hotel"] {
        let run = advise(
            &p,
            name,
            &[
                "--execute",
                &format!("embedded:{name}-exec.redb"),
                "--create-store",
                "--execute-rows",
                "300",
                "--execute-runs",
                "3",
            ],
            Project::run,
        );
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stderr}");
        let out = String::from_utf8_lossy(&run.stdout).into_owned();
        // Every scratch entity is removed again, and the user is told so.
        let line = line_starting(&stderr, "removed the ");
        let tag = line
            .split("(kinds ")
            .nth(1)
            .and_then(|t| t.strip_suffix("_*)"))
            .unwrap_or_else(|| panic!("{line}"));
        assert!(tag.starts_with("tern_advise_exec_"), "{line}");
        let store = format!("embedded:{name}-exec.redb");
        for kind in [format!("{tag}_rec_cf1"), format!("{tag}_base_0")] {
            let left = p.ok(&["--store", &store, "export", &kind]);
            assert!(left.trim().is_empty(), "{kind}: {left}");
        }
        assert!(
            out.contains(&format!("-- executed on embedded:{name}-exec.redb")),
            "{out}"
        );
        // Both schemas gave the same answers; on EAC every query has a plan in both. (The
        // baseline has no plan for the hotel's first query: the planner finds none over it.)
        assert!(!out.contains("!="), "{out}");
        if name == "eac" {
            assert!(!out.contains("(no plan"), "{out}");
        }
        // The updates ran on both schemas too, and the schemas still answer alike after them.
        assert!(out.contains("\nupdate "), "{out}");
        assert!(
            out.contains("-- after the updates both schemas still answer every query alike"),
            "{out}"
        );
        line_starting(
            &out,
            "-- weighted mean per statement, queries and updates: recommended ",
        );
        let line = line_starting(&out, "-- weighted mean response time: recommended ");
        let ms: Vec<f64> = line
            .split(' ')
            .filter_map(|t| t.parse::<f64>().ok())
            .collect();
        assert!(ms.len() >= 2 && ms[0] > 0.0 && ms[1] > 0.0, "{line}");
    }
}

#[test]
fn calibrate_and_execute_refuse_a_missing_embedded_store_without_create_store() {
    let p = Project::new(5_000);
    for flag in ["--calibrate", "--execute"] {
        advise(&p, "eac", &[flag, "embedded:typo.redb"], |p, args| {
            p.fails_saying(
                args,
                1,
                &["no embedded store at typo.redb", "--create-store"],
            )
        });
        assert!(!p.path("typo.redb").exists(), "{flag} created the store");
    }
}

/// A chain of `n` entities and one query along all of it (the worst case of the enumeration).
fn chain(p: &Project, n: usize) -> (String, String) {
    let tern_advisor::synthetic::Synthetic { model, workload } = tern_advisor::synthetic::chain(n);
    p.write("chain.model", &model);
    p.write("chain.workload", &workload);
    (
        p.path("chain.model").display().to_string(),
        p.path("chain.workload").display().to_string(),
    )
}

/// Without a time limit, a long chain's enumeration stops at its work bound (it grew with the
/// cube of the chain before: 400 entities took 64 s, 3,000 more than 11 minutes) and says so;
/// `--enumeration-limit` sets the bound.
#[test]
fn without_a_time_limit_the_enumeration_of_a_long_chain_stops_at_its_bound_with_a_note() {
    let p = Project::new(5_000);
    let (m, w) = chain(&p, 150);
    let out = p.ok(&["advise", &m, &w, "--enumeration-limit", "20000"]);
    assert!(out.contains("CREATE TABLE cf1"), "{out}");
    assert!(
        out.contains("-- note: the enumeration stopped widening at its bound (20000 units"),
        "{out}"
    );
    // A short chain stays below the default bound: no note, the full enumeration.
    let (m, w) = chain(&p, 20);
    let out = p.ok(&["advise", &m, &w]);
    assert!(!out.contains("-- note:"), "{out}");
}

#[test]
fn the_time_limit_bounds_every_phase_with_the_best_answer_so_far_and_a_note() {
    let p = Project::new(5_000);
    let (m, w) = chain(&p, 3_000);
    let start = std::time::Instant::now();
    let out = p.ok(&["advise", &m, &w, "--time-limit", "2"]);
    let took = start.elapsed().as_secs_f64();
    // 2 s of advising plus parsing and printing a 3,000-entity model (a debug build on a busy
    // machine: a generous margin; without the bound it ran for more than 11 minutes).
    assert!(took < 30.0, "took {took} s");
    assert!(out.contains("CREATE TABLE cf1"), "{out}");
    assert!(
        out.contains("-- note: the time limit stopped the enumeration"),
        "{out}"
    );
}

#[test]
fn sigterm_and_ctrl_c_stop_advise_promptly_with_exit_130() {
    let p = Project::new(5_000);
    let (m, w) = chain(&p, 3_000);
    for signal in ["TERM", "INT"] {
        let (out, after) = p.interrupt(&["advise", &m, &w], signal, 1_500);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            after.as_secs_f64() < 5.0,
            "{signal}: stopped after {after:?}"
        );
        assert_eq!(out.status.code(), Some(130), "{signal}: {stderr}");
        assert!(
            stderr.contains("interrupted: `tern advise` stopped"),
            "{signal}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{signal}: printed an answer");
    }
}

#[test]
fn compare_costs_a_hand_written_schema_beside_the_advice_and_costs_files_set_the_constants() {
    let p = Project::new(5_000);
    let schema = example("hotel.schema");
    let out = advise(&p, "hotel", &["--compare", &schema], Project::ok);
    assert!(out.contains(&format!("-- your schema ({schema})")), "{out}");
    assert!(out.contains("CREATE TABLE rooms_by_amenity ("), "{out}");
    let table = out.split("-- compared").nth(1).unwrap();
    let row = line_starting(
        table.trim_start_matches(|c| c != '\n'),
        "GuestsByCityAmenityRate ",
    );
    let ratio: f64 = row
        .split_whitespace()
        .last()
        .and_then(|r| r.strip_suffix('x'))
        .unwrap()
        .parse()
        .unwrap();
    assert!(ratio > 1.0, "{row}");
    assert!(
        out.contains("-- not served: update `NewReservation`"),
        "{out}"
    );
    line_starting(&out, "-- weighted cost: recommended ");
    // JSON: the recommendation as before, with the comparison beside it.
    let json = advise(&p, "hotel", &["--json", "--compare", &schema], Project::ok);
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(r["total_cost"].as_f64().unwrap() > 0.0);
    assert_eq!(
        r["compare"]["schema"]["column_families"]
            .as_array()
            .unwrap()
            .len(),
        7
    );
    assert!(!r["compare"]["unserved"].as_array().unwrap().is_empty());
    // A costs file: every step costs what its constants say.
    p.write(
        "store.costs",
        "request = 1\npartition = 0.5\nrow = 0.01\ninsert = 2\ndelete = 2\nsort = 3\n",
    );
    let json = advise(
        &p,
        "eac",
        &["--json", "--costs", "store.costs"],
        Project::ok,
    );
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    for q in r["queries"].as_array().unwrap() {
        for s in q["steps"].as_array().unwrap() {
            let f = |k: &str| s[k].as_f64().unwrap();
            let sort = if s["sort"].as_bool().unwrap() {
                3.0
            } else {
                0.0
            };
            let want = 1.0 + 0.5 * f("gets") + 0.01 * f("gets") * f("width") + sort;
            assert!((f("cost") - want).abs() < 1e-9 * want, "{s}");
        }
    }
    p.write("bad.costs", "request = 1\nlatency = 2\n");
    advise(&p, "eac", &["--costs", "bad.costs"], |p, args| {
        p.fails_saying(args, 1, &["bad.costs:2:1: unknown cost constant `latency`"])
    });
}

/// `--calibrate` and `--execute` on the real Cassandra of `TERN_IT_CASSANDRA_URL` (a fresh
/// keyspace); skipped, with the reason printed, without one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advise_calibrate_and_execute_on_cassandra() {
    let url = match tern_integration_tests::cassandra::backend().await {
        Ok(b) => b.fresh_url(),
        Err(reason) => {
            println!("skipped: {reason}");
            return;
        }
    };
    tokio::task::spawn_blocking(move || {
        let p = Project::new(5_000);
        let run = advise(
            &p,
            "eac",
            &[
                "--calibrate",
                &url,
                "--create-store",
                "--execute",
                &url,
                "--execute-rows",
                "60",
                "--execute-runs",
                "2",
            ],
            Project::run,
        );
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stderr}");
        let out = String::from_utf8_lossy(&run.stdout);
        assert!(stderr.contains("calibrated on cassandra://"), "{stderr}");
        assert!(stderr.contains("removed the "), "{stderr}");
        assert!(out.contains("-- executed on cassandra://"), "{out}");
        // Both schemas gave the same answers, and every query has a plan in both.
        assert!(!out.contains("!=") && !out.contains("(no plan"), "{out}");
        assert!(out.contains("-- weighted mean response time"), "{out}");
        // The updates ran on the Cassandra node too.
        assert!(
            out.contains("-- after the updates both schemas still answer every query alike"),
            "{out}"
        );
    })
    .await
    .unwrap();
}
