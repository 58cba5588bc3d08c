"""INC as a torch.distributed backend: ``import inc_torch`` registers ``"inc"`` (CPU tensors).

    import torch.distributed as dist
    import inc_torch
    dist.init_process_group("inc")          # under torchrun, or with rank/world_size/init_method
    dist.all_reduce(t)                      # runs on INC: on the hosts, or through a switch
    inc_torch.last_report()                 # how the last collective ran (algorithm, in_network)

Rank and size are torch's (the backend constructor receives them). Each group (the default one
and every ``new_group``) is an INC communicator of its own: the group's rank 0 hosts an INC
rendezvous store on a port the kernel picks and publishes its address in the group's torch
store; the others read it there. INC's own variables (INC_TIMEOUT, INC_SWITCH, INC_ALGO, ...)
apply as for any INC program; see docs/PYTORCH.md.
"""

import os
import socket

import torch
import torch.distributed as dist

from . import _C

__all__ = ["last_report", "totals", "BACKEND"]

BACKEND = "inc"
_STORE_KEY = "inc_torch/store"


def _local_host(size):
    """The address of this host that the group's other ranks reach it at."""
    if size == 1:
        return "127.0.0.1"
    host = os.environ.get("INC_HOST")  # INC's own setting: the address peers reach this rank at
    if host:
        return host
    master = os.environ.get("MASTER_ADDR")
    if not master:
        return "127.0.0.1"
    # The local address of the route towards the master (no packet is sent).
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((socket.gethostbyname(master), 9))
        return s.getsockname()[0]


def _free_port(host):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _create(store, rank, size, timeout):
    """torch's backend constructor (torch.distributed.Backend.register_backend)."""
    del timeout  # INC's deadline is INC_TIMEOUT (default 60 s), as for every INC program
    if rank == 0:
        host = _local_host(size)
        address = f"{host}:{_free_port(host)}"
        store.set(_STORE_KEY, address)
    else:
        address = store.get(_STORE_KEY).decode()
    return _C.create_backend(rank, size, address, rank == 0)


def _backend(group):
    group = group if group is not None else dist.group.WORLD
    return group._get_backend(torch.device("cpu"))


def last_report(group=None):
    """The INC report of the group's last completed collective, as a dict (algorithm,
    in_network, reason, bytes_sent, bytes_received, seconds, retransmissions, bytes_resent: of
    bytes_sent, what was not a first transmission, messages_sent, switch_operations, accumulate,
    hops: a list of dicts, predicted_us: a list of (path, microseconds), offload, wire_handler,
    ...; inc::Report's fields)."""
    return _C.last_report(_backend(group))


def totals(group=None):
    """Collectives, those that ran in the network, and payload bytes sent and received by
    this rank, summed over the group's completed collectives."""
    return _C.totals(_backend(group))


if BACKEND not in dist.Backend.backend_list:
    dist.Backend.register_backend(BACKEND, _create, devices=["cpu"])
