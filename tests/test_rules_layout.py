"""Rules (pynq_kv.rules) and structured keys / field rules (pynq_kv.layout), engine.md §2, §8."""

from __future__ import annotations

import ipaddress
import json

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pynq_kv.errors import InvalidRule, KeyFormatError, ValueFormatError
from pynq_kv.layout import Field, FieldLayout, parse_field_values, parse_layout_spec
from pynq_kv.ranges import range_to_ternary
from pynq_kv.rules import Rule, Ternary

# -- Ternary and Rule --------------------------------------------------------------------------


def test_ternary_and_rule_matching():
    entry = Ternary(0b1010, 0b1110)
    assert entry.matches(0b1010) and entry.matches(0b1011)
    assert not entry.matches(0b1000) and not entry.matches(0b0010)
    rule = Rule((Ternary(0x10, 0xF0), Ternary(0x03, 0x0F)), 5, b"v")
    assert rule.matches(0x1F) and rule.matches(0x23) and not rule.matches(0x24)
    assert Rule.ternary(0, 0, 1, "any").matches(12345)


def test_rule_normalises_its_fields():
    rule = Rule([Ternary(np.uint64(3), np.int32(7))], np.int16(4), bytearray(b"ab"), "r")
    assert rule.entries == (Ternary(3, 7),) and type(rule.entries[0].match) is int
    assert type(rule.priority) is int and rule.value == b"ab"
    assert Rule.ternary(1, 1, 0, np.uint8(9)).value == 9
    assert Rule.ternary(1, 1, 0, memoryview(b"x")).value == b"x"
    with pytest.raises(ValueFormatError):
        Rule.ternary(1, 1, 0, 1.5)
    with pytest.raises(ValueFormatError):
        Rule.ternary(1, 1, 0, True)


def test_rules_hash_and_compare_with_a_spec():
    a = Rule((Ternary(1, 1),), 2, "x", spec={"f": 1})
    b = Rule((Ternary(1, 1),), 2, "x", spec={"f": 1})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != Rule((Ternary(1, 1),), 2, "x", spec={"f": 2})


def test_valid_rule_passes():
    Rule((Ternary(0x0A << 280, 0xFF << 280), Ternary(0, 0)), 65535, "v", "name").validate(288, 16)
    Rule.ternary((1 << 143), (1 << 144) - 1, (1 << 32) - 1, 1).validate(144, 32)


@pytest.mark.parametrize("rule, message", [
    (Rule((), 1, "v"), "no entries"),
    (Rule.ternary(0, 1 << 144, 1, "v"), "wider than the 144-bit key"),
    (Rule.ternary(-1, 1, 1, "v"), "negative"),
    (Rule.ternary(0, -1, 1, "v"), "negative"),
    (Rule.ternary(0b11, 0b01, 1, "v"), "outside the mask"),
    (Rule.ternary(1, 1, -1, "v"), r"outside 0 \.\. 65535"),
    (Rule.ternary(1, 1, 1 << 16, "v"), r"outside 0 \.\. 65535"),
    (Rule.ternary(1, 1, 1.0, "v"), "priority must be an integer"),
    (Rule.ternary(1, 1, True, "v"), "priority must be an integer"),
    (Rule.ternary(1, 1, "3", "v"), "priority must be an integer"),
    (Rule(((1, 1),), 1, "v"), "not a Ternary"),
    (Rule((Ternary(1.0, 1),), 1, "v"), "must be integers"),
    (Rule.ternary(1, 1, 1, "v", name=7), "name must be a string"),
])
def test_invalid_rules(rule, message):
    with pytest.raises(InvalidRule, match=message):
        rule.validate(144, 16)


def test_invalid_rule_message_names_rule_and_entry():
    rule = Rule((Ternary(1, 1), Ternary(2, 1)), 1, "v", "web")
    with pytest.raises(InvalidRule, match="rule 'web', entry 1"):
        rule.validate(144, 16)


