//! The `tern` binary.
fn main() {
    println!("tern: not yet");
}
