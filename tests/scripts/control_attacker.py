#!/usr/bin/env python3
"""The on-path attacker of the UDP control packets (issue 8; control_abuse.sh).

relay PORTFILE SWITCH_PORT SNIFFED: forwards datagrams between a client and the switch at
  127.0.0.1:SWITCH_PORT, writing every datagram of the client to SNIFFED (4-byte length + bytes)
  and its own port to PORTFILE; runs until killed.
attack SWITCH_PORT SNIFFED: replays every sniffed datagram, then sends forged ones: random
  trailers, the old format (a guessed key in clear, unsealed), and each sniffed datagram altered
  (more slots; turned into a release of job 1, the victim). Prints
  "replayed R forged F received B bytes" and exits 0."""
import os
import random
import select
import socket
import struct
import sys

MAGIC, VERSION = 0x21434E49, 3
ADMIT, RELEASE, RAW, AUTH = 9, 11, 1, 0x40


def header(ptype, flags, job, count):
    return struct.pack("<IBBBBBBHIIIHHI", MAGIC, VERSION, ptype, flags, RAW, 0, 0, 0, job, 0,
                       random.getrandbits(32), 0, count, 0)


def relay(portfile, sw_port, sniffed):
    front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    front.bind(("127.0.0.1", 0))
    back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    back.bind(("127.0.0.1", 0))
    with open(portfile + ".tmp", "w") as f:
        f.write(str(front.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    client = None
    with open(sniffed, "ab") as out:
        while True:
            ready, _, _ = select.select([front, back], [], [])
            for s in ready:
                data, addr = s.recvfrom(65536)
                if s is front:
                    client = addr
                    out.write(struct.pack("<I", len(data)) + data)
                    out.flush()
                    back.sendto(data, ("127.0.0.1", sw_port))
                elif client:
                    front.sendto(data, client)


def attack(sw_port, sniffed):
    blob = open(sniffed, "rb").read()
    packets = []
    while blob:
        (n,) = struct.unpack_from("<I", blob)
        packets.append(blob[4:4 + n])
        blob = blob[4 + n:]
    assert packets, "nothing sniffed"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.setblocking(False)
    to = ("127.0.0.1", sw_port)
    replayed = forged = 0
    for _ in range(10):
        for p in packets:
            s.sendto(p, to)
            replayed += 1
    rng = random.Random(8)
    for _ in range(100):
        info = struct.pack("<QIHHQ", 0, 64, 2, 0xFFFF, 0)
        s.sendto(header(ADMIT, AUTH, 9, 24) + info + os.urandom(40), to)  # a made-up trailer
        info = struct.pack("<QIHHQ", rng.getrandbits(64), 64, 2, 0xFFFF, 0)
        s.sendto(header(ADMIT, 0, 9, 24) + info, to)  # the old format: a guessed key in clear
        s.sendto(header(RELEASE, 0, 1, 8) + struct.pack("<Q", rng.getrandbits(64)), to)
        forged += 3
    for p in packets:
        more = bytearray(p)
        more[32 + 8:32 + 12] = struct.pack("<I", 60)  # the slots asked for
        # The sniffed admit turned into a release of the victim job, its trailer kept.
        victim = bytearray(p[:32]) + bytes(8) + p[-40:]
        victim[5] = RELEASE
        victim[12:16] = struct.pack("<I", 1)
        victim[26:28] = struct.pack("<H", 8)
        for q in (more, victim):
            s.sendto(bytes(q), to)
            forged += 1
    received = 0
    r, _, _ = select.select([s], [], [], 1.0)
    while r:
        received += len(s.recv(65536))
        r, _, _ = select.select([s], [], [], 0.2)
    print(f"replayed {replayed} forged {forged} received {received} bytes")


if sys.argv[1] == "relay":
    relay(sys.argv[2], int(sys.argv[3]), sys.argv[4])
else:
    attack(int(sys.argv[2]), sys.argv[3])
