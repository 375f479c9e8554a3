//! `flashdoc router` (a mongos whose metadata lives in etcd), `flashdoc cluster up|down` (a
//! local cluster: etcd, N shards and a router, as detached processes), and the shard side of
//! `flashdoc serve --shardsvr`.

use anyhow::{anyhow, bail, Context, Result};
use bson::doc;
use cluster::meta::{Catalog, DEFAULT_ROOT};
use cluster::router::{Router, RouterOptions};
use cluster::shard::{ShardNode, SystemClock};
use cluster::transport::{call_ok, Connector, TcpConnector};
use server::keyfile::KeyFile;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn store_opener() -> cluster::shard::StoreOpener {
    Arc::new(|s: &str| cluster::store::open(s))
}

/// The address others reach a node bound to `addr` at.
fn advertised(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("127.0.0.1:{}", addr.port())
    } else {
        addr.to_string()
    }
}

/// The shard side of `serve --shardsvr`.
/// With `key` (`security.keyFile`), the shard authenticates to other shards as the internal
/// user.
pub fn open_shard(
    db: Arc<docdb::DocDb>,
    addr: SocketAddr,
    config_db: Option<&str>,
    key: Option<KeyFile>,
) -> Result<Arc<dyn server::hook::CommandHook>> {
    if addr.port() == 0 {
        bail!("a shard needs a fixed port (the cluster stores its address): give --port");
    }
    let node = ShardNode::open(
        db,
        &advertised(addr),
        store_opener(),
        Arc::new(TcpConnector::with_key(key)),
        Arc::new(SystemClock),
    )
    .map_err(|e| anyhow!("starting the shard: {e}"))?;
    if let Some(want) = config_db {
        cluster::store::open(want).map_err(|e| anyhow!("sharding.configDB: {e}"))?;
        if let Some(name) = node.name() {
            eprintln!("flashdoc: shard {name}, metadata at {want}");
        }
    }
    Ok(node)
}

#[derive(clap::Args)]
pub struct RouterArgs {
    /// A mongos.conf-shaped YAML file (net.port, net.bindIp, sharding.configDB,
    /// setParameter.enableTestCommands).
    #[arg(long, short = 'f')]
    config: Option<PathBuf>,
    /// Where the metadata lives: etcd://host:port[,host:port…] (overrides sharding.configDB).
    #[arg(long = "configdb")]
    config_db: Option<String>,
    #[arg(long)]
    port: Option<u16>,
    #[arg(long = "bind-ip")]
    bind_ip: Option<String>,
    /// Serve configureFailPoint (tests).
    #[arg(long = "enable-test-commands")]
    test_commands: bool,
    /// Seconds between balancer rounds.
    #[arg(long = "balancer-interval", default_value_t = 10)]
    balancer_interval: u64,
    /// Overrides security.keyFile: the cluster's shared key. The router authenticates to
    /// the shards with it and authenticates its clients against the cluster's users.
    #[arg(long = "keyFile", alias = "key-file")]
    key_file: Option<PathBuf>,
}

#[derive(Default)]
struct RouterConfig {
    port: u16,
    bind_ip: String,
    config_db: Option<String>,
    test_commands: bool,
    key_file: Option<PathBuf>,
}

/// A router's `security` section: `keyFile` only, as mongos's (authorization follows it).
fn parse_router_security(val: &serde_yaml::Value, c: &mut RouterConfig) -> Result<()> {
    for (k, v) in val
        .as_mapping()
        .ok_or_else(|| anyhow!("security: expected a mapping"))?
    {
        match k.as_str().unwrap_or("") {
            "keyFile" => {
                c.key_file = Some(
                    v.as_str()
                        .ok_or_else(|| anyhow!("security.keyFile: expected a path"))?
                        .into(),
                )
            }
            "authorization" => bail!("security.authorization: a router authorizes its clients when it has security.keyFile, as mongos does; give the key file instead"),
            other => bail!("security.{other}: unknown key for a router"),
        }
    }
    Ok(())
}

