"""Ethernet II (+802.1Q) / IPv4 / UDP frames, and ARP, built and parsed with their checksums.

The virtual board bridge wraps each UDP datagram for the front-end into the frame the hardware
receives and unwraps the frames it sends back; tests build frames the RTL must accept or drop.
Frames carry no FCS (the MAC adds and checks it). When a frame is refused, the reason is the
name of the RTL drop counter for that case (docs/frontend_rtl.md), so a test can expect it.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from typing import Optional, Union

ETH_IPV4 = 0x0800
ETH_ARP = 0x0806
ETH_VLAN = 0x8100
IP_UDP = 17
MIN_FRAME = 60  # without FCS
BROADCAST = b"\xff" * 6
IPV4_HEADER = struct.Struct(">BBHHHBBH4s4s")
UDP_HEADER = struct.Struct(">HHHH")
ARP_BODY = struct.Struct(">HHBBH6s4s6s4s")
FLAG_DF = 0x4000
FLAG_MF = 0x2000

Mac = Union[str, bytes]
Ip = Union[str, bytes]


def mac_bytes(mac: Mac) -> bytes:
    """6 bytes from "02:00:00:00:00:01" (or from 6 bytes)."""
    if isinstance(mac, bytes):
        raw = mac
    else:
        parts = mac.replace("-", ":").split(":")
        if len(parts) != 6:
            raise ValueError(f"not a MAC address: {mac!r}")
        raw = bytes(int(part, 16) for part in parts)
    if len(raw) != 6:
        raise ValueError(f"a MAC address has 6 bytes, got {len(raw)}")
    return raw


def mac_str(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


def ip_bytes(ip: Ip) -> bytes:
    if isinstance(ip, bytes):
        if len(ip) != 4:
            raise ValueError(f"an IPv4 address has 4 bytes, got {len(ip)}")
        return ip
    return ipaddress.IPv4Address(ip).packed


def ip_str(raw: bytes) -> str:
    return str(ipaddress.IPv4Address(raw))


def internet_checksum(data: bytes) -> int:
    """RFC 1071: the complement of the one's complement sum of the 16-bit words."""
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _udp_checksum(src_ip: bytes, dst_ip: bytes, udp: bytes) -> int:
    pseudo = src_ip + dst_ip + struct.pack(">BBH", 0, IP_UDP, len(udp))
    return internet_checksum(pseudo + udp)


@dataclass(frozen=True)
class UdpDatagram:
    """A UDP datagram with the addressing of the frame that carries it."""

    src_mac: str
    dst_mac: str
    src_ip: str
    dst_ip: str
    src_port: int
    dst_port: int
    payload: bytes
    vlan_tci: Optional[int] = None
    ip_id: int = 0
    ttl: int = 64


@dataclass(frozen=True)
class ArpPacket:
    """An Ethernet/IPv4 ARP request (oper 1) or reply (oper 2)."""

    oper: int
    sender_mac: str
    sender_ip: str
    target_mac: str
    target_ip: str
    vlan_tci: Optional[int] = None


