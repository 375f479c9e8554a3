//! flashdoc's MongoDB wire-protocol server: a standalone mongod as drivers see it.
//!
//! `wire` decodes and encodes messages, `conn` runs connections on tokio, `commands` answers
//! each command through the document layer, `cursors` keeps server-side cursors, `config`
//! reads a mongod.conf-shaped YAML file.

pub mod commands;
pub mod config;
pub mod conn;
pub mod cursors;
pub mod state;
pub mod wire;

use bson::Document;
use docdb::DocDb;
use state::ServerState;
use std::net::SocketAddr;
use std::sync::Arc;

/// The stack of every server thread (async workers and the blocking pool that runs commands).
/// Client input reaches recursive code only through bounded nesting (200 levels on the wire,
/// 200 path components, `docdb::limits`); `tests::deepest_legal_requests_fit_the_stack` runs
/// the deepest legal requests on a thread of this size.
pub const THREAD_STACK_BYTES: usize = 16 << 20;

/// Raises the soft limit on open files to the hard limit, as mongod advises (each connection
/// is a descriptor; the default 1024 is too few for 1000 clients), and says what it got.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            eprintln!("flashdoc: cannot read the open-file limit");
            return;
        }
        let before = lim.rlim_cur;
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                lim.rlim_cur = before;
            }
        }
        println!(
            "flashdoc: open-file limit {} (was {before}, hard limit {})",
            lim.rlim_cur, lim.rlim_max
        );
    }
}

/// Serves until the `shutdown` command, SIGTERM or SIGINT, then shuts the database down
/// cleanly (checkpoint, journal synced). Prints "waiting for connections on <addr>" once
/// listening (tests and scripts wait for that line).
pub fn serve(db: Arc<DocDb>, addr: SocketAddr, parsed_options: Document) -> std::io::Result<()> {
    raise_fd_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("flashdoc-net")
        .thread_stack_size(THREAD_STACK_BYTES)
        .build()?;
    let state = Arc::new(ServerState::new(db.clone(), parsed_options));
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        println!(
            "flashdoc: waiting for connections on {}",
            listener.local_addr()?
        );
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
        let st = state.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(60)).await;
                st.cursors().reap();
            }
        });
        let accept = tokio::spawn(conn::accept_loop(listener, state.clone(), tx));
        let _ = rx.changed().await;
        accept.abort();
        Ok::<(), std::io::Error>(())
    })?;
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    db.shutdown()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    println!("flashdoc: shut down cleanly");
    Ok(())
}