fn parse_router_yaml(text: &str) -> Result<RouterConfig> {
    let (rest, sharding) = cluster::config::split_sharding(text).map_err(|e| anyhow!(e))?;
    if sharding.shardsvr {
        bail!("sharding.clusterRole: a router has no cluster role");
    }
    let mut c = RouterConfig {
        port: 27017,
        bind_ip: "127.0.0.1".into(),
        config_db: sharding.config_db,
        ..RouterConfig::default()
    };
    let v: serde_yaml::Value = serde_yaml::from_str(&rest)?;
    let Some(m) = v.as_mapping() else {
        return Ok(c);
    };
    for (k, val) in m {
        match k.as_str().unwrap_or("") {
            "net" => {
                for (k2, v2) in val
                    .as_mapping()
                    .ok_or_else(|| anyhow!("net: expected a mapping"))?
                {
                    match k2.as_str().unwrap_or("") {
                        "port" => {
                            c.port = v2
                                .as_u64()
                                .and_then(|p| u16::try_from(p).ok())
                                .ok_or_else(|| anyhow!("net.port: expected a port number"))?
                        }
                        "bindIp" => {
                            c.bind_ip = v2
                                .as_str()
                                .ok_or_else(|| anyhow!("net.bindIp: expected a string"))?
                                .to_string()
                        }
                        other => bail!("net.{other}: unknown key for a router"),
                    }
                }
            }
            "setParameter" => {
                for (k2, v2) in val
                    .as_mapping()
                    .ok_or_else(|| anyhow!("setParameter: expected a mapping"))?
                {
                    match k2.as_str().unwrap_or("") {
                        "enableTestCommands" => {
                            c.test_commands = v2.as_bool().ok_or_else(|| {
                                anyhow!("setParameter.enableTestCommands: expected true or false")
                            })?
                        }
                        other => bail!("setParameter.{other}: unknown parameter"),
                    }
                }
            }
            "security" => parse_router_security(val, &mut c)?,
            other => bail!("{other}: unknown key for a router configuration"),
        }
    }
    Ok(c)
}

pub fn run_router(args: RouterArgs) -> Result<()> {
    let mut cfg = match &args.config {
        Some(p) => parse_router_yaml(
            &std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        )
        .with_context(|| format!("in {}", p.display()))?,
        None => RouterConfig {
            port: 27017,
            bind_ip: "127.0.0.1".into(),
            ..RouterConfig::default()
        },
    };
    if args.key_file.is_some() {
        cfg.key_file = args.key_file;
    }
    let key = cfg
        .key_file
        .as_deref()
        .map(KeyFile::read)
        .transpose()
        .map_err(|e| anyhow!(e))?;
    if let Some(p) = args.port {
        cfg.port = p;
    }
    if let Some(b) = args.bind_ip {
        cfg.bind_ip = b;
    }
    if args.config_db.is_some() {
        cfg.config_db = args.config_db;
    }
    cfg.test_commands |= args.test_commands;
    let config_db = cfg.config_db.ok_or_else(|| {
        anyhow!("a router needs sharding.configDB (or --configdb etcd://host:port)")
    })?;
    if args.balancer_interval == 0 {
        bail!("--balancer-interval must be at least 1 second");
    }
    let addr: SocketAddr = (cfg.bind_ip.as_str(), cfg.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow!("net.bindIp {} resolves to nothing", cfg.bind_ip))?;
    let store = cluster::store::open(&config_db).map_err(|e| anyhow!("{e}"))?;
    let catalog = Catalog::new(store, DEFAULT_ROOT);
    let catalog_for_users = catalog.clone();
    let router = Router::new(
        catalog.clone(),
        &config_db,
        Arc::new(TcpConnector::with_key(key.clone())),
        RouterOptions {
            id: format!(
                "{}:{}-{}",
                server::commands::hostname(),
                cfg.port,
                std::process::id()
            ),
            test_commands: cfg.test_commands,
            inline_autosplit: false,
            balancer_waits_for_delete: false,
        },
    );
    spawn_background(
        router.clone(),
        catalog,
        Duration::from_secs(args.balancer_interval),
    );
    let db = docdb::DocDb::open(docdb::DocDbConfig::in_memory()).map_err(|e| anyhow!("{e}"))?;
    let mut server_cfg = server::config::ServerConfig::default();
    server_cfg.net.port = addr.port();
    server_cfg.net.bind_ip = addr.ip().to_string();
    server_cfg.net.ipv6 = addr.is_ipv6();
    server_cfg
        .storage
        .set_engine("inMemory")
        .map_err(|e| anyhow!(e))?;
    // With the key file the server turns authorization on and knows the internal user; the
    // users are the cluster's, in the metadata store.
    server_cfg.security.key_file = cfg.key_file;
    let users = cluster::users::ClusterUsers::new(catalog_for_users);
    server::serve_with_users(
        db,
        &server_cfg,
        Some(router),
        doc! {"sharding": {"configDB": config_db}},
        Some(Arc::new(users)),
    )
    .context("serving")?;
    Ok(())
}

