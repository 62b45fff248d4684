//! The battery on Redis: the plain server, a container, and JSON-string kinds.

mod server {
    tern_core::battery_tests!("redis", tern_integration_tests::redis::backend());
}

mod json_strings {
    tern_core::battery_tests!("redis-json", async {
        tern_integration_tests::redis::backend()
            .await
            .map(|b| b.with_options("json=*"))
    });
}

mod container {
    tern_core::battery_tests!(
        "redis-container",
        tern_integration_tests::redis::container_backend()
    );
}
