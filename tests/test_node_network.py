"""The interface several nodes meet over (submission/node_network.py), decided on this host; the
two-namespace campaign that needs it is tests/test_two_nodes.py."""
from __future__ import annotations

import socket

import psutil
import pytest

from submission import node_network, preflight
from submission.config import resolve


@pytest.fixture(autouse=True)
def _no_variable_set(monkeypatch):
    for variable in node_network.VARIABLES.values():
        monkeypatch.delenv(variable, raising=False)


def test_one_node_is_left_as_it_was():
    assert node_network.meeting(resolve("cpu", {})) == node_network.Meeting()


def test_the_interface_of_the_route_to_master_addr():
    """master_addr on this host's loopback: the route's address is 127.0.0.1, held by `lo`."""
    met = node_network.meeting(resolve("cpu", {"nodes": "2", "master_addr": "127.0.0.1"}))
    (loopback,) = [name for name, held in psutil.net_if_addrs().items()
                   if any(entry.address == "127.0.0.1" for entry in held)]
    assert met.environment == {"GLOO_SOCKET_IFNAME": loopback} and not met.problem
    assert met.note == (f"nodes meet over {loopback} (127.0.0.1, the interface of the route to "
                        f"master_addr=127.0.0.1): GLOO_SOCKET_IFNAME={loopback} for the runs")


def test_the_users_variable_is_taken_as_given(monkeypatch):
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "ens5")
    met = node_network.meeting(resolve("cpu", {"nodes": "2", "master_addr": "10.0.0.1"}))
    assert met == node_network.Meeting("nodes meet over ens5: GLOO_SOCKET_IFNAME=ens5, as set")


def test_refused_when_nothing_reaches_master_addr_and_the_name_is_loopback(monkeypatch):
    monkeypatch.setattr(node_network, "local_address_towards", lambda host, port: None)
    monkeypatch.setattr(node_network, "host_addresses", lambda host: ["127.0.1.1"])
    config = resolve("cpu", {"nodes": "2", "master_addr": "10.0.0.1"})
    plan = preflight.launch_plan(config)
    (problem,) = [p for p in plan.problems if "master_addr" in p]
    assert problem == (f"no interface of this host reaches master_addr=10.0.0.1, and its name "
                       f"{socket.gethostname()!r} resolves only to 127.0.1.1, which the other nodes "
                       "cannot reach: set GLOO_SOCKET_IFNAME to the interface the nodes share (`ip -br "
                       "addr` lists them), or correct master_addr")
    assert plan.environment == {}


def test_a_name_that_resolves_elsewhere_is_left_to_the_backend(monkeypatch):
    monkeypatch.setattr(node_network, "local_address_towards", lambda host, port: None)
    monkeypatch.setattr(node_network, "host_addresses", lambda host: ["192.0.2.7"])
    met = node_network.meeting(resolve("cpu", {"nodes": "2", "master_addr": "10.0.0.1"}))
    assert not met.problem and not met.environment
    assert met.note.endswith("advertise " + socket.gethostname() + "'s address (192.0.2.7); "
                             "set GLOO_SOCKET_IFNAME to choose")