@pytest.mark.parametrize("value", [b"\x00bytes\xff", b"", "text ✓", "", 0, (1 << 511) + 5])
def test_rule_dict_round_trip(value):
    rule = Rule((Ternary(0xAB << 100, 0xFF << 100), Ternary(0, 0)), 77, value, "name",
                {"src": "10.0.0.0/8", "port": {"range": [1, 2]}})
    data = rule.to_dict()
    assert Rule.from_dict(data) == rule
    assert Rule.from_dict(json.loads(json.dumps(data))) == rule
    unnamed = Rule.ternary(3, 3, 0, value)
    assert Rule.from_dict(json.loads(json.dumps(unnamed.to_dict()))) == unnamed


def test_rule_dict_form():
    data = Rule.ternary(0x12, 0xFF, 9, b"\x01\x02", "r").to_dict()
    assert data == {"entries": [{"match": "0x12", "mask": "0xff"}], "priority": 9,
                    "value": {"bytes": "0102"}, "name": "r", "spec": None}
    assert Rule.ternary(0, 0, 0, 255).to_dict()["value"] == {"int": "0xff"}
    assert Rule.ternary(0, 0, 0, "s").to_dict()["value"] == {"str": "s"}


@pytest.mark.parametrize("mutate", [
    lambda d: d.pop("entries"),
    lambda d: d.pop("value"),
    lambda d: d.update(value={"float": 1.0}),
    lambda d: d.update(value={"bytes": "zz"}),
    lambda d: d.update(value={"str": 5}),
    lambda d: d.update(value={"int": "12"}),
    lambda d: d.update(value={"int": "0x1", "str": "a"}),
    lambda d: d.update(entries=[{"match": "0x1"}]),
    lambda d: d.update(entries=[{"match": 1, "mask": "0x1"}]),
    lambda d: d.update(entries=[{"match": "-0x1", "mask": "0x1"}]),
    lambda d: d.update(priority="1"),
    lambda d: d.update(spec=[1]),
    lambda d: d.clear(),
])
def test_malformed_rule_dicts(mutate):
    data = Rule.ternary(1, 1, 2, "v").to_dict()
    mutate(data)
    with pytest.raises(InvalidRule, match="not a rule record"):
        Rule.from_dict(data)
    with pytest.raises(InvalidRule):
        Rule.from_dict("not a dict")


# -- FieldLayout: construction ----------------------------------------------------------------

FIVE_TUPLE = [("src", "ipv4"), ("dst", "ipv4"), ("proto", "proto"), ("sport", "port"), ("dport", "port")]


def test_packing_positions_by_hand():
    layout = FieldLayout(144, FIVE_TUPLE)
    assert [(f.name, f.width, f.shift) for f in layout.fields] == [
        ("src", 32, 112), ("dst", 32, 80), ("proto", 8, 72), ("sport", 16, 56), ("dport", 16, 40)]
    key = layout.key(src="10.0.0.1", dst="192.168.1.2", proto=6, sport=1234, dport=80)
    assert key == (0x0A000001 << 112) | (0xC0A80102 << 80) | (6 << 72) | (1234 << 56) | (80 << 40)
    # byte view: big-endian, src first, 5 zero bytes after the last field
    assert key.to_bytes(18, "big").hex() == "0a000001" "c0a80102" "06" "04d2" "0050" + "00" * 5


def test_every_type_width_and_position():
    layout = FieldLayout(288, [("a", "ipv6"), ("b", "mac"), ("c", "vlan"), ("d", "uint:3"),
                               ("e", "bytes:3"), ("f", 20), ("g", " IPv4 ")])
    assert [(f.type, f.width) for f in layout.fields] == [
        ("ipv6", 128), ("mac", 48), ("vlan", 12), ("uint:3", 3), ("bytes:3", 24), ("uint:20", 20),
        ("ipv4", 32)]
    shifts = [f.shift for f in layout.fields]
    assert shifts == [160, 112, 100, 97, 73, 53, 21]
    key = layout.key(a="2001:db8::1", b="01:02:03:04:05:06", c=4095, d=5, e=b"xyz", f=0xABCDE,
                     g="1.2.3.4")
    assert key == ((0x20010DB8 << 96 | 1) << 160 | 0x010203040506 << 112 | 0xFFF << 100 | 5 << 97
                   | int.from_bytes(b"xyz", "big") << 73 | 0xABCDE << 53 | 0x01020304 << 21)
    assert Field("x", "uint:4", 4, 0).kind == "uint" and Field("x", "bytes:2", 16, 0).full == 0xFFFF


