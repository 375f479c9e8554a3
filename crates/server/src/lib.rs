//! flashdoc's MongoDB wire-protocol server: a standalone mongod as drivers see it.
//!
//! `wire` decodes and encodes messages, `conn` runs connections on tokio, `commands` answers
//! each command through the document layer from its row in the command table
//! (`commands::table`, whose facts are `spec`'s), `cursors` keeps server-side cursors, `access`
//! computes what a command reaches, `auth` and `roles` authenticate and authorize, `config` reads a mongod.conf-shaped YAML file, `log`
//! writes the server's log.

pub mod access;
pub mod auth;
pub mod build_info;
pub mod burst;
pub mod client;
pub mod commands;
pub mod config;
pub mod conn;
pub mod cursors;
pub mod failpoint;
pub mod hook;
pub mod keyfile;
pub mod limits;
pub mod log;
pub mod ops;
pub mod profile;
pub mod replset;
pub mod reply;
pub mod retryable;
pub mod roles;
pub mod scram;
pub mod sessions;
pub mod sizing;
pub mod spec;
pub mod state;
pub mod tls;
pub mod traffic;
pub mod users;
pub mod wire;

use bson::Document;
use config::{Authorization, ServerConfig};
use docdb::DocDb;
use state::ServerState;
use std::sync::Arc;

/// The stack of every server thread (async workers and the blocking pool that runs commands).
/// Client input reaches recursive code only through bounded nesting (200 levels on the wire,
/// 200 path components, `query::limits`); `tests/hostile_requests.rs` runs the deepest legal
/// requests on a thread of this size.
pub const THREAD_STACK_BYTES: usize = 16 << 20;

/// Raises the soft limit on open files to the hard limit, as mongod advises (each connection
/// is a descriptor; the default 1024 is too few for 1000 clients), and logs what it got.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            log::warn("CONTROL", "cannot read the open-file limit");
            return;
        }
        let before = lim.rlim_cur;
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                lim.rlim_cur = before;
            }
        }
        log::info(
            "CONTROL",
            &format!(
                "open-file limit {} (was {before}, hard limit {})",
                lim.rlim_cur, lim.rlim_max
            ),
        );
    }
}

/// Large buffers (a message body, a big document or reply) are mapped and unmapped by the
/// allocator rather than carved from its heaps: glibc's default threshold grows to the largest
/// block freed (up to 32 MiB), after which 17 MB frames came from the heaps and their memory
/// stayed with the process (the load test: 735 MB resident after hostile 17 MB frames). Fixed
/// at 1 MiB, freeing such a buffer gives its memory back at once.
const MMAP_THRESHOLD_BYTES: i32 = 1 << 20;

fn bound_allocator_retention() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning, under the allocator's own lock (the
    // engine's threads already run when the server starts).
    unsafe {
        if libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1 {
            log::warn("CONTROL", "cannot set the allocator's mmap threshold");
        }
    }
}

/// Turns transparent huge pages off for the process, as mongod's production notes advise (up to
/// 7.0) and as mimalloc does with `allow_thp=0`. mimalloc asks for huge pages on its arenas
/// (`MADV_HUGEPAGE`), so each connection thread's first small pages came in a 2 MiB huge page
/// and were purged only whole: 1.7 MB resident per idle connection, 444 MB kept 10 s after
/// 1 000 connections closed (docs/server.md, "Connections and memory"). Faults from now on get
/// 4 KiB pages, which the allocator purges as they empty.
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE only sets a flag on this process's memory map.
    unsafe {
        if libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0 {
            log::warn("CONTROL", "cannot turn transparent huge pages off");
        }
    }
}

/// Gives the allocators' free memory back to the system. glibc's (what C code allocates), all
/// arenas and not only their tops: after a burst of connections, the blocking pool's threads
/// leave their arenas full of free chunks glibc would otherwise keep (the load test: 195 MB
/// resident when idle). And the global allocator's freed pages ([`burst::return_freed_pages`]),
/// so pages emptied when nothing else runs in the allocator (a connection thread's last
/// frees after the burst's checkpoint) go back within [`TRIM_EVERY`].
/// Called every [`TRIM_EVERY`] by the server's housekeeping task.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it only returns free memory.
    unsafe {
        libc::malloc_trim(0);
    }
    burst::return_freed_pages();
}

