"""Frames and the reference rules of the Ethernet front-end's L2-L4 layer (docs/frontend_rtl.md),
shared by the kv_eth_if and kv_top testbenches.

``classify`` is an independent Python statement of the receive rules: for a frame it gives the one
outcome counter it must land in and what the front-end must produce for it (the UDP payload and
its metadata, or the request an ARP / ICMP reply answers). ``expect_*_reply`` build, with scapy,
the exact frames the transmit side must send. ``mutate`` corrupts frames for the fuzz tests.
Frames are built with scapy.
"""

from __future__ import annotations

import random
import socket
import struct

from scapy.all import ARP, ICMP, IP, UDP, Ether, Raw
from scapy.layers.inet import IPOption_NOP

OUR_MAC = "02:00:5e:10:00:01"
OUR_IP = "10.0.0.1"
OUR_PORT = 11211
PEER_MAC = "02:11:22:33:44:55"
PEER_IP = "10.0.0.2"
BCAST = "ff:ff:ff:ff:ff:ff"

COUNTERS = ["rx_frames", "rx_udp_payloads", "arp_replies", "icmp_replies", "drop_mac_error",
            "drop_oversize", "drop_runt", "drop_not_for_us", "drop_ethertype", "drop_arp",
            "drop_bad_length", "drop_ip_checksum", "drop_ip_fragment", "drop_ip_proto",
            "drop_udp_port", "drop_udp_checksum", "drop_icmp", "drop_fifo_full",
            "tx_frames", "tx_udp_replies", "tx_drop_oversize"]
C = {name: i for i, name in enumerate(COUNTERS)}
SERVED = (C["rx_udp_payloads"], C["arp_replies"], C["icmp_replies"])


# ------------------------------------------------------------------------------------------
# frames
# ------------------------------------------------------------------------------------------

