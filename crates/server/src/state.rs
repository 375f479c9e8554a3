//! What all connections share: the database, the cursors, counters for serverStatus.

use crate::cursors::CursorRegistry;
use bson::{doc, Bson, Document};
use docdb::DocDb;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub struct ConnInfo {
    pub id: i32,
    pub peer: SocketAddr,
}

pub struct ServerState {
    db: Arc<DocDb>,
    cursors: CursorRegistry,
    started: Instant,
    next_conn: AtomicI32,
    pub connections_current: AtomicI64,
    pub connections_total: AtomicI64,
    commands: Mutex<BTreeMap<String, u64>>,
    parsed_options: Document,
}

impl ServerState {
    pub fn new(db: Arc<DocDb>, parsed_options: Document) -> Self {
        ServerState {
            db,
            cursors: CursorRegistry::default(),
            started: Instant::now(),
            next_conn: AtomicI32::new(1),
            connections_current: AtomicI64::new(0),
            connections_total: AtomicI64::new(0),
            commands: Mutex::new(BTreeMap::new()),
            parsed_options,
        }
    }
    pub fn db(&self) -> &Arc<DocDb> {
        &self.db
    }
    pub fn cursors(&self) -> &CursorRegistry {
        &self.cursors
    }
    pub fn parsed_options(&self) -> Document {
        self.parsed_options.clone()
    }
    pub fn new_connection(&self, peer: SocketAddr) -> ConnInfo {
        self.connections_current.fetch_add(1, Ordering::Relaxed);
        self.connections_total.fetch_add(1, Ordering::Relaxed);
        ConnInfo {
            id: self.next_conn.fetch_add(1, Ordering::Relaxed),
            peer,
        }
    }
    pub fn end_connection(&self) {
        self.connections_current.fetch_sub(1, Ordering::Relaxed);
    }
    pub fn count_command(&self, name: &str) {
        *self.commands.lock().entry(name.to_string()).or_default() += 1;
    }

    pub fn server_status(&self) -> Document {
        let up = self.started.elapsed();
        let cmds = self.commands.lock();
        let mut opcounters = doc! {"insert": 0i64, "query": 0i64, "update": 0i64, "delete": 0i64, "getmore": 0i64, "command": 0i64};
        for (name, n) in cmds.iter() {
            let key = match name.as_str() {
                "insert" => "insert",
                "find" => "query",
                "update" => "update",
                "delete" => "delete",
                "getMore" => "getmore",
                _ => "command",
            };
            let cur = opcounters.get_i64(key).unwrap_or(0);
            opcounters.insert(key, cur + *n as i64);
        }
        let per_command: Document = cmds
            .iter()
            .map(|(k, v)| (k.clone(), Bson::Int64(*v as i64)))
            .collect();
        doc! {
            "host": crate::commands::hostname(),
            "version": crate::commands::VERSION,
            "process": "flashdoc",
            "pid": std::process::id() as i64,
            "uptime": up.as_secs_f64().floor(),
            "uptimeMillis": up.as_millis() as i64,
            "uptimeEstimate": up.as_secs() as i64,
            "localTime": bson::DateTime::now(),
            "connections": {
                "current": self.connections_current.load(Ordering::Relaxed) as i32,
                "available": 1_000_000 - self.connections_current.load(Ordering::Relaxed) as i32,
                "totalCreated": self.connections_total.load(Ordering::Relaxed),
            },
            "opcounters": opcounters,
            "metrics": {"commands": per_command, "cursor": {"open": {"total": self.cursors.len() as i64}}},
            "storageEngine": {"name": "wiredTiger", "supportsCommittedReads": false, "persistent": true},
            "flashdoc": self.db.storage_stats(),
        }
    }
}
