"""tests/vm/send.py MB JSONL — send MB megabytes (10^6 bytes) over TCP on
this network namespace's loopback and receive them; then wait until the
JSONL that `scopemeter run` writes for this rank has logged a
network_receive_megabytes value that covers every byte the namespace has
received (/proc/net/dev, read after the sending), and exit.  The guest's pod
case runs one per namespace, with different amounts, under scopemeter run:
the network_* values of each rank must be its own namespace's bytes.
(Without the wait, bytes sent just before CMD exits are in no sample: the
last partial window's sample is skipped when the previous one is recent,
docs/design.md §7.)"""
import json
import socket
import sys
import threading
import time

total = int(sys.argv[1]) * 1000 * 1000
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
got = []


def receive():
    conn, _ = srv.accept()
    n = 0
    while n < total:
        b = conn.recv(1 << 16)
        if not b:
            break
        n += len(b)
    got.append(n)
    conn.close()


t = threading.Thread(target=receive)
t.start()
cli = socket.create_connection(srv.getsockname())
chunk = b"x" * (1 << 16)
sent = 0
while sent < total:
    sent += cli.send(chunk[: min(len(chunk), total - sent)])
cli.close()
t.join()
if got != [total]:
    sys.exit(1)


def rx_mb():
    with open("/proc/net/dev") as f:
        return sum(int(line.split(":", 1)[1].split()[0]) for line in f.readlines()[2:]) / 1e6


def logged_mb(path):
    best = -1.0
    try:
        with open(path) as f:
            for line in f:
                r = json.loads(line) if line.strip() else {}
                if r.get("kind") == "metric" and "/network_receive_megabytes/" in r["key"]:
                    best = max(best, r["value"])
    except (OSError, ValueError):
        pass
    return best


want = round(rx_mb(), 1)
for _ in range(1200):  # bounded: the test then fails on the comparison, not here
    if logged_mb(sys.argv[2]) >= want:
        break
    time.sleep(0.05)