class FrameError(ValueError):
    """A frame that is not a well-formed UDP or ARP frame; reason is the RTL drop counter."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _ethernet(dst: Mac, src: Mac, ethertype: int, vlan_tci: Optional[int]) -> bytes:
    head = mac_bytes(dst) + mac_bytes(src)
    if vlan_tci is None:
        return head + struct.pack(">H", ethertype)
    if not 0 <= vlan_tci <= 0xFFFF:
        raise ValueError(f"VLAN TCI must be 16 bits, got {vlan_tci}")
    return head + struct.pack(">HHH", ETH_VLAN, vlan_tci, ethertype)


def _pad(frame: bytes) -> bytes:
    return frame + bytes(MIN_FRAME - len(frame)) if len(frame) < MIN_FRAME else frame


def build_udp_frame(payload: bytes, *, src_mac: Mac, dst_mac: Mac, src_ip: Ip, dst_ip: Ip,
                    src_port: int, dst_port: int, vlan_tci: Optional[int] = None,
                    ip_id: int = 0, ttl: int = 64, dont_fragment: bool = True) -> bytes:
    """A frame (no FCS) with correct IPv4 and UDP checksums, zero-padded to 60 bytes."""
    for name, port in (("src_port", src_port), ("dst_port", dst_port)):
        if not 0 <= port <= 0xFFFF:
            raise ValueError(f"{name} must be 16 bits, got {port}")
    src_ip_b, dst_ip_b = ip_bytes(src_ip), ip_bytes(dst_ip)
    udp_len = UDP_HEADER.size + len(payload)
    if 20 + udp_len > 0xFFFF:
        raise ValueError(f"a payload of {len(payload)} bytes does not fit one IPv4 datagram")
    udp = UDP_HEADER.pack(src_port, dst_port, udp_len, 0) + payload
    checksum = _udp_checksum(src_ip_b, dst_ip_b, udp) or 0xFFFF  # 0 would mean "none"
    udp = udp[:6] + struct.pack(">H", checksum) + udp[8:]
    header = IPV4_HEADER.pack(0x45, 0, 20 + udp_len, ip_id, FLAG_DF if dont_fragment else 0,
                              ttl, IP_UDP, 0, src_ip_b, dst_ip_b)
    header = header[:10] + struct.pack(">H", internet_checksum(header)) + header[12:]
    return _pad(_ethernet(dst_mac, src_mac, ETH_IPV4, vlan_tci) + header + udp)


def build_arp(oper: int, *, sender_mac: Mac, sender_ip: Ip, target_ip: Ip,
              target_mac: Mac = bytes(6), vlan_tci: Optional[int] = None) -> bytes:
    """An ARP request (oper 1, broadcast) or reply (oper 2, to target_mac), padded to 60 bytes."""
    if oper not in (1, 2):
        raise ValueError(f"ARP oper must be 1 (request) or 2 (reply), got {oper}")
    body = ARP_BODY.pack(1, ETH_IPV4, 6, 4, oper, mac_bytes(sender_mac), ip_bytes(sender_ip),
                         mac_bytes(target_mac), ip_bytes(target_ip))
    dst = BROADCAST if oper == 1 else target_mac
    return _pad(_ethernet(dst, sender_mac, ETH_ARP, vlan_tci) + body)


def parse_frame(frame: bytes) -> Union[UdpDatagram, ArpPacket]:
    """The UDP datagram or ARP packet of a frame, every length and checksum checked.

    Raises FrameError for anything else: another EtherType or IP protocol, a fragment, lengths
    that disagree, a wrong IPv4 or (non-zero) UDP checksum. Ethernet padding is ignored.
    """
    if len(frame) < 14:
        raise FrameError("drop_bad_length", f"{len(frame)}-byte frame has no Ethernet header")
    dst, src = frame[0:6], frame[6:12]
    ethertype, = struct.unpack_from(">H", frame, 12)
    offset, vlan_tci = 14, None
    if ethertype == ETH_VLAN:
        if len(frame) < 18:
            raise FrameError("drop_bad_length", "802.1Q tag cut short")
        vlan_tci, ethertype = struct.unpack_from(">HH", frame, 14)
        offset = 18
    if ethertype == ETH_ARP:
        return _parse_arp(frame, offset, vlan_tci)
    if ethertype != ETH_IPV4:
        raise FrameError("drop_ethertype", f"EtherType 0x{ethertype:04x} is neither IPv4 nor ARP")
    if len(frame) - offset < 20:
        raise FrameError("drop_bad_length", "IPv4 header cut short")
    (version_ihl, _, total_len, ip_id, flags_frag, ttl, protocol, _, src_ip,
     dst_ip) = IPV4_HEADER.unpack_from(frame, offset)
    if version_ihl >> 4 != 4:
        raise FrameError("drop_ethertype", f"IP version {version_ihl >> 4}")
    ihl = (version_ihl & 0xF) * 4
    if ihl < 20 or len(frame) - offset < ihl:
        raise FrameError("drop_bad_length", f"IPv4 header length {ihl} does not fit")
    if internet_checksum(frame[offset:offset + ihl]) != 0:
        raise FrameError("drop_ip_checksum", "IPv4 header checksum is wrong")
    if total_len < ihl or len(frame) - offset < total_len:
        raise FrameError("drop_bad_length", f"IPv4 total length {total_len} does not fit")
    if flags_frag & (FLAG_MF | 0x1FFF):
        raise FrameError("drop_ip_fragment", "IPv4 fragment")
    if protocol != IP_UDP:
        raise FrameError("drop_ip_proto", f"IPv4 protocol {protocol} is not UDP")
    udp_at = offset + ihl
    if total_len - ihl < UDP_HEADER.size:
        raise FrameError("drop_bad_length", "UDP header cut short")
    src_port, dst_port, udp_len, checksum = UDP_HEADER.unpack_from(frame, udp_at)
    if udp_len != total_len - ihl:
        raise FrameError("drop_bad_length", f"UDP length {udp_len} is not the IPv4 payload "
                         f"length {total_len - ihl}")
    udp = frame[udp_at:udp_at + udp_len]
    if checksum and _udp_checksum(src_ip, dst_ip, udp) != 0:
        raise FrameError("drop_udp_checksum", "UDP checksum is wrong")
    return UdpDatagram(mac_str(src), mac_str(dst), ip_str(src_ip), ip_str(dst_ip), src_port,
                       dst_port, bytes(udp[8:]), vlan_tci, ip_id, ttl)


def _parse_arp(frame: bytes, offset: int, vlan_tci: Optional[int]) -> ArpPacket:
    if len(frame) - offset < ARP_BODY.size:
        raise FrameError("drop_bad_length", "ARP body cut short")
    htype, ptype, hlen, plen, oper, sha, spa, tha, tpa = ARP_BODY.unpack_from(frame, offset)
    if (htype, ptype, hlen, plen) != (1, ETH_IPV4, 6, 4) or oper not in (1, 2):
        raise FrameError("drop_arp", "not an Ethernet/IPv4 ARP request or reply")
    return ArpPacket(oper, mac_str(sha), ip_str(spa), mac_str(tha), ip_str(tpa), vlan_tci)
