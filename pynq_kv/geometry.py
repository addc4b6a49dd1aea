"""Engine parameters (docs/engine.md §1), validated once so every layer can trust them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TypeVar, Union

import numpy as np

from .errors import GeometryError

# A slot coordinate: one int, or an integer array of them (the same shape in and out).
Coord = TypeVar("Coord", int, np.ndarray)

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
    def way_slots(self) -> int:
        """Slots in the hash banks (the stash comes after them in flat numbering)."""
        return self.ways * self.rows

    @property
    def capacity(self) -> int:
        return self.ways * self.rows + self.stash

    # -- slot addressing (docs/engine.md §4): the one place that knows the numbering ----------
    # Flat slot numbers run bank by bank (bank b, index i -> b * ROWS + i), then the stash,
    # which the control operations address as bank WAYS.

    def slot_address(self, number: Coord) -> tuple[Coord, Coord]:
        """(bank, index) of a flat slot number, or of every number in an integer array."""
        if isinstance(number, (int, np.integer)):
            bank = min(int(number) // self.rows, self.ways)
            return bank, int(number) - bank * self.rows
        numbers = np.asarray(number, dtype=np.int64)
        banks = np.minimum(numbers // self.rows, self.ways)
        return banks, numbers - banks * self.rows

    def slot_number(self, bank: Coord, index: Coord) -> Coord:
        """Flat slot number of (bank, index), elementwise for arrays; see has_slot for range."""
        if isinstance(bank, (int, np.integer)) and isinstance(index, (int, np.integer)):
            return int(bank) * self.rows + int(index)
        return np.asarray(bank, dtype=np.int64) * self.rows + np.asarray(index, dtype=np.int64)

    def has_slot(self, bank: Coord, index: Coord) -> Union[bool, np.ndarray]:
        """True where (bank, index) names a slot: a bank row, or a stash entry at bank WAYS."""
        if isinstance(bank, (int, np.integer)) and isinstance(index, (int, np.integer)):
            return bool(0 <= bank < self.ways and 0 <= index < self.rows
                        or bank == self.ways and 0 <= index < self.stash)
        banks = np.asarray(bank, dtype=np.int64)
        indexes = np.asarray(index, dtype=np.int64)
        return ((banks >= 0) & (banks < self.ways) & (indexes >= 0) & (indexes < self.rows)) | (
            (banks == self.ways) & (indexes >= 0) & (indexes < self.stash))

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
