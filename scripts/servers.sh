#!/usr/bin/env bash
# Installs, starts, stops and reports tern's integration-test servers, on 127.0.0.1 only.
#
#   scripts/servers.sh install|start|stop|restart|status|env [redis|cluster|mongodb|cassandra|cassandra-cluster|cassandra-tls|all]...
#   scripts/servers.sh kill-node N      SIGKILL node N (1-3) of cassandra-cluster (`start` restarts it)
#
#   redis      the real redis-server (Debian package), daemonized on 127.0.0.1:6379
#   cluster    a Redis Cluster of 3 masters (same package) on 127.0.0.1:7001-7003
#   mongodb    SecantusDB (MongoDB wire protocol over WiredTiger, Python build in a venv), :27017
#   cassandra  Apache Cassandra 5.0 (Maven's org.apache.cassandra:cassandra-all on OpenJDK 17), one
#              node on 127.0.0.1:9042 (storage 7000, JMX 7199), fresh data at each start
#   cassandra-cluster  three such nodes on 127.0.0.1-3, port 9142 (storage 7100, JMX 7201-7203),
#              keyspace tern_it with replication factor 3
#   cassandra-tls  one such node with client encryption (a test CA made by openssl at each start)
#              and PasswordAuthenticator, 127.0.0.1:9242 (storage 7300, JMX 7299), heap 512m
#   valkey     Valkey 8 (bookworm-backports) with tern's module loaded, 127.0.0.1:6390
#   valkey-cluster  a Valkey 8 cluster of 3 masters with the module, 127.0.0.1:7101-7103
#              (both: docs/module.md; not part of `all`, named explicitly)
#
# Every command is idempotent: `install` skips what is installed, `start` installs first and
# skips servers that already answer their protocol's ping, `stop` only stops processes this
# script started (by pid file). Each phase prints how long it took (on stderr).
# `env` prints `export TERN_IT_*_URL=...` lines for `eval "$(scripts/servers.sh env)"`.
# `status` exits 3 when a requested server does not answer.
#
# Environment: TERN_STATE_DIR (default: <repo>/.tern-servers), TERN_REDIS_PORT (6379),
# TERN_REDIS_CLUSTER_PORT (7001: the first of three),
# TERN_MONGODB_PORT (27017), TERN_CASSANDRA_PORT (9042), TERN_SERVER_TIMEOUT (60 s per start),
# TERN_CASSANDRA_STORAGE_PORT (7000), TERN_CASSANDRA_JMX_PORT (7199), TERN_CASSANDRA_HEAP (1g),
# TERN_CASSANDRA_CLUSTER_PORT (9142), TERN_CASSANDRA_CLUSTER_STORAGE_PORT (7100),
# TERN_CASSANDRA_CLUSTER_JMX_PORT (7201: the first of three), TERN_CASSANDRA_CLUSTER_HEAP (768m),
# TERN_CASSANDRA_TLS_PORT (9242), TERN_CASSANDRA_TLS_STORAGE_PORT (7300),
# TERN_CASSANDRA_TLS_JMX_PORT (7299), TERN_CASSANDRA_TLS_HEAP (512m),
# TERN_CASSANDRA_TIMEOUT (300 s per node start), TERN_CASSANDRA_KEEP_DATA (set: keep a node's data),
# TERN_MONGODB_STORAGE (default: $TERN_STATE_DIR/mongo-data; ':memory:' for a throwaway store),
# TERN_SECANTUS_SPEC (SecantusDB==0.7.0b3), TERN_PYTHON (python3), CARGO_TARGET_DIR,
# TERN_VALKEY_PORT (6390), TERN_VALKEY_CLUSTER_PORT (7101: the first of three),
# TERN_REDIS_MODULE (default: the debug build of tern-redis-module, built by `install`),
# TERN_VALKEY_MODULE_URL (the module's argument, the tern store URL of the data).
set -euo pipefail

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
LOG_TAG=servers
# shellcheck source=scripts/lib/common.sh
source "$REPO/scripts/lib/common.sh"
# shellcheck source=scripts/lib/valkey.sh
source "$REPO/scripts/lib/valkey.sh"

