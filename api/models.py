"""Request and response bodies: *Create/*Update models are what clients send, *Public what they get.

Keys and values travel in one JSON form everywhere (pynq_kv.bulk): a string is the UTF-8 text of
a byte string, an integer is an integer key or value, and {"hex": ...} / {"base64": ...} carry
byte strings that are not UTF-8 text. Responses use strings, integers and {"hex": ...}.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, model_validator

HEX_BYTES = r"^(?:[0-9a-fA-F]{2})*$"
HEX_NUMBER = r"^(?:0[xX])?[0-9a-fA-F]+$"


class Strict(BaseModel):
    """Unknown fields are an error, so a misspelt field is reported, not ignored."""

    model_config = ConfigDict(extra="forbid")


class HexItem(Strict):
    hex: str = Field(pattern=HEX_BYTES, description="bytes as hex, two digits a byte")


class Base64Item(Strict):
    base64: str = Field(description="bytes as base64 (standard or URL-safe alphabet)")


ItemIn = Union[StrictInt, StrictStr, HexItem, Base64Item]
ItemOut = Union[int, str, HexItem]


class KeyEncoding(str, Enum):
    """How the {key} in a URL is written."""

    utf8 = "utf8"
    hex = "hex"
    base64 = "base64"
    int = "int"
    fields = "fields"


class TextEncoding(str, Enum):
    """How byte strings are written as text (a prefix, CSV cells)."""

    utf8 = "utf8"
    hex = "hex"
    base64 = "base64"


class BulkFormat(str, Enum):
    ndjson = "ndjson"
    csv = "csv"


class ListFormat(str, Enum):
    json = "json"
    ndjson = "ndjson"
    csv = "csv"


# -- entries --------------------------------------------------------------------------------

class EntryUpdate(Strict):
    """PUT /v1/entries/{key}: the value to store."""

    value: ItemIn


class EntryPublic(BaseModel):
    key: ItemOut
    value: ItemOut


class EntryListed(EntryPublic):
    slot: int = Field(description="flat slot number: bank x rows + index (docs/engine.md §4)")


class EntryWritten(BaseModel):
    key: ItemOut
    value: ItemOut
    created: bool = Field(description="true when the key was new")


class EntryPage(BaseModel):
    entries: list[EntryListed]
    next_cursor: Optional[int] = Field(
        description="pass as ?cursor= for the next page; null when the table has been scanned")
    occupancy: int = Field(description="entries in the table now")


class ImportJobPublic(BaseModel):
    id: int
    state: Literal["running", "done", "failed"]
    format: BulkFormat
    total: int = Field(description="records in the file")
    done: int = Field(description="records written so far")
    inserted: int
    updated: int
    failed: int = Field(description="records that found no room (table full)")
    error: Optional[str] = None
    created: float
    finished: Optional[float] = None


# -- rules ----------------------------------------------------------------------------------

class TernaryIn(Strict):
    match: str = Field(pattern=HEX_NUMBER, description="raw key bits to compare, hex")
    mask: str = Field(pattern=HEX_NUMBER, description="1 bits are compared, hex")


class TernaryOut(BaseModel):
    match: str
    mask: str


class RuleCreate(Strict):
    """A rule from per-field specs (`match`, needs the appliance's field layout) or raw `ternary`."""

    priority: StrictInt = Field(ge=0, description="higher wins; below 2^prio_width")
    value: ItemIn
    name: Optional[str] = Field(None, max_length=200)
    match: Optional[dict[str, Any]] = Field(
        None, description='field -> spec: "10.0.0.0/8", 443, [1000, 2000], "1000-2000", '
                          '{"value": v, "mask": m}, {"range": [lo, hi]} or "*"; '
                          'fields left out match anything',
        examples=[{"src_ip": "10.0.0.0/8", "dst_port": [1000, 2000]}])
    ternary: Optional[list[TernaryIn]] = Field(None, min_length=1, max_length=4096)

    @model_validator(mode="after")
    def _one_form(self) -> "RuleCreate":
        if (self.match is None) == (self.ternary is None):
            raise ValueError("give exactly one of 'match' (per-field specs) or 'ternary' (raw entries)")
        return self


class RulePublic(BaseModel):
    id: int
    name: Optional[str]
    priority: int
    value: ItemOut
    match: Optional[dict[str, Any]] = Field(description="the field specs it was made from, if any")
    ternary: list[TernaryOut]
    entries: list[int] = Field(description="rule-table entry indexes holding its ternary entries")
    hits: int = Field(description="lookups this rule won")


# -- lookups --------------------------------------------------------------------------------

class RuleCandidate(BaseModel):
    id: int
    name: Optional[str]
    priority: int
    entry: int = Field(description="its lowest matching rule-table entry")
    winner: bool


class LookupPublic(BaseModel):
    key: ItemOut
    raw_key: str = Field(description="the KEY_W-bit raw key the engine compared, hex")
    fields: Optional[dict[str, Any]] = Field(description="the raw key read through the field layout")
    kind: Literal["exact", "rule", "miss"]
    value: Optional[ItemOut]
    rule_id: Optional[int]
    entry: Optional[int] = Field(description="winning rule-table entry")
    rule: Optional[RulePublic]
    candidates: list[RuleCandidate] = Field(
        description="every rule matching the key, best first (an exact hit shadows them all)")
    explanation: str


# -- overlay, stats, health -----------------------------------------------------------------

class OccupancyPublic(BaseModel):
    used: int
    capacity: int
    load_factor: float


class FrontendPublic(BaseModel):
    """The RTL Ethernet front-end of kv_top (pynq_kv.Frontend): settings and counters."""

    mac: str
    ip: str
    udp_port: int
    data_w: int = Field(description="MAC stream width in bits (64: 10G, 512: 100G)")
    counters: dict[str, int]


class OverlayPublic(BaseModel):
    kind: Optional[Literal["pynq", "xrt", "simulated"]] = Field(
        description="what pynq_kv.load() opened; null when the appliance was given an engine "
                    "directly instead")
    source: Optional[str] = Field(
        description='the bitstream or xclbin path, or "simulation (model)" / '
                    '"simulation (Verilated kv_top)"')
    board: Optional[str] = Field(description='the overlays/ board, "sim" for the simulated overlay')
    manifest: Optional[dict[str, Any]] = Field(
        description="the overlay's manifest (docs/overlay.md); the simulated overlay's clock is "
                    "assumed")
    frontend: Optional[FrontendPublic] = Field(
        description="the RTL Ethernet front-end; null on the model, which has none")
    backend: str
    geometry: dict[str, int]
    value_kind: str
    relocation: bool
    max_key_bytes: int
    max_value_bytes: int
    occupancy: OccupancyPublic
    rules: int
    rule_entries_used: int
    layout: Optional[dict[str, Any]]
    state_path: Optional[str]
    host_tier: Optional[str] = Field(
        default=None, description="the Redis behind the engine (docs/hosttier.md), as serve's "
                                  "banner names it; null when the data lives in the engine only")
    uptime: float
    reloads: int
    config: Optional[dict[str, Any]] = Field(description="serve settings (secrets hidden)")


class ReloadResult(BaseModel):
    restored: int = Field(description="entries put back into the new engine")
    reloads: int
    backend: str


class RuleHits(BaseModel):
    id: int
    name: Optional[str]
    priority: int
    hits: int


class LatencyPublic(BaseModel):
    count: int = Field(description="requests timed since the front-end started")
    sum: float = Field(description="their total latency, seconds")
    p50: Optional[float] = Field(description="median since start, seconds (bucket-interpolated); "
                                             "null before any request")
    p99: Optional[float] = Field(description="99th percentile since start, seconds; null before any request")


class StatsPublic(BaseModel):
    backend: str
    uptime: float
    reloads: int
    occupancy: OccupancyPublic
    counters: dict[str, int] = Field(description="engine counters (docs/engine.md §6) and host relocations")
    hit_rate: Optional[float] = Field(
        description="(exact_hits + rule_hits) / lookups; null before any lookup")
    rules: list[RuleHits]
    frontends: dict[str, dict[str, Any]]
    latency: dict[str, LatencyPublic] = Field(
        description="each timing front-end's request latency since it started (/metrics has the "
                    "histograms: pynq_kv_frontend_request_duration_seconds)")


class Health(BaseModel):
    status: Literal["ok"]
    backend: str
    uptime: float
