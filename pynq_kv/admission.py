"""Who the memcached UDP port answers, and with how many reply bytes (frontend.md §10).

The admission table is the same in the software server and the RTL front-end: at most
`ADMIT_ENTRIES` IPv4 prefixes, each allowing or denying its sources with a reply-budget
multiplier, checked in index order, then a default. This module is pure (no engine, no socket):
the software server asks `admit` (Admission.decide on the IPv4 source), the board driver
programs the same table into registers, and `pynq-kv serve` builds it from its options with
`admission_from_options`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Iterable, Optional, Union

from .errors import KVError

ADMIT_ENTRIES = 8  # table entries, in the RTL (kv_mc_core) and in software alike
MAX_BUDGET = 255  # the budget multiplier is an 8-bit field; 0 = trusted (no budget)
DEFAULT_BUDGET = 2  # the RTL's reset default and serve's --udp-budget default
LOOPBACK_NET = ipaddress.IPv4Network("127.0.0.0/8")

Address = Union[int, str, ipaddress.IPv4Address]


class AdmissionError(KVError, ValueError):
    """An admission table or serve option that cannot be programmed."""


def parse_network(text: str) -> ipaddress.IPv4Network:
    """An IPv4 prefix "a.b.c.d/len" (a bare address is a /32); host bits must be zero.

    Host bits are refused rather than masked off: "10.0.0.1/8" more likely means a typo than
    10.0.0.0/8, and the table must hold exactly what the user meant.
    """
    try:
        return ipaddress.IPv4Network(text.strip(), strict=True)
    except ipaddress.AddressValueError as exc:
        if ":" in text:
            raise AdmissionError(f"{text!r}: UDP admission takes IPv4 networks only "
                                 "(the RTL front-end is IPv4-only)") from None
        raise AdmissionError(f"{text!r} is not an IPv4 network (a.b.c.d/len): {exc}") from None
    except ipaddress.NetmaskValueError as exc:
        raise AdmissionError(f"{text!r}: bad prefix length: {exc}") from None
    except ValueError:  # host bits set
        network = ipaddress.IPv4Network(text.strip(), strict=False)
        raise AdmissionError(f"{text!r} has host bits set; did you mean {network}?") from None


def _check_budget(budget: int, what: str) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int) or not 0 <= budget <= MAX_BUDGET:
        raise AdmissionError(f"{what} must be an integer 0..{MAX_BUDGET} "
                             f"(0 = trusted, no budget), got {budget!r}")


def _address(addr: Address) -> int:
    """An IPv4 source address as a 32-bit integer."""
    if isinstance(addr, bool):
        raise AdmissionError(f"not an IPv4 address: {addr!r}")
    if isinstance(addr, int):
        if not 0 <= addr < 1 << 32:
            raise AdmissionError(f"IPv4 address out of range: {addr}")
        return addr
    try:
        return int(ipaddress.IPv4Address(addr))
    except ValueError:
        raise AdmissionError(f"not an IPv4 address: {addr!r}") from None


@dataclass(frozen=True)
class AdmissionEntry:
    """One prefix of the table: its sources are allowed with budget multiplier M, or denied."""

    network: ipaddress.IPv4Network
    allow: bool
    budget: int = DEFAULT_BUDGET  # M; 0 = trusted; meaningless when denied

    def __post_init__(self) -> None:
        if not isinstance(self.network, ipaddress.IPv4Network):
            raise AdmissionError(f"an entry's network must be an IPv4Network, "
                                 f"got {self.network!r}")
        _check_budget(self.budget, f"the budget multiplier of {self.network}")

    def contains(self, addr: int) -> bool:
        return (addr & int(self.network.netmask)) == int(self.network.network_address)


@dataclass(frozen=True)
class Admission:
    """The table of frontend.md §10: entries in index order, then the default (action, M)."""

    entries: tuple[AdmissionEntry, ...]
    default_allow: bool
    default_budget: int = DEFAULT_BUDGET

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", tuple(self.entries))
        if len(self.entries) > ADMIT_ENTRIES:
            raise AdmissionError(f"{len(self.entries)} admission entries, the table holds "
                                 f"{ADMIT_ENTRIES}")
        for entry in self.entries:
            if not isinstance(entry, AdmissionEntry):
                raise AdmissionError(f"not an AdmissionEntry: {entry!r}")
        _check_budget(self.default_budget, "the default budget multiplier")

    def decide(self, addr: Address) -> tuple[bool, int]:
        """(allowed, M) for an IPv4 source: the first entry containing it, else the default."""
        value = _address(addr)
        for entry in self.entries:
            if entry.contains(value):
                return entry.allow, entry.budget
        return self.default_allow, self.default_budget

    def describe(self) -> str:
        """One line for logs and the start-up banner, entries in order."""
        parts = [f"{'allow' if e.allow else 'deny'} {e.network}"
                 + (f" x{e.budget}" if e.allow and e.budget else " trusted" if e.allow else "")
                 for e in self.entries]
        default = (f"allow x{self.default_budget}" if self.default_allow and self.default_budget
                   else "allow trusted" if self.default_allow else "deny")
        return ", ".join(parts + [f"else {default}"])


def admission_from_options(*, loopback_bind: bool, allow: Iterable[str] = (),
                           deny: Iterable[str] = (), trust: Iterable[str] = (),
                           budget: int = DEFAULT_BUDGET) -> Optional[Admission]:
    """The table `pynq-kv serve` programs from --udp-deny/--udp-trust/--udp-allow/--udp-budget.

    Entries go in that order: deny, then trust (allow, M = 0), then allow (M = budget), so a
    denied host inside an allowed network stays denied. With allow or trust networks the default
    is deny. Without them, a loopback bind answers everyone (only local hosts reach it) at the
    budget, with 127.0.0.0/8 trusted after the deny entries; a non-loopback bind gets None:
    UDP stays off until the user names who may use it.
    """
    _check_budget(budget, "--udp-budget")
    denied = [parse_network(text) for text in deny]
    trusted = [parse_network(text) for text in trust]
    allowed = [parse_network(text) for text in allow]
    entries = ([AdmissionEntry(n, False, 0) for n in denied]
               + [AdmissionEntry(n, True, 0) for n in trusted]
               + [AdmissionEntry(n, True, budget) for n in allowed])
    if trusted or allowed:
        return Admission(tuple(entries), default_allow=False, default_budget=budget)
    if not loopback_bind:
        return None
    entries.append(AdmissionEntry(LOOPBACK_NET, True, 0))
    return Admission(tuple(entries), default_allow=True, default_budget=budget)



def source_ipv4(host: str) -> Optional[int]:
    """The IPv4 address the table decides for a datagram's source host, or None (denied).

    The RTL sees IPv4 only. A software server bound to an IPv6 socket also hears IPv4-mapped
    sources (::ffff:a.b.c.d, decided as a.b.c.d) and ::1, decided as 127.0.0.1 (it is the same
    machine); any other IPv6 source has no entry that could match it and is denied.
    """
    address = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv4Address):
        return int(address)
    if address.ipv4_mapped is not None:
        return int(address.ipv4_mapped)
    if address == ipaddress.IPv6Address("::1"):
        return int(ipaddress.IPv4Address("127.0.0.1"))
    return None


def admit(admission: Admission, host: str) -> tuple[bool, int]:
    """(allowed, M) for a datagram from host as a socket reports it (see source_ipv4)."""
    address = source_ipv4(host)
    if address is None:
        return False, 0
    return admission.decide(address)
