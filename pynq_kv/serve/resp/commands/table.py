"""The command table: every family's commands, in the order COMMAND lists them.

The server builds its table here; the families know nothing of it or of each other. COMMAND,
COMMAND INFO and friends read the table back through the server they are handed.
"""

from __future__ import annotations

from . import connection, keyspace, server, strings, wildcard
from .base import Command


def command_list() -> list[Command]:
    """Every command, as COMMAND lists them (Redis' families, then the engine's KV.* commands)."""
    config, command, info = server.commands()
    return [*connection.commands(), config, command, *strings.commands(), *keyspace.commands(),
            info, *wildcard.commands()]


def build_table() -> tuple[dict[bytes, Command], list[Command]]:
    """Lookup table (upper- and lower-case names) and the command list in COMMAND order."""
    commands = command_list()
    table: dict[bytes, Command] = {}
    for cmd in commands:
        name = cmd.name.encode()
        table[name.upper()] = cmd
        table[name.lower()] = cmd
    return table, commands
