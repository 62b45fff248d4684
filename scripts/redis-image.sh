#!/usr/bin/env bash
# Builds the local Redis container image for tern's container-based tests, without any
# container registry (none is reachable from the build machines):
#
#   scripts/redis-image.sh [all|build|check|dockerd|stop-dockerd]     (default: all)
#
#   dockerd       install docker.io if dockerd is missing; start dockerd unless `docker info`
#                 already answers (log and pid file under the state dir)
#   build         dockerd, then the base image local/debian:<suite> (debootstrap --variant=minbase
#                 from the mirror configured for apt on this machine, then docker import), then
#                 local/tern-redis:7 from integration-tests/fixtures/redis/Dockerfile
#                 (docker build --network host)
#   check         (dockerd, then) run local/tern-redis:7 with host networking on 127.0.0.1:$TERN_REDIS_CHECK_PORT
#                 (6389), ping it, stop it
#   all           build, then check
#   stop-dockerd  stop the dockerd this script started (if any)
#
# Idempotent: a step whose result exists is skipped (an image is rebuilt only when its
# Dockerfile changed). Each phase prints how long it took, on stderr.
# The mirror is read at run time from /etc/apt/sources.list.d/*.sources (deb822 URIs:) or
# /etc/apt/sources.list; this repository names no package registry.
# dockerd is started with --bridge=none: containers get host networking (or none), so tests can
# only reach them on 127.0.0.1 and no private-range docker bridge exists.
#
# Environment: TERN_STATE_DIR (default: <repo>/.tern-servers), TERN_DEBIAN_SUITE (this machine's
# VERSION_CODENAME), TERN_DEBIAN_MIRROR (overrides the apt configuration), TERN_REDIS_CHECK_PORT
# (6389), TERN_SERVER_TIMEOUT (60 s).
set -euo pipefail

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
LOG_TAG=redis-image
# shellcheck source=scripts/lib/common.sh
source "$REPO/scripts/lib/common.sh"

STATE=${TERN_STATE_DIR:-$REPO/.tern-servers}
TIMEOUT=${TERN_SERVER_TIMEOUT:-60}
CHECK_PORT=${TERN_REDIS_CHECK_PORT:-6389}
# shellcheck source=/dev/null
SUITE=${TERN_DEBIAN_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}
BASE_IMAGE=local/debian:$SUITE
REDIS_IMAGE=local/tern-redis:7
REDIS_CONTEXT=$REPO/integration-tests/fixtures/redis
DOCKERD_PID=$STATE/dockerd.pid
DOCKERD_LOG=$STATE/dockerd.log

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
}

# apt_mirror: the first archive URI configured for $SUITE (not -security / -updates).
apt_mirror() {
    if [[ -n ${TERN_DEBIAN_MIRROR:-} ]]; then
        echo "$TERN_DEBIAN_MIRROR"
        return 0
    fi
    local files=() mirror
    shopt -s nullglob
    files=(/etc/apt/sources.list.d/*.sources)
    shopt -u nullglob
    mirror=""
    local file
    for file in "${files[@]}"; do
        # deb822: paragraphs of "Field: value" lines; take the URIs of a "deb" paragraph whose
        # Suites list $SUITE. (Plain POSIX awk: Debian's default awk is mawk.)
        mirror=$(awk -v suite="$SUITE" '
            function flush() {
                if (!found && uris != "" && (" " suites " ") ~ (" " suite " ") \
                    && (" " types " ") ~ / deb /) {
                    split(uris, u, " "); print u[1]; found = 1
                }
                uris = ""; suites = ""; types = ""
            }
            /^[ \t]*$/ { flush(); next }
            tolower($0) ~ /^uris:/ { sub(/^[^:]*:[ \t]*/, ""); uris = $0 }
            tolower($0) ~ /^suites:/ { sub(/^[^:]*:[ \t]*/, ""); suites = $0 }
            tolower($0) ~ /^types:/ { sub(/^[^:]*:[ \t]*/, ""); types = $0 }
            END { flush() }' "$file")
        [[ -z $mirror ]] || break
    done
    if [[ -z $mirror && -r /etc/apt/sources.list ]]; then
        # One-line format: deb [options] URI SUITE COMPONENT...
        mirror=$(awk -v suite="$SUITE" '
            $1 == "deb" {
                i = 2
                if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) == suite) { print $i; exit }
            }' /etc/apt/sources.list)
    fi
    [[ -n $mirror ]] || die "no apt mirror for '$SUITE' in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list (set TERN_DEBIAN_MIRROR)"
    echo "$mirror"
}

docker_up() { docker info >/dev/null 2>&1; }

ensure_dockerd() {
    if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
        apt_install docker.io
    fi
    if docker_up; then
        log "dockerd: already answering"
        return 0
    fi
    mkdir -p "$STATE"
    printf '\n--- dockerd: starting at %s\n' "$(date -Is)" >>"$DOCKERD_LOG"
    # Without job control the child is no process-group leader: setsid execs in place.
    setsid nohup dockerd --host=unix:///var/run/docker.sock --bridge=none \
        >>"$DOCKERD_LOG" 2>&1 </dev/null &
    echo "$!" >"$DOCKERD_PID"
    wait_ready dockerd "$DOCKERD_LOG" "$DOCKERD_PID" dockerd "$TIMEOUT" docker_up
}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

