# shellcheck shell=bash
# Valkey 8 from Debian's bookworm-backports (sourced by scripts/servers.sh; needs common.sh).
# The backports suite is added from the mirror this machine's apt already uses (read from
# /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list), so no host is written here.

VALKEY_SUITE=${TERN_VALKEY_SUITE:-bookworm-backports}
VALKEY_SOURCES=/etc/apt/sources.list.d/tern-valkey-backports.sources

# valkey_mirror: the first Debian archive URI of the machine's apt configuration (not the
# security archive), on stdout; fails when there is none.
valkey_mirror() {
    local uri=""
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -e $f && $f != "$VALKEY_SOURCES" ]] || continue
        uri=$(awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }' "$f" \
            | grep -v -- '-security' | grep -E '/debian/?$' | head -n 1 || true)
        [[ -n $uri ]] && break
    done
    if [[ -z $uri && -r /etc/apt/sources.list ]]; then
        uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\//) { print $i; break } }' \
            /etc/apt/sources.list | grep -v -- '-security' | grep -E '/debian/?$' | head -n 1 || true)
    fi
    [[ -n $uri ]] || return 1
    printf '%s\n' "$uri"
}

# valkey_add_backports: writes the backports suite for the machine's own mirror (once).
valkey_add_backports() {
    if grep -rqs -- "$VALKEY_SUITE" /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null; then
        return 0
    fi
    [[ $(id -u) == 0 ]] || die "valkey: root is needed to add $VALKEY_SUITE to apt's sources"
    local mirror
    mirror=$(valkey_mirror) || die "valkey: no Debian mirror in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list to add $VALKEY_SUITE from"
    log "valkey: adding $VALKEY_SUITE from $mirror"
    local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    {
        printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\n' "$mirror" "$VALKEY_SUITE"
        [[ -r $keyring ]] && printf 'Signed-By: %s\n' "$keyring"
    } >"$VALKEY_SOURCES"
    rm -f "${TMPDIR:-/tmp}/tern-apt-updated.stamp"
}

# valkey_install_packages: valkey-server and valkey-tools from backports (skipped when present).
valkey_install_packages() {
    if command -v valkey-server >/dev/null && command -v valkey-cli >/dev/null; then
        log "valkey: $(valkey-server --version | cut -d' ' -f1-3) already installed"
        return 0
    fi
    valkey_add_backports
    [[ $(id -u) == 0 ]] || die "valkey: root is needed to install valkey-server valkey-tools"
    local aptlog policy=/usr/sbin/policy-rc.d own_policy=""
    aptlog=$(mktemp "${TMPDIR:-/tmp}/tern-apt.XXXXXX")
    # The package's postinst would start a system valkey on the default port 6379, where the
    # battery's redis-server runs: forbid service starts during the install (policy-rc.d 101).
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && own_policy=1
    fi
    log "valkey: apt-get update; apt-get install -t $VALKEY_SUITE valkey-server valkey-tools"
    if ! { apt-get -q -y -o Acquire::Retries=3 -o DPkg::Lock::Timeout=300 update &&
        DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Acquire::Retries=3 \
            -o DPkg::Lock::Timeout=300 install --no-install-recommends -t "$VALKEY_SUITE" \
            valkey-server valkey-tools; } >"$aptlog" 2>&1; then
        tail -n 30 "$aptlog" >&2
        [[ -z $own_policy ]] || rm -f "$policy"
        die "valkey: installing from $VALKEY_SUITE failed (full output: $aptlog)"
    fi
    rm -f "$aptlog"
    [[ -z $own_policy ]] || rm -f "$policy"
    if [[ -x /etc/init.d/valkey-server ]] && /etc/init.d/valkey-server status >/dev/null 2>&1; then
        log "valkey: stopping the valkey-server the package started"
        /etc/init.d/valkey-server stop >&2 || true
    fi
}
