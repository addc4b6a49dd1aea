"""Two deliberately simple oracles of docs/engine.md, for the differential tests.

Neither shares code with pynq_kv.model or pynq_kv.engine: they are plain Python (lists, dicts,
ints, no numpy), written straight from the contract, and slow. Their only imports from the
package are the literal §3 hash (`hash_int`), the status codes of the backend interface and
`CommandError`.

- `ContractOracle(geometry)` is the engine of §4–§6 at the level of the `Backend` interface:
  raw keys as ints, raw values as bytes, one operation at a time (a batch is a loop, §7).
- `DictOracle` is what a user of `KVEngine` expects (§8): a dict, and a list of rule entries
  scanned linearly, allocated at the lowest free entry index as KVEngine does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from pynq_kv.backend import COUNTER_NAMES, DelStatus, MatchKind, RuleEntry, SetStatus
from pynq_kv.errors import CommandError
from pynq_kv.hashing import hash_int

MOD64 = 1 << 64


def key_int(raw: bytes) -> int:
    """A raw key (big-endian bytes, §1) as an integer."""
    return int.from_bytes(bytes(raw), "big")


def int_key(key: int, key_bytes: int) -> bytes:
    return key.to_bytes(key_bytes, "big")


# --------------------------------------------------------------------------------------------
# §2 encodings, written again from the text (the API tests compare pynq_kv.keys against these).
# --------------------------------------------------------------------------------------------
def tagged(data: bytes, nbytes: int) -> bytes:
    """`[L] ‖ data ‖ zero padding` of exactly nbytes bytes (§2); caller checks L ≤ nbytes-1."""
    assert len(data) <= nbytes - 1
    return bytes([len(data)]) + data + b"\x00" * (nbytes - 1 - len(data))


def raw_key_of(key: Any, key_width: int) -> int:
    """Raw key (int) of a byte-string/str/int user key (§2)."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    if isinstance(key, (bytes, bytearray)):
        return key_int(tagged(bytes(key), key_width // 8))
    assert isinstance(key, int) and 0 <= key < 1 << key_width
    return key


# --------------------------------------------------------------------------------------------
# The contract engine (§4–§6)
# --------------------------------------------------------------------------------------------
class ContractOracle:
    """The literal engine of engine.md §4–§6.

    Slots are `None` (invalid) or a `(key, value)` pair with key an int and value bytes;
    `self.ways[w][r]` is slot (w, r) and `self.stash[i]` is slot (WAYS, i). An invalid slot's
    leftover contents are not part of the contract, so they are not kept.

    Which slots are searched. §5.1 defines the first copy over the key's candidate slots and
    the stash, and §4 says a key may live in way w only at row row_w(k). A slot that a host
    wrote with WRITE_SLOT at a row that is not one of its key's candidates is therefore treated
    as invisible to the data plane (it occupies the slot, counts in `occupancy`, is moved and
    read by control operations, but GET/LOOKUP/SET/DEL never look at it) — the only reading an
    engine that reads WAYS candidate rows plus the stash per request can implement.
    """

    def __init__(self, geometry) -> None:
        g = geometry
        self.g = g
        self.ways: list[list[tuple[int, bytes] | None]] = [[None] * g.rows for _ in range(g.ways)]
        self.stash: list[tuple[int, bytes] | None] = [None] * g.stash
        # Rule entries: RuleEntry, or None while never written since reset (then only its
        # `valid = False` is defined by the contract).
        self.rules: list[RuleEntry | None] = [None] * g.rules
        self.rule_hit = [0] * g.rules
        self.counters = {name: 0 for name in COUNTER_NAMES if name != "occupancy"}
        self._rows_cache: dict[int, list[int]] = {}

    # -- helpers ------------------------------------------------------------------------------
    def count(self, name: str, amount: int = 1) -> None:
        self.counters[name] = (self.counters[name] + amount) % MOD64

    def rows_of(self, key: int) -> list[int]:
        """row_w(k) for every way (§3 step 5), from the literal hash."""
        rows = self._rows_cache.get(key)
        if rows is None:
            g = self.g
            rows = [hash_int(key, g.hash_seed, w, g.key_width) % g.rows for w in range(g.ways)]
            if len(self._rows_cache) < 200_000:
                self._rows_cache[key] = rows
        return rows

    def copies(self, key: int) -> list[tuple[int, int]]:
        """Every (bank, index) holding key, in first-copy order (§5.1): ways, then stash."""
        found = []
        for w, r in enumerate(self.rows_of(key)):
            slot = self.ways[w][r]
            if slot is not None and slot[0] == key:
                found.append((w, r))
        for i, slot in enumerate(self.stash):
            if slot is not None and slot[0] == key:
                found.append((self.g.ways, i))
        return found

    def slot(self, bank: int, index: int) -> tuple[int, bytes] | None:
        return self.ways[bank][index] if bank < self.g.ways else self.stash[index]

    def put(self, bank: int, index: int, content: tuple[int, bytes] | None) -> None:
        if bank < self.g.ways:
            self.ways[bank][index] = content
        else:
            self.stash[index] = content

    def good_address(self, bank: int, index: int) -> bool:
        g = self.g
        if 0 <= bank < g.ways:
            return 0 <= index < g.rows
        return bank == g.ways and 0 <= index < g.stash

    def refuse(self, what: str) -> None:
        self.count("cmd_errors")
        raise CommandError(what)

    def occupancy(self) -> int:
        """§6 counter 10: the number of valid slots now."""
        return (sum(s is not None for way in self.ways for s in way)
                + sum(s is not None for s in self.stash))

    def counter_values(self) -> dict[str, int]:
        out = dict(self.counters)
        out["occupancy"] = self.occupancy()
        return {name: out[name] for name in COUNTER_NAMES}

    def valid_slots(self) -> list[tuple[int, int, bytes]]:
        """(flat slot number, key, value) of every valid slot, in flat order (§4)."""
        g = self.g
        out = []
        for w in range(g.ways):
            for r in range(g.rows):
                s = self.ways[w][r]
                if s is not None:
                    out.append((w * g.rows + r, s[0], s[1]))
        for i, s in enumerate(self.stash):
            if s is not None:
                out.append((g.ways * g.rows + i, s[0], s[1]))
        return out

    # -- data plane (§5.2–§5.5), one operation at a time ---------------------------------
    def get(self, key: int) -> bytes | None:
        self.count("lookups")
        found = self.copies(key)
        if found:
            self.count("exact_hits")
            return self.slot(*found[0])[1]
        self.count("misses")
        return None

    def lookup(self, key: int) -> tuple[MatchKind, bytes | None, int]:
        """(kind, value, entry); value None and entry -1 where they do not apply."""
        self.count("lookups")
        found = self.copies(key)
        if found:
            self.count("exact_hits")
            return MatchKind.EXACT, self.slot(*found[0])[1], -1
        best = -1
        for e, rule in enumerate(self.rules):
            if rule is None or not rule.valid or key & rule.mask != rule.match:
                continue
            if best < 0 or rule.priority > self.rules[best].priority:  # ties: lowest e stays
                best = e
        if best >= 0:
            self.count("rule_hits")
            self.rule_hit[best] = (self.rule_hit[best] + 1) % MOD64
            return MatchKind.RULE, self.rules[best].value, best
        self.count("misses")
        return MatchKind.MISS, None, -1

    def set(self, key: int, value: bytes) -> SetStatus:
        g = self.g
        found = self.copies(key)
        if found:
            for bank, index in found:
                self.put(bank, index, (key, value))
            self.count("updates")
            return SetStatus.UPDATED
        for w, r in enumerate(self.rows_of(key)):
            if self.ways[w][r] is None:
                self.ways[w][r] = (key, value)
                self.count("inserts")
                return SetStatus.INSERTED
        for i in range(g.stash):
            if self.stash[i] is None:
                self.stash[i] = (key, value)
                self.count("inserts")
                return SetStatus.INSERTED_STASH
        self.count("insert_failures")
        return SetStatus.FULL

    def delete(self, key: int) -> DelStatus:
        found = self.copies(key)
        for bank, index in found:
            self.put(bank, index, None)
        if found:
            self.count("deletes")
            return DelStatus.DELETED
        self.count("delete_misses")
        return DelStatus.NOT_FOUND

    # batches (§7): the operations one after another
    def get_batch(self, keys: Iterable[int]) -> list[bytes | None]:
        return [self.get(k) for k in keys]

    def lookup_batch(self, keys: Iterable[int]) -> list[tuple[MatchKind, bytes | None, int]]:
        return [self.lookup(k) for k in keys]

    def set_batch(self, keys: Iterable[int], values: Iterable[bytes]) -> list[SetStatus]:
        return [self.set(k, v) for k, v in zip(keys, values)]

    def delete_batch(self, keys: Iterable[int]) -> list[DelStatus]:
        return [self.delete(k) for k in keys]

    # -- control (§5.6) -------------------------------------------------------------------
    def read_slot(self, bank: int, index: int) -> tuple[bool, int | None, bytes | None]:
        """(valid, key, value); key and value None for an invalid slot (not defined)."""
        if not self.good_address(bank, index):
            self.refuse(f"READ_SLOT bad address ({bank}, {index})")
        s = self.slot(bank, index)
        return (False, None, None) if s is None else (True, s[0], s[1])

    def write_slot(self, bank: int, index: int, valid: bool, key: int, value: bytes) -> None:
        if not self.good_address(bank, index):
            self.refuse(f"WRITE_SLOT bad address ({bank}, {index})")
        self.put(bank, index, (key, value) if valid else None)

    def move_slot(self, b1: int, i1: int, b2: int, i2: int) -> None:
        if not self.good_address(b1, i1) or not self.good_address(b2, i2):
            self.refuse("MOVE bad address")
        if b1 == b2:
            self.refuse("MOVE within one bank")
        if self.slot(b1, i1) is None:
            self.refuse("MOVE from an invalid slot")
        if self.slot(b2, i2) is not None:
            self.refuse("MOVE to a valid slot")
        self.put(b2, i2, self.slot(b1, i1))
        self.put(b1, i1, None)

    def write_rule(self, entry: int, rule: RuleEntry) -> None:
        if not 0 <= entry < self.g.rules:
            self.refuse(f"WRITE_RULE entry {entry} out of range")
        if not 0 <= rule.priority < 1 << self.g.prio_width:
            self.refuse(f"WRITE_RULE priority {rule.priority} too wide")
        self.rules[entry] = RuleEntry(bool(rule.valid), rule.match, rule.mask, rule.priority,
                                      bytes(rule.value))
        self.rule_hit[entry] = 0

    def read_rule(self, entry: int) -> RuleEntry | None:
        """The entry, or None when it was never written (only valid = False is defined)."""
        if not 0 <= entry < self.g.rules:
            self.refuse(f"READ_RULE entry {entry} out of range")
        return self.rules[entry]

    def clear_table(self) -> None:
        self.ways = [[None] * self.g.rows for _ in range(self.g.ways)]
        self.stash = [None] * self.g.stash

    def clear_counters(self) -> None:
        for name in self.counters:
            self.counters[name] = 0
        self.rule_hit = [0] * self.g.rules


# --------------------------------------------------------------------------------------------
# The user's view of KVEngine (§8)
# --------------------------------------------------------------------------------------------
@dataclass
class OracleRule:
    rule_id: int
    entries: list[tuple[int, int, int]]  # (entry index, match, mask)
    priority: int
    value: Any
    hits: int = 0


class DictOracle:
    """A dict for the exact table and a linear list of rule entries.

    `raw_key(user_key) -> int` maps user keys onto raw keys (only rules need it). Rule entries
    are allocated at the lowest free indexes, like KVEngine, so the §5.3 tie-break (lowest
    entry index among equal priorities) is predictable. The oracle does not know where the
    engine's table is full: the test tells it, and the oracle checks that a key refused with
    TableFull was not stored.
    """

    def __init__(self, rule_entries: int, raw_key: Callable[[Any], int]) -> None:
        self.data: dict[Any, Any] = {}
        self.raw_key = raw_key
        self.entry_owner: list[int | None] = [None] * rule_entries
        self.rules: dict[int, OracleRule] = {}
        self.next_rule_id = 1
        self.c = dict.fromkeys(
            ["lookups", "exact_hits", "rule_hits", "misses", "inserts", "updates",
             "insert_failures", "deletes", "delete_misses"], 0)
        self.table_full = 0  # TableFull raised / mset positions reported failed

    # -- exact table --------------------------------------------------------------------
    def get(self, key: Any) -> Any:
        self.c["lookups"] += 1
        if key in self.data:
            self.c["exact_hits"] += 1
            return self.data[key]
        self.c["misses"] += 1
        return None

    def exists(self, key: Any) -> bool:
        return self.get(key) is not None

    def set(self, key: Any, value: Any) -> bool:
        new = key not in self.data
        self.data[key] = value
        self.c["inserts" if new else "updates"] += 1
        return new

    def set_failed(self, key: Any) -> None:
        """The engine refused key with TableFull: it must have been a new key."""
        assert key not in self.data, f"TableFull for {key!r}, which is already stored"
        self.c["insert_failures"] += 1
        self.table_full += 1

    def delete(self, key: Any) -> bool:
        if key in self.data:
            del self.data[key]
            self.c["deletes"] += 1
            return True
        self.c["delete_misses"] += 1
        return False

    def clear(self) -> None:
        self.data.clear()
        for rule_id in list(self.rules):
            self.remove_rule(rule_id)

    # -- rules --------------------------------------------------------------------------
    def free_entries(self) -> int:
        return sum(owner is None for owner in self.entry_owner)

    def add_rule(self, ternaries: list[tuple[int, int]], priority: int, value: Any) -> int:
        free = [e for e, owner in enumerate(self.entry_owner) if owner is None]
        assert len(free) >= len(ternaries)
        rule_id = self.next_rule_id
        self.next_rule_id += 1
        entries = []
        for e, (match, mask) in zip(free, ternaries):
            self.entry_owner[e] = rule_id
            entries.append((e, match, mask))
        self.rules[rule_id] = OracleRule(rule_id, entries, priority, value)
        return rule_id

    def remove_rule(self, rule_id: int) -> None:
        rule = self.rules.pop(rule_id)
        for e, _, _ in rule.entries:
            self.entry_owner[e] = None

    def lookup(self, key: Any) -> tuple[str, Any, int | None, int | None]:
        """(kind, value, rule_id, entry) with kind "exact", "rule" or "miss"."""
        self.c["lookups"] += 1
        if key in self.data:
            self.c["exact_hits"] += 1
            return "exact", self.data[key], None, None
        raw = self.raw_key(key)
        best: tuple[int, int, OracleRule] | None = None  # (priority, entry, rule)
        for rule in self.rules.values():
            for e, match, mask in rule.entries:
                if raw & mask != match:
                    continue
                if best is None or rule.priority > best[0] or (rule.priority == best[0] and e < best[1]):
                    best = (rule.priority, e, rule)
        if best is None:
            self.c["misses"] += 1
            return "miss", None, None, None
        self.c["rule_hits"] += 1
        best[2].hits += 1
        return "rule", best[2].value, best[2].rule_id, best[1]

    def rule_hits(self) -> dict[int, int]:
        return {rule_id: rule.hits for rule_id, rule in self.rules.items()}

    def clear_counters(self) -> None:
        for name in self.c:
            self.c[name] = 0
        for rule in self.rules.values():
            rule.hits = 0
