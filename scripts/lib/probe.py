#!/usr/bin/env python3
"""Protocol-level readiness probes for tern's test servers (loopback only, standard library only).

usage: probe.py tcp|redis|mongodb|cql PORT [HOST]
Exits 0 when the server on HOST:PORT answers its protocol's ping, 1 otherwise (reason on stderr).
HOST defaults to 127.0.0.1 and must be a loopback address.
"""

import ipaddress
import socket
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


def probe_cql(sock):
    # CQL v4 OPTIONS frame: version 0x04, flags 0, stream 1, opcode 0x05, empty body.
    sock.sendall(struct.pack(">BBhBI", 0x04, 0, 1, 0x05, 0))
    version, _, _, opcode, length = struct.unpack(">BBhBI", recv_exact(sock, 9))
    recv_exact(sock, length)
    if version != 0x84 or opcode != 0x06:  # SUPPORTED
        raise ValueError(f"unexpected CQL reply: version {version:#x} opcode {opcode:#x}")
    return True


PROBES = {"tcp": probe_tcp, "redis": probe_redis, "mongodb": probe_mongodb, "cql": probe_cql}


def main(argv):
    if len(argv) not in (3, 4) or argv[1] not in PROBES:
        print(__doc__, file=sys.stderr)
        return 2
    host = argv[3] if len(argv) == 4 else "127.0.0.1"
    if not ipaddress.ip_address(host).is_loopback:
        print(f"probe: refusing non-loopback host {host}", file=sys.stderr)
        return 2
    try:
        with socket.create_connection((host, int(argv[2])), timeout=TIMEOUT) as sock:
            sock.settimeout(TIMEOUT)
            PROBES[argv[1]](sock)
    except (OSError, ValueError, struct.error) as err:
        print(f"probe {argv[1]} {host}:{argv[2]}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
