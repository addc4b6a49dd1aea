"""Engine parameters (docs/engine.md §1), validated once so every layer can trust them."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .errors import GeometryError

KEY_WIDTHS = (144, 288, 576, 1152)
DEFAULT_HASH_SEED = 0x70796E712D6B7631  # "pynq-kv1" in ASCII


@dataclass(frozen=True)
class Geometry:
    """Shape of one engine: key/value widths, table size, rule table, hash seed."""

    key_width: int = 288
    value_width: int = 256
    ways: int = 4
    rows: int = 8192
    stash: int = 8
    rules: int = 256
    prio_width: int = 16
    hash_seed: int = DEFAULT_HASH_SEED

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise GeometryError(f"{name} must be an integer, got {value!r}")
        if self.key_width not in KEY_WIDTHS:
            raise GeometryError(f"key_width must be one of {KEY_WIDTHS}, got {self.key_width}")
        if self.value_width % 32 or not 32 <= self.value_width <= 512:
            raise GeometryError(
                f"value_width must be a multiple of 32 from 32 to 512, got {self.value_width}")
        if not 2 <= self.ways <= 8:
            raise GeometryError(f"ways must be 2..8, got {self.ways}")
        if self.rows < 2 or self.rows > 1 << 24 or self.rows & (self.rows - 1):
            raise GeometryError(f"rows must be a power of two from 2 to 2^24, got {self.rows}")
        if not 0 <= self.stash <= 64:
            raise GeometryError(f"stash must be 0..64, got {self.stash}")
        if not 0 <= self.rules <= 4096:
            raise GeometryError(f"rules must be 0..4096, got {self.rules}")
        if not 1 <= self.prio_width <= 32:
            raise GeometryError(f"prio_width must be 1..32, got {self.prio_width}")
        if not 0 <= self.hash_seed < 1 << 64:
            raise GeometryError("hash_seed must be a 64-bit unsigned value")

    @property
    def key_bytes(self) -> int:
        return self.key_width // 8

    @property
    def value_bytes(self) -> int:
        return self.value_width // 8

    @property
    def row_bits(self) -> int:
        return self.rows.bit_length() - 1

    @property
    def way_slots(self) -> int:
        """Slots in the hash banks (the stash comes after them in flat numbering)."""
        return self.ways * self.rows

    @property
    def capacity(self) -> int:
        return self.ways * self.rows + self.stash

    @property
    def stash_bank(self) -> int:
        return self.ways

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
