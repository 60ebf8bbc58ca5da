"""The network interface several nodes meet over, decided before a campaign starts.

gloo (CPU) and NCCL (GPU) each advertise an address of this host to the other ranks. Without
GLOO_SOCKET_IFNAME, gloo advertises what the host's name resolves to, which on cloned VMs and
with Debian's /etc/hosts is a loopback address (127.0.0.1, 127.0.1.1): the other nodes then
connect to themselves ("Gloo connectFullMesh failed ... remote=[127.0.0.1]") while node 0
waits. So on several nodes the harness names the interface for the processes it launches: the
one holding the address this host reaches master_addr from (a UDP socket connected to it, which
sends nothing, and psutil's addresses), unless the user set the variable, which is taken as
given. A single node (nodes=1) is left as it was.
"""
from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass, field

from .config import Config

# the variable each backend reads (distributed.setup: nccl on GPUs, gloo on the CPU)
VARIABLES = {"cuda": "NCCL_SOCKET_IFNAME", "cpu": "GLOO_SOCKET_IFNAME"}


@dataclass(frozen=True)
class Meeting:
    """Where this node meets the others: what to say, the variables to set for the runs, or
    why it cannot meet them."""
    note: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    problem: str = ""


def meeting(config: Config) -> Meeting:
    """The interface this node meets the others over (nothing for a single node)."""
    if config.num_nodes == 1:
        return Meeting()
    variable = VARIABLES[config.device_type]
    given = os.environ.get(variable, "")
    if given:
        return Meeting(f"nodes meet over {given}: {variable}={given}, as set")
    address = local_address_towards(config.master_addr, config.master_port)
    interface = interface_holding(address) if address else None
    if interface:
        return Meeting(f"nodes meet over {interface} ({address}, the interface of the route to "
                       f"master_addr={config.master_addr}): {variable}={interface} for the runs",
                       {variable: interface})
    host = socket.gethostname()
    addresses = host_addresses(host)
    if all(ipaddress.ip_address(a).is_loopback for a in addresses):
        resolved = f"resolves only to {', '.join(addresses)}" if addresses else "resolves to no address"
        return Meeting(problem=(
            f"no interface of this host reaches master_addr={config.master_addr}, and its name "
            f"{host!r} {resolved}, which the other nodes cannot reach: set {variable} to the "
            "interface the nodes share (`ip -br addr` lists them), or correct master_addr"))
    return Meeting(f"no interface of this host reaches master_addr={config.master_addr}: the runs "
                   f"advertise {host}'s address ({', '.join(addresses)}); set {variable} to choose")


def local_address_towards(host: str, port: int) -> str | None:
    """The address of this host that packets to `host` leave from, or None when no route
    reaches it (or its name does not resolve). Connecting a UDP socket sends nothing."""
    try:
        family, _, _, _, where = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(where)
            return str(probe.getsockname()[0]).split("%")[0]
    except OSError:            # socket.gaierror included
        return None


def interface_holding(address: str) -> str | None:
    """The name of the interface that holds `address` (for this host's own address, not the
    route's device: a route to oneself goes through `lo`)."""
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(entry.address.split("%")[0] == address for entry in addresses):
            return name
    return None


def host_addresses(host: str) -> list[str]:
    """The addresses `host` resolves to, in order, each once; none when it does not resolve."""
    try:
        found = [str(entry[4][0]).split("%")[0] for entry in socket.getaddrinfo(host, None)]
    except OSError:
        return []
    return list(dict.fromkeys(found))
