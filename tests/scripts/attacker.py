#!/usr/bin/env python3
"""An attacker on the switch's network (issue 8): forges joins with random sessions and
members, and contributions with guessed epochs, unsealed and with made-up authentication
trailers, towards a switch serving a keyed job; counts every byte the switch sends back.
Prints "sent N received M bytes" and exits 0. usage: attacker.py HOST PORT JOB"""
import os
import random
import socket
import struct
import sys
import time

host, port, job = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
MAGIC, VERSION = 0x21434E49, 3
JOIN, DATA = 1, 3
AUTH, WANT_RESULT = 0x40, 0x01
rng = random.Random(1234)


def header(ptype, flags, elem, op, member, epoch, chunk, slot, count, aux):
    return struct.pack("<IBBBBBBHIIIHHI", MAGIC, VERSION, ptype, flags, elem, op, 0, member, job,
                       epoch, chunk, slot, count, aux)


s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
s.setblocking(False)
sent = received = 0


def drain():
    global received
    while True:
        try:
            received += len(s.recv(65536))
        except BlockingIOError:
            return


for burst in range(40):
    for i in range(50):
        trailer = rng.random() < 0.5
        flags = AUTH if trailer else 0
        tail = os.urandom(40) if trailer else b""
        # A join naming any member and any session (newer or older than the job's).
        s.sendto(header(JOIN, flags, 0, 0, rng.randrange(4), 0, rng.getrandbits(32), 0, 0,
                        rng.getrandbits(32)) + tail, (host, port))
        # A contribution with a guessed epoch, asking for the result (a reflector's request).
        chunk = rng.randrange(256)
        s.sendto(header(DATA, flags | WANT_RESULT, 2, 1, rng.randrange(4), rng.getrandbits(32),
                        chunk, chunk % 16, 16, 0) + b"\x7f" * 64 + tail, (host, port))
        sent += 2
    drain()
    time.sleep(0.005)
deadline = time.time() + 1.0
while time.time() < deadline:
    drain()
    time.sleep(0.01)
print(f"sent {sent} received {received} bytes")