/// The balancer (when this router holds the lock) and the load policy's split rounds.
fn spawn_background(router: Arc<Router>, catalog: Catalog, interval: Duration) {
    let id = router
        .me()
        .upgrade()
        .map(|_| format!("router-{}", std::process::id()))
        .unwrap_or_default();
    std::thread::Builder::new()
        .name("flashdoc-balancer".into())
        .spawn(move || {
            let mut last_round = Instant::now();
            loop {
                std::thread::sleep(Duration::from_secs(1));
                if let Ok(s) = router.settings() {
                    if matches!(s.policy, cluster::split::SplitPolicy::Load(_)) {
                        if let Err(e) = cluster::router::autosplit::load_split_round(&router) {
                            eprintln!("flashdoc: load split round: {e}");
                        }
                    }
                }
                if last_round.elapsed() < interval {
                    continue;
                }
                last_round = Instant::now();
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(0);
                match catalog.take_lock("balancer", &id, now, 3 * interval.as_millis() as i64) {
                    Ok(true) => {
                        if let Err(e) = router.balancer.round(&router) {
                            eprintln!("flashdoc: balancer round: {e}");
                        }
                    }
                    Ok(false) => {}
                    Err(e) => eprintln!("flashdoc: balancer lock: {e}"),
                }
            }
        })
        .expect("spawn the balancer thread");
}

#[derive(clap::Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(clap::Subcommand)]
enum ClusterCommand {
    /// Start etcd (unless --etcd is given), N shards and a router; print the connection string.
    Up {
        #[arg(long, default_value_t = 3)]
        shards: usize,
        /// Where data, logs and the process list go.
        #[arg(long, default_value = "flashdoc-cluster")]
        dir: PathBuf,
        /// The router's port; shards take the next ones.
        #[arg(long, default_value_t = 27017)]
        port: u16,
        /// Use this etcd instead of starting one: etcd://host:port.
        #[arg(long)]
        etcd: Option<String>,
        /// The cluster's shared key (security.keyFile) for every shard and the router: they
        /// authenticate to each other with it and authorize their clients.
        #[arg(long = "keyFile", alias = "key-file")]
        key_file: Option<PathBuf>,
        /// Every shard's storage engine (wiredTiger, inMemory or mmapv1; serve's
        /// --storageEngine); unset, the shards' default engine.
        #[arg(long = "storageEngine", alias = "storage-engine")]
        storage_engine: Option<String>,
        /// Members per shard. 1 (the default): each shard is one server. More: each shard is
        /// a replica set `shardK` of that many members (a 0.25 GB cache each, elections after
        /// 2 s without a primary), initiated and added as `shardK/host1,host2,…`.
        #[arg(long, default_value_t = 1)]
        replicas: usize,
        /// Test commands (configureFailPoint, …) on the router and every shard, as a test
        /// suite needs them (serve's `--setParameter enableTestCommands=1`).
        #[arg(long = "enable-test-commands")]
        test_commands: bool,
    },
    /// Stop everything `cluster up` started in --dir.
    Down {
        #[arg(long, default_value = "flashdoc-cluster")]
        dir: PathBuf,
    },
    /// Add running shards to a cluster through its router (addShard).
    AddShard {
        /// The router, host:port.
        router: String,
        /// Shards, host:port each.
        shards: Vec<String>,
    },
}

pub fn run_cluster(args: ClusterArgs) -> Result<()> {
    match args.command {
        ClusterCommand::Up {
            shards,
            dir,
            port,
            etcd,
            key_file,
            storage_engine,
            replicas,
            test_commands,
        } => cluster_up(
            Layout { shards, replicas },
            &dir,
            port,
            etcd,
            key_file.as_deref(),
            storage_engine.as_deref(),
            test_commands,
        ),
        ClusterCommand::Down { dir } => cluster_down(&dir),
        ClusterCommand::AddShard { router, shards } => {
            let conn = TcpConnector::default().connect(&router);
            for s in shards {
                let r = call_ok(&*conn, &doc! {"addShard": s.clone(), "$db": "admin"})
                    .map_err(|e| anyhow!("addShard {s}: {e}"))?;
                println!("{s}: {}", r.get_str("shardAdded").unwrap_or("?"));
            }
            Ok(())
        }
    }
}