/// How often the housekeeping task returns free memory to the system.
const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// After a burst of connections closed ([`burst`]): a checkpoint, so the records those
/// connections wrote move out of their threads' pages and the pages return to the system. Logs
/// what it found and what it left (connection threads still running, resident memory), so a
/// run whose memory did not come back shows why.
fn release_closed_connections_memory(state: &ServerState, burst: burst::ClosedBurst) {
    let threads = state.conn_threads.load(std::sync::atomic::Ordering::SeqCst);
    log::info(
        "STORAGE",
        &format!(
            "a burst of connections closed ({} of {}; {} open, {threads} connection threads running, resident {} MB): checkpointing, so the memory their writes hold returns",
            burst.peak - burst.open,
            burst.peak,
            burst.open,
            traffic::resident_mb(),
        ),
    );
    let started = std::time::Instant::now();
    if let Err(e) = state.db().engine().checkpoint() {
        log::warn(
            "STORAGE",
            &format!("checkpoint after a burst of connections failed: {e}"),
        );
    }
    let checkpointed = (started.elapsed().as_millis(), traffic::resident_mb());
    // The checkpoint freed the records; the pages they emptied go back to the system now, not
    // at the allocator's next event, which after the last close may not come (burst.rs).
    burst::return_freed_pages();
    log::info(
        "STORAGE",
        &format!(
            "checkpoint after the burst done in {} ms (resident {} MB); freed pages returned: resident {} MB",
            checkpointed.0,
            checkpointed.1,
            traffic::resident_mb(),
        ),
    );
}

/// Once a second: idle cursors time out, transactions past `transactionLifetimeLimitSeconds`
/// are aborted (mongod's periodic reaper), a burst of closed connections gets its checkpoint
/// ([`burst`]); every [`TRIM_EVERY`], free memory goes back to the system.
async fn housekeeping(st: Arc<ServerState>) {
    let mut last_trim = std::time::Instant::now();
    let mut burst = burst::BurstWatch::default();
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        st.cursors().reap(st.cursor_timeout());
        st.db().txns().reap_expired();
        let open = st
            .connections_current
            .load(std::sync::atomic::Ordering::Relaxed);
        let most = st
            .connections_most
            .swap(open, std::sync::atomic::Ordering::Relaxed);
        if let Some(closed) = burst.closed_burst(open, most) {
            let st = st.clone();
            let _ =
                tokio::task::spawn_blocking(move || release_closed_connections_memory(&st, closed))
                    .await;
        }
        if last_trim.elapsed() >= TRIM_EVERY {
            last_trim = std::time::Instant::now();
            let _ = tokio::task::spawn_blocking(release_free_memory).await;
        }
    }
}

/// Serves until the `shutdown` command, SIGTERM or SIGINT, then shuts the database down
/// cleanly (checkpoint, journal synced). Prints "waiting for connections on <addr>" to standard
/// output once listening (tests and scripts wait for that line).
pub fn serve(db: Arc<DocDb>, cfg: &ServerConfig) -> std::io::Result<()> {
    serve_with_hook(db, cfg, None, Document::new())
}

/// The process's side of starting: the log, the time-zone database, descriptor and allocator
/// limits, the listening addresses (checked before anything binds) and the pid file.
fn start_process(cfg: &ServerConfig) -> std::io::Result<Vec<std::net::SocketAddr>> {
    log::init(&cfg.system_log)?;
    if let Some(dir) = &cfg.process_management.time_zone_info {
        let zones =
            config::open_time_zone_dir(dir).map_err(|e| std::io::Error::other(e.to_string()))?;
        query::expr::zones::use_zone_dir(zones);
        log::info("CONTROL", &format!("time zones from {}", dir.display()));
    }
    raise_fd_limit();
    bound_allocator_retention();
    disable_transparent_huge_pages();
    let addrs = cfg
        .bind_addrs()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    if let Some(pid) = &cfg.process_management.pid_file_path {
        std::fs::write(pid, format!("{}\n", std::process::id()))
            .map_err(|e| std::io::Error::new(e.kind(), format!("pidFilePath: {e}")))?;
    }
    Ok(addrs)
}

/// [`serve`], with a command hook (see `hook`) in front of the built-in commands.
/// `other_options` are the configuration sections the server does not own (a router's or a
/// shard's `sharding`), shown by getCmdLineOpts with the server's own.
pub fn serve_with_hook(
    db: Arc<DocDb>,
    cfg: &ServerConfig,
    hook: Option<Arc<dyn hook::CommandHook>>,
    other_options: Document,
) -> std::io::Result<()> {
    serve_with_users(db, cfg, hook, other_options, None)
}