STATE=${TERN_STATE_DIR:-$REPO/.tern-servers}
REDIS_PORT=${TERN_REDIS_PORT:-6379}
CLUSTER_PORT=${TERN_REDIS_CLUSTER_PORT:-7001}
CLUSTER_PORTS=("$CLUSTER_PORT" "$((CLUSTER_PORT + 1))" "$((CLUSTER_PORT + 2))")
MONGODB_PORT=${TERN_MONGODB_PORT:-27017}
TIMEOUT=${TERN_SERVER_TIMEOUT:-60}
MONGODB_STORAGE=${TERN_MONGODB_STORAGE:-$STATE/mongo-data}
SECANTUS_SPEC=${TERN_SECANTUS_SPEC:-SecantusDB==0.7.0b3}
PYTHON=${TERN_PYTHON:-python3}
VENV=$STATE/venv
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
}

# probe KIND PORT: protocol-level ping on 127.0.0.1 (scripts/lib/probe.py).
probe() { "$PYTHON" "$REPO/scripts/lib/probe.py" "$@"; }

# refuse_if_running NAME PIDFILE PATTERN: fails when PIDFILE names a live server that did not
# answer the ping (hung, or started with another port): its pid file must not be overwritten.
refuse_if_running() {
    if pid_alive "$2" "$3"; then
        die "$1: pid $(<"$2") from $2 is running but does not answer on the configured port; stop it first (scripts/servers.sh stop $1)"
    fi
}

# start_background NAME PIDFILE LOGFILE COMMAND...: runs COMMAND detached (own session, no
# stdin, output appended to LOGFILE) and records its pid.
start_background() {
    local name=$1 pidfile=$2 logfile=$3
    shift 3
    refuse_if_running "$name" "$pidfile" "$(basename -- "$1")"
    printf '\n--- %s: starting %s at %s\n' "$name" "$*" "$(date -Is)" >>"$logfile"
    # Without job control the child is no process-group leader, so setsid execs in place
    # and $! is the server's own pid.
    setsid nohup "$@" >>"$logfile" 2>&1 </dev/null &
    echo "$!" >"$pidfile"
}

# --- redis -----------------------------------------------------------------------------------

redis_install() {
    if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
        log "redis: $(redis-server --version | cut -d' ' -f1-3) already installed"
        return 0
    fi
    apt_install redis-server
    # Debian's postinst may have started a system redis through its init script; it would
    # hold the port we want. It is not ours to keep: stop it the way it was started.
    if [[ -x /etc/init.d/redis-server ]] && /etc/init.d/redis-server status >/dev/null 2>&1; then
        log "redis: stopping the redis-server the package started"
        /etc/init.d/redis-server stop >&2 || true
    fi
}

redis_start() {
    if probe redis "$REDIS_PORT" 2>/dev/null; then
        log "redis: already answering on 127.0.0.1:$REDIS_PORT"
        return 0
    fi
    mkdir -p "$STATE/redis"
    refuse_if_running redis "$STATE/redis.pid" redis-server
    rm -f "$STATE/redis.pid"
    # Early errors (before redis opens its log file) land in the same log; stdio never stays
    # attached to the caller's pipes. Redis only appends to the file: no read/write race.
    # shellcheck disable=SC2094
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes --save '' \
        --appendonly no --dir "$STATE/redis" --pidfile "$STATE/redis.pid" \
        --logfile "$STATE/redis.log" </dev/null >>"$STATE/redis.log" 2>&1
    wait_ready redis "$STATE/redis.log" "$STATE/redis.pid" redis-server "$TIMEOUT" \
        probe redis "$REDIS_PORT"
}

redis_stop() { stop_pidfile redis "$STATE/redis.pid" redis-server; }

# --- cluster (Redis Cluster, 3 masters) ---------------------------------------------------------

cluster_install() { redis_install; }

# slots_served CLI PORT: the cluster answers on PORT and every slot is served.
slots_served() {
    "$1" -h 127.0.0.1 -p "$2" cluster info 2>/dev/null | grep -q '^cluster_state:ok'
}

# cluster_up NAME CLI NODE PORT...: a cluster of masters (Redis or Valkey): NODE PORT DIR starts
# each node that does not answer yet (DIR is $STATE/NAME/PORT), CLI creates the cluster, and it is
# up once every slot is served.
cluster_up() {
    local name=$1 cli=$2 node=$3 port nodes=()
    shift 3
    for port in "$@"; do
        nodes+=("127.0.0.1:$port")
        "$node" "$port" "$STATE/$name/$port"
    done
    "$cli" --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >&2
    local waited=0
    until slots_served "$cli" "$1"; do
        ((waited++ < TIMEOUT * 10)) || die "$name: slots not served after ${TIMEOUT}s"
        sleep 0.1
    done
}

