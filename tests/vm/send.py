"""tests/vm/send.py MB — send MB megabytes (10^6 bytes) over TCP on this
network namespace's loopback and receive them, then exit.  The guest's pod
case runs one per namespace, with different amounts, under scopemeter run:
the network_* values of each rank must be its own namespace's bytes."""
import socket
import sys
import threading

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
sys.exit(0 if got == [total] else 1)
