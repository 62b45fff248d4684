# shellcheck shell=bash
# The real Apache Cassandra of tern's tests (sourced by scripts/servers.sh, which sets REPO,
# STATE, PYTHON, TIMEOUT and defines probe, start_background, wait_ready, stop_pidfile).
#
#   cassandra          one node on 127.0.0.1 (the battery's server)
#   cassandra-cluster  three nodes on 127.0.0.1, 127.0.0.2, 127.0.0.3 (the fault tests), every
#                      node a seed, keyspace tern_it with replication factor 3
#   cassandra-tls      one node on 127.0.0.1:9242 with client encryption only (TLS, a test CA)
#                      and PasswordAuthenticator (superuser cassandra/cassandra): the Cassandra
#                      TLS and credentials tests (adapters/cassandra/tests/tls.rs)
#
# install: Maven resolves org.apache.cassandra:cassandra-all (scripts/cassandra/pom.xml) into
# $STATE/cassandra/lib, once per pom (Maven's own cache, ~/.m2, makes a second resolution
# fast). start: `java ... org.apache.cassandra.service.CassandraDaemon` on a cassandra.yaml
# written here, detached, until a CQL query answers (scripts/lib/probe.py cql).

CASSANDRA_PORT=${TERN_CASSANDRA_PORT:-9042}
CASSANDRA_STORAGE_PORT=${TERN_CASSANDRA_STORAGE_PORT:-7000}
CASSANDRA_JMX_PORT=${TERN_CASSANDRA_JMX_PORT:-7199}
CASSANDRA_HEAP=${TERN_CASSANDRA_HEAP:-1g}
CCLUSTER_PORT=${TERN_CASSANDRA_CLUSTER_PORT:-9142}
CCLUSTER_STORAGE_PORT=${TERN_CASSANDRA_CLUSTER_STORAGE_PORT:-7100}
CCLUSTER_JMX_PORT=${TERN_CASSANDRA_CLUSTER_JMX_PORT:-7201}
CCLUSTER_HEAP=${TERN_CASSANDRA_CLUSTER_HEAP:-768m}
CCLUSTER_HOSTS=(127.0.0.1 127.0.0.2 127.0.0.3)
# Evenly spaced Murmur3 tokens, one per node: the nodes start together, none bootstraps.
CCLUSTER_TOKENS=(-9223372036854775808 -3074457345618258603 3074457345618258602)
CTLS_PORT=${TERN_CASSANDRA_TLS_PORT:-9242}
CTLS_STORAGE_PORT=${TERN_CASSANDRA_TLS_STORAGE_PORT:-7300}
CTLS_JMX_PORT=${TERN_CASSANDRA_TLS_JMX_PORT:-7299}
CTLS_HEAP=${TERN_CASSANDRA_TLS_HEAP:-512m}
CASSANDRA_TIMEOUT=${TERN_CASSANDRA_TIMEOUT:-300}
CASSANDRA_LIB=$STATE/cassandra/lib
CASSANDRA_POM=$REPO/scripts/cassandra/pom.xml

# --- install ---------------------------------------------------------------------------------

# java_major: the major version of the `java` on the PATH (0 when there is none).
java_major() {
    local v
    v=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
    printf '%s\n' "${v:-0}"
}

