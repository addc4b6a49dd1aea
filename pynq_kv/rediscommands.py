"""Which keys a Redis command may change, from Redis' own description of its commands.

The host tier's engine caches string keys; before a forwarded command that may write runs, its
keys leave the engine. Redis says what every command does in `COMMAND` (its flags and its key
specs, Redis 7): a command with the `write` flag changes the keys of its specs that are not
read-only. A command that may write but whose keys cannot be found from its arguments (FLUSHALL,
SWAPDB, SORT ... STORE, a key spec Redis itself calls incomplete or unknown), and scripts and
functions (they may write keys they do not declare), change `ALL` keys: the whole cache goes.
Reads are never looked at. Names are matched case-insensitively, subcommands as
"container|sub" as Redis names them.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

# The answer for a command that may change keys nobody can name from its arguments.
ALL = "all"
# Scripts and functions: not flagged `write`, yet they may write any key.
_SCRIPTS = frozenset({b"eval", b"evalsha", b"fcall"})
# Commands that may change data though Redis does not flag them as writes.
_UNFLAGGED_WRITES = frozenset({b"debug"})
_WRITE_FLAGS = frozenset({b"RW", b"OW", b"RM", b"update", b"insert", b"delete"})

Written = Union[None, str, list[bytes]]  # None: writes nothing; ALL; or the keys it may change


class _Spec:
    """One key spec: where the search begins and how keys are found from there."""

    __slots__ = ("begin", "begin_arg", "find", "find_args")

    def __init__(self, raw: dict) -> None:
        begin, find = _pairs(raw[b"begin_search"]), _pairs(raw[b"find_keys"])
        self.begin = begin[b"type"]
        self.begin_arg = _pairs(begin[b"spec"]) if begin[b"spec"] else {}
        self.find = find[b"type"]
        self.find_args = _pairs(find[b"spec"]) if find[b"spec"] else {}

    def keys(self, args: Sequence[bytes]) -> Optional[list[bytes]]:
        """The keys this spec finds in args, or None when it cannot tell."""
        argc = len(args)
        if self.begin == b"index":
            start = self.begin_arg[b"index"]
        elif self.begin == b"keyword":
            word = self.begin_arg[b"keyword"].upper()
            frm = self.begin_arg[b"startfrom"]
            order = (range(frm, argc) if frm >= 0 else range(argc + frm, 0, -1))
            start = next((i + 1 for i in order if 0 <= i < argc and args[i].upper() == word), -1)
            if start < 0:
                return []  # the keyword is absent: no keys of this spec
        else:
            return None
        if self.find == b"range":
            last, step, limit = (self.find_args[b"lastkey"], self.find_args[b"keystep"],
                                 self.find_args[b"limit"])
            if last >= 0:
                end = start + last
            elif limit > 1:
                end = start + (argc - start) // limit - 1
            else:
                end = argc + last
            return list(args[start:end + 1:step])
        if self.find == b"keynum":
            try:
                count = int(args[start + self.find_args[b"keynumidx"]])
            except (IndexError, ValueError):
                return []  # Redis refuses the command: it changes nothing
            first = start + self.find_args[b"firstkey"]
            step = self.find_args[b"keystep"]
            return list(args[first:first + count * step:step])
        return None


def _pairs(flat: Any) -> dict:
    """A RESP2 flat name/value array as a dict."""
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


class _Info:
    __slots__ = ("writes", "specs", "everything", "blocking", "single")

    def __init__(self, entry: list) -> None:
        flags = set(entry[2])
        name = entry[0].lower()
        self.blocking = b"blocking" in flags
        self.writes = b"write" in flags or name in _UNFLAGGED_WRITES or name in _SCRIPTS
        self.everything = name in _SCRIPTS or name in _UNFLAGGED_WRITES
        self.specs: list[_Spec] = []
        specs = entry[8] if len(entry) > 8 else []
        for raw in specs:
            spec = _pairs(raw)
            spec_flags = set(spec.get(b"flags", []))
            if not spec_flags & _WRITE_FLAGS:
                continue
            if b"incomplete" in spec_flags:
                self.everything = True
            self.specs.append(_Spec(spec))
        if self.writes and not specs:
            self.everything = True  # a write that names no keys (FLUSHALL, SWAPDB)
        # Most writes change one key at a fixed place (SET, INCR, LPUSH, HSET): found at once.
        self.single = 0
        if len(self.specs) == 1 and not self.everything:
            spec = self.specs[0]
            if (spec.begin == b"index" and spec.find == b"range"
                    and spec.find_args[b"lastkey"] == 0 and spec.begin_arg[b"index"] > 0):
                self.single = spec.begin_arg[b"index"]


class CommandSpecs:
    """What Redis says of its commands (the reply of COMMAND, RESP2, decoded by hiredis)."""

    def __init__(self, reply: list) -> None:
        self._info: dict[bytes, _Info] = {}
        self._containers: set[bytes] = set()  # commands with subcommands (CLIENT, XGROUP, ...)
        for entry in reply:
            name = entry[0].lower()
            self._info[name] = _Info(entry)
            for sub in entry[9] if len(entry) > 9 else []:
                self._info[sub[0].lower()] = _Info(sub)
                self._containers.add(name)

    def __len__(self) -> int:
        return len(self._info)

    def _find(self, args: Sequence[bytes]) -> Optional[_Info]:
        name = args[0].lower()
        if name in self._containers and len(args) > 1:
            sub = self._info.get(name + b"|" + args[1].lower())
            if sub is not None:
                return sub
        return self._info.get(name)

    def known(self, name: bytes) -> bool:
        return name.lower() in self._info

    def fixed(self, name: bytes) -> bool:
        """Whether name alone says which command it is: known, with no subcommands."""
        name = name.lower()
        return name in self._info and name not in self._containers

    def plain_key(self, name: bytes) -> Optional[int]:
        """For a command that is no container: 0 if it writes nothing, the index of the one key
        it writes if that is all it writes, else None (a write of several or unknown keys)."""
        name = name.lower()
        info = self._info.get(name)
        if info is None or name in self._containers:
            return None
        if not info.writes:
            return 0
        return info.single or None

    def blocking(self, args: Sequence[bytes]) -> bool:
        """Whether the command may block its connection (BLPOP, XREAD BLOCK, ...)."""
        info = self._find(args)
        return info is not None and info.blocking

    def written(self, args: Sequence[bytes]) -> Written:
        """The keys args may change: None (a read, or a command Redis does not know, which it
        refuses), ALL, or the list of keys."""
        info = self._find(args)
        if info is None or not info.writes:
            return None
        if info.single:
            return [args[info.single]] if len(args) > info.single else []
        if info.everything:
            return ALL
        keys: list[bytes] = []
        for spec in info.specs:
            found = spec.keys(args)
            if found is None:
                return ALL
            keys.extend(found)
        return keys


__all__ = ["ALL", "CommandSpecs", "Written"]