# cluster_ok: the cluster answers on its first port and every slot is served.
cluster_ok() { slots_served redis-cli "$CLUSTER_PORT"; }

# cluster_node PORT DIR: a fresh Redis Cluster node on PORT, unless one answers there.
cluster_node() {
    local port=$1 dir=$2
    mkdir -p "$dir"
    if probe redis "$port" 2>/dev/null; then
        return 0
    fi
    refuse_if_running "cluster:$port" "$dir/redis.pid" redis-server
    # A fresh node each time: a node file of an earlier cluster would make it
    # refuse to join the new one.
    rm -f "$dir/redis.pid" "$dir/nodes.conf"
    # shellcheck disable=SC2094
    redis-server --bind 127.0.0.1 --port "$port" --daemonize yes --save '' \
        --appendonly no --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
        --cluster-enabled yes --cluster-config-file "$dir/nodes.conf" \
        --cluster-node-timeout 5000 </dev/null >>"$dir/redis.log" 2>&1
    wait_ready "cluster:$port" "$dir/redis.log" "$dir/redis.pid" redis-server "$TIMEOUT" \
        probe redis "$port"
}

cluster_start() {
    if cluster_ok; then
        log "cluster: already answering on 127.0.0.1:${CLUSTER_PORTS[0]}-${CLUSTER_PORTS[2]}"
        return 0
    fi
    cluster_up cluster redis-cli cluster_node "${CLUSTER_PORTS[@]}"
}

cluster_stop() {
    local port
    for port in "${CLUSTER_PORTS[@]}"; do
        stop_pidfile "cluster:$port" "$STATE/cluster/$port/redis.pid" redis-server
    done
}

# --- mongodb (SecantusDB) -------------------------------------------------------------------------

mongodb_install() {
    if [[ -x $VENV/bin/secantusd-py && $(cat "$VENV/.tern-installed" 2>/dev/null) == "$SECANTUS_SPEC" ]]; then
        log "mongodb: $SECANTUS_SPEC already installed in $VENV"
        return 0
    fi
    if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
        apt_install python3-venv
    fi
    mkdir -p "$STATE"
    if [[ ! -x $VENV/bin/python ]]; then
        "$PYTHON" -m venv "$VENV"
    fi
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "$SECANTUS_SPEC" >&2
    [[ -x $VENV/bin/secantusd-py ]] || die "mongodb: $SECANTUS_SPEC installed no secantusd-py"
    printf '%s\n' "$SECANTUS_SPEC" >"$VENV/.tern-installed"
}

mongodb_start() {
    if probe mongodb "$MONGODB_PORT" 2>/dev/null; then
        log "mongodb: already answering on 127.0.0.1:$MONGODB_PORT"
        return 0
    fi
    if [[ $MONGODB_STORAGE != ":memory:" ]]; then
        mkdir -p "$MONGODB_STORAGE"
    fi
    start_background mongodb "$STATE/mongodb.pid" "$STATE/mongodb.log" \
        "$VENV/bin/secantusd-py" --host 127.0.0.1 --port "$MONGODB_PORT" \
        --storage-path "$MONGODB_STORAGE"
    wait_ready mongodb "$STATE/mongodb.log" "$STATE/mongodb.pid" secantusd-py "$TIMEOUT" \
        probe mongodb "$MONGODB_PORT"
}

mongodb_stop() { stop_pidfile mongodb "$STATE/mongodb.pid" secantusd-py; }

# --- cassandra, cassandra-cluster (Apache Cassandra) -------------------------------------------

# shellcheck source=scripts/lib/cassandra.sh
source "$REPO/scripts/lib/cassandra.sh"

# --- valkey (Valkey 8 with tern's module) -----------------------------------------------------

