//! `flashdoc serve`: the MongoDB wire-protocol server on a database directory.

use anyhow::Context;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// A mongod.conf-shaped YAML file (storage, net, security, setParameter, systemLog, …).
    #[arg(long, short = 'f')]
    config: Option<PathBuf>,
    /// Overrides storage.dbPath.
    #[arg(long)]
    dbpath: Option<PathBuf>,
    /// Overrides net.port (0 picks a free port; the chosen one is printed).
    #[arg(long)]
    port: Option<u16>,
    /// Overrides net.bindIp (a comma-separated list).
    #[arg(long = "bind-ip", alias = "bind_ip")]
    bind_ip: Option<String>,
    /// Overrides storage.engine (wiredTiger, inMemory or mmapv1; mongod's --storageEngine).
    #[arg(long = "storage-engine", alias = "storageEngine")]
    storage_engine: Option<String>,
    /// Overrides storage.flash.mode: flash (the default: flashdoc's co-design for flash) or
    /// off (WiredTiger's behaviour: best fit, 5/20 dirty, no placement, hints or TRIM).
    #[arg(long = "flash-mode")]
    flash_mode: Option<String>,
    /// Overrides security.authorization: clients must authenticate.
    #[arg(long)]
    auth: bool,
    /// Overrides security.javascriptEnabled: no server-side JavaScript (mongod's
    /// --noscripting).
    #[arg(long)]
    noscripting: bool,
    /// Sets a server parameter as `name=value` (mongod's --setParameter), e.g.
    /// `ttlMonitorSleepSecs=1`; may be repeated.
    #[arg(long = "set-parameter", alias = "setParameter")]
    set_parameter: Vec<String>,
    /// Runs as a shard of a sharded cluster (sharding.clusterRole: shardsvr; default port
    /// 27018). A router's addShard tells it where the cluster's metadata lives.
    #[arg(long)]
    shardsvr: bool,
    /// Overrides security.keyFile: the cluster's shared key; members authenticate to each
    /// other with it, and it turns authorization on (as mongod's --keyFile).
    #[arg(long = "keyFile", alias = "key-file")]
    key_file: Option<PathBuf>,
    /// Overrides replication.replSetName: runs as a member of the replica set NAME (opens the
    /// oplog, replicates through Raft over the members' own ports; `replSetInitiate` on one
    /// member starts the set).
    #[arg(long = "replSet", alias = "repl-set", value_name = "NAME")]
    repl_set: Option<String>,
    /// Overrides replication.oplogSizeMB: the oplog's cap in megabytes.
    #[arg(long = "oplogSize", alias = "oplog-size", value_name = "MB")]
    oplog_size: Option<f64>,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let (cfg, sharding) = config(&args)?;
    let mut docdb_cfg = cfg
        .storage
        .docdb_config()
        .map_err(|e| anyhow::anyhow!("in the configuration: {e}"))?;
    docdb_cfg.oplog = cfg.replication.oplog()?;
    let db = docdb::DocDb::open(docdb_cfg).map_err(|e| {
        anyhow::anyhow!(
            "opening the database at {}: {e}",
            cfg.storage.db_path.display()
        )
    })?;
    if !sharding.shardsvr {
        server::serve(db, &cfg).context("serving")?;
        return Ok(());
    }
    let addr = *cfg
        .bind_addrs()?
        .first()
        .context("net.bindIp: no address")?;
    let key = cfg
        .security
        .key_file
        .as_deref()
        .map(server::keyfile::KeyFile::read)
        .transpose()
        .map_err(|e| anyhow::anyhow!(e))?;
    let node =
        crate::cluster_cmd::open_shard(db.clone(), addr, sharding.config_db.as_deref(), key)?;
    let mut shown = bson::doc! {"clusterRole": "shardsvr"};
    if let Some(c) = &sharding.config_db {
        shown.insert("configDB", c.clone());
    }
    server::serve_with_hook(db, &cfg, Some(node), bson::doc! {"sharding": shown})
        .context("serving")?;
    Ok(())
}

fn config(
    args: &ServeArgs,
) -> anyhow::Result<(
    server::config::ServerConfig,
    cluster::config::ShardingConfig,
)> {
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
        cfg.net.port = 27018;
    }
    if let Some(p) = &args.dbpath {
        cfg.storage.db_path = p.clone();
    }
    if let Some(p) = args.port {
        cfg.net.port = p;
    }
    if let Some(ip) = &args.bind_ip {
        cfg.net.bind_ip = ip.clone();
        cfg.net.bind_ip_all = false; // the flag names the addresses; the file's "all" yields
    }
    if let Some(m) = &args.flash_mode {
        cfg.storage
            .set_flash_mode(m)
            .map_err(|e| anyhow::anyhow!("--flash-mode: {e}"))?;
    }
    if let Some(e) = &args.storage_engine {
        cfg.storage
            .set_engine(e)
            .map_err(|e| anyhow::anyhow!("--storage-engine: {e}"))?;
    }
    if args.auth {
        cfg.security.authorization = server::config::Authorization::Enabled;
    }
    if let Some(k) = &args.key_file {
        cfg.security.key_file = Some(k.clone());
    }
    if cfg.security.key_file.is_some() {
        // As in mongod: members that authenticate each other authorize their clients.
        cfg.security.authorization = server::config::Authorization::Enabled;
    }
    if let Some(name) = &args.repl_set {
        cfg.replication.repl_set_name = Some(name.clone());
    }
    if let Some(mb) = args.oplog_size {
        cfg.replication.oplog_size_mb = Some(mb);
    }
    if args.noscripting {
        cfg.security.javascript_enabled = Some(false);
    }
    for p in &args.set_parameter {
        let (name, value) = p
            .split_once('=')
            .with_context(|| format!("--set-parameter {p}: expected name=value"))?;
        cfg.set_parameter
            .set(name, value)
            .map_err(|e| anyhow::anyhow!("--set-parameter {p}: {e}"))?;
    }
    cfg.validate()?;
    if sharding.shardsvr
        && cfg.security.authorization == server::config::Authorization::Enabled
        && cfg.security.key_file.is_none()
    {
        // Routers and other shards reach a shard as the internal user of the key file.
        anyhow::bail!("security.authorization with sharding.clusterRole: shardsvr needs security.keyFile (--keyFile), the key routers and shards authenticate to each other with");
    }
    Ok((cfg, sharding))
}
