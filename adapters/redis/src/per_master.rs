//! Many commands on a Redis Cluster as one pipeline per master.
//!
//! The cluster client sends concurrent single requests on each master's
//! multiplexed connection; 100 of them (a page's reads, a batch's write
//! scripts, one per key's slot) cost about two round trips, where a pipeline
//! of 100 costs one (docs/benchmarks.md, "Where a worker's batch goes"). So
//! commands of many keys are grouped by the master that serves each key's
//! slot, as `CLUSTER NODES` last said ([`Slots`]), and each group is sent as
//! one pipeline to its master. A reply that is a redirection (`MOVED`,
//! `ASK`, `TRYAGAIN`, `CLUSTERDOWN`: the slot moved or is moving), and every
//! command of a pipeline that failed as a whole (a lost connection), is sent
//! again alone through the cluster client, which follows redirections and
//! reconnects, and the slot map is read again at the next call. A command run
//! twice that way is a compare-and-set, a put of the same value or a read:
//! the second run reports what the store holds.

use std::sync::{Arc, RwLock};

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::SingleNodeRoutingInfo;
use redis::{Cmd, FromRedisValue, RedisResult, Value};

use crate::topology::{Node, SLOTS, key_slot, parse_slot_map};

/// Which master serves each slot, shared by the clones of one connection;
/// empty until read, and again after a redirection.
#[derive(Clone, Default)]
pub(crate) struct Slots(Arc<RwLock<Option<Arc<Owners>>>>);

/// The masters, and for each slot the index of its master plus one (0: no
/// master serves it).
struct Owners {
    nodes: Vec<Node>,
    of_slot: Vec<u16>,
}

impl Owners {
    fn from_cluster_nodes(text: &str) -> Owners {
        let map = parse_slot_map(text);
        let mut of_slot = vec![0u16; usize::from(SLOTS)];
        let mut nodes = Vec::with_capacity(map.len());
        for (i, (node, ranges)) in map.into_iter().enumerate() {
            let owner = u16::try_from(i + 1).unwrap_or(0);
            for (lo, hi) in ranges {
                let hi = usize::from(hi).min(usize::from(SLOTS) - 1);
                if let Some(range) = of_slot.get_mut(usize::from(lo)..=hi) {
                    range.fill(owner);
                }
            }
            nodes.push(node);
        }
        Owners { nodes, of_slot }
    }

    /// The index of the master serving `cmd`'s key.
    fn of(&self, cmd: &Cmd) -> Option<usize> {
        let slot = usize::from(key_slot(first_key(cmd)?));
        let owner = *self.of_slot.get(slot)?;
        (owner > 0).then(|| usize::from(owner) - 1)
    }
}

impl Slots {
    fn get(&self) -> Option<Arc<Owners>> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn set(&self, owners: Option<Arc<Owners>>) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = owners;
    }

    /// The slot map, read from the cluster when there is none.
    async fn owners(&self, c: &ClusterConnection) -> Option<Arc<Owners>> {
        if let Some(owners) = self.get() {
            return Some(owners);
        }
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut c.clone())
            .await
            .ok()?;
        let owners = Arc::new(Owners::from_cluster_nodes(&text));
        self.set(Some(Arc::clone(&owners)));
        Some(owners)
    }
}

/// The key a command is routed by: the first key of `EVALSHA`/`EVAL`/`FCALL`
/// (after the script and the key count), else the first argument.
fn first_key(cmd: &Cmd) -> Option<&[u8]> {
    let mut args = cmd.args_iter().filter_map(|a| match a {
        redis::Arg::Simple(bytes) => Some(bytes),
        _ => None,
    });
    let name = args.next()?;
    let scripted = [
        &b"EVALSHA"[..],
        b"EVAL",
        b"FCALL",
        b"EVALSHA_RO",
        b"EVAL_RO",
        b"FCALL_RO",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n));
    if scripted {
        let _script = args.next()?;
        let keys = args.next()?;
        if keys == b"0" {
            return None;
        }
    }
    args.next()
}

