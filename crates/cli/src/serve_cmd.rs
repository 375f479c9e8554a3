//! `flashdoc serve`: the MongoDB wire-protocol server on a database directory.

use anyhow::Context;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// A mongod.conf-shaped YAML file (storage, net, systemLog, storage.flash).
    #[arg(long, short = 'f')]
    config: Option<PathBuf>,
    /// Overrides storage.dbPath.
    #[arg(long)]
    dbpath: Option<PathBuf>,
    /// Overrides net.port (0 picks a free port; the chosen one is printed).
    #[arg(long)]
    port: Option<u16>,
    /// Overrides net.bindIp.
    #[arg(long = "bind-ip", alias = "bind_ip")]
    bind_ip: Option<String>,
    /// Overrides storage.engine (wiredTiger or inMemory).
    #[arg(long = "storage-engine")]
    storage_engine: Option<String>,
    /// Runs as a shard of a sharded cluster (sharding.clusterRole: shardsvr; default port
    /// 27018). A router's addShard tells it where the cluster's metadata lives.
    #[arg(long)]
    shardsvr: bool,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let (mut cfg, mut sharding) = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the configuration file {}", path.display()))?;
            let (rest, sharding) = cluster::config::split_sharding(&text)
                .map_err(|e| anyhow::anyhow!("in {}: {e}", path.display()))?;
            let cfg = server::config::ServerConfig::from_yaml(&rest)
                .with_context(|| format!("in {}", path.display()))?;
            (cfg, sharding)
        }
        None => (
            server::config::ServerConfig::default(),
            cluster::config::ShardingConfig::default(),
        ),
    };
    sharding.shardsvr |= args.shardsvr;
    if sharding.shardsvr && args.config.is_none() && args.port.is_none() {
        cfg.port = 27018;
    }
    if let Some(p) = args.dbpath {
        cfg.db_path = p;
    }
    if let Some(p) = args.port {
        cfg.port = p;
    }
    if let Some(ip) = args.bind_ip {
        cfg.bind_ip = ip;
    }
    if let Some(e) = args.storage_engine {
        cfg.engine = e
            .parse()
            .map_err(|e| anyhow::anyhow!("--storage-engine: {e}"))?;
    }
    let addr: SocketAddr = (cfg.bind_ip.as_str(), cfg.port)
        .to_socket_addrs()
        .with_context(|| format!("net.bindIp {}:{} is not an address", cfg.bind_ip, cfg.port))?
        .next()
        .with_context(|| format!("net.bindIp {} resolves to nothing", cfg.bind_ip))?;
    let db = docdb::DocDb::open(cfg.docdb_config().context("in the configuration")?)
        .map_err(|e| anyhow::anyhow!("opening the database at {}: {e}", cfg.db_path.display()))?;
    if !sharding.shardsvr {
        server::serve(db, addr, cfg.as_document()).context("serving")?;
        return Ok(());
    }
    let node = crate::cluster_cmd::open_shard(db.clone(), addr, sharding.config_db.as_deref())?;
    server::serve_with_hook(db, addr, cfg.as_document(), Some(node)).context("serving")?;
    Ok(())
}
