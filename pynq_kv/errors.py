"""Exceptions of the engine contract (docs/engine.md §9).

Every error leaves the tables unchanged; callers can catch `KVError` for all of them.
"""


class KVError(Exception):
    """Base class of every pynq-kv error."""


class KeyFormatError(KVError, ValueError):
    """A key of the wrong type, out of range, or a malformed field value."""


class KeyTooLong(KeyFormatError):
    """A byte-string key longer than the key format holds."""


class ValueFormatError(KVError, ValueError):
    """A value of the wrong type or out of range."""


class ValueTooLarge(ValueFormatError):
    """A byte-string value longer than the value width holds."""


class TableFull(KVError):
    """SET found no free slot, even after host relocation."""


class InvalidRule(KVError, ValueError):
    """A rule that cannot be written: bad mask, bad priority, bad field match."""


class RuleTableFull(KVError):
    """Not enough free rule entries for every ternary entry of a rule."""


class UnknownRule(KVError, KeyError):
    """A rule id that does not exist."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "unknown rule"


class GeometryError(KVError, ValueError):
    """Illegal engine parameters, or a snapshot taken with another geometry."""


class CommandError(KVError):
    """A control operation the engine refused (bad address, bad MOVE)."""


class SnapshotError(KVError):
    """A dump file that cannot be read or does not describe a consistent table."""


# -- loading an overlay (pynq_kv.load, docs/overlay.md): raised before anything is loaded, or
# after closing whatever was opened, and each names the file and what to do.


class OverlayError(KVError):
    """An overlay that cannot be loaded."""


class UnknownBoard(OverlayError, ValueError):
    """A board name with no overlays/<board>/manifest.json (the message lists the boards)."""


class OverlayNotBuilt(OverlayError):
    """The bitstream, .hwh or .xclbin of a board is missing (build it with make -C hw overlay)."""


class ManifestError(OverlayError):
    """A manifest that cannot be read, or that disagrees with this package or the hardware
    (part, platform, register-map version, geometry)."""


class DriverUnavailable(OverlayError):
    """The board's driver stack (pynq, XRT's pyxrt) is missing or cannot reach the registers."""