def mac_b(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


def mac_i(mac: str) -> int:
    return int.from_bytes(mac_b(mac), "big")


def ip_i(ip: str) -> int:
    return int.from_bytes(socket.inet_aton(ip), "big")


def eth(dst: str, src: str, etype: int, tci: int | None = None) -> bytes:
    h = mac_b(dst) + mac_b(src)
    if tci is not None:
        h += struct.pack(">HH", 0x8100, tci)
    return h + struct.pack(">H", etype)


def pad60(frame: bytes) -> bytes:
    return frame + bytes(max(0, 60 - len(frame)))


def udp_frame(payload: bytes, *, sport=40000, dport=OUR_PORT, src_ip=PEER_IP, dst_ip=OUR_IP, src_mac=PEER_MAC,
              dst_mac=OUR_MAC, tci=None, opt_words=0, zero_csum=False, ip_id=7, flags=0, frag=0, ttl=64) -> bytes:
    ip = IP(src=src_ip, dst=dst_ip, id=ip_id, flags=flags, frag=frag, ttl=ttl,
            options=[IPOption_NOP()] * (4 * opt_words)) / UDP(sport=sport, dport=dport) / Raw(payload)
    if zero_csum:
        ip[UDP].chksum = 0
    return pad60(eth(dst_mac, src_mac, 0x0800, tci) + bytes(ip))


def arp_frame(*, op=1, tpa=OUR_IP, spa=PEER_IP, sha=PEER_MAC, dst_mac=BCAST, tci=None, hwtype=1) -> bytes:
    a = ARP(op=op, hwsrc=sha, psrc=spa, hwdst="00:00:00:00:00:00", pdst=tpa, hwtype=hwtype)
    return pad60(eth(dst_mac, sha, 0x0806, tci) + bytes(a))


def icmp_frame(data: bytes, *, ident=0x1234, seq=1, itype=8, src_ip=PEER_IP, dst_ip=OUR_IP, src_mac=PEER_MAC,
               dst_mac=OUR_MAC, tci=None, opt_words=0) -> bytes:
    ip = IP(src=src_ip, dst=dst_ip, id=99, options=[IPOption_NOP()] * (4 * opt_words)) / \
        ICMP(type=itype, id=ident, seq=seq) / Raw(data)
    return pad60(eth(dst_mac, src_mac, 0x0800, tci) + bytes(ip))


def ones_sum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f">{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def meta_int(vlan: int, tci: int, mac: int, ip: int, port: int, length: int) -> int:
    return (vlan << 128) | (tci << 112) | (mac << 64) | (ip << 32) | (port << 16) | length


def unpack_meta(meta: int) -> dict:
    return {"vlan": meta >> 128 & 1, "tci": meta >> 112 & 0xFFFF, "mac": meta >> 64 & (1 << 48) - 1,
            "ip": meta >> 32 & 0xFFFFFFFF, "port": meta >> 16 & 0xFFFF, "len": meta & 0xFFFF}


def reply_hdr(dst_mac: int, tci: int | None, etype: int, cfg: dict) -> bytes:
    dst = ":".join(f"{b:02x}" for b in dst_mac.to_bytes(6, "big"))
    return eth(dst, cfg["mac"], etype, tci)


def expect_udp_reply(payload: bytes, meta: int, ip_id: int, cfg: dict) -> bytes:
    m = unpack_meta(meta)
    dst_ip = socket.inet_ntoa(m["ip"].to_bytes(4, "big"))
    ip = IP(src=cfg["ip"], dst=dst_ip, id=ip_id, flags="DF", ttl=64) / UDP(sport=cfg["port"], dport=m["port"]) / \
        Raw(payload)
    return pad60(reply_hdr(m["mac"], m["tci"] if m["vlan"] else None, 0x0800, cfg) + bytes(ip))


def expect_icmp_reply(req: dict, ip_id: int, cfg: dict) -> bytes:
    ip = IP(src=cfg["ip"], dst=socket.inet_ntoa(req["ip"].to_bytes(4, "big")), id=ip_id, flags="DF", ttl=64) / \
        ICMP(type=0, code=0, id=req["ident"], seq=req["seq"]) / Raw(req["data"])
    return pad60(reply_hdr(req["mac"], req["tci"], 0x0800, cfg) + bytes(ip))


def expect_arp_reply(req: dict, cfg: dict) -> bytes:
    a = ARP(op=2, hwsrc=cfg["mac"], psrc=cfg["ip"], hwdst=":".join(f"{b:02x}" for b in req["sha"]),
            pdst=socket.inet_ntoa(req["spa"]))
    return pad60(reply_hdr(int.from_bytes(req["sha"], "big"), req["tci"], 0x0806, cfg) + bytes(a))


def classify(frame: bytes, user: int, max_frame: int, cfg: dict) -> tuple[int, object]:
    """The one outcome counter of a received frame, by the rules of docs/frontend_rtl.md, and what
    the front-end must produce for it (payload+meta, or the request an ARP/ICMP reply answers)."""
    n = len(frame)
    be16 = lambda o: struct.unpack_from(">H", frame, o)[0]
    if user:
        return C["drop_mac_error"], None
    if n > max_frame:
        return C["drop_oversize"], None
    if n < 60:
        return C["drop_runt"], None
    if frame[0:6] not in (mac_b(cfg["mac"]), b"\xff" * 6):
        return C["drop_not_for_us"], None
    tci = None
    etype, e = be16(12), 14
    if etype == 0x8100:
        tci, etype, e = be16(14), be16(16), 18
    if etype == 0x0806:
        htype, ptype, hlen, plen, op = be16(e), be16(e + 2), frame[e + 4], frame[e + 5], be16(e + 6)
        if (htype, ptype, hlen, plen, op) != (1, 0x0800, 6, 4, 1):
            return C["drop_arp"], None
        if frame[e + 24:e + 28] != socket.inet_aton(cfg["ip"]):
            return C["drop_not_for_us"], None
        return C["arp_replies"], {"sha": frame[e + 8:e + 14], "spa": frame[e + 14:e + 18], "tci": tci}
    if etype != 0x0800 or frame[e] >> 4 != 4:
        return C["drop_ethertype"], None
    ihl = frame[e] & 15
    if ihl < 5 or n < e + 4 * ihl:
        return C["drop_bad_length"], None
    if ones_sum(frame[e:e + 4 * ihl]) != 0xFFFF:
        return C["drop_ip_checksum"], None
    total = be16(e + 2)
    if total < 4 * ihl or n < e + total:
        return C["drop_bad_length"], None
    if frame[e + 16:e + 20] != socket.inet_aton(cfg["ip"]):
        return C["drop_not_for_us"], None
    fl = be16(e + 6)
    if fl & 0x2000 or fl & 0x1FFF:
        return C["drop_ip_fragment"], None
    proto = frame[e + 9]
    l4, l4len = e + 4 * ihl, total - 4 * ihl
    src_mac = int.from_bytes(frame[6:12], "big")
    src_ip = int.from_bytes(frame[e + 12:e + 16], "big")
    if proto == 17:
        # an L4 header shorter than 8 bytes reads whatever follows: still one outcome
        ulen = be16(l4 + 4) if l4 + 6 <= n else -1
        if ulen != l4len or ulen < 9:
            return C["drop_bad_length"], None
        if be16(l4 + 2) != cfg["port"]:
            return C["drop_udp_port"], None
        if be16(l4 + 6) != 0:
            pseudo = frame[e + 12:e + 20] + struct.pack(">BBH", 0, 17, ulen)
            if ones_sum(pseudo + frame[l4:e + total]) != 0xFFFF:
                return C["drop_udp_checksum"], None
        payload = frame[l4 + 8:e + total]
        meta = meta_int(int(tci is not None), tci or 0, src_mac, src_ip, be16(l4), len(payload))
        return C["rx_udp_payloads"], (payload, meta)
    if proto == 1:
        if l4len < 8:
            return C["drop_bad_length"], None
        if frame[l4] != 8 or frame[l4 + 1] != 0 or ones_sum(frame[l4:e + total]) != 0xFFFF:
            return C["drop_icmp"], None
        return C["icmp_replies"], {"mac": src_mac, "ip": src_ip, "tci": tci, "ident": be16(l4 + 4),
                                   "seq": be16(l4 + 6), "data": frame[l4 + 8:e + total]}
    return C["drop_ip_proto"], None


def verify_tx_checksums(frame: bytes) -> None:
    """Every checksum of a transmitted frame, by raw one's-complement sums and by scapy."""
    etype, e = struct.unpack_from(">H", frame, 12)[0], 14
    if etype == 0x8100:
        etype, e = struct.unpack_from(">H", frame, 16)[0], 18
    if etype != 0x0800:
        return
    ihl = frame[e] & 15
    total = struct.unpack_from(">H", frame, e + 2)[0]
    assert ones_sum(frame[e:e + 4 * ihl]) == 0xFFFF, "IPv4 header checksum"
    seg = frame[e + 4 * ihl:e + total]
    if frame[e + 9] == 17:
        pseudo = frame[e + 12:e + 20] + struct.pack(">BBH", 0, 17, len(seg))
        assert struct.unpack_from(">H", seg, 6)[0] != 0, "UDP checksum must be generated"
        assert ones_sum(pseudo + seg) == 0xFFFF, "UDP checksum"
    else:
        assert ones_sum(seg) == 0xFFFF, "ICMP checksum"
    p = Ether(frame)
    q = p.copy()
    del q[IP].chksum
    if UDP in q:
        del q[UDP].chksum
    if ICMP in q:
        del q[ICMP].chksum
    q = Ether(bytes(q))
    assert q[IP].chksum == p[IP].chksum, "scapy: IPv4 checksum"
    if UDP in p:
        assert q[UDP].chksum == p[UDP].chksum, "scapy: UDP checksum"
    if ICMP in p:
        assert q[ICMP].chksum == p[ICMP].chksum, "scapy: ICMP checksum"


def fix_ip_checksum(f: bytearray, e: int) -> None:
    """Recompute the IPv4 header checksum (when the header is there), so that checks behind it are reached."""
    ihl = (f[e] & 15) * 4 if len(f) > e else 0
    if ihl >= 20 and len(f) >= e + ihl:
        struct.pack_into(">H", f, e + 10, 0)
        struct.pack_into(">H", f, e + 10, 0xFFFF - ones_sum(bytes(f[e:e + ihl])))


def mutate(frame: bytes, rng: random.Random, cfg: dict | None = None) -> tuple[bytes, int]:
    """A random corruption of a frame: truncation, bit flips, length fields, checksums, addresses,
    ports, fragments, tuser...; header fields are changed with a fixed-up IPv4 checksum half the time.
    cfg ({"mac", "ip", "port"}) names the front-end's addresses (default OUR_*)."""
    our_mac = cfg["mac"] if cfg else OUR_MAC
    our_port = cfg["port"] if cfg else OUR_PORT
    f = bytearray(frame)
    user = 0
    e = 18 if f[12:14] == b"\x81\x00" else 14
    ihl = (f[e] & 15) * 4 if len(f) > e else 0
    r = rng.randrange(15)
    if r == 0:
        f = f[:rng.randint(0, len(f))]
    elif r == 1:
        for _ in range(rng.randint(1, 3)):
            if f:
                f[rng.randrange(len(f))] ^= 1 << rng.randrange(8)
    elif r == 2 and len(f) > e + 4:
        struct.pack_into(">H", f, e + 2, rng.choice([rng.getrandbits(16), len(f) - e + rng.randint(-30, 30) & 0xFFFF]))
    elif r == 3 and len(f) > e + ihl + 6:
        struct.pack_into(">H", f, e + ihl + 4, rng.choice([rng.getrandbits(16), rng.randint(0, 12)]))  # UDP length
    elif r == 4 and len(f) > e + 12:
        struct.pack_into(">H", f, e + 10, rng.getrandbits(16))         # IPv4 checksum
    elif r == 5:
        f += bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 1600)))   # trailing bytes / oversize
    elif r == 6:
        user = 1
    elif r == 7 and len(f) > e:
        f[e] = rng.choice([0x45, 0x46, 0x4F, 0x44, 0x40, 0x65, rng.getrandbits(8)])   # version / IHL
    elif r == 8:
        f[12:14] = rng.choice([b"\x81\x00", b"\x08\x00", b"\x08\x06", b"\x88\xa8", bytes([rng.getrandbits(8)] * 2)])
    elif r == 9 and len(f) > e + 8:
        f[e + 6] = rng.choice([0x20, 0x40, 0x00, 0x01, rng.getrandbits(8)])   # flags / fragment offset
        f[e + 7] = rng.choice([0, 0, rng.getrandbits(8)])
    elif r == 10 and len(f) > e + 9:
        f[e + 9] = rng.choice([1, 6, 17, 58, rng.getrandbits(8)])       # protocol
    elif r == 11 and len(f) > e + 20:
        f[e + 16 + rng.randrange(4)] ^= 1 << rng.randrange(8)          # destination IP
    elif r == 12 and len(f) > e + ihl + 4:
        struct.pack_into(">H", f, e + ihl + 2, rng.choice([our_port + 1, rng.getrandbits(16)]))  # dest port
    elif r == 13 and len(f) >= 6:
        f[0:6] = mac_b(rng.choice([BCAST, "02:00:5e:10:00:02", "01:00:5e:00:00:fb"]))
    else:
        f = bytearray(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 200))))  # noise
        if rng.random() < 0.5 and len(f) >= 6:
            f[0:6] = mac_b(our_mac)
    if r in (2, 7, 9, 10, 11) and rng.random() < 0.5:
        fix_ip_checksum(f, e)
    return bytes(f), user