def test_fields_may_fill_the_key_exactly():
    layout = FieldLayout(144, [("a", "ipv6"), ("b", "port")])
    assert layout.fields[-1].shift == 0
    assert layout.key(a=(1 << 128) - 1, b=65535) == (1 << 144) - 1


@pytest.mark.parametrize("key_width, fields, message", [
    (144, [("a", "ipv6"), ("b", "ipv4")], "need 160 bits, the key has only 144"),
    (100, [("a", "ipv4")], "key width must be one of"),
    (True, [("a", "ipv4")], "key width must be one of"),
    (144, [], "needs a list"),
    (144, "a:ipv4", "needs a list"),
    (144, [("a", "ipv4"), ("a", "port")], "used twice"),
    (144, [("1a", "ipv4")], "not an identifier"),
    (144, [("a b", "ipv4")], "not an identifier"),
    (144, [(3, "ipv4")], "not an identifier"),
    (144, [("priority", "port")], "reserved"),
    (144, [("value", "port")], "reserved"),
    (144, [("a", "ipv5")], "unknown type"),
    (144, [("a", "uint:0")], "unknown type"),
    (144, [("a", "uint:x")], "unknown type"),
    (144, [("a", "bytes:")], "unknown type"),
    (144, [("a", "float:3")], "unknown type"),
    (144, [("a", None)], "type must be a string"),
    (144, [("a", "ipv4", 3)], "not a \\(name, type\\) pair"),
    (144, ["ab"], "not a \\(name, type\\) pair"),
    (144, [5], "not a \\(name, type\\) pair"),
])
def test_bad_layouts(key_width, fields, message):
    with pytest.raises(KeyFormatError, match=message):
        FieldLayout(key_width, fields)


def test_layout_dict_round_trip_repr_and_equality():
    layout = FieldLayout(288, [("src", "ipv4"), ("tag", "bytes:4"), ("n", 12)])
    data = layout.to_dict()
    assert data == {"key_width": 288, "fields": [["src", "ipv4"], ["tag", "bytes:4"], ["n", "uint:12"]]}
    again = FieldLayout.from_dict(json.loads(json.dumps(data)))
    assert again == layout and hash(again) == hash(layout)
    assert layout != FieldLayout(288, [("src", "ipv4")]) and layout != "layout"
    assert repr(layout) == "FieldLayout(288, [('src', 'ipv4'), ('tag', 'bytes:4'), ('n', 'uint:12')])"
    for bad in ({"fields": []}, {"key_width": 144, "fields": [], "x": 1}, [144]):
        with pytest.raises(KeyFormatError):
            FieldLayout.from_dict(bad)


# -- FieldLayout: keys ------------------------------------------------------------------------


def test_natural_value_forms():
    layout = FieldLayout(288, [("ip", "ipv4"), ("ip6", "ipv6"), ("mac", "mac"), ("port", "port"),
                               ("tag", "bytes:4")])
    base = layout.key(ip="10.0.0.1", ip6="::1", mac="aa:bb:cc:dd:ee:ff", port=80, tag=b"ab")
    same = [
        dict(ip=ipaddress.IPv4Address("10.0.0.1")), dict(ip=0x0A000001), dict(ip=" 10.0.0.1 "),
        dict(ip6=ipaddress.IPv6Address("::1")), dict(ip6=1), dict(ip6="0:0:0:0:0:0:0:1"),
        dict(mac="AA-BB-CC-DD-EE-FF"), dict(mac=0xAABBCCDDEEFF), dict(mac=bytes.fromhex("aabbccddeeff")),
        dict(port="80"), dict(port=np.uint16(80)), dict(port="0x50"),
        dict(tag=b"ab\0\0"), dict(tag="ab"), dict(tag=bytearray(b"ab")),
    ]
    values = dict(ip="10.0.0.1", ip6="::1", mac="aa:bb:cc:dd:ee:ff", port=80, tag=b"ab")
    for change in same:
        assert layout.key(**{**values, **change}) == base, change


