"""Zeroconf (mDNS) announcement of the Wyoming service, so Home Assistant discovers it.

Home Assistant's Wyoming integration browses ``_wyoming._tcp.local.``; a service found there
appears under Settings → Devices & services → Discovered, and Home Assistant then connects to
the announced address and port and asks ``describe``. Only a service bound beyond loopback is
announced: one on 127.0.0.1 cannot be reached from another machine anyway.
"""

from __future__ import annotations

import ipaddress
import logging
import socket

from zeroconf import Error, IPVersion
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

log = logging.getLogger(__name__)

SERVICE_TYPE = "_wyoming._tcp.local."
MDNS_GROUP = "224.0.0.251"


class Announcement:
    """A registered zeroconf service; ``close`` withdraws it."""

    def __init__(self, zc: AsyncZeroconf, info: AsyncServiceInfo) -> None:
        self.zc = zc
        self.info = info

    @property
    def name(self) -> str:
        """The announced instance name (``lifebot-HOST._wyoming._tcp.local.``)."""
        return str(self.info.name)

    async def close(self) -> None:
        """Withdraw the announcement and stop answering mDNS."""
        try:
            await self.zc.async_unregister_service(self.info)
        finally:
            await self.zc.async_close()


def lan_address() -> str | None:
    """This machine's address on the network that carries mDNS (None if there is none).

    Connecting a UDP socket sends nothing: it only asks the kernel which source address it
    would use for the mDNS group.
    """
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((MDNS_GROUP, 5353))
        address = str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith(("0.", "127.")) else address


def announced_address(host: str) -> str | None:
    """The IPv4 address to announce for a service bound to ``host`` (None: do not announce)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        try:
            ip = ipaddress.ip_address(socket.gethostbyname(host))
        except OSError:
            return None
    if ip.is_loopback:
        return None
    if ip.is_unspecified:  # 0.0.0.0 or ::, every interface: the one that carries mDNS
        return lan_address()
    return str(ip) if ip.version == 4 else None


async def announce(
    host: str, port: int, *, name: str | None = None, interfaces: list[str] | None = None
) -> Announcement | None:
    """Announce the service on ``host:port``; None when bound to loopback or it cannot be.

    ``interfaces``: where mDNS is spoken (default: every interface with the address).
    """
    if _loopback(host):
        return None
    address = announced_address(host)
    if address is None:
        log.warning("Wyoming: no IPv4 network address to announce over zeroconf; add it by hand")
        return None
    instance = name or f"lifebot-{socket.gethostname().split('.')[0]}"
    info = AsyncServiceInfo(
        SERVICE_TYPE,
        f"{instance}.{SERVICE_TYPE}",
        addresses=[socket.inet_aton(address)],
        port=port,
        server=f"{instance}.local.",
    )
    zc = AsyncZeroconf(
        interfaces=interfaces or [address],
        ip_version=IPVersion.V4Only,
    )
    try:
        await zc.async_register_service(info)
    except (OSError, Error) as exc:  # an announcement is extra: the service still runs
        await zc.async_close()
        log.warning("Wyoming: could not announce over zeroconf (%s); add it by address", exc)
        return None
    log.info("Wyoming announced over zeroconf as %s at %s:%s", instance, address, port)
    return Announcement(zc, info)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
