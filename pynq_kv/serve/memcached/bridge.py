"""The virtual board on a UDP socket: host datagrams <-> the Verilated kv_top's Ethernet port.

`start_board_bridge` serves memcached clients with the RTL data plane of the appliance's
virtual board (pynq_kv.board): each datagram is wrapped into a frame, the board answers, and
the reply frames' payloads go back to the sender. The board keeps its own counters; the bridge
counts only what it forwards or drops. Its latency (the "udp" histogram) is timed by the UDP
server's protocol it inherits: datagram in to the last reply's sendto, the board's time included.
"""

from __future__ import annotations

from typing import Any, Optional

from ...appliance import Appliance
from ...board import MAX_UDP_PAYLOAD, BoardBackend, BoardError, VirtualBoard
from .guard import Admission, admit
from .server import UdpServer, start_udp_server


class BoardBridge(UdpServer):
    """UDP on the host ↔ the virtual board's Ethernet port; counters are the board's own."""

    def _board(self) -> VirtualBoard:
        backend = self.appliance.engine.backend
        if not isinstance(backend, BoardBackend):
            raise BoardError("the appliance's engine does not run on a virtual board")
        return backend.board

    def handle(self, data: bytes, addr: Any) -> list[bytes]:
        if not admit(self.admission, addr[0])[0]:
            self.counters["drop_denied"] += 1  # the board sees one virtual source: deny here
            return []
        self.counters["rx_datagrams"] += 1
        if len(data) > MAX_UDP_PAYLOAD:
            self.counters["drop_over_mtu"] += 1  # no IP fragmentation on the virtual wire
            return []
        replies = self._board().exchange(data, addr[1])
        self.counters["tx_datagrams"] += len(replies)
        return replies

    def stats(self) -> dict[str, Any]:
        bridge = {name: self.counters[name] for name in
                  ("drop_denied", "rx_datagrams", "tx_datagrams", "drop_over_mtu",
                   "internal_errors")}
        out: dict[str, Any] = {"bridge": bridge}
        try:
            out["board"] = self._board().counters()
        except BoardError:
            pass
        return out


async def start_board_bridge(appliance: Appliance, host: str = "127.0.0.1", port: int = 11211, *,
                             admission: Optional[Admission] = None) -> UdpServer:
    """Serve the virtual board's memcached front-end on a UDP socket of this host.

    The bridge drops the sources admission denies (as start_udp_server's); the reply budget is
    the board's own, applied by its RTL to the one virtual source it sees.
    """
    return await start_udp_server(appliance, host, port, admission=admission,
                                  server_class=BoardBridge)
