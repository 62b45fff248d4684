# shellcheck shell=bash
# Helpers shared by scripts/servers.sh and scripts/redis-image.sh (sourced, not executed).
# The caller sets LOG_TAG and runs with `set -euo pipefail`.

# log MESSAGE...: one line on stderr, so stdout stays clean for `eval "$(... env)"`.
log() { printf '[%s] %s\n' "${LOG_TAG:-tern}" "$*" >&2; }

die() {
    log "ERROR: $*"
    exit 1
}

# now_ns: monotonic-enough wall clock in nanoseconds.
now_ns() { date +%s%N; }

# seconds_since START_NS: elapsed seconds with one decimal, e.g. "12.3".
seconds_since() {
    local ms=$((($(now_ns) - $1) / 1000000))
    printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}

# phase NAME COMMAND...: runs COMMAND and logs how long it took. A failing COMMAND ends the
# script (errexit), after the command itself has said why.
phase() {
    local name=$1 start
    shift
    start=$(now_ns)
    "$@"
    log "phase '$name' took $(seconds_since "$start")s"
}

# apt_install PACKAGE...: installs the packages that are not installed yet (root, Debian).
# Refreshes the package lists first unless this helper did so within the last hour.
apt_install() {
    local missing=() pkg
    for pkg in "$@"; do
        if [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null) != "install ok installed" ]]; then
            missing+=("$pkg")
        fi
    done
    if ((${#missing[@]} == 0)); then
        return 0
    fi
    if [[ $(id -u) != 0 ]]; then
        die "root is needed to install: ${missing[*]} (apt-get install -y ${missing[*]})"
    fi
    local apt_opts=(-q -y -o Acquire::Retries=3 -o DPkg::Lock::Timeout=300) aptlog
    aptlog=$(mktemp "${TMPDIR:-/tmp}/tern-apt.XXXXXX")
    local stamp=${TMPDIR:-/tmp}/tern-apt-updated.stamp
    if [[ -z $(find "$stamp" -mmin -60 2>/dev/null) ]]; then
        log "apt-get update"
        if ! apt-get "${apt_opts[@]}" update >"$aptlog" 2>&1; then
            tail -n 30 "$aptlog" >&2
            die "apt-get update failed (full output: $aptlog)"
        fi
        touch "$stamp"
    fi
    log "apt-get install ${missing[*]}"
    if ! DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install --no-install-recommends \
        "${missing[@]}" >"$aptlog" 2>&1; then
        tail -n 30 "$aptlog" >&2
        die "apt-get install ${missing[*]} failed (full output: $aptlog)"
    fi
    rm -f "$aptlog"
}

# proc_running PID: PID is a live process (a zombie, not yet reaped by its parent, is not).
proc_running() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

# pid_alive PIDFILE [PATTERN]: the pid in PIDFILE is a live process whose command line
# contains PATTERN (guards against a recycled pid).
pid_alive() {
    local pidfile=$1 pattern=${2:-} pid
    [[ -s $pidfile ]] || return 1
    pid=$(<"$pidfile")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    proc_running "$pid" || return 1
    [[ -z $pattern ]] || tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$pattern"
}

# stop_pidfile NAME PIDFILE PATTERN: stops the process recorded in PIDFILE (TERM, then KILL
# after 15 s) if it is still the one we started, and removes PIDFILE.
stop_pidfile() {
    local name=$1 pidfile=$2 pattern=$3 pid i
    if ! pid_alive "$pidfile" "$pattern"; then
        log "$name: not running (no live process in $pidfile)"
        rm -f "$pidfile"
        return 0
    fi
    pid=$(<"$pidfile")
    kill "$pid"
    for ((i = 0; i < 150; i++)); do
        proc_running "$pid" || break
        sleep 0.1
    done
    if proc_running "$pid"; then
        log "$name: pid $pid ignored TERM for 15s, sending KILL"
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
    log "$name: stopped (pid $pid)"
}

# wait_ready NAME LOGFILE PIDFILE PATTERN TIMEOUT CHECK...: polls CHECK until it succeeds.
# Fails, printing the log's tail, after TIMEOUT seconds or as soon as the process has died
# (once its pid file exists).
wait_ready() {
    local name=$1 logfile=$2 pidfile=$3 pattern=$4 timeout=$5
    shift 5
    local start deadline
    start=$(now_ns)
    deadline=$((SECONDS + timeout))
    until "$@" 2>/dev/null; do
        if [[ -s $pidfile ]] && ! pid_alive "$pidfile" "$pattern"; then
            log "ERROR: $name exited during startup; last lines of $logfile:"
            tail -n 40 "$logfile" >&2 || true
            rm -f "$pidfile"
            exit 1
        fi
        if ((SECONDS >= deadline)); then
            log "ERROR: $name not ready after ${timeout}s; last lines of $logfile:"
            tail -n 40 "$logfile" >&2 || true
            exit 1
        fi
        sleep 0.2
    done
    log "$name: ready after $(seconds_since "$start")s"
}
