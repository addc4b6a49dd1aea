"""A blocking memcached binary-over-UDP client for pynq-kv (and any memcached -U).

UDP loses datagrams, so every call has a timeout and retries: a retry resends the same datagram
with the same request id, and a late reply to an earlier attempt is as good as a fresh one.
Replies are matched to requests by request id and opaque, so stale datagrams are ignored. It
accepts both reply layouts: one response per datagram (pynq-kv, memcached 1.6) and responses
spread over numbered datagrams (memcached's large values).
"""

from __future__ import annotations

import random
import socket
import time
from dataclasses import dataclass, field, replace
from typing import Iterable, Optional, Sequence, Union

from .codec import (
    HEADER_LEN,
    NO_ENTRY,
    Opcode,
    Request,
    Response,
    Status,
    delete_request,
    get_request,
    match_request,
    parse_match_extras,
    parse_responses,
    set_request,
)
from .udpframe import FRAME_HEADER_LEN, MAX_DATAGRAM, FrameHeader, wrap

Bytesy = Union[bytes, str]
MATCH_KINDS = {1: "exact", 2: "rule"}  # the engine's MATCH codes (regmap ST_MATCH_*)


def _b(item: Bytesy) -> bytes:
    return item.encode("utf-8") if isinstance(item, str) else bytes(item)


class MemcacheError(Exception):
    """The server answered with an error status."""

    def __init__(self, status: int, message: bytes) -> None:
        try:
            name = Status(status).name
        except ValueError:
            name = f"0x{status:04x}"
        super().__init__(f"{name}: {message.decode('utf-8', 'replace')}")
        self.status = status
        self.message = message


class MemcacheTimeout(TimeoutError):
    """No complete reply after every retry."""


@dataclass(frozen=True)
class MatchReply:
    """A MATCH hit: kind "exact" or "rule", the rule entry index for a rule hit, the value."""

    kind: str
    entry: Optional[int]
    value: bytes


@dataclass
class _Exchange:
    """One request datagram in flight and what has come back for it."""

    payload: bytes
    opaques: list[int]
    responses: dict[int, Response] = field(default_factory=dict)
    train: dict[int, bytes] = field(default_factory=dict)
    done: bool = False


def _raise_for(response: Response) -> None:
    if response.status != Status.NO_ERROR:
        raise MemcacheError(response.status, response.value)


