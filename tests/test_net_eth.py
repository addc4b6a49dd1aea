"""pynq_kv.net.eth against scapy: frames we build, scapy reads; frames scapy builds, we read."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynq_kv.net import eth

scapy_all = pytest.importorskip("scapy.all")
Ether, Dot1Q, IP, UDP, ARP, Raw = (scapy_all.Ether, scapy_all.Dot1Q, scapy_all.IP, scapy_all.UDP,
                                   scapy_all.ARP, scapy_all.Raw)

MAC_A, MAC_B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
ports = st.integers(0, 0xFFFF)
ips = st.integers(1, 0xFFFFFFFE).map(lambda n: ".".join(str(n >> s & 255) for s in (24, 16, 8, 0)))
vlans = st.one_of(st.none(), st.integers(0, 0xFFFF))


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=1472), ips, ips, ports, ports, vlans, st.integers(0, 0xFFFF))
def test_built_frames_read_by_scapy(payload: bytes, src: str, dst: str, sport: int, dport: int,
                                    vlan: int | None, ip_id: int) -> None:
    frame = eth.build_udp_frame(payload, src_mac=MAC_A, dst_mac=MAC_B, src_ip=src, dst_ip=dst,
                                src_port=sport, dst_port=dport, vlan_tci=vlan, ip_id=ip_id)
    assert len(frame) >= 60
    packet = Ether(frame)
    assert (packet.src, packet.dst) == (MAC_A, MAC_B)
    if vlan is None:
        assert Dot1Q not in packet
    else:
        tag = packet[Dot1Q]
        assert (tag.prio << 13 | tag.dei << 12 | tag.vlan) == vlan
    ip, udp = packet[IP], packet[UDP]
    assert (ip.src, ip.dst, ip.id, ip.ttl, int(ip.flags), ip.frag) == (src, dst, ip_id, 64, 2, 0)
    assert (udp.sport, udp.dport, udp.len) == (sport, dport, 8 + len(payload))
    assert bytes(udp.payload)[:len(payload)] == payload
    # scapy recomputes both checksums from scratch: they must equal ours
    rebuilt = IP(bytes(ip))
    del rebuilt.chksum
    del rebuilt[UDP].chksum
    rebuilt = IP(bytes(rebuilt))
    assert rebuilt.chksum == ip.chksum
    assert (rebuilt[UDP].chksum or 0xFFFF) == udp.chksum
    assert eth.parse_frame(frame) == eth.UdpDatagram(MAC_A, MAC_B, src, dst, sport, dport,
                                                     payload, vlan, ip_id, 64)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=600), ips, ips, ports, ports, st.booleans(), st.booleans())
def test_scapy_frames_parsed(payload: bytes, src: str, dst: str, sport: int, dport: int,
                             tagged: bool, no_checksum: bool) -> None:
    packet = Ether(src=MAC_A, dst=MAC_B)
    if tagged:
        packet = packet / Dot1Q(vlan=42, prio=5)
    packet = packet / IP(src=src, dst=dst, id=7, ttl=9) / UDP(sport=sport, dport=dport) / Raw(payload)
    if no_checksum:
        packet[UDP].chksum = 0
    parsed = eth.parse_frame(bytes(packet))
    assert isinstance(parsed, eth.UdpDatagram)
    assert (parsed.src_ip, parsed.dst_ip, parsed.src_port, parsed.dst_port) == (src, dst, sport, dport)
    assert parsed.payload == payload and parsed.ttl == 9 and parsed.ip_id == 7
    assert parsed.vlan_tci == ((5 << 13) | 42 if tagged else None)


def test_ip_options_are_skipped() -> None:
    packet = (Ether(src=MAC_A, dst=MAC_B) / IP(src="10.0.0.1", dst="10.0.0.2",
              options=[scapy_all.IPOption_RR()]) / UDP(sport=1, dport=2) / Raw(b"hi"))
    assert eth.parse_frame(bytes(packet)).payload == b"hi"


def _udp(**ip_fields: object) -> bytes:
    return bytes(Ether(src=MAC_A, dst=MAC_B) / IP(src="10.0.0.1", dst="10.0.0.2", **ip_fields)
                 / UDP(sport=1, dport=11211) / Raw(b"payload"))


def _corrupt(frame: bytes, at: int) -> bytes:
    return frame[:at] + bytes([frame[at] ^ 0x01]) + frame[at + 1:]


@pytest.mark.parametrize("frame, reason", [
    (b"\x00" * 13, "drop_bad_length"),
    (bytes(Ether(src=MAC_A, dst=MAC_B, type=0x86DD) / Raw(bytes(40))), "drop_ethertype"),
    (_corrupt(_udp(), 24), "drop_ip_checksum"),  # the IPv4 header checksum no longer adds up
    (_corrupt(_udp(), len(_udp()) - 1), "drop_udp_checksum"),
    (_udp(flags="MF"), "drop_ip_fragment"),
    (_udp(frag=3), "drop_ip_fragment"),
    (bytes(Ether(src=MAC_A, dst=MAC_B) / IP(src="10.0.0.1", dst="10.0.0.2") / scapy_all.ICMP()),
     "drop_ip_proto"),
    (_udp()[:40], "drop_bad_length"),  # total length beyond the frame
    (bytes(Ether(src=MAC_A, dst=MAC_B) / IP(src="10.0.0.1", dst="10.0.0.2")
           / UDP(sport=1, dport=2, len=20) / Raw(b"abc")), "drop_bad_length"),
    (bytes(Ether(src=MAC_A, dst=MAC_B) / IP(src="10.0.0.1", dst="10.0.0.2", version=6)
           / UDP() / Raw(b"x")), "drop_ethertype"),
    (bytes(Ether(src=MAC_A, dst="ff:ff:ff:ff:ff:ff") / ARP(op=3, pdst="10.0.0.2")), "drop_arp"),
])
def test_refused_frames(frame: bytes, reason: str) -> None:
    with pytest.raises(eth.FrameError) as info:
        eth.parse_frame(frame)
    assert info.value.reason == reason


def test_padding_is_ignored() -> None:
    frame = _udp() + bytes(20)
    assert eth.parse_frame(frame).payload == b"payload"


def test_arp_both_ways() -> None:
    request = eth.build_arp(1, sender_mac=MAC_A, sender_ip="10.0.0.1", target_ip="10.0.0.2",
                            vlan_tci=7)
    packet = Ether(request)
    assert packet.dst == "ff:ff:ff:ff:ff:ff" and packet[Dot1Q].vlan == 7 and len(request) == 60
    arp = packet[ARP]
    assert (arp.op, arp.hwsrc, arp.psrc, arp.pdst) == (1, MAC_A, "10.0.0.1", "10.0.0.2")
    reply = bytes(Ether(src=MAC_B, dst=MAC_A) / ARP(op=2, hwsrc=MAC_B, psrc="10.0.0.2",
                                                    hwdst=MAC_A, pdst="10.0.0.1"))
    assert eth.parse_frame(reply) == eth.ArpPacket(2, MAC_B, "10.0.0.2", MAC_A, "10.0.0.1")
    ours = eth.build_arp(2, sender_mac=MAC_B, sender_ip="10.0.0.2", target_mac=MAC_A,
                         target_ip="10.0.0.1")
    assert bytes(Ether(ours))[:42] == reply[:42]


def test_address_helpers() -> None:
    assert eth.mac_bytes("02-00-00-00-00-0A") == bytes.fromhex("02000000000a")
    assert eth.mac_str(eth.mac_bytes(MAC_A)) == MAC_A
    assert eth.ip_str(eth.ip_bytes("192.168.1.2")) == "192.168.1.2"
    for bad in ("02:00", "zz:00:00:00:00:00"):
        with pytest.raises(ValueError):
            eth.mac_bytes(bad)
    with pytest.raises(ValueError):
        eth.ip_bytes(b"\x01\x02")
    with pytest.raises(ValueError):
        eth.build_udp_frame(b"", src_mac=MAC_A, dst_mac=MAC_B, src_ip="1.2.3.4", dst_ip="1.2.3.5",
                            src_port=70000, dst_port=1)
    assert eth.internet_checksum(bytes.fromhex("45000073000040004011c0a80001c0a800c7")) == 0xB861