cassandra_install() {
    if ! command -v java >/dev/null || (($(java_major) < 17)); then
        apt_install openjdk-17-jre-headless
    fi
    command -v mvn >/dev/null || apt_install maven
    local stamp want
    stamp=$CASSANDRA_LIB/.tern-installed
    want=$(sha256sum "$CASSANDRA_POM" | cut -d' ' -f1)
    if [[ -s $stamp && $(<"$stamp") == "$want" ]]; then
        log "cassandra: class path in $CASSANDRA_LIB is up to date ($(ls "$CASSANDRA_LIB" | wc -l) jars)"
        return 0
    fi
    mkdir -p "$STATE/cassandra"
    rm -rf "$CASSANDRA_LIB.tmp"
    log "cassandra: resolving $(sed -n 's:.*<cassandra.version>\(.*\)</cassandra.version>.*:\1:p' "$CASSANDRA_POM") with Maven into $CASSANDRA_LIB"
    if ! mvn -q -B -f "$CASSANDRA_POM" dependency:copy-dependencies \
        -DoutputDirectory="$CASSANDRA_LIB.tmp" >"$STATE/cassandra/mvn.log" 2>&1; then
        tail -n 30 "$STATE/cassandra/mvn.log" >&2
        die "cassandra: mvn dependency:copy-dependencies failed (full output: $STATE/cassandra/mvn.log)"
    fi
    printf '%s\n' "$want" >"$CASSANDRA_LIB.tmp/.tern-installed"
    # A running node keeps its open jars: replace the folder, never edit it in place.
    rm -rf "$CASSANDRA_LIB.old"
    [[ ! -d $CASSANDRA_LIB ]] || mv "$CASSANDRA_LIB" "$CASSANDRA_LIB.old"
    mv "$CASSANDRA_LIB.tmp" "$CASSANDRA_LIB"
    rm -rf "$CASSANDRA_LIB.old"
}

cassandra_cluster_install() { cassandra_install; }

# --- one node --------------------------------------------------------------------------------

# cassandra_yaml DIR CLUSTER HOST NATIVE_PORT STORAGE_PORT SEEDS [INITIAL_TOKEN]: the node's
# configuration, sized for a shared 2-core test machine (see docs/testing.md).
cassandra_yaml() {
    local dir=$1 cluster=$2 host=$3 native=$4 storage=$5 seeds=$6 token=${7:-}
    cat <<EOF
# Written by scripts/servers.sh (scripts/lib/cassandra.sh): a test node, not a production one.
cluster_name: $cluster
num_tokens: 1
${token:+initial_token: $token}
auto_bootstrap: false
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "$seeds"
listen_address: $host
rpc_address: $host
storage_port: $storage
native_transport_port: $native
start_native_transport: true
data_file_directories: [$dir/data]
commitlog_directory: $dir/commitlog
saved_caches_directory: $dir/saved_caches
hints_directory: $dir/hints
cdc_raw_directory: $dir/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
commitlog_segment_size: 8MiB
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
disk_failure_policy: stop
commit_failure_policy: stop
# Tests create hundreds of keyspaces: a slab (1 MiB per table) each ran a 1 GiB heap out of
# memory; dropped keyspaces need no snapshot.
memtable_allocation_type: unslabbed_heap_buffers
auto_snapshot: false
concurrent_compactors: 1
# The tests prepare statements in hundreds of keyspaces: the default cache (heap/256, 4 MiB
# here) evicted them mid-test ("Prepared query ... not found"), and a batch failed.
prepared_statements_cache_size: 64MiB
concurrent_reads: 8
concurrent_writes: 8
concurrent_counter_writes: 4
# A loaded 2-core machine answers slower than a production node: the server's own timeouts
# are raised so that a test sees its own timeouts (the store URL's timeout_ms), not these.
read_request_timeout: 10000ms
range_request_timeout: 20000ms
write_request_timeout: 10000ms
cas_contention_timeout: 5000ms
request_timeout: 20000ms
EOF
}

