"""Listening addresses: which ones only this machine can reach (no engine, no server needed).

`pynq-kv serve` refuses to open the admin API or RESP beyond loopback without a token or a
password; this is the one test of "beyond loopback" every front-end shares.
"""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 (bare or as "[::1]"), ::ffff:127.x and "localhost".

    Anything else counts as reachable from elsewhere: 0.0.0.0, ::, "" (every address), LAN
    addresses and host names other than localhost (they may resolve anywhere).
    """
    text = host.strip()
    if text.lower() == "localhost":
        return True
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback
