#!/usr/bin/env python3
"""Times one PING at a time to a Redis server (or through a fault proxy in
front of one), every 5 ms, and prints the median and 90th percentile of each
second: how long a request waits on a loaded machine, beside a benchmark.

Usage: ping_latency.py <port> <seconds> [host]   (host: 127.0.0.1)
"""
import socket
import statistics
import sys
import time


def main(port, seconds, host="127.0.0.1"):
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    end = time.time() + seconds
    second, lat = int(time.time()), []
    while time.time() < end:
        start = time.perf_counter()
        sock.sendall(b"PING\r\n")
        reply = b""
        while not reply.endswith(b"\r\n"):
            chunk = sock.recv(100)
            if not chunk:
                sys.exit("the server closed the connection")
            reply += chunk
        lat.append((time.perf_counter() - start) * 1000)
        if int(time.time()) != second and lat:
            lat.sort()
            print(f"{time.strftime('%H:%M:%S')} n={len(lat)} median={statistics.median(lat):.2f} ms "
                  f"p90={lat[int(len(lat) * 0.9)]:.2f} ms", flush=True)
            second, lat = int(time.time()), []
        time.sleep(0.005)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: ping_latency.py <port> <seconds> [host]")
    main(int(sys.argv[1]), float(sys.argv[2]), *sys.argv[3:])