# cassandra_node_start NAME DIR CLUSTER HOST NATIVE STORAGE JMX HEAP SEEDS [TOKEN]: starts one
# node in the background (pid in DIR.pid, log in DIR.log) unless it answers already.
cassandra_node_start() {
    local name=$1 dir=$2 cluster=$3 host=$4 native=$5 storage=$6 jmx=$7 heap=$8 seeds=$9
    local token=${10:-}
    mkdir -p "$dir"
    # CASSANDRA_YAML_FN: the function writing the configuration (cassandra_tls_yaml for the
    # TLS node), cassandra_yaml by default.
    "${CASSANDRA_YAML_FN:-cassandra_yaml}" "$dir" "$cluster" "$host" "$native" "$storage" \
        "$seeds" "$token" >"$dir/cassandra.yaml"
    local flags=(
        -Xms"$heap" -Xmx"$heap" -Xss256k -XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError
        -XX:-UsePerfData -Djava.net.preferIPv4Stack=true
        # The JPMS flags of Cassandra's conf/jvm17-server.options.
        -Djdk.attach.allowAttachSelf=true -Dio.netty.tryReflectionSetAccessible=true
        --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
        --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
        --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
        --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
        --add-exports java.sql/java.sql=ALL-UNNAMED
        --add-exports java.base/java.lang.ref=ALL-UNNAMED
        --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
        --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
        --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
        --add-opens java.base/java.lang.module=ALL-UNNAMED
        --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
        --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
        --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
        --add-opens java.base/jdk.internal.math=ALL-UNNAMED
        --add-opens java.base/jdk.internal.module=ALL-UNNAMED
        --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
        --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
        --add-opens java.base/sun.nio.ch=ALL-UNNAMED
        --add-opens java.base/java.io=ALL-UNNAMED
        --add-opens java.base/java.nio=ALL-UNNAMED
        --add-opens java.base/java.lang.reflect=ALL-UNNAMED
        --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
        --add-opens java.base/java.lang=ALL-UNNAMED
        --add-opens java.base/java.util=ALL-UNNAMED
        -Dcassandra.config="file://$dir/cassandra.yaml"
        -Dcassandra-foreground=yes
        -Dcassandra.storagedir="$dir"
        -Dcassandra.jmx.local.port="$jmx"
        -Dcassandra.skip_wait_for_gossip_to_settle=0
        -Dcassandra.ring_delay_ms=1000
        # With PasswordAuthenticator (the TLS node): the default superuser at once, not 10 s on.
        -Dcassandra.superuser_setup_delay_ms=0
        -Dlogback.configurationFile="$REPO/scripts/cassandra/logback.xml"
        -cp "$CASSANDRA_LIB/*"
        org.apache.cassandra.service.CassandraDaemon
    )
    start_background "$name" "$dir.pid" "$dir.log" java "${flags[@]}"
}

# cassandra_wait NAME DIR HOST PORT: waits until the node started by cassandra_node_start
# answers a CQL query.
cassandra_wait() {
    wait_ready "$1" "$2.log" "$2.pid" "file://$2/cassandra.yaml" "$CASSANDRA_TIMEOUT" \
        probe cql "$4" "$3"
}

cassandra_start() {
    if probe cql "$CASSANDRA_PORT" 2>/dev/null; then
        log "cassandra: already answering on 127.0.0.1:$CASSANDRA_PORT"
        return 0
    fi
    local dir=$STATE/cassandra/node
    refuse_if_running cassandra "$dir.pid" "file://$dir/cassandra.yaml"
    # A fresh node: the keyspaces of earlier test runs would only slow every schema change.
    [[ -n ${TERN_CASSANDRA_KEEP_DATA:-} ]] || rm -rf "$dir"
    cassandra_node_start cassandra "$dir" tern-single 127.0.0.1 "$CASSANDRA_PORT" \
        "$CASSANDRA_STORAGE_PORT" "$CASSANDRA_JMX_PORT" "$CASSANDRA_HEAP" \
        "127.0.0.1:$CASSANDRA_STORAGE_PORT"
    cassandra_wait cassandra "$dir" 127.0.0.1 "$CASSANDRA_PORT"
}

cassandra_stop() {
    stop_pidfile cassandra "$STATE/cassandra/node.pid" "file://$STATE/cassandra/node/cassandra.yaml"
}

# --- three nodes -----------------------------------------------------------------------------

cassandra_cluster_dir() { printf '%s/cassandra-cluster/n%s' "$STATE" "$1"; }

