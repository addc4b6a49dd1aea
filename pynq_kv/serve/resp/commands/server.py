"""Server commands: CONFIG, COMMAND and INFO (info.py builds its text)."""

from __future__ import annotations

from typing import Any, Optional

from ....globmatch import Glob
from .. import errors as E
from ..protocol import OK, ErrorReply, RespSet, Simple, Verbatim
from .base import Client, Command, Handler, Server, help_reply
from .info import info_text


# CONFIG GET answers what clients and tools ask; the values come from the server's settings.
def _config_values(srv: Server) -> dict[bytes, bytes]:
    cfg = srv.config
    return {
        b"appendonly": b"no",
        b"save": b"",
        b"databases": b"1",
        b"maxclients": str(cfg.max_clients).encode(),
        b"timeout": str(int(cfg.idle_timeout)).encode(),
        b"proto-max-bulk-len": str(cfg.max_bulk_len).encode(),
        b"client-query-buffer-limit": str(cfg.max_query_buffer).encode(),
        b"requirepass": srv.requirepass or b"",
        b"maxmemory": b"0",
        b"maxmemory-policy": b"noeviction",
        b"maxmemory-clients": str(cfg.maxmemory_clients).encode(),
        b"port": str(srv.port).encode(),
        b"bind": srv.host.encode(),
        b"protected-mode": b"no",
        b"cluster-enabled": b"no",
    }


def cmd_config_get(srv: Server, conn: Client, args: list[bytes]) -> Any:
    values = _config_values(srv)
    longest = max(map(len, values))
    found: dict[bytes, bytes] = {}
    for pattern in args[2:]:
        if not any(ch in pattern for ch in b"[*?"):  # Redis' test: a name, not a pattern
            if pattern.lower() in values and pattern not in found:
                found[pattern] = values[pattern.lower()]
            continue
        glob = Glob(pattern, nocase=True, limit=longest)
        for name, value in values.items():
            if glob.match(name):
                found[name] = value
    return found


def cmd_config_set(srv: Server, conn: Client, args: list[bytes]) -> Any:
    if len(args) % 2:
        return ErrorReply(E.wrong_arity("config|set"))
    name = args[2]
    if name.lower() in _config_values(srv):
        return ErrorReply(E.config_set_immutable(name))
    return ErrorReply(E.config_set_unknown(name))


def cmd_config_resetstat(srv: Server, conn: Client, args: list[bytes]) -> Any:
    srv.reset_stats()
    return OK


def cmd_config_help(srv: Server, conn: Client, args: list[bytes]) -> Any:
    return help_reply("CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", [
        "GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>", "    pynq-kv's settings are fixed when the server starts.",
        "RESETSTAT", "    Reset the RESP front-end's statistics reported by INFO.",
        "HELP", "    Prints this help."])


# -- COMMAND ------------------------------------------------------------------------------------
_CATEGORIES = {"readonly": "@read", "write": "@write", "fast": "@fast", "admin": "@admin",
               "no_auth": "@connection"}


def command_info(cmd: Command) -> list[Any]:
    first, last, step = cmd.keys
    categories = RespSet(Simple(c) for f, c in _CATEGORIES.items() if f in cmd.flags)
    return [cmd.name.encode(), cmd.arity, RespSet(Simple(f) for f in cmd.flags), first, last, step,
            categories, [], [], [command_info(s) for s in cmd.subcommands.values()]]


def own_commands(srv: Server) -> list[Command]:
    """pynq-kv's own commands (KV.*): with a host tier, what COMMAND adds to Redis' list."""
    return [cmd for cmd in srv.command_list if cmd.group == "kv"]


def _find(srv: Server, name: bytes) -> Optional[Command]:
    base, _, sub = name.upper().partition(b"|")
    cmd = srv.commands.get(base)
    if cmd is not None and sub:
        cmd = cmd.subcommands.get(sub)
    return cmd


def cmd_command(srv: Server, conn: Client, args: list[bytes]) -> Any:
    return [command_info(cmd) for cmd in srv.command_list]


