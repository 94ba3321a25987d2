"""tests/netns/sniff.py - what crosses the test bed's bridge, seen from the
switch namespace (tests/netns/lib.sh) with a packet socket on every port.

    ip netns exec SWITCH python3 sniff.py ROOT_ADDR OUT.json [TOKEN_FILE]

Run inside the switch namespace, it reads the frames on every interface
there (each frame twice: in on one bridge port, out on another) until
SIGTERM or SIGINT, then writes OUT.json.  A socket filter (classic BPF)
keeps what it looks at small enough for Python to keep up with: every IPv4
frame to or from ROOT_ADDR, and the SYNs of TCP between hosts; the hosts'
collective data is left out (a capture that drops frames proves nothing).

  frames          frames read
  drops           frames the kernel dropped for want of buffer (PACKET_STATISTICS)
  ssh             TCP frames to or from port 22 of a host
  to_root_syn     TCP SYNs (without ACK) a host sent to ROOT_ADDR: a host
                  dialling the controller's machine
  root_other      TCP frames between ROOT_ADDR and a host with neither port
                  22 on the host's side: anything but ssh between them
  root_other_ports  up to 20 of those as "ROOT_PORT<->HOST:PORT"
  host_to_host    TCP SYNs between two hosts (their collectives' connections)
  found           needles seen in a TCP payload, each with the frame's
                  addresses: the worker protocol's JSON ("type", "token"
                  keys as cJSON prints them) and the run's token once
                  TOKEN_FILE exists (read again every 0.2 s until it does)

Python's standard library only; ETH_P_ALL needs CAP_NET_RAW (root). """
import ctypes
import json
import os
import select
import signal
import socket
import struct
import sys
import time

root, out = sys.argv[1], sys.argv[2]
token_file = sys.argv[3] if len(sys.argv) > 3 else None
root_ip = socket.inet_aton(root)
needles = [b'"type":"', b'"token":"', b'"server_id":"']
token = None

s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))   # ETH_P_ALL
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
# struct sock_filter {u16 code; u8 jt, jf; u32 k}: jumps count from the next
# instruction.  linux/filter.h opcodes: 0x28 ldh [k], 0x20 ld [k], 0x30 ldb
# [k], 0xb1 ldx 4*([k]&0xf), 0x50 ldb [x+k], 0x15 jeq #k, 0x45 jset #k,
# 0x06 ret #k.  Offsets: Ethernet type 12, IPv4 protocol 23, source 26,
# destination 30, TCP flags 14 + IHL + 13.
R = int.from_bytes(root_ip, "big")
prog = [(0x28, 0, 0, 12), (0x15, 0, 9, 0x0800),      # IPv4, else drop
        (0x20, 0, 0, 26), (0x15, 8, 0, R),           # from ROOT: keep
        (0x20, 0, 0, 30), (0x15, 6, 0, R),           # to ROOT: keep
        (0x30, 0, 0, 23), (0x15, 0, 3, 6),           # TCP, else drop
        (0xb1, 0, 0, 14), (0x50, 0, 0, 27), (0x45, 1, 0, 0x02),   # SYN: keep
        (0x06, 0, 0, 0), (0x06, 0, 0, 0x40000)]
code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in prog))
s.setsockopt(socket.SOL_SOCKET, 26, struct.pack("HL", len(prog), ctypes.addressof(code)))   # SO_ATTACH_FILTER
# Frames that arrived before the filter: read and dropped.
s.setblocking(False)
try:
    while s.recv(65536):
        pass
except BlockingIOError:
    pass
s.setblocking(True)
st = dict(frames=0, drops=0, ssh=0, to_root_syn=0, root_other=0, root_other_ports=[], host_to_host=0, found=[])
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
signal.signal(signal.SIGINT, lambda *a: stop.append(1))
# Ready: the test waits for this file before it starts what it watches.
open(out + ".ready", "w").close()
next_token_look = 0.0
while not stop:
    if token is None and token_file and time.monotonic() >= next_token_look:
        next_token_look = time.monotonic() + 0.2
        try:
            t = open(token_file, "rb").read().strip()
            if t:
                token = t
                needles.append(t)
        except OSError:
            pass
    try:
        r, _, _ = select.select([s], [], [], 0.2)
    except InterruptedError:
        continue
    if not r:
        continue
    try:
        f = s.recv(65536)
    except InterruptedError:
        continue
    st["frames"] += 1
    if len(f) < 34 or f[12:14] != b"\x08\x00":
        continue
    ihl = (f[14] & 15) * 4
    if f[23] != 6 or len(f) < 14 + ihl + 20:
        continue
    src, dst = f[26:30], f[30:34]
    t0 = 14 + ihl
    sport, dport = struct.unpack("!HH", f[t0:t0 + 4])
    flags = f[t0 + 13]
    payload = f[t0 + ((f[t0 + 12] >> 4) * 4):]
    if sport == 22 and src != root_ip or dport == 22 and dst != root_ip:
        st["ssh"] += 1
    elif src == root_ip or dst == root_ip:
        if dst == root_ip and flags & 0x12 == 0x02:
            st["to_root_syn"] += 1
        st["root_other"] += 1
        mine, theirs = (sport, (dst, dport)) if src == root_ip else (dport, (src, sport))
        tag = "%d<->%s:%d" % (mine, socket.inet_ntoa(theirs[0]), theirs[1])
        if len(st["root_other_ports"]) < 20 and tag not in st["root_other_ports"]:
            st["root_other_ports"].append(tag)
    else:
        st["host_to_host"] += 1
    if payload:
        for n in needles:
            if n in payload and len(st["found"]) < 20:
                st["found"].append("%s in %s:%d -> %s:%d" % ("the token" if n is token else n.decode(),
                                   socket.inet_ntoa(src), sport, socket.inet_ntoa(dst), dport))
# struct tpacket_stats { unsigned tp_packets, tp_drops; } (SOL_PACKET 263, PACKET_STATISTICS 6)
try:
    st["drops"] = struct.unpack("II", s.getsockopt(263, 6, 8))[1]
except OSError:
    st["drops"] = -1
st["token_seen"] = token is not None
with open(out + ".tmp", "w") as o:
    json.dump(st, o)
os.rename(out + ".tmp", out)
