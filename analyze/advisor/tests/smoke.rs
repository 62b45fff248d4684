//! Temporary smoke run.
mod common;
#[test]
fn hotel_runs() {
    let (m, w) = common::example("hotel");
    let r = tern_advisor::advise(&m, &w, &Default::default());
    match r {
        Ok(r) => println!("{}", tern_advisor::render::text(&r)),
        Err(e) => panic!("{e}"),
    }
}
