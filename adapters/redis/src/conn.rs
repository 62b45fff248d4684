//! The connection: one server (the driver's connection manager) or a Redis
//! Cluster (the driver's cluster client, which follows MOVED and ASK).

use crate::topology::Node;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{
    Cmd, ErrorKind, FromRedisValue, Pipeline, RedisError, RedisFuture, RedisResult, Script, Value,
};

/// A connection to one server or to a cluster.
#[derive(Clone)]
pub(crate) enum Conn {
    /// One server.
    Single(ConnectionManager),
    /// A Redis Cluster, and which master serves each slot (for commands of
    /// many keys: [`crate::per_master`]).
    Cluster(ClusterConnection, crate::per_master::Slots),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c, _) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c, _) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c, _) => c.get_db(),
        }
    }
}

impl Conn {
    /// Runs `cmd` on `node` (a cluster master), or on the server.
    pub(crate) async fn on_node<T: FromRedisValue>(
        &mut self,
        node: Option<&Node>,
        cmd: Cmd,
    ) -> RedisResult<T> {
        match (self, node) {
            (Conn::Cluster(c, _), Some(node)) => {
                let value = c
                    .route_command(
                        cmd,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                            host: node.host.clone(),
                            port: node.port,
                        }),
                    )
                    .await?
                    // A server's error reply (`NOSCRIPT`...) as an error of its kind,
                    // not as a value that fails to convert.
                    .extract_error()?;
                redis::from_redis_value(value).map_err(Into::into)
            }
            (conn, _) => cmd.query_async(conn).await,
        }
    }

    /// Runs `cmds`, each routed by its own key: one pipeline on a single
    /// server; concurrent requests on a cluster, whose pipelines must stay in
    /// one slot (the cluster client multiplexes them per node).
    pub(crate) async fn many<T: FromRedisValue>(&mut self, cmds: Vec<Cmd>) -> RedisResult<Vec<T>> {
        if cmds.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Conn::Single(c) => {
                let mut pipe = redis::pipe();
                for cmd in cmds {
                    pipe.add_command(cmd);
                }
                pipe.query_async(c).await
            }
            Conn::Cluster(c, slots) => crate::per_master::each(c, slots, &cmds).await,
        }
    }

    /// Runs `cmd` (an `EVALSHA` of `script`) as [`Conn::on_node`] does; where
    /// the script is not loaded there (`NOSCRIPT`), loads it (on every master)
    /// and runs it again, once.
    pub(crate) async fn on_node_loading<T: FromRedisValue>(
        &mut self,
        node: Option<&Node>,
        script: &Script,
        cmd: Cmd,
    ) -> RedisResult<T> {
        match self.on_node(node, cmd.clone()).await {
            Err(e) if no_script(&e) => {
                script.load_async(self).await?;
                self.on_node(node, cmd).await
            }
            other => other,
        }
    }

    /// Runs `cmds` as [`Conn::many`] does; where `script` is not loaded
    /// (`NOSCRIPT`: a server or master restarted, failed over, or never ran
    /// it), loads it (on every master) and runs them again, once. The
    /// commands are built once and sent by reference both times.
    pub(crate) async fn many_loading<T: FromRedisValue>(
        &mut self,
        script: &Script,
        cmds: Vec<Cmd>,
    ) -> RedisResult<Vec<T>> {
        if cmds.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Conn::Single(c) => {
                let mut pipe = redis::pipe();
                for cmd in cmds {
                    pipe.add_command(cmd);
                }
                match pipe.query_async(c).await {
                    Err(e) if no_script(&e) => {
                        script.load_async(c).await?;
                        pipe.query_async(c).await
                    }
                    other => other,
                }
            }
            Conn::Cluster(c, slots) => match crate::per_master::each(c, slots, &cmds).await {
                Err(e) if no_script(&e) => {
                    script.load_async(c).await?;
                    crate::per_master::each(c, slots, &cmds).await
                }
                other => other,
            },
        }
    }

    /// The masters of the cluster, in address order (empty for one server),
    /// from `CLUSTER NODES`.
    pub(crate) async fn masters(&mut self) -> RedisResult<Vec<Node>> {
        if let Conn::Single(_) = self {
            return Ok(Vec::new());
        }
        let text: String = redis::cmd("CLUSTER").arg("NODES").query_async(self).await?;
        let mut nodes: Vec<Node> = text
            .lines()
            .filter_map(|line| Node::master_in(line).map(|(node, _)| node))
            .collect();
        nodes.sort();
        nodes.dedup();
        Ok(nodes)
    }
}

/// Whether `e` is the server's `NOSCRIPT`: the script is not in its cache.
fn no_script(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(redis::ServerErrorKind::NoScript)
}
