"""The "inc" backend with a Core-INC switch (python/tests/with_switch.sh starts one and sets
INC_SWITCH): f32 sums are aggregated in the network, as the group's INC report says."""

import os

import pytest
import torch
import torch.distributed as dist

import inc_torch
from conftest import rank_input, reference, same


def test_f32_sum_in_network():
    r, n = dist.get_rank(), dist.get_world_size()
    t = rank_input(r, "sw/f32", torch.float32, "sum", 1000)
    dist.all_reduce(t)
    rep = inc_torch.last_report()
    pending = rank_input(r, "sw/async", torch.float32, "sum", 4096)
    work = dist.all_reduce(pending, async_op=True)
    work.wait()
    rep_async = inc_torch.last_report()
    assert same(t, reference([rank_input(q, "sw/f32", torch.float32, "sum", 1000) for q in range(n)],
                             "sum", torch.float32))
    assert rep["in_network"] and rep["algorithm"] == "inc", rep
    assert 0 <= rep["bytes_resent"] < rep["bytes_sent"], rep
    # 4000 B in one switch operation (the default INC_SEGMENT_BYTES of `inc` is 64 KiB), no
    # point-to-point message, over host->switch and switch->hosts.
    assert rep["switch_operations"] == 1 and rep["messages_sent"] == 0, rep
    assert [h["hop"] for h in rep["hops"]] == ["host->switch", "switch->hosts"], rep
    assert same(pending, reference([rank_input(q, "sw/async", torch.float32, "sum", 4096) for q in range(n)],
                                   "sum", torch.float32))
    assert rep_async["in_network"], rep_async
    assert inc_torch.totals()["in_network"] >= 2


def test_other_dtypes_and_groups_say_where_they_ran():
    r, n = dist.get_rank(), dist.get_world_size()
    x = rank_input(r, "sw/i64", torch.int64, "max", 64)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    rep_max = inc_torch.last_report()
    g = dist.new_group(list(range(n)))
    y = torch.ones(8)
    dist.all_reduce(y, group=g)
    rep_group = inc_torch.last_report(g)
    assert same(x, reference([rank_input(q, "sw/i64", torch.int64, "max", 64) for q in range(n)], "max",
                             torch.int64))
    assert rep_max["reason"], rep_max
    # A group made by new_group is a second INC communicator of this process: on the hosts,
    # saying why (the switch job belongs to the world's communicator).
    assert torch.equal(y, torch.full((8,), float(n)))
    assert not rep_group["in_network"] and rep_group["reason"], rep_group


@pytest.mark.skipif(not os.environ.get("INC_FAULT_LOSS"), reason="needs INC_FAULT_LOSS (torch_backend_lossy_switch_n3)")
def test_bytes_resent_under_loss():
    """With this rank losing some of its datagrams to the switch, a 1 MiB sum is still right and
    the report counts what was sent again: part, not all, of bytes_sent."""
    r, n = dist.get_rank(), dist.get_world_size()
    t = rank_input(r, "sw/lossy", torch.float32, "sum", 1 << 18)
    dist.all_reduce(t)
    rep = inc_torch.last_report()
    assert same(t, reference([rank_input(q, "sw/lossy", torch.float32, "sum", 1 << 18) for q in range(n)],
                             "sum", torch.float32))
    assert rep["in_network"] and rep["retransmissions"] > 0, rep
    assert 0 < rep["bytes_resent"] < rep["bytes_sent"], rep
    assert rep["switch_operations"] == 16, rep  # 1 MiB in operations of 64 KiB
