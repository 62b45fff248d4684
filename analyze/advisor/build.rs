//! Fails early, with the fix, when CBC (the solver `coin_cbc` links) is missing: otherwise the
//! build would stop much later with undefined references at link time.

fn main() {
    // Without the `cbc` feature nothing links CBC (tern-cli --no-default-features).
    if std::env::var_os("CARGO_FEATURE_CBC").is_none() {
        return;
    }
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");
    if let Err(e) = pkg_config::Config::new().cargo_metadata(false).probe("cbc") {
        panic!(
            "\n\ntern-advisor needs the CBC solver library (Debian package coinor-libcbc-dev) and pkg-config.\n\
             Install them with `scripts/deps.sh` (or `apt-get install coinor-libcbc-dev pkg-config`).\n\
             pkg-config said: {e}\n\n"
        );
    }
}