def test_decode_round_trip():
    layout = FieldLayout(288, [("ip", "ipv4"), ("ip6", "ipv6"), ("mac", "mac"), ("port", "port"),
                               ("proto", "proto"), ("vlan", "vlan"), ("n", "uint:7"), ("tag", "bytes:3")])
    values = dict(ip="192.0.2.55", ip6="2001:db8::8:800:200c:417a", mac="00:1b:44:11:3a:b7",
                  port=65535, proto=17, vlan=100, n=127, tag=b"q\x00z")
    key = layout.key(**values)
    assert layout.decode(key) == values
    assert layout.key(**layout.decode(key)) == key
    zero = layout.key(ip=0, ip6=0, mac=0, port=0, proto=0, vlan=0, n=0, tag=b"")
    assert zero == 0 and layout.decode(0)["tag"] == b"\0\0\0" and layout.decode(0)["ip"] == "0.0.0.0"


@pytest.mark.parametrize("bad", [-1, 1 << 144, "0", 1.0, 1 << 39])
def test_decode_rejects_foreign_raw_keys(bad):
    layout = FieldLayout(144, FIVE_TUPLE)  # the low 40 bits are not part of any field
    with pytest.raises(KeyFormatError):
        layout.decode(bad)


def test_key_needs_exactly_the_layout_fields():
    layout = FieldLayout(144, FIVE_TUPLE)
    with pytest.raises(KeyFormatError, match="missing field\\(s\\) sport, dport"):
        layout.key(src=1, dst=2, proto=3)
    with pytest.raises(KeyFormatError, match="unknown field\\(s\\) colour"):
        layout.key(src=1, dst=2, proto=3, sport=4, dport=5, colour=6)


@pytest.mark.parametrize("field, value, message", [
    ("ip", "300.1.2.3", "'ip' \\(ipv4\\)"),
    ("ip", "::1", "'ip' \\(ipv4\\)"),
    ("ip", ipaddress.IPv6Address("::1"), "expected an ipv4 address"),
    ("ip", -1, "outside 0 .. 4294967295"),
    ("ip", 1 << 32, "outside"),
    ("ip", 1.5, "expected an ipv4 address"),
    ("ip6", "1.2.3.4", "'ip6' \\(ipv6\\)"),
    ("mac", "aa:bb:cc:dd:ee", "not a MAC address"),
    ("mac", "aa:bb-cc:dd:ee:ff", "not a MAC address"),
    ("mac", b"12345", "6 bytes, not 5"),
    ("mac", 1 << 48, "outside"),
    ("mac", None, "expected a MAC address"),
    ("port", 65536, "'port' \\(port\\): 65536 is outside 0 .. 65535"),
    ("port", -5, "outside"),
    ("port", "eighty", "not a decimal"),
    ("port", "-5", "not a decimal"),
    ("port", True, "expected an integer"),
    ("port", 80.0, "expected an integer"),
    ("port", "0xzz", "'port'"),
    ("tag", b"12345", "5 bytes do not fit in 4"),
    ("tag", "ü" * 3, "6 bytes do not fit in 4"),
    ("tag", 5, "expected bytes or str"),
])
def test_bad_field_values_name_the_field(field, value, message):
    layout = FieldLayout(288, [("ip", "ipv4"), ("ip6", "ipv6"), ("mac", "mac"), ("port", "port"),
                               ("tag", "bytes:4")])
    values = dict(ip=1, ip6=1, mac=1, port=1, tag=b"")
    values[field] = value
    with pytest.raises(KeyFormatError, match=message):
        layout.key(**values)


# -- FieldLayout: rules -----------------------------------------------------------------------

LAYOUT = FieldLayout(576, FIVE_TUPLE + [("ip6", "ipv6"), ("mac", "mac"), ("tag", "bytes:2"),
                                        ("vlan", "vlan")])
