//! Bad input: clear errors with file:line:col.

mod common;

use tern_advisor::{Model, Workload};

const MODEL: &str = "entity Hotel 100
  id HotelID
  field HotelCity string 20 distinct 10
entity Room 1000
  id RoomID
  field RoomRate float
fk Room.Hotel -> Hotel.Rooms
";

fn workload_error(text: &str) -> String {
    let m = common::model(MODEL);
    match Workload::parse("w.workload", text, &m) {
        Ok(_) => panic!("`{text}` parsed"),
        Err(e) => e.to_string(),
    }
}

fn model_error(text: &str) -> String {
    match Model::parse("m.model", text) {
        Ok(_) => panic!("`{text}` parsed"),
        Err(e) => e.to_string(),
    }
}

/// Asserts the error `e` starts with `prefix`.
fn assert_starts(e: &str, prefix: &str) {
    assert!(e.starts_with(prefix), "{e}");
}

#[test]
fn a_path_through_a_missing_relationship_names_the_relationships() {
    let e = workload_error("Q: SELECT Room.RoomID FROM Room.Guest WHERE Room.RoomID = ?;");
    assert_eq!(
        e,
        "w.workload:1:33: `Room` has no relationship `Guest`; its relationships are: Hotel"
    );
}

#[test]
fn a_query_without_equality_predicate_asks_for_one() {
    let e = workload_error("Q: SELECT Room.RoomID FROM Room\n   WHERE Room.RoomRate > ?;");
    assert_starts(&e, "w.workload:1:4: the query has no equality predicate");
    assert!(e.contains("WHERE Entity.Field = ?"), "{e}");
}

#[test]
fn a_cyclic_query_graph_is_refused() {
    let e = workload_error("Q: SELECT Room.RoomID FROM Room.Hotel.Rooms WHERE Room.RoomID = ?;");
    assert_starts(
        &e,
        "w.workload:1:39: cyclic query graph: `Rooms` leads back to `Room`",
    );
}

#[test]
fn a_self_reference_is_refused_in_the_model() {
    let e = model_error(
        "entity Employee 10\n  id EmployeeID\nfk Employee.Manager -> Employee.Reports\n",
    );
    assert_starts(&e, "m.model:3:4: self reference `Employee.Manager`");
    assert!(e.contains("intermediate entity"), "{e}");
}

#[test]
fn an_unknown_field_lists_the_fields() {
    let e = workload_error("Q: SELECT Room.Price FROM Room WHERE Room.RoomID = ?;");
    assert_eq!(
        e,
        "w.workload:1:16: `Room` has no field `Price`; its fields are: RoomID, RoomRate"
    );
    let e = workload_error("Q: SELECT Room.RoomID FROM Room WHERE Room.Hotel.Name = ?;");
    assert_eq!(
        e,
        "w.workload:1:50: `Hotel` has no field `Name`; its fields are: HotelID, HotelCity"
    );
}

#[test]
fn model_errors_point_at_the_line() {
    assert_eq!(
        model_error("entity A 10\n  field X int\n"),
        "m.model:2:3: entity `A` needs its `id` line before its fields"
    );
    assert_eq!(
        model_error("entity A 10\n  id AID\n  field X blob\n"),
        "m.model:3:11: unknown type `blob`: use int, float, string, bool or date"
    );
    assert_eq!(
        model_error("entity A 10\n"),
        "m.model:1:8: entity `A` has no `id` line"
    );
    assert_starts(
        &model_error("entity A 10\n  id AID\n  field X int distinct 11\n"),
        "m.model:3:24: distinct values",
    );
    assert_starts(
        &model_error("entity A 10\n  id AID\nfk A.B -> C.As\n"),
        "m.model:3:4: unknown entity `C`",
    );
}

#[test]
fn workload_syntax_errors_point_at_the_token() {
    assert_eq!(
        workload_error("Q: SELECT Room.RoomID FROM Room WHERE Room.RoomID = ?"),
        "w.workload:1:53: expected `;`, found the end of the file"
    );
    assert_eq!(
        workload_error("Q: FETCH Room.RoomID;"),
        "w.workload:1:4: expected SELECT, INSERT, UPDATE, DELETE, CONNECT or DISCONNECT, found `FETCH`"
    );
    assert_starts(
        &workload_error("Q: SELECT Room.RoomID FROM Nope WHERE Nope.X = ?;"),
        "w.workload:1:28: unknown entity `Nope`",
    );
    assert!(
        workload_error("Q: UPDATE Room SET RoomID = ? WHERE Room.RoomID = ?;")
            .contains("cannot change an id")
    );
}

#[test]
fn an_error_about_a_huge_model_lists_twenty_names_and_counts_the_rest() {
    let mut text = String::from("entity Big 1000\n  id BigId\n");
    for i in 0..10_000 {
        text.push_str(&format!("  field F{i} int\n"));
    }
    text.push_str("  field F7 int\n");
    // A repeated field among 10,000 is found (by hash: parsing stays linear).
    let e = model_error(&text);
    assert!(
        e.starts_with("m.model:10003:9: field `F7` is declared twice"),
        "{e}"
    );
    text.truncate(text.len() - "  field F7 int\n".len());
    let m = common::model(&text);
    let e = match Workload::parse(
        "w.workload",
        "Q: SELECT Big.Nope FROM Big WHERE Big.BigId = ?;",
        &m,
    ) {
        Ok(_) => panic!("parsed"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.ends_with("its fields are: BigId, F0, F1, F2, F3, F4, F5, F6, F7, F8, F9, F10, F11, F12, F13, F14, F15, F16, F17, F18, ... and 9981 more"),
        "{e}"
    );
}