/// Each of `cmds` on the cluster, answered in order: one pipeline per master
/// (see the module's documentation); a command whose key's master is not
/// known is sent alone through the cluster client.
///
/// # Errors
/// The first command's error, as the cluster client reports it (a server's
/// error reply as an error of its kind).
pub(crate) async fn each<T: FromRedisValue>(
    c: &ClusterConnection,
    slots: &Slots,
    cmds: &[Cmd],
) -> RedisResult<Vec<T>> {
    let mut replies: Vec<Option<Value>> = vec![None; cmds.len()];
    let mut alone: Vec<usize> = Vec::new();
    match slots.owners(c).await {
        Some(owners) => {
            let mut groups: Vec<Vec<usize>> = vec![Vec::new(); owners.nodes.len()];
            for (i, cmd) in cmds.iter().enumerate() {
                match owners.of(cmd) {
                    Some(n) => groups[n].push(i),
                    None => alone.push(i),
                }
            }
            let sent = futures::future::join_all(
                groups
                    .iter()
                    .zip(&owners.nodes)
                    .filter(|(group, _)| !group.is_empty())
                    .map(|(group, node)| pipeline(c, node, group, cmds)),
            )
            .await;
            for (group, answer) in sent {
                match answer {
                    Ok(values) if values.len() == group.len() => {
                        for (&i, v) in group.iter().zip(values) {
                            if redirected(&v) {
                                slots.set(None);
                                alone.push(i);
                            } else {
                                replies[i] = Some(v);
                            }
                        }
                    }
                    _ => {
                        slots.set(None);
                        alone.extend_from_slice(group);
                    }
                }
            }
        }
        None => alone.extend(0..cmds.len()),
    }
    let again = futures::future::try_join_all(alone.iter().map(|&i| {
        let mut c = c.clone();
        async move {
            let v: Value = cmds[i].query_async(&mut c).await?;
            Ok::<_, redis::RedisError>((i, v))
        }
    }))
    .await?;
    for (i, v) in again {
        replies[i] = Some(v);
    }
    replies
        .into_iter()
        .map(|v| {
            redis::from_redis_value(v.unwrap_or(Value::Nil).extract_error()?).map_err(Into::into)
        })
        .collect()
}

/// The commands `group` of `cmds` as one pipeline to `node`.
async fn pipeline<'g>(
    c: &ClusterConnection,
    node: &Node,
    group: &'g [usize],
    cmds: &[Cmd],
) -> (&'g [usize], RedisResult<Vec<Value>>) {
    let mut pipe = redis::pipe();
    for &i in group {
        pipe.add_command(cmds[i].clone());
    }
    let route = SingleNodeRoutingInfo::ByAddress {
        host: node.host.clone(),
        port: node.port,
    };
    let answer = c.clone().route_pipeline(pipe, 0, group.len(), route).await;
    (group, answer)
}