DEFAULTS = dict(src="10.1.2.3", dst="192.168.0.1", proto=6, sport=40000, dport=443, ip6="2001:db8::1",
                mac="aa:bb:cc:dd:ee:ff", tag=b"hi", vlan=7)


def key(**changes):
    return LAYOUT.key(**{**DEFAULTS, **changes})


def test_wildcards_everywhere():
    for spec in (None, "any", "*", " ANY "):
        rule = LAYOUT.rule(1, "v", src=spec)
        assert rule.entries == (Ternary(0, 0),) and rule.spec == {}
    assert LAYOUT.rule(1, "v").matches(key())


def test_exact_prefix_and_value_mask_specs():
    rule = LAYOUT.rule(3, "v", "web", src="10.0.0.0/8", dport=443, proto="6",
                       mac="aa:bb:cc:00:00:00/24", ip6="2001:db8::/32", tag=b"hi",
                       vlan={"value": "0x0f0", "mask": 0xFF0})
    assert len(rule.entries) == 1 and rule.name == "web" and rule.priority == 3
    assert rule.spec == {"src": "10.0.0.0/8", "proto": 6, "dport": 443, "ip6": "2001:db8::/32",
                         "mac": "aa:bb:cc:00:00:00/24", "tag": {"value": "0x6869", "mask": "0xffff"},
                         "vlan": {"value": "0xf0", "mask": "0xff0"}}
    entry = rule.entries[0]
    fields = {f.name: f for f in LAYOUT.fields}
    assert entry.mask >> fields["src"].shift & 0xFFFFFFFF == 0xFF000000
    assert entry.match >> fields["src"].shift & 0xFFFFFFFF == 0x0A000000
    assert entry.mask >> fields["sport"].shift & 0xFFFF == 0
    def hit(**changes):
        return rule.matches(key(**{"vlan": 0x0F7, **changes}))

    assert hit() and hit(vlan=0x0F0) and hit(src="10.255.255.255") and hit(mac="aa:bb:cc:00:00:00")
    assert not hit(vlan=0x1F0) and not hit(src="11.0.0.0") and not hit(dport=80)
    assert not hit(mac="aa:bb:cd:00:00:00") and not hit(tag=b"h") and not hit(ip6="2001:db9::")
    # the spec reproduces the rule
    assert LAYOUT.rule(3, "v", "web", **rule.spec) == rule


def test_value_mask_in_natural_forms():
    a = LAYOUT.rule(1, "v", src={"value": "10.0.0.0", "mask": "255.0.0.0"},
                    mac={"value": "02:00:00:00:00:00", "mask": 0x020000000000})
    b = LAYOUT.rule(1, "v", src="10.0.0.0/8", mac={"value": 1 << 41, "mask": "0x020000000000"})
    assert a.entries == b.entries
    assert a.spec["src"] == {"value": "0xa000000", "mask": "0xff000000"}


def test_prefix_objects_and_edge_lengths():
    assert LAYOUT.rule(1, "v", src=ipaddress.ip_network("10.0.0.0/8")).entries == \
        LAYOUT.rule(1, "v", src="10.0.0.0/8").entries
    assert LAYOUT.rule(1, "v", src="0.0.0.0/0").entries == (Ternary(0, 0),)
    assert LAYOUT.rule(1, "v", src="1.2.3.4/32").entries == LAYOUT.rule(1, "v", src="1.2.3.4").entries
    assert LAYOUT.rule(1, "v", mac="00:00:00:00:00:00/0").entries == (Ternary(0, 0),)


@pytest.mark.parametrize("spec", [(1000, 2000), [1000, 2000], {"range": [1000, 2000]}, "1000-2000",
                                  " 1000 - 2000 ", ("1000", "2000")])
def test_range_forms(spec):
    rule = LAYOUT.rule(1, "v", dport=spec)
    assert rule.spec == {"dport": {"range": [1000, 2000]}}
    assert len(rule.entries) == len(range_to_ternary(1000, 2000, 16)) == 8
    for port, inside in [(999, False), (1000, True), (1500, True), (2000, True), (2001, False)]:
        assert rule.matches(key(dport=port)) is inside
    assert rule.entries[0].matches(key(dport=1500))  # broadest entry first


