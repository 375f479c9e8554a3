//! Which server this is: the MongoDB version flashdoc answers as, and the host it runs on
//! (`buildInfo`, `serverStatus`, `explain`'s serverInfo).

use bson::{doc, Document};

pub const VERSION: &str = "7.0.14";

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// `buildInfo`'s reply.
pub fn build_info() -> Document {
    let parts: Vec<i32> = VERSION.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    doc! {
        "version": VERSION,
        "gitVersion": "flashdoc",
        "versionArray": [parts[0], parts[1], parts[2], 0],
        "bits": 64,
        "debug": false,
        "maxBsonObjectSize": crate::wire::MAX_BSON_OBJECT_SIZE,
        "modules": [],
        "storageEngines": ["wiredTiger", "inMemory", "mmapv1"],
        "javascriptEngine": "none",
        "flashdoc": env!("CARGO_PKG_VERSION"),
    }
}
