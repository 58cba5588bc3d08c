"""The "inc" backend under torchrun (3 and 4 ranks): every collective x dtype x ReduceOp against
results computed in Python, async Works and futures, new_group, and clear errors."""

import time

import pytest
import torch
import torch.distributed as dist

import inc_torch
from conftest import DTYPES, OPS, rank_input, reference, same

N = 7  # elements per rank: odd, so that no algorithm splits it evenly


def ids(dtype):
    return str(dtype).removeprefix("torch.")


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_all_reduce(dtype, op):
    r, n = dist.get_rank(), dist.get_world_size()
    case = f"ar/{dtype}/{op}"
    t = rank_input(r, case, dtype, op, N)
    dist.all_reduce(t, op=OPS[op])
    want = reference([rank_input(q, case, dtype, op, N) for q in range(n)], op, dtype)
    assert same(t, want), (t, want)
    rep = inc_torch.last_report()
    assert rep["collective"] == "allreduce" and rep["algorithm"], rep
    assert rep["bytes_resent"] == 0, rep  # on the hosts: nothing is sent twice
    # Point-to-point messages, no switch operation; one host->host hop (three when a narrow sum
    # widens); no tuning file, no Edge-INC engine.
    assert rep["messages_sent"] > 0 and rep["switch_operations"] == 0, rep
    assert rep["hops"] and all(h["hop"].startswith("host->host") for h in rep["hops"]), rep
    assert rep["predicted_us"] == [] and rep["offload"] == "" and rep["wire_handler"] == "", rep


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_reduce_scatter(dtype, op):
    r, n = dist.get_rank(), dist.get_world_size()
    case = f"rs/{dtype}/{op}"
    full = [rank_input(q, case, dtype, op, n * N) for q in range(n)]
    out = torch.empty(N, dtype=dtype)
    dist.reduce_scatter_tensor(out, full[r].clone(), op=OPS[op])
    out_list = torch.empty(N, dtype=dtype)
    dist.reduce_scatter(out_list, list(full[r].clone().chunk(n)), op=OPS[op])
    want = reference(full, op, dtype)[r * N:(r + 1) * N]
    assert same(out, want), (out, want)
    assert same(out_list, want), (out_list, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_gather_broadcast_alltoall(dtype):
    r, n = dist.get_rank(), dist.get_world_size()
    mine = [rank_input(q, f"ag/{dtype}", dtype, "sum", N) for q in range(n)]
    flat = torch.empty(n * N, dtype=dtype)
    dist.all_gather_into_tensor(flat, mine[r])
    listed = [torch.empty(N, dtype=dtype) for _ in range(n)]
    dist.all_gather(listed, mine[r])
    casts = []
    for root in range(n):
        b = mine[r].clone() if r == root else torch.zeros(N, dtype=dtype)
        dist.broadcast(b, src=root)
        casts.append(b)
    # all_to_all_single: block q of rank p's input goes to rank q's output block p.
    blocks = [rank_input(p, f"a2a/{dtype}", dtype, "sum", n * 3).view(n, 3) for p in range(n)]
    a2a = torch.empty(n, 3, dtype=dtype)
    dist.all_to_all_single(a2a, blocks[r].clone())
    a2a_splits = torch.empty(n, 3, dtype=dtype)
    dist.all_to_all_single(a2a_splits, blocks[r].clone(), [1] * n, [1] * n)
    assert same(flat, torch.cat(mine))
    assert all(same(listed[q], mine[q]) for q in range(n))
    assert all(same(casts[q], mine[q]) for q in range(n))
    want = torch.stack([blocks[p][r] for p in range(n)])
    assert same(a2a, want) and same(a2a_splits, want), (a2a, want)


def test_non_contiguous_tensors():
    r, n = dist.get_rank(), dist.get_world_size()
    base = torch.full((4, 6), -1.0)
    view = base[:, ::2]  # every second column: not contiguous
    view.copy_(torch.arange(12.0).view(4, 3) + r)
    dist.all_reduce(view)
    out = torch.zeros(3, n * 2).t()  # the output of allgather, transposed
    dist.all_gather_into_tensor(out, torch.tensor([[r, 10 + r], [20 + r, 30 + r], [40 + r, 50 + r]]).float().t())
    total = sum(range(n))
    assert torch.equal(base[:, ::2], n * torch.arange(12.0).view(4, 3) + total)
    assert torch.equal(base[:, 1::2], torch.full((4, 3), -1.0)), "elements outside the view changed"
    want = torch.cat([torch.tensor([[q, 10 + q], [20 + q, 30 + q], [40 + q, 50 + q]]).float().t() for q in range(n)])
    assert torch.equal(out, want)


def test_empty_tensors():
    n = dist.get_world_size()
    e = torch.empty(0)
    dist.all_reduce(e)
    dist.broadcast(e, src=n - 1)
    dist.all_gather_into_tensor(torch.empty(0), e)
    dist.all_to_all_single(torch.empty(0), e)
    t = torch.ones(2)
    dist.all_reduce(t)
    assert e.numel() == 0 and torch.equal(t, torch.full((2,), float(n)))


def test_async_work_and_future():
    r, n = dist.get_rank(), dist.get_world_size()
    store = dist.distributed_c10d._get_default_store()
    # Rank 0's call must return before the others even start theirs: they wait for its key.
    t = torch.full((1000,), float(r + 1))
    if r == 0:
        work = dist.all_reduce(t, async_op=True)
        issued_before_peers = not work.is_completed()
        store.set("async/issued", "1")
    else:
        store.wait(["async/issued"])
        work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    seen = []
    chained = fut.then(lambda f: seen.append(f.value()[0].sum().item()) or f.value()[0] * 2)
    deadline = time.monotonic() + 60
    while not work.is_completed() and time.monotonic() < deadline:  # completes without wait()
        time.sleep(0.001)
    completed_without_wait = work.is_completed()
    work.wait()
    doubled = chained.wait()
    # Several in flight at once complete in order, each with its own result.
    works = [dist.all_reduce(torch.full((5,), float(i)), async_op=True) for i in range(8)]
    results = [w.get_future().wait()[0] for w in works]
    barrier = dist.barrier(async_op=True)
    barrier.wait()
    want = n * (n + 1) / 2
    if r == 0:
        assert issued_before_peers, "all_reduce(async_op=True) waited for its peers"
    assert completed_without_wait
    assert work.is_success() and torch.equal(t, torch.full((1000,), want))
    assert seen == [want * 1000] and torch.equal(doubled, torch.full((1000,), 2 * want))
    assert all(torch.equal(res, torch.full((5,), float(i * n))) for i, res in enumerate(results))
    assert barrier.is_completed()


def test_new_group():
    r, n = dist.get_rank(), dist.get_world_size()
    low = dist.new_group([0, 1])
    high = dist.new_group(list(range(1, n)))  # overlaps `low` at rank 1
    a = torch.tensor([float(r)])
    b = torch.tensor([float(r)])
    if r in (0, 1):
        dist.all_reduce(a, group=low)
    if r >= 1:
        dist.all_reduce(b, group=high, op=dist.ReduceOp.MAX)
        dist.broadcast(b, group_src=0, group=high)  # the group's rank 0 is global rank 1
    world = torch.tensor([1.0])
    dist.all_reduce(world)  # the world's communicator is untouched by the groups'
    assert a.item() == (1.0 if r in (0, 1) else r)
    assert b.item() == (n - 1 if r >= 1 else 0)
    assert world.item() == n
    if r in (0, 1):
        assert dist.get_world_size(low) == 2 and inc_torch.last_report(low)["collective"] == "allreduce"


def test_errors_are_clear():
    n = dist.get_world_size()
    with pytest.raises(TypeError, match="does not support dtype Bool"):
        dist.all_reduce(torch.ones(3, dtype=torch.bool))
    with pytest.raises(TypeError, match="does not support dtype Short"):
        dist.all_reduce(torch.ones(3, dtype=torch.int16))
    with pytest.raises(TypeError, match="does not support dtype Short"):
        dist.broadcast(torch.ones(3, dtype=torch.int16), src=0)
    with pytest.raises(ValueError, match="BAND, BOR, BXOR and PREMUL_SUM are not INC operations"):
        dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist.ReduceOp.BAND)
    with pytest.raises(ValueError, match="ReduceOp PREMUL_SUM"):
        dist.all_reduce(torch.ones(3), op=dist._make_nccl_premul_sum(2.0))
    with pytest.raises(ValueError, match=r"supports dense \(strided\) tensors only, got Sparse"):
        dist.all_reduce(torch.eye(3).to_sparse())
    with pytest.raises(ValueError, match="equal splits only"):
        uneven = [3, 1] + [2] * (n - 2)
        dist.all_to_all_single(torch.empty(2 * n), torch.empty(2 * n), uneven, uneven)
    with pytest.raises(ValueError, match="must divide into"):
        dist.all_to_all_single(torch.empty(n + 1), torch.empty(n + 1))
    with pytest.raises(ValueError, match="output has"):
        dist.all_gather_into_tensor(torch.empty(n * 3 + 1), torch.empty(3))
    with pytest.raises(TypeError, match="output dtype Double differs"):
        dist.reduce_scatter_tensor(torch.empty(2, dtype=torch.float64), torch.empty(2 * n))
    with pytest.raises(RuntimeError, match="does not support reduce"):
        dist.reduce(torch.ones(2), dst=0)
    # Nothing was sent: the group still works (complex tensors reach INC as float pairs).
    t = torch.ones(2)
    dist.all_reduce(t)
    c = torch.tensor([1 + 2j, -3j], dtype=torch.complex64)
    dist.all_reduce(c)
    assert torch.equal(t, torch.full((2,), float(n)))
    assert torch.equal(c, n * torch.tensor([1 + 2j, -3j], dtype=torch.complex64))


def test_mismatch_across_ranks_is_named():
    # Ranks that disagree on the count get an error naming the mismatch (a group of its own,
    # so that the failed communicator is not the world's).
    r = dist.get_rank()
    g = dist.new_group(list(range(dist.get_world_size())))
    with pytest.raises(RuntimeError, match="inc: allreduce #0: .*rank 0 called allreduce of 5 x f32"):
        dist.all_reduce(torch.ones(4 + (r == 0)), group=g)