def test_ip_ranges_and_cross_products():
    rule = LAYOUT.rule(1, "v", src="10.0.0.1-10.0.0.6", sport=(1, 6),
                       ip6=("2001:db8::1", "2001:db8::6"))
    assert len(rule.entries) == 3 * 3 * 3
    assert rule.spec["src"] == {"range": ["10.0.0.1", "10.0.0.6"]}
    assert rule.spec["ip6"] == {"range": ["2001:db8::1", "2001:db8::6"]}
    assert rule.matches(key(src="10.0.0.6", sport=1, ip6="2001:db8::3"))
    assert not rule.matches(key(src="10.0.0.7", sport=1, ip6="2001:db8::3"))
    assert not rule.matches(key(src="10.0.0.6", sport=0, ip6="2001:db8::3"))
    assert not rule.matches(key(src="10.0.0.6", sport=1, ip6="2001:db8::7"))
    mac = LAYOUT.rule(1, "v", mac=("00:00:00:00:00:01", "00:00:00:00:00:06"))
    assert len(mac.entries) == 3 and mac.matches(key(mac="00-00-00-00-00-05"))


def test_max_entries_guards_cross_products():
    per_field = "1 x 1 x 8 x 8 x 8 x 1 x 1 x 1 x 2"
    with pytest.raises(InvalidRule, match=f"expands to 1024 ternary entries .* {per_field}"):
        LAYOUT.rule(1, "v", sport=(1000, 2000), dport=(1000, 2000), vlan=(1, 2), src="10.0.0.0/8",
                    proto=(1, 254), max_entries=500)
    assert len(LAYOUT.rule(1, "v", sport=(1000, 2000), dport=(1000, 2000), max_entries=64).entries) == 64


@pytest.mark.parametrize("matches, message", [
    (dict(colour=1), "unknown field\\(s\\) colour"),
    (dict(src="10.0.0.0/33"), "'src' \\(ipv4\\): bad prefix"),
    (dict(src="10.0.0.1/8"), "'src' \\(ipv4\\): bad prefix: .*host bits"),
    (dict(src="2001:db8::/32"), "'src' \\(ipv4\\)"),
    (dict(ip6="10.0.0.0/8"), "'ip6' \\(ipv6\\): '10.0.0.0/8' is an IPv4 prefix"),
    (dict(mac="aa:bb:cc:00:00:00/49"), "'mac' \\(mac\\): bad prefix length"),
    (dict(mac="aa:bb:cc:00:00:00/x"), "'mac' \\(mac\\): bad prefix length"),
    (dict(mac="aa:bb:cc:00:00:01/24"), "'mac' \\(mac\\): .* bits set after the prefix"),
    (dict(dport="80/4"), "'dport' \\(port\\): prefixes are for ipv4, ipv6 and mac"),
    (dict(dport=(5, 4)), "'dport' \\(port\\): range \\[5, 4\\] is empty"),
    (dict(dport=(0, 65536)), "'dport' \\(port\\): 65536 is outside"),
    (dict(dport=(-1, 5)), "'dport' \\(port\\): -1 is outside"),
    (dict(dport="1-2-3"), "'dport' \\(port\\): a range has two ends"),
    (dict(dport=(1, 2, 3)), "a range has two ends"),
    (dict(dport={"range": 5}), "a range has two ends"),
    (dict(tag=(b"a", b"b")), "'tag' \\(bytes:2\\): ranges are not supported"),
    (dict(vlan={"value": 1, "mask": 0x1FFF}), "'vlan' \\(vlan\\): mask 0x1fff has bits outside the 12-bit"),
    (dict(vlan={"value": -1, "mask": 1}), "value -1 is negative"),
    (dict(vlan={"value": 3, "mask": 1}), "value 0x3 has bits outside mask 0x1"),
    (dict(vlan={"value": "0xg", "mask": 1}), "value '0xg' is not a hex number"),
    (dict(vlan={"value": 1}), "a dict spec is"),
    (dict(vlan={"eq": 1}), "a dict spec is"),
    (dict(proto=256), "'proto' \\(proto\\): 256 is outside"),
    (dict(proto=6.0), "'proto' \\(proto\\): expected an integer"),
    (dict(src="10.0.0.300"), "'src' \\(ipv4\\)"),
])
def test_bad_specs_name_the_field(matches, message):
    with pytest.raises(InvalidRule, match=message):
        LAYOUT.rule(1, "v", **matches)


