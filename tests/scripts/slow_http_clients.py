#!/usr/bin/env python3
"""N slow HTTP clients hold connections to a switch's /metrics (each sends one more request
header line every 0.3 s and never ends its request) while one more client scrapes it with a
10 s deadline; prints "ok BYTES ..." or "FAIL why". usage: slow_http_clients.py PORT N"""
import socket
import sys
import threading
import time
import urllib.request

port, n = int(sys.argv[1]), int(sys.argv[2])
conns = []
for _ in range(n):
    c = socket.create_connection(("127.0.0.1", port))
    c.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    conns.append(c)
stop = threading.Event()


def trickle():
    while not stop.is_set():
        for c in conns:
            try:
                c.send(b"X-slow: 1\r\n")
            except OSError:
                pass
        time.sleep(0.3)


t = threading.Thread(target=trickle)
t.start()
time.sleep(0.6)  # every slow client is being served (or queued) before the scrape
start = time.time()
try:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    print(f"ok {len(body)} bytes in {time.time() - start:.2f} s")
except Exception as e:  # noqa: BLE001 - any failure of the scrape is the finding
    print(f"FAIL {e}")
stop.set()
t.join()