/// Whether a reply says the slot is served elsewhere, or not served now (the
/// errors the cluster client itself follows: `MOVED`, `ASK`, `TRYAGAIN`,
/// `CLUSTERDOWN`).
fn redirected(v: &Value) -> bool {
    use redis::ServerErrorKind::{Ask, ClusterDown, Moved, TryAgain};
    matches!(v, Value::ServerError(e) if matches!(e.kind(), Some(Moved | Ask | TryAgain | ClusterDown)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cluster_redirections_count_as_redirected() {
        let reply =
            |text: &str| redis::parse_redis_value(format!("-{text}\r\n").as_bytes()).unwrap();
        assert!(redirected(&reply("MOVED 3999 127.0.0.1:6381")));
        assert!(redirected(&reply("ASK 3999 127.0.0.1:6381")));
        assert!(redirected(&reply(
            "TRYAGAIN Multiple keys request during rehashing of slot"
        )));
        assert!(redirected(&reply("CLUSTERDOWN The cluster is down")));
        assert!(!redirected(&reply("NOSCRIPT No matching script")));
        assert!(!redirected(&reply(
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        )));
        assert!(!redirected(&Value::Nil));
    }

    #[test]
    fn commands_are_routed_by_their_first_key() {
        let mut get = redis::cmd("HGETALL");
        get.arg("blog:post:1");
        assert_eq!(first_key(&get), Some(&b"blog:post:1"[..]));
        let mut script = redis::cmd("EVALSHA");
        script.arg("abc").arg(2).arg("k1").arg("k2").arg("x");
        assert_eq!(first_key(&script), Some(&b"k1"[..]));
        let mut keyless = redis::cmd("evalsha");
        keyless.arg("abc").arg(0).arg("x");
        assert_eq!(first_key(&keyless), None);
    }

    #[test]
    fn each_slot_has_the_master_cluster_nodes_names() {
        let text = "\
a 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
b 127.0.0.1:7002@17002 master - 0 0 2 connected 5461-10922 [10923->-c]
c 127.0.0.1:7003@17003 master - 0 0 3 connected 10923-16383
d 127.0.0.1:7004@17004 slave a 0 0 1 connected
";
        let owners = Owners::from_cluster_nodes(text);
        let mut cmd = redis::cmd("GET");
        cmd.arg("foo"); // slot 12182
        let n = owners.of(&cmd).unwrap();
        assert_eq!(owners.nodes[n].port, 7003);
        let mut cmd = redis::cmd("GET");
        cmd.arg("123456789"); // slot 0x31C3 = 12739 % 16384
        assert_eq!(owners.nodes[owners.of(&cmd).unwrap()].port, 7003);
        let unserved =
            Owners::from_cluster_nodes("a 127.0.0.1:7001@17001 master - 0 0 1 connected 0-100\n");
        let mut cmd = redis::cmd("GET");
        cmd.arg("foo");
        assert_eq!(unserved.of(&cmd), None, "slot 12182 has no master there");
    }

    /// `name <key>` for each of `keys`.
    fn per_key(name: &str, keys: &[String]) -> Vec<Cmd> {
        keys.iter()
            .map(|k| {
                let mut cmd = redis::cmd(name);
                cmd.arg(k);
                cmd
            })
            .collect()
    }

    /// The cluster at `TERN_IT_REDIS_CLUSTER_URL` (its seed, without options),
    /// or `None` (said on stderr).
    async fn cluster(test: &str) -> Option<ClusterConnection> {
        let Some(url) = std::env::var("TERN_IT_REDIS_CLUSTER_URL")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            eprintln!("{test}: skipped: TERN_IT_REDIS_CLUSTER_URL is not set");
            return None;
        };
        let seed = url.split('?').next().unwrap_or(&url).to_owned();
        let client = redis::cluster::ClusterClient::new(vec![seed]).unwrap();
        Some(client.get_async_connection().await.unwrap())
    }

    #[tokio::test]
    async fn a_stale_slot_map_is_mended_by_the_redirections_and_nothing_is_lost() {
        let Some(c) = cluster("a_stale_slot_map_is_mended_by_the_redirections").await else {
            return;
        };
        let prefix = format!("tern_per_master_{}", std::process::id());
        let keys: Vec<String> = (0..60).map(|i| format!("{prefix}:{i}")).collect();
        let sets: Vec<Cmd> = keys
            .iter()
            .map(|k| {
                let mut cmd = redis::cmd("SET");
                cmd.arg(k).arg(format!("v-{k}"));
                cmd
            })
            .collect();
        // A map that says the first master serves every slot: most keys'
        // commands reach a master that answers MOVED.
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut c.clone())
            .await
            .unwrap();
        let first = Owners::from_cluster_nodes(&text).nodes.remove(0);
        let stale = Slots::default();
        stale.set(Some(Arc::new(Owners {
            nodes: vec![first],
            of_slot: vec![1; usize::from(SLOTS)],
        })));
        let ok: Vec<String> = each(&c, &stale, &sets).await.unwrap();
        assert_eq!(ok, vec!["OK".to_owned(); keys.len()]);
        assert!(stale.get().is_none(), "a redirection drops the stale map");
        // Read back through a fresh map (read from the cluster), in order.
        let gets = per_key("GET", &keys);
        let fresh = Slots::default();
        let got: Vec<Option<String>> = each(&c, &fresh, &gets).await.unwrap();
        let want: Vec<Option<String>> = keys.iter().map(|k| Some(format!("v-{k}"))).collect();
        assert_eq!(got, want);
        assert!(fresh.get().is_some(), "the map read from the cluster stays");
        // A server's error reply is the command's error, of its kind.
        let mut wrong = redis::cmd("HGETALL");
        wrong.arg(&keys[0]);
        let e = each::<Value>(&c, &fresh, &[wrong]).await.unwrap_err();
        assert!(e.to_string().contains("WRONGTYPE"), "{e}");
        let _: Vec<i64> = each(&c, &fresh, &per_key("DEL", &keys)).await.unwrap();
    }
}
