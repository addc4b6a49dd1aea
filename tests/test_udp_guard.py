"""The UDP admission table of frontend.md §10 (pynq_kv.admission), no sockets."""

from __future__ import annotations

import ipaddress

import pytest

from pynq_kv.admission import (
    ADMIT_ENTRIES,
    LOOPBACK_NET,
    Admission,
    AdmissionEntry,
    AdmissionError,
    admission_from_options,
    parse_network,
    source_ipv4,
)


def entry(cidr: str, allow: bool = True, budget: int = 2) -> AdmissionEntry:
    return AdmissionEntry(ipaddress.IPv4Network(cidr), allow, budget)


def test_first_matching_entry_decides_in_index_order() -> None:
    table = Admission((entry("10.1.2.3/32", False, 0), entry("10.0.0.0/8", True, 5),
                       entry("10.1.0.0/16", True, 0)), default_allow=False, default_budget=2)
    assert table.decide("10.1.2.3") == (False, 0)
    assert table.decide("10.1.2.4") == (True, 5)  # the /8 comes first, the /16 never decides
    assert table.decide("11.0.0.1") == (False, 2)  # no entry: the default
    assert table.decide(int(ipaddress.IPv4Address("10.9.9.9"))) == (True, 5)


def test_prefix_edges() -> None:
    everything = Admission((entry("0.0.0.0/0", True, 7),), default_allow=False)
    assert everything.decide("0.0.0.0") == (True, 7)
    assert everything.decide("255.255.255.255") == (True, 7)
    host = Admission((entry("192.168.1.1/32", False, 0),), default_allow=True, default_budget=3)
    assert host.decide("192.168.1.1") == (False, 0)
    assert host.decide("192.168.1.0") == (True, 3)
    assert host.decide("192.168.1.2") == (True, 3)
    block = Admission((entry("172.16.0.0/12", True, 1),), default_allow=False)
    assert block.decide("172.31.255.255") == (True, 1)
    assert block.decide("172.32.0.0")[0] is False
    assert block.decide("172.15.255.255")[0] is False


def test_empty_table_is_the_default() -> None:
    assert Admission((), default_allow=True, default_budget=2).decide("8.8.8.8") == (True, 2)
    assert Admission((), default_allow=False).decide(0)[0] is False


def test_validation() -> None:
    with pytest.raises(AdmissionError, match="0..255"):
        entry("10.0.0.0/8", True, 256)
    with pytest.raises(AdmissionError, match="0..255"):
        Admission((), default_allow=True, default_budget=-1)
    with pytest.raises(AdmissionError, match="holds 8"):
        Admission(tuple(entry(f"10.0.{i}.0/24") for i in range(ADMIT_ENTRIES + 1)),
                  default_allow=False)
    Admission(tuple(entry(f"10.0.{i}.0/24") for i in range(ADMIT_ENTRIES)), default_allow=False)
    with pytest.raises(AdmissionError, match="IPv4Network"):
        AdmissionEntry("10.0.0.0/8", True, 2)  # type: ignore[arg-type]
    table = Admission((), default_allow=True)
    for bad in ("10.0.0", "::1", 1 << 32, -1, True):
        with pytest.raises(AdmissionError):
            table.decide(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("text, message", [
    ("10.0.0.1/8", "host bits set.*10.0.0.0/8"),
    ("10.0.0.0/33", "prefix length"),
    ("300.0.0.0/8", "not an IPv4 network"),
    ("fe80::/10", "IPv4 networks only"),
    ("", "not an IPv4 network"),
])
def test_parse_network_refuses_clearly(text: str, message: str) -> None:
    with pytest.raises(AdmissionError, match=message):
        parse_network(text)


def test_parse_network_bare_address_is_a_host() -> None:
    assert parse_network("10.1.2.3") == ipaddress.IPv4Network("10.1.2.3/32")


def test_options_loopback_defaults() -> None:
    table = admission_from_options(loopback_bind=True)
    assert table is not None
    assert table.entries == (AdmissionEntry(LOOPBACK_NET, True, 0),)
    assert (table.default_allow, table.default_budget) == (True, 2)
    assert table.decide("127.0.0.5") == (True, 0)
    assert table.decide("10.0.0.1") == (True, 2)


def test_options_order_deny_trust_allow_and_default_deny() -> None:
    table = admission_from_options(loopback_bind=False, allow=["10.0.0.0/8"],
                                   trust=["10.1.0.0/16"], deny=["10.1.2.3"], budget=4)
    assert table is not None
    assert [(str(e.network), e.allow, e.budget) for e in table.entries] == [
        ("10.1.2.3/32", False, 0), ("10.1.0.0/16", True, 0), ("10.0.0.0/8", True, 4)]
    assert table.decide("10.1.2.3") == (False, 0)
    assert table.decide("10.1.2.4") == (True, 0)
    assert table.decide("10.2.0.1") == (True, 4)
    assert table.decide("127.0.0.1")[0] is False  # a list replaces the loopback default


def test_options_non_loopback_without_allow_list_is_off() -> None:
    assert admission_from_options(loopback_bind=False) is None
    assert admission_from_options(loopback_bind=False, deny=["10.0.0.0/8"]) is None
    with pytest.raises(AdmissionError, match="udp-budget"):
        admission_from_options(loopback_bind=True, budget=300)
    with pytest.raises(AdmissionError, match="holds 8"):  # 8 denies + implicit loopback = 9
        admission_from_options(loopback_bind=True, deny=[f"10.0.{i}.0/24" for i in range(8)])


def test_source_ipv4() -> None:
    assert source_ipv4("10.0.0.1") == int(ipaddress.IPv4Address("10.0.0.1"))
    assert source_ipv4("::ffff:10.0.0.1") == int(ipaddress.IPv4Address("10.0.0.1"))
    assert source_ipv4("::1") == int(ipaddress.IPv4Address("127.0.0.1"))
    assert source_ipv4("fe80::1%lo") is None
    assert source_ipv4("2001:db8::1") is None