VALKEY_PORT=${TERN_VALKEY_PORT:-6390}
VALKEY_CLUSTER_PORT=${TERN_VALKEY_CLUSTER_PORT:-7101}
VALKEY_CLUSTER_PORTS=("$VALKEY_CLUSTER_PORT" "$((VALKEY_CLUSTER_PORT + 1))" "$((VALKEY_CLUSTER_PORT + 2))")
VALKEY_MODULE=${TERN_REDIS_MODULE:-$TARGET_DIR/debug/libtern_redis_module.so}
VALKEY_MODULE_URL=${TERN_VALKEY_MODULE_URL:-redis://127.0.0.1/0?prefix=vm&id_tag=1&string=oldc,c&set=oldtags,tags&list=oldlog,log&zset=oldsc,sc&json=doc}

valkey_install() {
    valkey_install_packages
    # The module, built as the tests build it (cargo decides what is stale), unless
    # TERN_REDIS_MODULE names one built elsewhere (a worktree's, a release build).
    if [[ -z ${TERN_REDIS_MODULE:-} ]]; then
        (cd "$REPO" && cargo build --quiet --locked -p tern-redis-module) >&2
    fi
    [[ -f $VALKEY_MODULE ]] || die "valkey: the module $VALKEY_MODULE was not built"
}

valkey_ping() { valkey-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null | grep -q PONG; }

# valkey_node PORT DIR [ARGS...]: one daemonized Valkey with the module loaded.
valkey_node() {
    local port=$1 dir=$2
    shift 2
    mkdir -p "$dir"
    refuse_if_running "valkey:$port" "$dir/valkey.pid" valkey-server
    rm -f "$dir/valkey.pid"
    # shellcheck disable=SC2094
    valkey-server --bind 127.0.0.1 --port "$port" --daemonize yes --save '' --appendonly no \
        --dir "$dir" --pidfile "$dir/valkey.pid" --logfile "$dir/valkey.log" \
        --enable-debug-command local "$@" \
        --loadmodule "$VALKEY_MODULE" "$VALKEY_MODULE_URL" </dev/null >>"$dir/valkey.log" 2>&1
    wait_ready "valkey:$port" "$dir/valkey.log" "$dir/valkey.pid" valkey-server "$TIMEOUT" \
        valkey_ping "$port"
}

valkey_start() {
    if valkey_ping "$VALKEY_PORT"; then
        log "valkey: already answering on 127.0.0.1:$VALKEY_PORT"
        return 0
    fi
    valkey_node "$VALKEY_PORT" "$STATE/valkey"
}

valkey_stop() { stop_pidfile valkey "$STATE/valkey/valkey.pid" valkey-server; }

valkey_cluster_install() { valkey_install; }

valkey_cluster_ok() { slots_served valkey-cli "$VALKEY_CLUSTER_PORT"; }

# valkey_cluster_node PORT DIR: a fresh Valkey cluster node with the module, unless one answers.
valkey_cluster_node() {
    local port=$1 dir=$2
    valkey_ping "$port" && return 0
    mkdir -p "$dir"
    rm -f "$dir/nodes.conf"
    valkey_node "$port" "$dir" --cluster-enabled yes --cluster-config-file "$dir/nodes.conf" \
        --cluster-node-timeout 5000
}

valkey_cluster_start() {
    if valkey_cluster_ok; then
        log "valkey-cluster: already answering on 127.0.0.1:${VALKEY_CLUSTER_PORTS[0]}-${VALKEY_CLUSTER_PORTS[2]}"
        return 0
    fi
    local port
    cluster_up valkey-cluster valkey-cli valkey_cluster_node "${VALKEY_CLUSTER_PORTS[@]}"
    # A fresh cluster holds no state document: tell every master (a master without the state
    # key refuses the namespace until it has a spec; docs/module.md, TERN.LOADSPEC).
    for port in "${VALKEY_CLUSTER_PORTS[@]}"; do
        valkey-cli -h 127.0.0.1 -p "$port" TERN.LOADSPEC '' '' >/dev/null
    done
}

valkey_cluster_stop() {
    local port
    for port in "${VALKEY_CLUSTER_PORTS[@]}"; do
        stop_pidfile "valkey-cluster:$port" "$STATE/valkey-cluster/$port/valkey.pid" valkey-server
    done
}

# --- status / env ----------------------------------------------------------------------------

status_of() {
    local svc=$1 kind port pidfile pid=""
    if [[ $svc == cassandra-cluster ]]; then
        cassandra_cluster_status
        return
    fi
    if [[ $svc == cassandra-tls ]]; then
        cassandra_tls_status
        return
    fi
    if [[ $svc == valkey || $svc == valkey-cluster ]]; then
        local p=$VALKEY_PORT ok=valkey_ping
        [[ $svc == valkey-cluster ]] && p=$VALKEY_CLUSTER_PORT ok=valkey_cluster_ok
        if $ok "$p"; then
            printf '%-9s up    127.0.0.1:%s\n' "$svc" "$p"
        else
            printf '%-9s down  127.0.0.1:%s\n' "$svc" "$p"
            return 3
        fi
        return 0
    fi
    if [[ $svc == cluster ]]; then
        if cluster_ok; then
            printf '%-9s up    127.0.0.1:%s-%s\n' "$svc" "${CLUSTER_PORTS[0]}" "${CLUSTER_PORTS[2]}"
        else
            printf '%-9s down  127.0.0.1:%s-%s\n' "$svc" "${CLUSTER_PORTS[0]}" "${CLUSTER_PORTS[2]}"
            return 3
        fi
        return 0
    fi
    case $svc in
        redis) kind=redis port=$REDIS_PORT ;;
        mongodb) kind=mongodb port=$MONGODB_PORT ;;
        cassandra) kind=cql port=$CASSANDRA_PORT ;;
    esac
    pidfile=$STATE/$svc.pid
    [[ $svc != cassandra ]] || pidfile=$STATE/cassandra/node.pid
    if [[ -s $pidfile ]]; then
        pid=" (pid file: $(<"$pidfile"))"
    fi
    if probe "$kind" "$port" 2>/dev/null; then
        printf '%-9s up    127.0.0.1:%s%s\n' "$svc" "$port" "$pid"
    else
        printf '%-9s down  127.0.0.1:%s%s\n' "$svc" "$port" "$pid"
        return 3
    fi
}