def test_rule_priority_and_value_are_checked():
    with pytest.raises(InvalidRule, match="priority"):
        LAYOUT.rule(-1, "v")
    with pytest.raises(ValueFormatError):
        LAYOUT.rule(1, 2.5)
    assert LAYOUT.rule(priority=(1 << 32) - 1, value=b"x", name="n").priority == (1 << 32) - 1


def test_field_rules_survive_json():
    rule = LAYOUT.rule(4, b"\x00\x01", "r", src="10.0.0.0/8", dport="1000-2000", tag=b"ok",
                       mac={"value": 1, "mask": 1})
    again = Rule.from_dict(json.loads(json.dumps(rule.to_dict())))
    assert again == rule and again.spec == rule.spec
    assert LAYOUT.rule(4, b"\x00\x01", "r", **again.spec) == rule


# -- property: a field rule matches exactly the keys every field predicate accepts -------------

TYPES = ["ipv4", "ipv6", "mac", "port", "proto", "vlan", "uint:1", "uint:5", "uint:40", "bytes:1",
         "bytes:3"]


def natural(kind: str, width: int, number: int, draw) -> object:
    """A random natural form of a field value (the layout must accept all of them)."""
    forms = [number]
    if kind in ("ipv4", "ipv6"):
        forms.append(str(ipaddress.IPv4Address(number) if kind == "ipv4" else ipaddress.IPv6Address(number)))
    elif kind == "mac":
        forms.append("-".join(f"{b:02X}" for b in number.to_bytes(6, "big")))
    elif kind == "bytes":
        forms = [number.to_bytes(width // 8, "big")]
    else:
        forms.append(str(number))
    return draw(st.sampled_from(forms))


@st.composite
def layouts_and_rules(draw):
    types, used = [], 0
    for kind in draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=5)):
        width = FieldLayout(1152, [("x", kind)]).fields[0].width
        if used + width <= 144:
            types.append(kind)
            used += width
    layout = FieldLayout(144, [(f"f{i}", t) for i, t in enumerate(types)])
    specs, predicates, probes = {}, {}, {}
    for f in layout.fields:
        full, width, kind = f.full, f.width, f.kind
        choices = ["any", "exact", "mask"] + (["prefix"] if kind in ("ipv4", "ipv6", "mac") else []) \
            + (["range"] if kind != "bytes" else [])
        choice = draw(st.sampled_from(choices))
        near = []
        if choice == "any":
            spec, pred = draw(st.sampled_from([None, "any", "*"])), (lambda x: True)
        elif choice == "exact":
            v = draw(st.integers(0, full))
            spec, pred, near = natural(kind, width, v, draw), (lambda x, v=v: x == v), [v - 1, v, v + 1]
        elif choice == "mask":
            m = draw(st.integers(0, full))
            v = draw(st.integers(0, full)) & m
            spec = {"value": draw(st.sampled_from([v, hex(v)])), "mask": draw(st.sampled_from([m, hex(m)]))}
            pred, near = (lambda x, v=v, m=m: x & m == v), [v, v | (full & ~m), v ^ (m & -m)]
        elif choice == "prefix":
            length = draw(st.integers(0, width))
            host = (1 << (width - length)) - 1
            base = draw(st.integers(0, full)) & ~host
            if kind == "mac":
                spec = ":".join(f"{b:02x}" for b in base.to_bytes(6, "big")) + f"/{length}"
            else:
                address = ipaddress.IPv4Address(base) if kind == "ipv4" else ipaddress.IPv6Address(base)
                spec = f"{address}/{length}"
            pred = lambda x, base=base, host=host: x & ~host == base  # noqa: E731
            near = [base - 1, base, base | host, (base | host) + 1]
        else:
            lo, hi = sorted((draw(st.integers(0, full)), draw(st.integers(0, full))))
            a, b = natural(kind, width, lo, draw), natural(kind, width, hi, draw)
            forms = [(a, b), [a, b], {"range": [a, b]}]
            if isinstance(a, str) and isinstance(b, str) and kind != "mac":
                forms.append(f"{a}-{b}")
            spec = draw(st.sampled_from(forms))
            pred, near = (lambda x, lo=lo, hi=hi: lo <= x <= hi), [lo - 1, lo, lo + 1, hi - 1, hi, hi + 1]
        if spec is not None or draw(st.booleans()):
            specs[f.name] = spec
        predicates[f.name] = pred
        probes[f.name] = [x for x in near if 0 <= x <= full]
    return layout, specs, predicates, probes


