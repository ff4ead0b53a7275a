"""What the agent believes about a request's origin: the socket peer, X-Forwarded-For hops, SSO group lists.

uvicorn's proxy-header rewriting is switched off (`proxy_headers=False`), so `request.client` is always the
socket's peer; only the functions here interpret forwarded headers, and only for peers in TRUSTED_PROXIES.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# RDN attributes that continue a DN rather than start a new group name ("cn=helpdesk,ou=groups,dc=corp")
_DN_TAIL = re.compile(r"^\s*(ou|dc|o|c|l|st|street)\s*=", re.IGNORECASE)
_UNESCAPED_COMMA = re.compile(r"(?<!\\),")


def parse_networks(spec: str) -> list[Network]:
    return [ipaddress.ip_network(p.strip(), strict=False) for p in spec.split(",") if p.strip()]


def is_trusted(address: str, proxies: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    return any(ip in net for net in proxies)


def client_address(peer: str, forwarded_for: str | None, proxies: Sequence[Network]) -> str:
    """The right-most X-Forwarded-For hop that is not a trusted proxy, when the peer is one; else the peer.

    Hops left of the first untrusted one were written by whoever sent the request and prove nothing.
    """
    if not forwarded_for or not is_trusted(peer, proxies):
        return peer
    hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
    for hop in reversed(hops):
        if not is_trusted(hop, proxies):
            return hop[:64]
    return hops[0][:64] if hops else peer


def split_groups(raw: str) -> list[str]:
    """Group names from an SSO header: `;`- or `,`-separated, but a comma inside a DN does not split it."""
    groups: list[str] = []
    for part in raw.split(";"):
        for piece in _UNESCAPED_COMMA.split(part):
            if groups and _DN_TAIL.match(piece) and "=" in groups[-1] and piece.strip():
                groups[-1] = f"{groups[-1]},{piece.strip()}"
            elif piece.strip():
                groups.append(piece.strip())
    return groups