/// A free loopback port outside `taken` (the ports `cluster up` gives the router and shards,
/// so that etcd's ephemeral ports cannot land on one of them).
fn free_port_outside(taken: &std::ops::RangeInclusive<u32>) -> Result<u16> {
    for _ in 0..64 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        if !taken.contains(&u32::from(port)) {
            return Ok(port);
        }
    }
    bail!("no free port outside {taken:?} after 64 tries")
}

/// Refuses to start when a port the cluster needs is taken, before anything is spawned: a
/// node that cannot bind would only exit, and the cluster would be half up.
fn check_ports_free(taken: &std::ops::RangeInclusive<u32>) -> Result<()> {
    if *taken.end() > u32::from(u16::MAX) {
        bail!(
            "--port {} leaves no room for the shards' ports after it",
            taken.start()
        );
    }
    for port in taken.clone() {
        if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", port as u16)) {
            bail!("port {port} is not free ({e}): the router takes --port and the shards the ports after it; pick another --port");
        }
    }
    Ok(())
}

fn spawn_detached(program: &Path, args: &[String], log: &Path) -> Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    Ok(child)
}

/// Waits until `log` contains `needle` (the line a node prints when it listens); fails at
/// once, with the log's last lines, if the node exits first.
fn wait_for_log(
    log: &Path,
    needle: &str,
    what: &str,
    child: &mut std::process::Child,
) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(needle) {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            let tail: Vec<&str> = text.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!(
                "{what} exited ({status}) before listening; see {}:\n{}",
                log.display(),
                tail.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("{what} did not start in 60 s; see {}", log.display())
}

/// How many shards `cluster up` starts, and how many members each has.
#[derive(Clone, Copy)]
struct Layout {
    shards: usize,
    replicas: usize,
}

impl Layout {
    fn check(&self) -> Result<()> {
        if self.shards == 0 || self.shards > 64 {
            bail!("--shards must be between 1 and 64");
        }
        if self.replicas == 0 || self.replicas > 7 {
            bail!(
                "--replicas must be between 1 and 7 (a replica set votes with at most 7 members)"
            );
        }
        Ok(())
    }
    /// The ports the router (`port`) and every member take, in order.
    fn ports(&self, port: u16) -> std::ops::RangeInclusive<u32> {
        u32::from(port)..=u32::from(port) + (self.shards * self.replicas) as u32
    }
}

/// One process `cluster up` started and waits for.
struct Started {
    name: String,
    log: PathBuf,
    child: std::process::Child,
}

/// A shard `cluster up` adds: its name, its host string for addShard, and (a replica set's)
/// members' addresses.
struct ShardPlan {
    name: String,
    host: String,
    members: Vec<String>,
}

fn cluster_up(
    layout: Layout,
    dir: &Path,
    port: u16,
    etcd: Option<String>,
    key_file: Option<&Path>,
    storage_engine: Option<&str>,
    test_commands: bool,
) -> Result<()> {
    layout.check()?;
    // Checked before anything starts; each node checks it again.
    let key = key_file
        .map(KeyFile::read)
        .transpose()
        .map_err(|e| anyhow!(e))?;
    let key_args: Vec<String> = match key_file {
        Some(k) => vec![
            "--keyFile".into(),
            k.canonicalize()?.to_string_lossy().into_owned(),
        ],
        None => Vec::new(),
    };
    std::fs::create_dir_all(dir)?;
    let dir = dir.canonicalize()?;
    if dir.join("cluster.json").exists() {
        bail!(
            "{} already has a cluster (flashdoc cluster down --dir {} first)",
            dir.display(),
            dir.display()
        );
    }
    let taken = layout.ports(port);
    check_ports_free(&taken)?;
    let exe = std::env::current_exe()?;
    let mut pids: Vec<(String, u32)> = Vec::new();
    let config_db = match etcd {
        Some(e) => e,
        None => start_etcd(&dir, &taken, &mut pids)?,
    };
    let mut shard_flags = key_args.clone();
    if let Some(engine) = storage_engine {
        shard_flags.extend(["--storageEngine".into(), engine.into()]);
    }
    if test_commands {
        shard_flags.extend(["--setParameter".into(), "enableTestCommands=1".into()]);
    }
    let (plans, mut started) = if layout.replicas == 1 {
        spawn_shards(&exe, &dir, port, layout.shards, &shard_flags, &mut pids)?
    } else {
        let small_cache = storage_engine.is_none_or(|e| e == "wiredTiger");
        spawn_sets(
            &exe,
            &dir,
            port,
            layout,
            &shard_flags,
            small_cache,
            &mut pids,
        )?
    };
    let rlog = dir.join("router.log");
    let mut rargs: Vec<String> = vec![
        "router".into(),
        "--configdb".into(),
        config_db.clone(),
        "--port".into(),
        port.to_string(),
    ];
    rargs.extend(key_args);
    if test_commands {
        rargs.push("--enable-test-commands".into());
    }
    let router = spawn_detached(&exe, &rargs, &rlog)?;
    pids.push(("router".into(), router.id()));
    write_record(&dir, port, &config_db, &pids)?;
    started.push(Started {
        name: "the router".into(),
        log: rlog,
        child: router,
    });
    for s in &mut started {
        wait_for_log(&s.log, "waiting for connections", &s.name, &mut s.child)?;
    }
    let internal = TcpConnector::with_key(key);
    for plan in plans.iter().filter(|p| !p.members.is_empty()) {
        initiate_set(&internal, plan)?;
    }
    // As the internal user when the cluster has a key: no cluster user exists yet.
    let conn = internal.connect(&format!("127.0.0.1:{port}"));
    for plan in &plans {
        call_ok(
            &*conn,
            &doc! {"addShard": plan.host.clone(), "name": plan.name.clone(), "$db": "admin"},
        )
        .map_err(|e| anyhow!("addShard {}: {e}", plan.host))?;
    }
    println!("mongodb://127.0.0.1:{port}/");
    Ok(())
}

/// `cluster.json`: the router's address, the metadata store, and the processes to stop.
fn write_record(dir: &Path, port: u16, config_db: &str, pids: &[(String, u32)]) -> Result<()> {
    let record = serde_json::json!({
        "router": format!("mongodb://127.0.0.1:{port}/"),
        "configDB": config_db,
        "pids": pids.iter().map(|(n, p)| serde_json::json!({"name": n, "pid": p})).collect::<Vec<_>>(),
    });
    std::fs::write(
        dir.join("cluster.json"),
        serde_json::to_string_pretty(&record)?,
    )?;
    Ok(())
}

/// Starts `shards` shard processes on the ports after `port`, each in its own directory
/// under `dir` with `flags` added to `serve --shardsvr` (their pids added to `pids`).
fn spawn_shards(
    exe: &Path,
    dir: &Path,
    port: u16,
    shards: usize,
    flags: &[String],
    pids: &mut Vec<(String, u32)>,
) -> Result<(Vec<ShardPlan>, Vec<Started>)> {
    let mut plans = Vec::new();
    let mut started = Vec::new();
    for i in 0..shards {
        let p = port + 1 + i as u16;
        let name = format!("shard{i}");
        let child = spawn_member(exe, dir, &name, p, flags, pids)?;
        started.push(child);
        plans.push(ShardPlan {
            name,
            host: format!("127.0.0.1:{p}"),
            members: Vec::new(),
        });
    }
    Ok((plans, started))
}

/// Starts one `serve --shardsvr` process named `name` (its directory and log under `dir`).
fn spawn_member(
    exe: &Path,
    dir: &Path,
    name: &str,
    port: u16,
    flags: &[String],
    pids: &mut Vec<(String, u32)>,
) -> Result<Started> {
    let log = dir.join(format!("{name}.log"));
    let data = dir.join(name);
    std::fs::create_dir_all(&data)?;
    let mut args: Vec<String> = vec![
        "serve".into(),
        "--shardsvr".into(),
        "--dbpath".into(),
        data.to_string_lossy().into_owned(),
        "--port".into(),
        port.to_string(),
    ];
    args.extend(flags.iter().cloned());
    let child = spawn_detached(exe, &args, &log)?;
    pids.push((name.to_string(), child.id()));
    Ok(Started {
        name: name.to_string(),
        log,
        child,
    })
}

/// A replica-set member's configuration: a small cache (several members share the
/// machine) and a bounded oplog.
const MEMBER_CONFIG: &str =
    "storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.25\nreplication:\n  oplogSizeMB: 64\n";

/// Starts `layout.replicas` members of each shard's replica set `shardK` on the ports after
/// `port` (members `shardK-M`), each with [`MEMBER_CONFIG`] when `small_cache`.
fn spawn_sets(
    exe: &Path,
    dir: &Path,
    port: u16,
    layout: Layout,
    flags: &[String],
    small_cache: bool,
    pids: &mut Vec<(String, u32)>,
) -> Result<(Vec<ShardPlan>, Vec<Started>)> {
    let mut plans = Vec::new();
    let mut started = Vec::new();
    for i in 0..layout.shards {
        let set = format!("shard{i}");
        let mut members = Vec::new();
        for m in 0..layout.replicas {
            let p = port + 1 + (i * layout.replicas + m) as u16;
            let name = format!("{set}-{m}");
            let mut member_flags = vec!["--replSet".to_string(), set.clone()];
            if small_cache {
                let conf = dir.join(format!("{name}.conf"));
                std::fs::write(&conf, MEMBER_CONFIG)?;
                member_flags.extend(["-f".into(), conf.to_string_lossy().into_owned()]);
            }
            member_flags.extend(flags.iter().cloned());
            started.push(spawn_member(exe, dir, &name, p, &member_flags, pids)?);
            members.push(format!("127.0.0.1:{p}"));
        }
        plans.push(ShardPlan {
            host: format!("{set}/{}", members.join(",")),
            name: set,
            members,
        });
    }
    Ok((plans, started))
}

/// Elections after 2 s without a primary, heartbeats every 400 ms: what the replica-set e2e
/// tests use, which a loaded two-core machine keeps.
fn set_settings() -> bson::Document {
    doc! {"electionTimeoutMillis": 2000, "heartbeatIntervalMillis": 400}
}

/// `replSetInitiate` on the set's first member, then waits (60 s at most) for a primary.
fn initiate_set(conn: &TcpConnector, plan: &ShardPlan) -> Result<()> {
    let members: Vec<bson::Bson> = plan
        .members
        .iter()
        .enumerate()
        .map(|(i, h)| bson::Bson::Document(doc! {"_id": i as i32, "host": h.clone()}))
        .collect();
    let config = doc! {"_id": plan.name.clone(), "members": members, "settings": set_settings()};
    call_ok(
        &*conn.connect(&plan.members[0]),
        &doc! {"replSetInitiate": config, "$db": "admin"},
    )
    .map_err(|e| anyhow!("replSetInitiate of {}: {e}", plan.name))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let primary = plan.members.iter().any(|h| {
            call_ok(&*conn.connect(h), &doc! {"hello": 1, "$db": "admin"})
                .is_ok_and(|r| r.get_bool("isWritablePrimary").unwrap_or(false))
        });
        if primary {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("replica set {} elected no primary in 60 s", plan.name)
}

/// Starts a local etcd for the cluster's metadata in `dir` (its pid added to `pids`) and
/// waits until it answers; returns its `etcd://` URL.
fn start_etcd(
    dir: &Path,
    taken: &std::ops::RangeInclusive<u32>,
    pids: &mut Vec<(String, u32)>,
) -> Result<String> {
    let etcd_bin = which("etcd").ok_or_else(|| anyhow!("etcd is not installed (Debian: apt-get install etcd-server), or pass --etcd etcd://host:port"))?;
    let (client, peer) = (free_port_outside(taken)?, free_port_outside(taken)?);
    let args: Vec<String> = [
        "--name",
        "flashdoc",
        "--data-dir",
        &dir.join("etcd").to_string_lossy(),
        "--listen-client-urls",
        &format!("http://127.0.0.1:{client}"),
        "--advertise-client-urls",
        &format!("http://127.0.0.1:{client}"),
        "--listen-peer-urls",
        &format!("http://127.0.0.1:{peer}"),
        "--initial-advertise-peer-urls",
        &format!("http://127.0.0.1:{peer}"),
        "--initial-cluster",
        &format!("flashdoc=http://127.0.0.1:{peer}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let etcd = spawn_detached(&etcd_bin, &args, &dir.join("etcd.log"))?;
    pids.push(("etcd".into(), etcd.id()));
    let url = format!("etcd://127.0.0.1:{client}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if cluster::store::open(&url).and_then(|s| s.list("/")).is_ok() {
            return Ok(url);
        }
        if Instant::now() > deadline {
            bail!(
                "etcd did not answer in 30 s; see {}",
                dir.join("etcd.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Sends `sig` to `pid` (0: only checks that it exists); true when delivered.
fn signal(pid: i32, sig: i32) -> bool {
    // SAFETY: kill(2) takes two integers and touches no memory of ours; the pids come from
    // the cluster.json this command wrote for the processes it started.
    unsafe { libc::kill(pid, sig) == 0 }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn cluster_down(dir: &Path) -> Result<()> {
    let path = dir.join("cluster.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("no cluster in {} ({})", dir.display(), path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)?;
    let mut pids: Vec<(String, i32)> = v["pids"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| Some((p["name"].as_str()?.to_string(), p["pid"].as_i64()? as i32)))
                .collect()
        })
        .unwrap_or_default();
    // Router first, etcd last.
    pids.reverse();
    for (name, pid) in pids {
        if !signal(pid, libc::SIGTERM) {
            continue;
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline && signal(pid, 0) {
            std::thread::sleep(Duration::from_millis(100));
        }
        if signal(pid, 0) {
            eprintln!("{name} (pid {pid}) did not stop; killing it");
            signal(pid, libc::SIGKILL);
        }
    }
    std::fs::remove_file(&path)?;
    println!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_for_a_node_that_exits_fails_at_once_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("node.log");
        let args = vec!["-c".to_string(), "echo cannot bind; exit 3".to_string()];
        let mut child = spawn_detached(Path::new("/bin/sh"), &args, &log).unwrap();
        // "exited", not "did not start in 60 s": it did not wait out the deadline.
        let err = wait_for_log(&log, "waiting for connections", "shard0", &mut child)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("shard0 exited") && err.contains("cannot bind"),
            "{err}"
        );
    }

    #[test]
    fn ports_the_cluster_needs_are_checked_before_anything_starts() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = u32::from(held.local_addr().unwrap().port());
        let err = check_ports_free(&(port - 1..=port + 1))
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("port {port} is not free")), "{err}");
        let err = check_ports_free(&(65_534..=65_537))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no room"), "{err}");
        let outside = free_port_outside(&(port..=port)).unwrap();
        assert_ne!(u32::from(outside), port);
    }

    #[test]
    fn replica_set_shards_take_consecutive_ports_and_bounded_sizes() {
        let l = Layout {
            shards: 2,
            replicas: 3,
        };
        l.check().unwrap();
        // The router, then shard0's three members, then shard1's.
        assert_eq!(l.ports(30_000), 30_000..=30_006);
        for (shards, replicas, want) in [
            (0, 1, "--shards"),
            (1, 0, "--replicas"),
            (1, 8, "--replicas"),
        ] {
            let e = Layout { shards, replicas }.check().unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        assert!(MEMBER_CONFIG.contains("cacheSizeGB: 0.25"));
        assert_eq!(set_settings().get_i32("electionTimeoutMillis"), Ok(2000));
    }

    #[test]
    fn a_router_takes_a_key_file_and_refuses_other_security_keys() {
        for (yaml, want) in [
            (
                "security:\n  authorization: enabled\n",
                "give the key file instead",
            ),
            (
                "security: {authorization: disabled}\n",
                "give the key file instead",
            ),
            (
                "security: {clusterAuthMode: x509}\n",
                "security.clusterAuthMode: unknown",
            ),
            (
                "security: {keyFile: [1]}\n",
                "security.keyFile: expected a path",
            ),
        ] {
            let e = parse_router_yaml(yaml).err().unwrap().to_string();
            assert!(e.contains(want), "{yaml}: {e}");
        }
        let c = parse_router_yaml("security: {keyFile: /etc/flashdoc/key}\n").unwrap();
        assert_eq!(c.key_file.as_deref(), Some(Path::new("/etc/flashdoc/key")));
        let c = parse_router_yaml("net: {port: 1234}\n").unwrap();
        assert_eq!(c.port, 1234);
    }
}
