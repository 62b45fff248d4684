#!/usr/bin/env python3
"""Protocol-level readiness probes for tern's test servers (loopback only, standard library only).

usage: probe.py tcp|redis|mongodb|cql PORT [HOST]
       probe.py cql-peers PORT HOST N     the CQL node lists N peers (a cluster's nodes met)
       probe.py cql-exec PORT HOST CQL    runs one CQL statement (e.g. CREATE KEYSPACE)
       probe.py cql-tls PORT HOST CAFILE  the CQL ping over TLS (the node's certificate checked
                                          against CAFILE), logging in as TERN_CQL_AUTH=user:pass
Exits 0 when the server on HOST:PORT answers its protocol's ping, 1 otherwise (reason on stderr).
HOST defaults to 127.0.0.1 and must be a loopback address. The CQL ping is a query
(`SELECT release_version FROM system.local`): a Cassandra node opens its native port before it
can answer one.
"""

import ipaddress
import os
import socket
import ssl
import struct
import sys

TIMEOUT = 2.0


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by server")
        buf += chunk
    return buf


def probe_tcp(sock):
    return True


def probe_redis(sock):
    sock.sendall(b"*1\r\n$4\r\nPING\r\n")
    reply = sock.recv(64)
    if not reply.startswith(b"+PONG"):
        raise ValueError(f"unexpected redis reply {reply!r}")
    return True


def bson_doc(items):
    """Minimal BSON encoder for a flat document of str -> int32 | str."""
    body = b""
    for key, value in items:
        name = key.encode() + b"\x00"
        if isinstance(value, int):
            body += b"\x10" + name + struct.pack("<i", value)
        else:
            raw = value.encode() + b"\x00"
            body += b"\x02" + name + struct.pack("<i", len(raw)) + raw
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def probe_mongodb(sock):
    # OP_MSG (opcode 2013), flags 0, one kind-0 section: {ping: 1, $db: "admin"}.
    doc = bson_doc([("ping", 1), ("$db", "admin")])
    payload = struct.pack("<I", 0) + b"\x00" + doc
    header = struct.pack("<iiii", 16 + len(payload), 1, 0, 2013)
    sock.sendall(header + payload)
    length, _, _, opcode = struct.unpack("<iiii", recv_exact(sock, 16))
    reply = recv_exact(sock, length - 16)
    ok_values = (b"\x01ok\x00" + struct.pack("<d", 1.0), b"\x10ok\x00" + struct.pack("<i", 1))
    if opcode != 2013 or not any(v in reply for v in ok_values):
        raise ValueError(f"unexpected mongodb reply (opcode {opcode}): {reply[:200]!r}")
    return True


CQL_ERROR, CQL_STARTUP, CQL_READY, CQL_QUERY, CQL_RESULT = 0x00, 0x01, 0x02, 0x07, 0x08
CQL_AUTHENTICATE, CQL_AUTH_RESPONSE, CQL_AUTH_SUCCESS = 0x03, 0x0F, 0x10
EXEC_TIMEOUT = 60.0


def cql_string(text, long=False):
    raw = text.encode()
    return struct.pack(">i" if long else ">H", len(raw)) + raw


def cql_request(sock, opcode, body):
    """Sends one CQL v4 request frame (stream 1), returns (opcode, body) of the answer."""
    sock.sendall(struct.pack(">BBhBI", 0x04, 0, 1, opcode, len(body)) + body)
    version, _, _, answer, length = struct.unpack(">BBhBI", recv_exact(sock, 9))
    reply = recv_exact(sock, length)
    if version != 0x84:
        raise ValueError(f"unexpected CQL reply version {version:#x}")
    if answer == CQL_ERROR:
        code, size = struct.unpack(">iH", reply[:6])
        raise ValueError(f"CQL error {code:#x}: {reply[6:6 + size].decode(errors='replace')}")
    return answer, reply


