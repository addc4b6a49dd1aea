"""No client can starve the rest (issue 16): a tick runs at most `tick_commands` of one client
and parses at most `tick_bytes` of input (reads of up to SMALL_READ bytes excepted), whatever a
client sends. Deterministic: the server runs on a stand-in loop and transports, ticks are
counted, and input is only delivered while the server reads from that client, as asyncio does.
The same over real sockets is tests/test_abuse.py's pipelined_gets_unread scenario.
"""

from __future__ import annotations

from typing import Any, Callable

import hiredis

from pynq_kv import Geometry, KVEngine
from pynq_kv.appliance import Appliance
from pynq_kv.serve.resp.server import FREE_PER_TICK, SMALL_READ, Connection, RespConfig, RespServer
from resp_helpers import encode_command

READ_SIZE = 256 * 1024  # what asyncio's selector transport reads at most per event


class Transport:
    """What Connection uses of an asyncio transport, recording replies and reading state."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.reading = True
        self.closed = False

    def write(self, data: bytes) -> None:
        self.out += data

    def set_write_buffer_limits(self, high: int) -> None:
        pass

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closed = True

    abort = close

    def get_extra_info(self, name: str) -> Any:
        return None

    def replies(self) -> list:
        reader = hiredis.Reader()
        reader.feed(bytes(self.out))
        out = []
        reply = reader.gets()
        while reply is not False:
            out.append(reply)
            reply = reader.gets()
        return out


class Loop:
    """call_soon only: the test runs the callbacks, one event-loop pass at a time."""

    def __init__(self) -> None:
        self.ready: list[Callable[[], None]] = []

    def call_soon(self, fn: Callable[[], None]) -> None:
        self.ready.append(fn)

    def run_pass(self) -> int:
        todo, self.ready = self.ready, []
        for fn in todo:
            fn()
        return len(todo)


class Client:
    """A connection whose input is delivered READ_SIZE bytes at a time while it is read from."""

    def __init__(self, server: RespServer) -> None:
        self.transport = Transport()
        self.conn = Connection(server)
        self.conn.connection_made(self.transport)
        self.pending = b""

    def send(self, data: bytes) -> None:
        self.pending += data

    def deliver(self) -> None:
        if self.transport.reading and self.pending:
            chunk, self.pending = self.pending[:READ_SIZE], self.pending[READ_SIZE:]
            self.conn.data_received(chunk)


def make_server(**config: Any) -> tuple[RespServer, Loop]:
    appliance = Appliance(lambda: KVEngine("model", Geometry(rows=1024, rules=64)))
    server = RespServer(appliance, RespConfig(**config))
    loop = server.loop = Loop()
    return server, loop


def run(loop: Loop, clients: list[Client], passes: int, until: Callable[[], bool]) -> int:
    """Event-loop passes (ready callbacks, then each readable client's next read) until
    `until()`; returns how many it took, failing past `passes`."""
    for n in range(1, passes + 1):
        loop.run_pass()
        for client in clients:
            client.deliver()
        if until():
            return n
    raise AssertionError(f"not done after {passes} passes")


def count_ticks(server: RespServer) -> list[int]:
    """Commands run by each tick, recorded as ticks happen."""
    ran: list[int] = []
    tick = server.tick

    def counted() -> None:
        before = server.total_commands
        tick()
        ran.append(server.total_commands - before)

    server.tick = counted  # type: ignore[method-assign]
    return ran


def test_a_huge_pipeline_does_not_delay_another_clients_ping() -> None:
    server, loop = make_server(tick_commands=500)
    ticks = count_ticks(server)
    heavy, control = Client(server), Client(server)
    heavy.send(encode_command("GET", "k") * 50_000)
    run(loop, [heavy, control], 3, lambda: bool(ticks))
    assert max(ticks) <= 500  # one client's share of a tick
    for _ in range(5):  # PINGs while the pipeline is still being served
        control.send(encode_command("PING"))
        before = len(control.transport.replies())
        passes = run(loop, [heavy, control], 3,
                     lambda: len(control.transport.replies()) > before)
        assert passes <= 2  # read in one pass, answered by the tick of the next
        assert heavy.pending  # the heavy client was not done: the PING did not wait for it
    assert max(ticks) <= 501


def test_order_is_kept_and_a_deferred_client_is_served_in_full() -> None:
    # Writes and reads of one key, in blocks and single commands, cut at odd places by a small
    # share and a small parse budget: the replies must be sequential execution's.
    server, loop = make_server(tick_commands=7, tick_bytes=1024)
    client = Client(server)
    expected: list[Any] = []
    data = b""
    for i in range(300):
        value = b"v%d" % i
        data += encode_command("SET", "k", value) + encode_command("GET", "k") * (i % 9)
        data += encode_command("MGET", "k", "nokey") if i % 5 == 0 else b""
        expected += [b"OK"] + [value] * (i % 9) + ([[value, None]] if i % 5 == 0 else [])
    client.send(data)
    passes = run(loop, [client], len(expected), lambda: len(client.transport.replies()) == len(expected))
    assert client.transport.replies() == expected
    assert passes >= len(expected) // 7  # it really was cut into shares
    assert client.transport.reading and not client.conn.deferred and not client.conn.held
    assert not loop.ready or loop.run_pass() <= 1 and not loop.ready  # nothing left running


def test_reading_stops_while_commands_wait_and_resumes_after() -> None:
    server, loop = make_server(tick_commands=100)
    client = Client(server)
    client.send(encode_command("GET", "k") * 1000)
    client.deliver()  # parsed whole (under tick_bytes): 1000 commands queued
    loop.run_pass()  # the tick runs 100 of them
    assert len(client.transport.replies()) == 100
    assert not client.transport.reading  # 900 wait: nothing more is read meanwhile
    passes = 0
    while len(client.transport.replies()) < 1000:
        assert not client.transport.reading
        loop.run_pass()
        passes += 1
        assert passes <= 9
    assert client.transport.reading
    assert client.transport.replies() == [None] * 1000


def test_eof_after_a_long_pipeline_closes_only_once_all_is_answered() -> None:
    server, loop = make_server(tick_commands=10)
    client = Client(server)
    client.conn.data_received(encode_command("PING") * 95)
    client.conn.eof_received()  # asyncio may see the FIN in the same pass as the data
    run(loop, [client], 20, lambda: client.transport.closed)
    assert client.transport.replies() == [b"PONG"] * 95


def test_many_clients_of_huge_commands_parse_within_the_budget() -> None:
    # Issue 16's many-small-arguments clients: each holds a partial EXISTS of tiny arguments.
    # No pass parses more than tick_bytes plus short reads, and a PING is answered at once.
    budget = 64 * 1024
    server, loop = make_server(tick_bytes=budget)
    heavy = [Client(server) for _ in range(8)]
    control = Client(server)
    parsed: list[int] = []
    for client in heavy + [control]:
        def counting(data: bytes, now: float, parse: Callable = client.conn.parse) -> None:
            parsed.append(len(data))
            parse(data, now)
        client.conn.parse = counting  # type: ignore[method-assign]
        if client is not control:
            client.send(b"*100001\r\n$6\r\nEXISTS\r\n" + b"$2\r\nab\r\n" * 99_999)
    for _ in range(10):
        parsed.clear()
        control.send(encode_command("PING"))
        before = len(control.transport.replies())
        run(loop, heavy + [control], 2, lambda: len(control.transport.replies()) > before)
        assert sum(n for n in parsed if n > SMALL_READ) <= 2 * budget  # two passes at most
    assert any(client.pending for client in heavy)  # the PINGs did not wait for them
    assert server.client_memory > 0


def test_a_closed_clients_huge_partial_command_is_freed_a_piece_per_tick() -> None:
    # Freeing 20 clients' partial commands of 200,000 arguments at once held the loop ~50 ms.
    server, loop = make_server()
    client = Client(server)
    client.send(b"*300001\r\n$6\r\nEXISTS\r\n" + b"$2\r\nab\r\n" * 299_999)
    run(loop, [client], 100, lambda: not client.pending and not client.conn.held)
    client.conn.connection_lost(None)
    assert server.client_memory == 0
    left = [sum(map(len, server._garbage))]
    assert left[0] == 300_000  # the name and 299,999 arguments
    while left[-1]:
        assert loop.run_pass() == 1
        left.append(sum(map(len, server._garbage)))
        assert left[-2] - left[-1] == min(FREE_PER_TICK, left[-2])
    assert len(left) == 1 + -(-300_000 // FREE_PER_TICK) and not loop.ready