build_base_image() {
    if image_exists "$BASE_IMAGE"; then
        log "$BASE_IMAGE: already present"
        return 0
    fi
    apt_install debootstrap
    local mirror rootfs=$STATE/rootfs-$SUITE start
    mirror=$(apt_mirror)
    rm -rf "$rootfs"
    mkdir -p "$rootfs"
    log "debootstrap --variant=minbase $SUITE (mirror from the apt configuration)"
    start=$(now_ns)
    if ! debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" >"$STATE/debootstrap.log" 2>&1; then
        tail -n 30 "$STATE/debootstrap.log" >&2
        tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2 2>/dev/null || true
        die "debootstrap failed (full output: $STATE/debootstrap.log)"
    fi
    log "debootstrap took $(seconds_since "$start")s"
    # The image's apt uses this machine's apt sources and options (mirror, security suite).
    rm -f "$rootfs/etc/apt/sources.list"
    cp -a /etc/apt/sources.list.d/. "$rootfs/etc/apt/sources.list.d/"
    if [[ -f /etc/apt/sources.list ]]; then
        cp -a /etc/apt/sources.list "$rootfs/etc/apt/sources.list"
    fi
    cp -a /etc/apt/apt.conf.d/. "$rootfs/etc/apt/apt.conf.d/"
    start=$(now_ns)
    tar -C "$rootfs" -c . | docker import - "$BASE_IMAGE" >/dev/null
    log "docker import took $(seconds_since "$start")s"
    rm -rf "$rootfs"
}

build_redis_image() {
    local hash current
    hash=$(sha256sum "$REDIS_CONTEXT/Dockerfile" | cut -c1-64)
    current=$(docker image inspect --format '{{ index .Config.Labels "tern.dockerfile.sha256" }}' \
        "$REDIS_IMAGE" 2>/dev/null || true)
    if [[ $current == "$hash" ]]; then
        log "$REDIS_IMAGE: already built from the current Dockerfile"
        return 0
    fi
    docker build --network host --label "tern.dockerfile.sha256=$hash" -t "$REDIS_IMAGE" \
        "$REDIS_CONTEXT" >"$STATE/redis-image-build.log" 2>&1 || {
        tail -n 30 "$STATE/redis-image-build.log" >&2
        die "docker build of $REDIS_IMAGE failed (full output: $STATE/redis-image-build.log)"
    }
}

check_redis_image() {
    local name=tern-redis-check-$$ start
    if "$PYTHON" "$REPO/scripts/lib/probe.py" tcp "$CHECK_PORT" 2>/dev/null; then
        die "port $CHECK_PORT is already in use; set TERN_REDIS_CHECK_PORT"
    fi
    docker run -d --rm --network host --name "$name" -e "REDIS_PORT=$CHECK_PORT" \
        "$REDIS_IMAGE" >/dev/null
    start=$(now_ns)
    local deadline=$((SECONDS + TIMEOUT))
    until "$PYTHON" "$REPO/scripts/lib/probe.py" redis "$CHECK_PORT" 2>/dev/null; do
        if ((SECONDS >= deadline)) || ! docker container inspect "$name" >/dev/null 2>&1; then
            docker logs "$name" >&2 2>/dev/null || true
            docker rm -f "$name" >/dev/null 2>&1 || true
            die "$REDIS_IMAGE did not answer PING on 127.0.0.1:$CHECK_PORT"
        fi
        sleep 0.2
    done
    log "$REDIS_IMAGE answered PING on 127.0.0.1:$CHECK_PORT after $(seconds_since "$start")s"
    docker stop --time 5 "$name" >/dev/null
}

PYTHON=${TERN_PYTHON:-python3}

main() {
    local cmd=${1:-all} start
    start=$(now_ns)
    mkdir -p "$STATE"
    case $cmd in
        dockerd) phase dockerd ensure_dockerd ;;
        build | all)
            phase dockerd ensure_dockerd
            phase "base image $BASE_IMAGE" build_base_image
            phase "image $REDIS_IMAGE" build_redis_image
            if [[ $cmd == all ]]; then
                phase "check $REDIS_IMAGE" check_redis_image
            fi
            ;;
        check)
            phase dockerd ensure_dockerd
            image_exists "$REDIS_IMAGE" || die "$REDIS_IMAGE is not built: run $0 build"
            phase "check $REDIS_IMAGE" check_redis_image
            ;;
        stop-dockerd) stop_pidfile dockerd "$DOCKERD_PID" dockerd ;;
        -h | --help | help) usage ;;
        *) log "unknown command: $cmd" && usage ;;
    esac
    log "$cmd: total $(seconds_since "$start")s"
}

main "$@"