def cmd_command_count(srv: Server, conn: Client, args: list[bytes]) -> Any:
    return len(srv.command_list)


def cmd_command_list(srv: Server, conn: Client, args: list[bytes]) -> Any:
    if len(args) != 2:
        return ErrorReply(E.SYNTAX)
    names = []
    for cmd in srv.command_list:
        names.append(cmd.name.encode())
        names.extend(sub.name.encode() for sub in cmd.subcommands.values())
    return names


def cmd_command_info(srv: Server, conn: Client, args: list[bytes]) -> Any:
    if len(args) == 2:
        return cmd_command(srv, conn, args)
    found = [_find(srv, name) for name in args[2:]]
    return [None if cmd is None else command_info(cmd) for cmd in found]


def command_docs(cmd: Command) -> dict[bytes, Any]:
    doc: dict[bytes, Any] = {b"summary": cmd.summary.encode(), b"since": b"1.0.0",
                             b"group": cmd.group.encode()}
    if cmd.subcommands:
        doc[b"subcommands"] = {s.name.encode(): command_docs(s) for s in cmd.subcommands.values()}
    return doc


def cmd_command_docs(srv: Server, conn: Client, args: list[bytes]) -> Any:
    chosen = srv.command_list if len(args) == 2 else [_find(srv, name) for name in args[2:]]
    return {cmd.name.encode(): command_docs(cmd) for cmd in chosen if cmd is not None}


def cmd_command_help(srv: Server, conn: Client, args: list[bytes]) -> Any:
    return help_reply("COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", [
        "(no subcommand)", "    Return details about all commands.",
        "COUNT", "    Return the total number of commands in this server.",
        "LIST", "    Return a list of all commands in this server.",
        "INFO [<command-name> ...]", "    Return details about multiple commands.",
        "DOCS [<command-name> ...]", "    Return documentation details about multiple commands.",
        "HELP", "    Prints this help."])


def cmd_info(srv: Server, conn: Client, args: list[bytes]) -> Any:
    return Verbatim(info_text(srv, [a.decode("latin-1").lower() for a in args[1:]]))


def commands() -> list[Command]:
    """CONFIG, COMMAND, INFO."""
    def sub(name: str, arity: int, flags: tuple[str, ...], handler: Handler, summary: str) -> Command:
        return Command(name, arity, flags, handler, summary)

    config = Command("config", -2, (), None, "A container for server configuration commands", "server")
    config.subcommands = {s.name.split("|")[1].upper().encode(): s for s in [
        sub("config|get", -3, ("admin", "noscript", "loading", "stale"), cmd_config_get,
            "Returns the effective values of configuration parameters"),
        sub("config|set", -4, ("admin", "noscript", "loading", "stale"), cmd_config_set,
            "Sets configuration parameters (none can change at run time)"),
        sub("config|resetstat", 2, ("admin", "noscript", "loading", "stale"), cmd_config_resetstat,
            "Resets the server's statistics"),
        sub("config|help", 2, ("loading", "stale"), cmd_config_help, "Returns helpful text"),
    ]}
    command = Command("command", -1, ("loading", "stale"), cmd_command,
                      "Returns detailed information about all commands", "server")
    command.subcommands = {s.name.split("|")[1].upper().encode(): s for s in [
        sub("command|count", 2, ("loading", "stale"), cmd_command_count,
            "Returns a count of commands"),
        sub("command|list", -2, ("loading", "stale"), cmd_command_list,
            "Returns a list of command names"),
        sub("command|info", -2, ("loading", "stale"), cmd_command_info,
            "Returns information about one, multiple or all commands"),
        sub("command|docs", -2, ("loading", "stale"), cmd_command_docs,
            "Returns documentary information about one, multiple or all commands"),
        sub("command|help", 2, ("loading", "stale"), cmd_command_help, "Returns helpful text"),
    ]}
    return [
        config, command,
        Command("info", -1, ("loading", "stale"), cmd_info,
                "Returns information and statistics about the server and the engine", "server"),
    ]
