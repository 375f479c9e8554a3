//! The `sharding` section of a configuration file (mongod.conf's and mongos.conf's shape):
//!
//! ```yaml
//! sharding:
//!   clusterRole: shardsvr            # a shard (mongod); absent on a router
//!   configDB: etcd://127.0.0.1:2379  # where the metadata lives (a router needs it; a shard
//!                                    # learns it from addShard, and checks it if given)
//! ```
//! The server's own parser does not know this section; the `flashdoc` command takes it out
//! of the file before handing the rest to the server, and parses it here (strictly: an
//! unknown key or value is an error naming it).
use serde_yaml::Value;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShardingConfig {
    pub shardsvr: bool,
    pub config_db: Option<String>,
}

/// Splits a YAML configuration into its `sharding` section and the rest (re-serialized).
pub fn split_sharding(yaml: &str) -> Result<(String, ShardingConfig), String> {
    let mut v: Value = serde_yaml::from_str(yaml).map_err(|e| format!("invalid YAML: {e}"))?;
    let mut out = ShardingConfig::default();
    if let Value::Mapping(m) = &mut v {
        if let Some(s) = m.remove("sharding") {
            let Value::Mapping(s) = s else {
                return Err("sharding: expected a mapping of keys".into());
            };
            for (k, val) in s {
                let k = k.as_str().unwrap_or("").to_string();
                match k.as_str() {
                    "clusterRole" => match val.as_str() {
                        Some("shardsvr") => out.shardsvr = true,
                        Some("configsvr") => {
                            return Err("sharding.clusterRole: configsvr is not a flashdoc role (the metadata lives in etcd: sharding.configDB)".into())
                        }
                        _ => return Err(format!("sharding.clusterRole: expected shardsvr, found {val:?}")),
                    },
                    "configDB" => match val.as_str() {
                        Some(s) if s.starts_with("etcd://") => out.config_db = Some(s.to_string()),
                        _ => return Err(format!("sharding.configDB: expected etcd://host:port[,host:port…], found {val:?}")),
                    },
                    other => return Err(format!("sharding.{other}: unknown key")),
                }
            }
        }
    }
    let rest = if v.is_null() {
        String::new()
    } else {
        serde_yaml::to_string(&v).map_err(|e| e.to_string())?
    };
    Ok((rest, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_section_out() {
        let (rest, s) = split_sharding(
            "net: {port: 1}\nsharding: {clusterRole: shardsvr, configDB: 'etcd://h:1'}\n",
        )
        .unwrap();
        assert!(s.shardsvr);
        assert_eq!(s.config_db.as_deref(), Some("etcd://h:1"));
        assert!(rest.contains("port") && !rest.contains("sharding"));
        assert!(split_sharding("sharding: {bogus: 1}").is_err());
        assert!(split_sharding("sharding: {clusterRole: configsvr}").is_err());
        assert!(split_sharding("sharding: {configDB: 'mongodb://x'}").is_err());
        assert_eq!(
            split_sharding("net: {port: 1}").unwrap().1,
            ShardingConfig::default()
        );
    }
}