def cql_query(sock, cql):
    """STARTUP, then one QUERY at consistency ONE: the RESULT body (after its kind)."""
    opcode, _ = cql_request(sock, CQL_STARTUP, struct.pack(">H", 1) + cql_string("CQL_VERSION")
                            + cql_string("3.0.0"))
    if opcode == CQL_AUTHENTICATE:
        # PasswordAuthenticator: SASL PLAIN with TERN_CQL_AUTH (user:password).
        user, _, password = os.environ.get("TERN_CQL_AUTH", "").partition(":")
        token = b"\0" + user.encode() + b"\0" + password.encode()
        opcode, _ = cql_request(sock, CQL_AUTH_RESPONSE, struct.pack(">i", len(token)) + token)
        if opcode != CQL_AUTH_SUCCESS:
            raise ValueError(f"CQL AUTH_RESPONSE answered opcode {opcode:#x}, not AUTH_SUCCESS")
    elif opcode != CQL_READY:
        raise ValueError(f"CQL STARTUP answered opcode {opcode:#x}, not READY")
    opcode, body = cql_request(sock, CQL_QUERY, cql_string(cql, long=True)
                               + struct.pack(">HB", 0x0001, 0))
    if opcode != CQL_RESULT:
        raise ValueError(f"CQL QUERY answered opcode {opcode:#x}, not RESULT")
    return body


def cql_row_count(body):
    """The number of rows of a RESULT of kind Rows whose columns are of simple types."""
    (kind,) = struct.unpack(">i", body[:4])
    if kind != 2:
        raise ValueError(f"CQL result of kind {kind}, not rows")
    flags, columns = struct.unpack(">ii", body[4:12])
    pos = 12
    if flags & 0x0002:  # has more pages: a paging state
        (size,) = struct.unpack(">i", body[pos:pos + 4])
        pos += 4 + max(size, 0)
    if not flags & 0x0004:  # metadata present
        names = 1 if flags & 0x0001 else 0
        for _ in range(2 * names):
            (size,) = struct.unpack(">H", body[pos:pos + 2])
            pos += 2 + size
        for _ in range(columns):
            for _ in range(1 + (0 if names else 2)):
                (size,) = struct.unpack(">H", body[pos:pos + 2])
                pos += 2 + size
            (type_id,) = struct.unpack(">H", body[pos:pos + 2])
            pos += 2
            if type_id == 0 or type_id >= 0x20:
                raise ValueError(f"column type {type_id:#x} is not a simple type")
    (rows,) = struct.unpack(">i", body[pos:pos + 4])
    return rows


def probe_cql(sock):
    rows = cql_row_count(cql_query(sock, "SELECT release_version FROM system.local"))
    if rows != 1:
        raise ValueError(f"system.local answered {rows} rows")
    return True


def probe_cql_peers(sock, expected):
    rows = cql_row_count(cql_query(sock, "SELECT peer FROM system.peers"))
    if rows != int(expected):
        raise ValueError(f"{rows} peers, waiting for {expected}")
    return True


def probe_cql_exec(sock, cql):
    sock.settimeout(EXEC_TIMEOUT)
    cql_query(sock, cql)
    return True


def probe_cql_tls(sock, _cafile):
    return probe_cql(sock)


PROBES = {"tcp": probe_tcp, "redis": probe_redis, "mongodb": probe_mongodb, "cql": probe_cql,
          "cql-peers": probe_cql_peers, "cql-exec": probe_cql_exec, "cql-tls": probe_cql_tls}
# How many arguments after HOST each probe takes.
EXTRA = {"cql-peers": 1, "cql-exec": 1, "cql-tls": 1}


def main(argv):
    extra = EXTRA.get(argv[1], 0) if len(argv) > 1 else 0
    if argv[1:2] == [] or argv[1] not in PROBES or len(argv) not in (
        (3 + extra, 4 + extra) if extra == 0 else (4 + extra,)
    ):
        print(__doc__, file=sys.stderr)
        return 2
    host = argv[3] if len(argv) >= 4 else "127.0.0.1"
    if not ipaddress.ip_address(host).is_loopback:
        print(f"probe: refusing non-loopback host {host}", file=sys.stderr)
        return 2
    try:
        with socket.create_connection((host, int(argv[2])), timeout=TIMEOUT) as sock:
            sock.settimeout(TIMEOUT)
            if argv[1] == "cql-tls":
                context = ssl.create_default_context(cafile=argv[4])
                context.check_hostname = False  # an IP address; the chain is still checked
                with context.wrap_socket(sock) as tls:
                    tls.settimeout(TIMEOUT)
                    PROBES[argv[1]](tls, *argv[4:])
            else:
                PROBES[argv[1]](sock, *argv[4:])
    except (OSError, ValueError, struct.error) as err:
        print(f"probe {argv[1]} {host}:{argv[2]}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