def directed_frames(rng: random.Random) -> list[tuple[str, bytes, int]]:
    """(name, frame, tuser) covering every outcome."""
    getreq = b"\x00\x01\x00\x00\x00\x01\x00\x00" + bytes([0x80, 0x00, 0x00, 0x05]) + bytes(20) + b"hello"
    big = bytes(rng.getrandbits(8) for _ in range(1472))
    f = []
    f += [("udp", udp_frame(getreq), 0),
          ("udp 1 byte", udp_frame(b"\x5a"), 0),
          ("udp vlan", udp_frame(getreq, tci=0xA123), 0),
          ("udp zero checksum", udp_frame(b"no checksum here", zero_csum=True), 0),
          ("udp broadcast mac", udp_frame(b"bcast", dst_mac=BCAST), 0),
          ("udp 1472", udp_frame(big), 0),
          ("udp 1472 vlan", udp_frame(big, tci=5), 0)]
    for words in range(1, 11):
        f.append((f"udp ihl {5 + words}", udp_frame(bytes(range(words * 7)), opt_words=words,
                                                    tci=0x0FFF if words % 2 else None), 0))
    for n in list(range(1, 70)) + [119, 120, 121, 127, 128, 129, 500]:
        f.append((f"udp len {n}", udp_frame(bytes(rng.getrandbits(8) for _ in range(n)),
                                            tci=7 if n % 3 == 0 else None), 0))
    f += [("arp", arp_frame(), 0),
          ("arp vlan", arp_frame(tci=0x2064), 0),
          ("arp unicast", arp_frame(dst_mac=OUR_MAC), 0),
          ("arp other ip", arp_frame(tpa="10.0.0.9"), 0),
          ("arp reply", arp_frame(op=2), 0),
          ("arp hwtype", arp_frame(hwtype=6), 0),
          ("icmp", icmp_frame(b"abcdefghijklmnopqrstuvwxyz012345"), 0),
          ("icmp no data", icmp_frame(b""), 0),
          ("icmp vlan", icmp_frame(bytes(range(200)), tci=0x3001), 0),
          ("icmp big", icmp_frame(bytes(rng.getrandbits(8) for _ in range(1472))), 0),
          ("icmp options", icmp_frame(b"xyz", opt_words=3), 0),
          ("icmp not echo", icmp_frame(b"x", itype=13), 0)]
    bad_icmp = bytearray(icmp_frame(b"checksum")); bad_icmp[14 + 20 + 8] ^= 1
    f.append(("icmp bad checksum", bytes(bad_icmp), 0))
    f += [("mac error", udp_frame(getreq), 1),
          ("runt", udp_frame(b"x")[:59], 0),
          ("runt 14", udp_frame(b"x")[:14], 0),
          ("oversize", udp_frame(bytes(1481)), 0),
          ("other mac", udp_frame(getreq, dst_mac="02:00:5e:10:00:02"), 0),
          ("multicast mac", udp_frame(getreq, dst_mac="01:00:5e:00:00:01"), 0),
          ("other ip", udp_frame(getreq, dst_ip="10.0.0.3"), 0),
          ("ipv6 ethertype", pad60(eth(OUR_MAC, PEER_MAC, 0x86DD) + bytes(60)), 0),
          ("qinq", pad60(eth(OUR_MAC, PEER_MAC, 0x8100, 5) + struct.pack(">HH", 0x0800, 0) + bytes(50)), 0),
          ("s-tag", pad60(eth(OUR_MAC, PEER_MAC, 0x88A8) + bytes(60)), 0),
          ("udp port", udp_frame(getreq, dport=11212), 0),
          ("fragment MF", udp_frame(getreq, flags="MF"), 0),
          ("fragment offset", udp_frame(getreq, frag=10), 0),
          ("fragment offset 1", udp_frame(getreq, frag=1), 0),          # lowest offset bit
          ("fragment offset max", udp_frame(getreq, frag=0x1000), 0),   # highest offset bit
          ("df is fine", udp_frame(getreq, flags="DF"), 0),
          ("tcp", pad60(eth(OUR_MAC, PEER_MAC, 0x0800) + bytes(IP(src=PEER_IP, dst=OUR_IP, proto=6) / Raw(bytes(20)))), 0)]
    ipv5 = bytearray(udp_frame(getreq)); ipv5[14] = 0x65
    f.append(("ip version 6 in 0x0800", bytes(ipv5), 0))
    ihl4 = bytearray(udp_frame(getreq)); ihl4[14] = 0x44
    f.append(("ihl 4", bytes(ihl4), 0))
    bad_ipcs = bytearray(udp_frame(getreq)); bad_ipcs[14 + 10] ^= 0x40
    f.append(("ip checksum", bytes(bad_ipcs), 0))
    bad_udpcs = bytearray(udp_frame(getreq)); bad_udpcs[-1] ^= 0x01
    f.append(("udp checksum", bytes(bad_udpcs), 0))
    bad_udpcs_v = bytearray(udp_frame(getreq, tci=9)); bad_udpcs_v[18 + 20 + 6] ^= 0x80
    f.append(("udp checksum vlan", bytes(bad_udpcs_v), 0))
    trunc = udp_frame(bytes(100))[:100]
    f.append(("truncated", trunc, 0))
    f.append(("udp empty", udp_frame(b""), 0))
    ulen = bytearray(udp_frame(bytes(30)))
    struct.pack_into(">H", ulen, 14 + 20 + 4, 30)   # UDP length 30 != 38
    f.append(("udp length mismatch", bytes(ulen), 0))
    tot = bytearray(udp_frame(bytes(30)))
    struct.pack_into(">H", tot, 14 + 2, 19)          # total length < header
    struct.pack_into(">H", tot, 14 + 10, 0)
    struct.pack_into(">H", tot, 14 + 10, 0xFFFF - ones_sum(bytes(tot[14:34])))
    f.append(("ip total < header", bytes(tot), 0))
    padded = udp_frame(b"tiny") + bytes(40)          # Ethernet padding beyond the IP datagram
    f.append(("trailing padding", padded, 0))
    return f