print_env() {
    local svc
    for svc in "$@"; do
        case $svc in
            redis) printf 'export TERN_IT_REDIS_URL=%q\n' "redis://127.0.0.1:$REDIS_PORT" ;;
            cluster)
                printf 'export TERN_IT_REDIS_CLUSTER_URL=%q\n' \
                    "redis://127.0.0.1:$CLUSTER_PORT/?cluster=1" ;;
            mongodb) printf 'export TERN_IT_MONGODB_URL=%q\n' "mongodb://127.0.0.1:$MONGODB_PORT" ;;
            cassandra)
                printf 'export TERN_IT_CASSANDRA_URL=%q\n' \
                    "cassandra://127.0.0.1:$CASSANDRA_PORT/tern_it" ;;
            valkey)
                printf 'export TERN_IT_VALKEY_URL=%q\n' \
                    "${VALKEY_MODULE_URL/127.0.0.1\//127.0.0.1:$VALKEY_PORT/}" ;;
            valkey-cluster)
                printf 'export TERN_IT_VALKEY_CLUSTER_URL=%q\n' \
                    "${VALKEY_MODULE_URL/127.0.0.1\//127.0.0.1:$VALKEY_CLUSTER_PORT/}&cluster=1" ;;
            cassandra-cluster)
                printf 'export TERN_IT_CASSANDRA_CLUSTER_URL=%q\n' "$(cassandra_cluster_url)" ;;
            cassandra-tls)
                printf 'export TERN_IT_CASSANDRA_TLS_URL=%q\n' "$(cassandra_tls_url)" ;;
        esac
    done
}

# run_steps "STEP..." SERVICE...: for each service in turn, each step as a timed phase (the
# function SERVICE_STEP, e.g. redis_install).
run_steps() {
    local steps=$1 svc step
    shift
    for svc in "$@"; do
        for step in $steps; do phase "$svc $step" "${svc//-/_}_${step}"; done
    done
}

# --- main ------------------------------------------------------------------------------------

main() {
    local cmd=${1:-} services=() svc rc=0 start
    [[ -n $cmd ]] || usage
    shift
    if [[ $cmd == kill-node ]]; then
        cassandra_cluster_kill "${1:-}"
        return 0
    fi
    for svc in "${@:-all}"; do
        case $svc in
            all) services+=(redis cluster mongodb cassandra cassandra-cluster cassandra-tls) ;;
            redis | cluster | mongodb | cassandra | cassandra-cluster | cassandra-tls | valkey | valkey-cluster) services+=("$svc") ;;
            *) log "unknown server: $svc" && usage ;;
        esac
    done
    start=$(now_ns)
    case $cmd in
        install) run_steps "install" "${services[@]}" ;;
        start) run_steps "install start" "${services[@]}" ;;
        stop) run_steps "stop" "${services[@]}" ;;
        restart) run_steps "stop install start" "${services[@]}" ;;
        status)
            for svc in "${services[@]}"; do status_of "$svc" || rc=$?; done
            return "$rc" ;;
        env)
            print_env "${services[@]}"
            return 0 ;;
        -h | --help | help) usage ;;
        *) log "unknown command: $cmd" && usage ;;
    esac
    log "$cmd ${services[*]}: total $(seconds_since "$start")s"
}

main "$@"
