"""The virtual board: the Verilated `kv_top` with its Ethernet port bridged to UDP datagrams.

`kv_top` is the block a Vivado design instantiates (MAC streams + AXI4-Lite). Here one Verilated
instance plays the whole board: its AXI4-Lite registers carry the engine's mailbox (the `rtl`
backend of KVEngine, so REST and RESP writes land in the RTL tables), and `exchange()` wraps a
UDP payload into a full Ethernet/IPv4/UDP frame with correct checksums, clocks the model until
it has answered, and unwraps the reply frames. `pynq_kv.serve.memcached.bridge` serves that on
a UDP socket, so real memcached clients reach the RTL data plane: nothing in the reply path is
Python but the unwrapping of frames.

Addresses on the virtual wire (the board's are the registers' reset values):
board 02:00:00:00:00:01 / 10.0.0.1, host 02:00:00:00:00:02 / 10.0.0.2 unless the caller names
the source address; the bridge gives each datagram its client's IPv4 address and UDP port, so
the board's own admission table and reply budget (frontend.md §10) decide per client, and
replies go back to the datagram's sender.
"""

from __future__ import annotations

import logging
from typing import Any

from . import regmap as rm
from . import sim
from .engine import KVEngine
from .frontend import Frontend
from .geometry import Geometry
from .mailbox import MailboxBackend
from .net.eth import FrameError, UdpDatagram, build_udp_frame, parse_frame

log = logging.getLogger("pynq_kv.board")

TOP = "kv_top"
BOARD_MAC = "02:00:00:00:00:01"
BOARD_IP = "10.0.0.1"
HOST_MAC = "02:00:00:00:00:02"
HOST_IP = "10.0.0.2"
BOARD_UDP_PORT = 11211
MAX_UDP_PAYLOAD = 1472       # a 1500-byte IPv4 MTU less the IPv4 and UDP headers
# An exchange is complete when nothing has been sent for QUIET_BASE + QUIET_PER_BYTE x (request
# bytes) cycles: binary requests take one per cycle, text is parsed one byte per cycle, and the
# port-to-port latency is under 64 cycles, so a datagram is always answered within that window.
QUIET_BASE = 128
QUIET_PER_BYTE = 2
MAX_EXCHANGE_CYCLES = 200_000  # a datagram that keeps the model busy longer is a failure


class BoardError(sim.SimError):
    """The virtual board answered with something that is not a reply to the host."""


def board_library(geometry: Geometry, data_w: int = 64) -> Any:
    """The (cached) Verilated kv_top for a geometry and MAC width."""
    params = {**sim.engine_params(geometry), "DATA_W": data_w}
    return sim.build_library(TOP, sim.engine_sources(), params)


class VirtualBoard:
    """One Verilated kv_top: registers for the host, a MAC port for the wire."""

    def __init__(self, geometry: Geometry, data_w: int = 64) -> None:
        if data_w not in (64, 512):
            raise ValueError(f"data_w must be 64 or 512, got {data_w}")
        self.geometry = geometry
        self.data_w = data_w
        self.device = sim.SimDevice(board_library(geometry, data_w))
        self.unexpected_frames = 0
        try:
            if self.device.eth_width != data_w // 8:
                raise BoardError(f"{TOP} has a {8 * self.device.eth_width}-bit MAC port, "
                                 f"expected {data_w}")
            self.device.write32(rm.REG_FE_UDP_PORT, BOARD_UDP_PORT)
            self.device.tick(2 * geometry.rows + 256)  # the engine clears its tables after reset
        except BaseException:
            self.device.close()
            raise

    def backend(self) -> "BoardBackend":
        """The engine's mailbox on this board's registers (closing it closes the board)."""
        return BoardBackend(self)

    def exchange(self, payload: bytes, src_port: int, src_ip: str = HOST_IP) -> list[bytes]:
        """The reply UDP payloads the board sends for one request payload from src_ip:src_port
        on the virtual wire, in order (the board's admission table decides by src_ip)."""
        frame = build_udp_frame(payload, src_mac=HOST_MAC, dst_mac=BOARD_MAC, src_ip=src_ip,
                                dst_ip=BOARD_IP, src_port=src_port, dst_port=BOARD_UDP_PORT)
        self.device.eth_send(frame)
        self.device.eth_run(QUIET_BASE + QUIET_PER_BYTE * len(payload), MAX_EXCHANGE_CYCLES)
        if self.device.eth_rx_pending:
            raise BoardError(f"the board did not take a frame within {MAX_EXCHANGE_CYCLES} cycles")
        replies = []
        while (out := self.device.eth_recv()) is not None:
            try:
                parsed = parse_frame(out)
            except FrameError as exc:
                self.unexpected_frames += 1
                raise BoardError(f"the board sent a malformed frame ({exc.reason}): {exc}") from exc
            if (not isinstance(parsed, UdpDatagram) or parsed.dst_port != src_port
                    or parsed.src_port != BOARD_UDP_PORT or parsed.dst_ip != src_ip
                    or parsed.dst_mac != HOST_MAC):
                self.unexpected_frames += 1
                log.warning("virtual board: a frame that is not a reply to the host: %r", parsed)
                continue
            replies.append(parsed.payload)
        return replies

    def counters(self) -> dict[str, int]:
        """The front-end counters (docs/registers.md FE_COUNTER), read through its registers."""
        return Frontend(self.device).counters()

    def close(self) -> None:
        self.device.close()


class BoardBackend(MailboxBackend):
    """KVEngine's `rtl` backend on a virtual board: the host side of the same registers."""

    def __init__(self, board: VirtualBoard) -> None:
        self.board = board
        super().__init__(board.device, name="rtl")

    def close(self) -> None:
        super().close()
        self.board.close()


def board_engine(geometry: Geometry, data_w: int = 64, **engine_kw: Any) -> KVEngine:
    """A KVEngine whose tables are the virtual board's RTL tables."""
    board = VirtualBoard(geometry, data_w)
    try:
        return KVEngine(board.backend(), **engine_kw)
    except BaseException:
        board.close()
        raise