cassandra_cluster_start() {
    local i dir host up=() seeds=""
    for i in 1 2 3; do
        host=${CCLUSTER_HOSTS[i - 1]}
        seeds+="${seeds:+,}$host:$CCLUSTER_STORAGE_PORT"
        if probe cql "$CCLUSTER_PORT" "$host" 2>/dev/null; then up+=("$i"); fi
    done
    if ((${#up[@]} == 3)); then
        log "cassandra-cluster: already answering on ${CCLUSTER_HOSTS[*]} port $CCLUSTER_PORT"
    else
        for i in 1 2 3; do
            [[ " ${up[*]} " != *" $i "* ]] || continue
            dir=$(cassandra_cluster_dir "$i")
            refuse_if_running "cassandra-cluster:$i" "$dir.pid" "file://$dir/cassandra.yaml"
            # A new cluster starts empty; a node restarted into a running cluster keeps its
            # data (the fault tests kill and restart nodes).
            ((${#up[@]} > 0)) || [[ -n ${TERN_CASSANDRA_KEEP_DATA:-} ]] || rm -rf "$dir"
            cassandra_node_start "cassandra-cluster:$i" "$dir" tern-cluster \
                "${CCLUSTER_HOSTS[i - 1]}" "$CCLUSTER_PORT" "$CCLUSTER_STORAGE_PORT" \
                "$((CCLUSTER_JMX_PORT + i - 1))" "$CCLUSTER_HEAP" "$seeds" \
                "${CCLUSTER_TOKENS[i - 1]}"
        done
        for i in 1 2 3; do
            [[ " ${up[*]} " != *" $i "* ]] || continue
            cassandra_wait "cassandra-cluster:$i" "$(cassandra_cluster_dir "$i")" \
                "${CCLUSTER_HOSTS[i - 1]}" "$CCLUSTER_PORT"
        done
    fi
    for i in 1 2 3; do
        dir=$(cassandra_cluster_dir "$i")
        wait_ready "cassandra-cluster:$i peers" "$dir.log" "$dir.pid" "file://$dir/cassandra.yaml" \
            "$CASSANDRA_TIMEOUT" probe cql-peers "$CCLUSTER_PORT" "${CCLUSTER_HOSTS[i - 1]}" 2
    done
    probe cql-exec "$CCLUSTER_PORT" 127.0.0.1 "CREATE KEYSPACE IF NOT EXISTS tern_it WITH \
replication = {'class': 'SimpleStrategy', 'replication_factor': 3}" ||
        die "cassandra-cluster: cannot create keyspace tern_it"
}

cassandra_cluster_stop() {
    local i dir
    for i in 1 2 3; do
        dir=$(cassandra_cluster_dir "$i")
        stop_pidfile "cassandra-cluster:$i" "$dir.pid" "file://$dir/cassandra.yaml"
    done
}

# cassandra_cluster_kill N: SIGKILL to node N (1-3) of the cluster, as a crash would; `start
# cassandra-cluster` restarts it with its data.
cassandra_cluster_kill() {
    local dir
    [[ $1 =~ ^[123]$ ]] || die "kill-node: expected a node number 1, 2 or 3, got '$1'"
    dir=$(cassandra_cluster_dir "$1")
    pid_alive "$dir.pid" "file://$dir/cassandra.yaml" || die "cassandra-cluster:$1 is not running"
    kill -9 "$(<"$dir.pid")"
    log "cassandra-cluster:$1: killed (pid $(<"$dir.pid"))"
}

cassandra_cluster_status() {
    local i rc=0 host
    for i in 1 2 3; do
        host=${CCLUSTER_HOSTS[i - 1]}
        if probe cql "$CCLUSTER_PORT" "$host" 2>/dev/null; then
            printf '%-17s up    %s:%s\n' "cassandra-cluster" "$host" "$CCLUSTER_PORT"
        else
            printf '%-17s down  %s:%s\n' "cassandra-cluster" "$host" "$CCLUSTER_PORT"
            rc=3
        fi
    done
    return "$rc"
}

cassandra_cluster_url() {
    local nodes="" host
    for host in "${CCLUSTER_HOSTS[@]}"; do nodes+="${nodes:+,}$host:$CCLUSTER_PORT"; done
    printf 'cassandra://%s/tern_it?replication_factor=3&consistency=quorum' "$nodes"
}

# --- one node with TLS and passwords ---------------------------------------------------------

cassandra_tls_install() { cassandra_install; }

cassandra_tls_dir() { printf '%s/cassandra-tls' "$STATE"; }

# cassandra_tls_pki DIR: a test CA (ca.pem), a server certificate for 127.0.0.1 signed by it
# (keystore.pem: key and certificate, the form Cassandra's PEMBasedSslContextFactory reads),
# and another CA that signed nothing (other-ca.pem, for the wrong-CA test). Made anew at each
# start with openssl (the node needs them before any test runs; the Redis and MongoDB TLS
# tests start their servers themselves and make theirs with rcgen).
cassandra_tls_pki() {
    local dir=$1
    rm -rf "$dir" && mkdir -p "$dir"
    (
        cd "$dir"
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 \
            -subj "/CN=tern test CA" 2>/dev/null
        openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.pem \
            -days 3650 -subj "/CN=another CA" 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
            -subj "/CN=127.0.0.1" 2>/dev/null
        printf '%s\n' "subjectAltName=IP:127.0.0.1" "basicConstraints=CA:FALSE" \
            "keyUsage=digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" >server.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
            -out server.pem -days 3650 -extfile server.ext 2>/dev/null
        cat server.key server.pem >keystore.pem
    ) || die "cassandra-tls: openssl could not make the test certificates in $dir"
}

# cassandra_tls_yaml: cassandra_yaml's node with PasswordAuthenticator and client encryption
# required (the keystore and CA of cassandra_tls_pki, in DIR/../pki).
cassandra_tls_yaml() {
    local pki
    pki=$(dirname -- "$1")/pki
    cassandra_yaml "$@" | sed 's/^authenticator: .*/authenticator: PasswordAuthenticator/'
    cat <<EOF
client_encryption_options:
  enabled: true
  optional: false
  ssl_context_factory:
    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory
  keystore: $pki/keystore.pem
  truststore: $pki/ca.pem
  require_client_auth: false
EOF
}

# cassandra_tls_probe: whether the node answers a query over TLS as its superuser.
cassandra_tls_probe() {
    local pki
    pki=$(cassandra_tls_dir)/pki
    [[ -s $pki/ca.pem ]] &&
        TERN_CQL_AUTH=cassandra:cassandra probe cql-tls "$CTLS_PORT" 127.0.0.1 "$pki/ca.pem"
}

cassandra_tls_start() {
    local dir pki
    dir=$(cassandra_tls_dir)/node
    pki=$(cassandra_tls_dir)/pki
    if cassandra_tls_probe 2>/dev/null; then
        log "cassandra-tls: already answering on 127.0.0.1:$CTLS_PORT"
        return 0
    fi
    refuse_if_running cassandra-tls "$dir.pid" "file://$dir/cassandra.yaml"
    rm -rf "$dir"
    cassandra_tls_pki "$pki"
    local CASSANDRA_YAML_FN=cassandra_tls_yaml
    cassandra_node_start cassandra-tls "$dir" tern-tls 127.0.0.1 "$CTLS_PORT" \
        "$CTLS_STORAGE_PORT" "$CTLS_JMX_PORT" "$CTLS_HEAP" "127.0.0.1:$CTLS_STORAGE_PORT"
    wait_ready cassandra-tls "$dir.log" "$dir.pid" "file://$dir/cassandra.yaml" \
        "$CASSANDRA_TIMEOUT" cassandra_tls_probe
}

cassandra_tls_stop() {
    local dir
    dir=$(cassandra_tls_dir)/node
    stop_pidfile cassandra-tls "$dir.pid" "file://$dir/cassandra.yaml"
}

cassandra_tls_status() {
    if cassandra_tls_probe 2>/dev/null; then
        printf '%-17s up    127.0.0.1:%s (TLS)\n' cassandra-tls "$CTLS_PORT"
    else
        printf '%-17s down  127.0.0.1:%s (TLS)\n' cassandra-tls "$CTLS_PORT"
        return 3
    fi
}

# The node's URL without credentials (the tests create roles of their own as the superuser;
# other-ca.pem lies next to the CA).
cassandra_tls_url() {
    printf 'cassandra://127.0.0.1:%s/tern_it?tls_ca_file=%s' "$CTLS_PORT" \
        "$(cassandra_tls_dir)/pki/ca.pem"
}