class MemcacheUDPClient:
    """memcached binary protocol over UDP: get/set/delete/noop/version/match, batched get_multi."""

    def __init__(self, host: str = "127.0.0.1", port: int = 11211, *, timeout: float = 0.5,
                 retries: int = 2, max_datagram: int = MAX_DATAGRAM) -> None:
        if timeout <= 0 or retries < 0:
            raise ValueError("timeout must be positive and retries not negative")
        if max_datagram < FRAME_HEADER_LEN + 2 * HEADER_LEN:
            raise ValueError(f"max_datagram of {max_datagram} bytes cannot hold a request")
        self.timeout = timeout
        self.retries = retries
        self.max_datagram = max_datagram
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        self._sock.connect((host, port))  # only the server's datagrams are received
        self._next_id = random.randrange(1 << 16)
        self._next_opaque = random.randrange(1 << 32)
        self.timeouts = 0  # attempts that ran out of time (each led to a retry or a failure)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "MemcacheUDPClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the exchange ----------------------------------------------------------------------
    def exchange(self, batches: Sequence[Sequence[Request]]) -> list[list[Response]]:
        """Send each batch as one datagram; their responses in request order (quiet ones omitted).

        The last request of a batch must not be quiet: its response ends the batch. Opaques are
        assigned here. Raises MemcacheTimeout if a batch stays incomplete after every retry.
        """
        if len(batches) > 0xFFFF:
            raise ValueError(f"{len(batches)} datagrams at once exceed the 16-bit request ids")
        flights: dict[int, _Exchange] = {}
        order = []
        for batch in batches:
            if not batch or batch[-1].quiet:
                raise ValueError("a batch must end with a request that is always answered")
            requests = [replace(r, opaque=self._opaque()) for r in batch]
            request_id = self._request_id(flights)
            flights[request_id] = _Exchange(wrap(request_id, b"".join(r.encode() for r in requests)),
                                            [r.opaque for r in requests])
            order.append(request_id)
        for attempt in range(self.retries + 1):
            waiting = [f for f in flights.values() if not f.done]
            if not waiting:
                break
            if attempt:
                self.timeouts += 1
            for flight in waiting:
                try:
                    self._sock.send(flight.payload)
                except ConnectionRefusedError:  # an earlier ICMP error; the retries cover it
                    pass
            self._collect(flights, time.monotonic() + self.timeout)
        if not all(f.done for f in flights.values()):
            self.timeouts += 1
            raise MemcacheTimeout(f"no complete reply after {self.retries + 1} attempts of "
                                  f"{self.timeout:g} s")
        return [[flights[rid].responses[o] for o in flights[rid].opaques
                 if o in flights[rid].responses] for rid in order]

    def _opaque(self) -> int:
        self._next_opaque = (self._next_opaque + 1) & 0xFFFFFFFF
        return self._next_opaque

    def _request_id(self, busy: dict[int, _Exchange]) -> int:
        while True:
            self._next_id = (self._next_id + 1) & 0xFFFF
            if self._next_id not in busy:
                return self._next_id

    def _collect(self, flights: dict[int, _Exchange], deadline: float) -> None:
        """Receive until every flight is done or the deadline passes."""
        while not all(f.done for f in flights.values()):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._sock.settimeout(left)
            try:
                data = self._sock.recv(65536)
            except TimeoutError:
                return
            except ConnectionRefusedError:  # ICMP port unreachable: nobody there yet
                continue
            if len(data) < FRAME_HEADER_LEN:
                continue
            header = FrameHeader.unpack(data)
            flight = flights.get(header.request_id)
            if flight is None:
                continue  # a late reply to an earlier call
            message = self._message(flight, header, data[FRAME_HEADER_LEN:])
            if message is not None:
                self._take(flight, message)

    @staticmethod
    def _message(flight: _Exchange, header: FrameHeader, body: bytes) -> Optional[bytes]:
        """A whole reply message once all its datagrams are in (most replies are one)."""
        if header.total <= 1:
            return body
        flight.train[header.sequence] = body
        if len(flight.train) < header.total:
            return None
        message = b"".join(flight.train[i] for i in range(header.total) if i in flight.train)
        flight.train.clear()
        return message

    @staticmethod
    def _take(flight: _Exchange, message: bytes) -> None:
        for response in parse_responses(message):
            if response.opaque in flight.opaques:
                flight.responses[response.opaque] = response
                if response.opaque == flight.opaques[-1]:
                    flight.done = True

    def _one(self, request: Request) -> Response:
        return self.exchange([[request]])[0][0]

    # -- commands --------------------------------------------------------------------------
    def get(self, key: Bytesy) -> Optional[bytes]:
        response = self._one(get_request(_b(key)))
        if response.status == Status.KEY_NOT_FOUND:
            return None
        _raise_for(response)
        return response.value

    def set(self, key: Bytesy, value: Bytesy) -> None:
        """Store value; MemcacheError for a refused one (too large, table full, bad key)."""
        _raise_for(self._one(set_request(_b(key), _b(value))))

    def delete(self, key: Bytesy) -> bool:
        """True if the key was there. After a lost reply, the retry finds it gone: False."""
        response = self._one(delete_request(_b(key)))
        if response.status == Status.KEY_NOT_FOUND:
            return False
        _raise_for(response)
        return True

    def noop(self) -> None:
        _raise_for(self._one(Request(Opcode.NOOP)))

    def version(self) -> str:
        response = self._one(Request(Opcode.VERSION))
        _raise_for(response)
        return response.value.decode("utf-8", "replace")

    def match(self, key: Bytesy) -> Optional[MatchReply]:
        """pynq-kv's MATCH: the exact entry, else the best wildcard rule, else None."""
        response = self._one(match_request(_b(key)))
        if response.status == Status.KEY_NOT_FOUND:
            return None
        _raise_for(response)
        kind, entry = parse_match_extras(response.extras)
        return MatchReply(MATCH_KINDS.get(kind, str(kind)), None if entry == NO_ENTRY else entry,
                          response.value)

    def get_multi(self, keys: Iterable[Bytesy]) -> dict[bytes, bytes]:
        """The hits among keys: GETKQ requests closed by a NOOP, as few datagrams as fit."""
        unique = list(dict.fromkeys(_b(k) for k in keys))
        batches: list[list[Request]] = []
        room = self.max_datagram - FRAME_HEADER_LEN - HEADER_LEN  # the NOOP always fits
        current: list[Request] = []
        used = 0
        for key in unique:
            size = HEADER_LEN + len(key)
            if current and used + size > room:
                batches.append(current + [Request(Opcode.NOOP)])
                current, used = [], 0
            current.append(get_request(key, opcode=Opcode.GETKQ))
            used += size
        if current:
            batches.append(current + [Request(Opcode.NOOP)])
        found: dict[bytes, bytes] = {}
        for responses in self.exchange(batches):
            for response in responses:
                if response.opcode == Opcode.NOOP:
                    continue
                _raise_for(response)
                found[response.key] = response.value
        return found