@settings(max_examples=150, deadline=None)
@given(layouts_and_rules(), st.data())
def test_field_rules_match_exactly_the_field_predicates(case, data):
    layout, specs, predicates, probes = case
    try:
        rule = layout.rule(7, "v", **specs)
    except InvalidRule as exc:
        assume("ternary entries" not in str(exc))  # a cross product over max_entries
        raise
    assert layout.rule(7, "v", **rule.spec).entries == rule.entries  # the spec reproduces it
    for _ in range(12):
        raw = {}
        for f in layout.fields:
            pool = probes[f.name]
            if pool and data.draw(st.booleans()):
                raw[f.name] = data.draw(st.sampled_from(pool))
            else:
                raw[f.name] = data.draw(st.integers(0, f.full))
        fields = {f.name: natural(f.kind, f.width, raw[f.name], data.draw) for f in layout.fields}
        expected = all(predicates[name](raw[name]) for name in raw)
        assert rule.matches(layout.key(**fields)) is expected, (specs, raw)


@pytest.mark.parametrize("spec", ["aa:bb:cc:00:00:00/²", "aa:bb:cc:00:00:00/٣", "aa:bb:cc:00:00:00/ "])
def test_non_ascii_digits_in_a_prefix_length_are_an_invalid_rule(spec: str) -> None:
    layout = FieldLayout(288, [("m", "mac")])
    with pytest.raises(InvalidRule, match="bad prefix length"):
        layout.rule(1, b"x", m=spec)


# -- layouts and field values written as text (CLI, serve, admin API) -------------------------


def test_layout_spec_text():
    assert parse_layout_spec(" src_ip : ipv4,dst_port:port, flow:20,tag:bytes:4,") == [
        ("src_ip", "ipv4"), ("dst_port", "port"), ("flow", 20), ("tag", "bytes:4")]
    layout = FieldLayout.from_spec(288, "src_ip:ipv4,flow:20")
    assert layout == FieldLayout(288, [("src_ip", "ipv4"), ("flow", "uint:20")])
    assert [f.width for f in layout.fields] == [32, 20]


@pytest.mark.parametrize("spec, message", [
    ("src_ip", "'src_ip' is not name:type"),
    ("src_ip:ipv4,:port", "':port' is not name:type"),
    ("a:", "is not name:type"),
    (" , ", "empty layout"),
])
def test_bad_layout_specs(spec, message):
    with pytest.raises(KeyFormatError, match=message):
        parse_layout_spec(spec)


def test_layout_spec_types_are_checked_by_the_layout():
    with pytest.raises(KeyFormatError, match="unknown type 'ipv5'"):
        FieldLayout.from_spec(288, "a:ipv5")
    with pytest.raises(KeyFormatError, match="need 300 bits"):
        FieldLayout.from_spec(288, "a:300")


def test_field_values_text():
    assert parse_field_values(["src_ip = 10.0.0.0/8", "dst_port=1000-2000", "tag="]) == {
        "src_ip": "10.0.0.0/8", "dst_port": "1000-2000", "tag": ""}
    with pytest.raises(ValueError, match="is not name=value"):
        parse_field_values(["src_ip"])
    with pytest.raises(ValueError, match="is not name=value"):
        parse_field_values(["=1"])
    with pytest.raises(ValueError, match="'a' is given twice"):
        parse_field_values(["a=1", "a=2"])