/// The shared state of a server: the hook, the users (`users`, or `admin.system.users`) and
/// the cluster's key file, which turns authorization on as in mongod.
fn server_state(
    db: Arc<DocDb>,
    cfg: &ServerConfig,
    hook: Option<Arc<dyn hook::CommandHook>>,
    other_options: Document,
    users: Option<Arc<dyn users::UserStore>>,
) -> std::io::Result<ServerState> {
    let key = match &cfg.security.key_file {
        Some(path) => Some(keyfile::KeyFile::read(path).map_err(std::io::Error::other)?),
        None => None,
    };
    let mut cfg = cfg.clone();
    if key.is_some() {
        cfg.security.authorization = Authorization::Enabled;
    }
    let replset = match &cfg.replication.repl_set_name {
        Some(name) => Some(
            replset::ReplSet::open(name, db.clone(), &cfg, key.as_ref())
                .map_err(std::io::Error::other)?,
        ),
        None => None,
    };
    let mut state = ServerState::new(db, &cfg)
        .with_hook(hook, other_options)
        .with_internal_key(key)
        .with_replset(replset);
    if let Some(users) = users {
        state = state.with_user_store(users);
    }
    Ok(state)
}

/// [`serve_with_hook`], with the users kept in `users` (a router's, in the cluster's
/// metadata) instead of `admin.system.users`.
pub fn serve_with_users(
    db: Arc<DocDb>,
    cfg: &ServerConfig,
    hook: Option<Arc<dyn hook::CommandHook>>,
    other_options: Document,
    users: Option<Arc<dyn users::UserStore>>,
) -> std::io::Result<()> {
    let addrs = start_process(cfg)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("flashdoc-net")
        .thread_stack_size(THREAD_STACK_BYTES)
        .build()?;
    let tls = tls::acceptor(&cfg.net.tls).map_err(std::io::Error::other)?;
    query::js::set_enabled(cfg.security.javascript_enabled());
    let state = Arc::new(server_state(db.clone(), cfg, hook, other_options, users)?);
    limits::apply_budgets(&cfg.set_parameter);
    // Spilled $group runs go where mongod puts its: under the database directory.
    query::aggregate::budget::set_spill_dir(cfg.storage.db_path.join("_tmp"));
    state.start_ttl_monitor();
    docdb::validation::set_warning_sink(Box::new(|m| log::warn("STORAGE", m)));
    for w in db.startup_warnings() {
        log::warn("STORAGE", w);
    }
    // Which mode runs, and what it runs with (the same values serverStatus().flash shows).
    log::info("STORAGE", &db.flash_report().log_line());
    if state.config().security.authorization == Authorization::Disabled
        && addrs.iter().any(|a| !a.ip().is_loopback())
    {
        log::warn(
            "CONTROL",
            "Access control is not enabled for the database; this server is bound to a non-loopback address: anyone who can reach it can read and write all data. Enable security.authorization.",
        );
    }
    rt.block_on(async {
        let mut listeners = Vec::new();
        for a in &addrs {
            listeners.push(tokio::net::TcpListener::bind(a).await?);
        }
        for l in &listeners {
            let msg = format!("waiting for connections on {}", l.local_addr()?);
            log::info("NETWORK", &msg);
            println!("flashdoc: {msg}");
        }
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let (tx, mut rx) = tokio::sync::watch::channel(false);
        let tx2 = tx.clone();
        tokio::spawn(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler");
            let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
                .expect("SIGINT handler");
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            let _ = tx2.send(true);
        });
        tokio::spawn(housekeeping(state.clone()));
        let mut accepts = Vec::new();
        for l in listeners {
            accepts.push(tokio::spawn(conn::accept_loop(
                l,
                state.clone(),
                tx.clone(),
                tls.clone(),
            )));
        }
        let _ = rx.changed().await;
        for a in accepts {
            a.abort();
        }
        Ok::<(), std::io::Error>(())
    })?;
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    conn::wait_for_connection_threads(&state, std::time::Duration::from_secs(2));
    state.stop_background();
    if let Some(rs) = state.replset() {
        rs.shutdown();
    }
    db.shutdown()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    if let Some(pid) = &cfg.process_management.pid_file_path {
        let _ = std::fs::remove_file(pid);
    }
    log::info("CONTROL", "shut down cleanly");
    println!("flashdoc: shut down cleanly");
    Ok(())
}

#[cfg(test)]
mod burst_memory_tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static RETURNS: AtomicUsize = AtomicUsize::new(0);

    fn count_return() {
        RETURNS.fetch_add(1, Ordering::SeqCst);
    }

    /// The allocator is asked for its freed pages after the burst's checkpoint (which frees
    /// the gone threads' records), and with the periodic trim.
    #[test]
    fn the_burst_checkpoint_and_the_trim_return_the_freed_pages() {
        burst::set_return_freed_pages(count_return);
        let db = DocDb::open(docdb::DocDbConfig::in_memory()).unwrap();
        let state = ServerState::new(db, &ServerConfig::default());
        let before = RETURNS.load(Ordering::SeqCst);
        release_closed_connections_memory(&state, burst::ClosedBurst { peak: 200, open: 0 });
        assert_eq!(RETURNS.load(Ordering::SeqCst), before + 1);
        release_free_memory();
        assert_eq!(RETURNS.load(Ordering::SeqCst), before + 2);
    }
}
