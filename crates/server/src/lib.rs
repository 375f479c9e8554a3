//! flashdoc's MongoDB wire-protocol server: a standalone mongod as drivers see it.
//!
//! `wire` decodes and encodes messages, `conn` runs connections on tokio, `commands` answers
//! each command through the document layer, `cursors` keeps server-side cursors, `config`
//! reads a mongod.conf-shaped YAML file.

pub mod commands;
pub mod config;
pub mod conn;
pub mod cursors;
pub mod hook;
pub mod state;
pub mod wire;

use bson::Document;
use docdb::DocDb;
use state::ServerState;
use std::net::SocketAddr;
use std::sync::Arc;

/// Serves until the `shutdown` command, SIGTERM or SIGINT, then shuts the database down
/// cleanly (checkpoint, journal synced). Prints "waiting for connections on <addr>" once
/// listening (tests and scripts wait for that line).
pub fn serve(db: Arc<DocDb>, addr: SocketAddr, parsed_options: Document) -> std::io::Result<()> {
    serve_with_hook(db, addr, parsed_options, None)
}

/// [`serve`], with a command hook (see `hook`) in front of the built-in commands.
pub fn serve_with_hook(
    db: Arc<DocDb>,
    addr: SocketAddr,
    parsed_options: Document,
    hook: Option<Arc<dyn hook::CommandHook>>,
) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("flashdoc-net")
        .build()?;
    let state = Arc::new(ServerState::new(db.clone(), parsed_options).with_hook(hook));
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
