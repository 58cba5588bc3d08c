"""Shared by the backend's tests, which every rank of a torchrun job runs (python/tests/CMakeLists.txt).

Every test makes its collectives on all ranks in the same order and asserts only afterwards, so
that a failing assertion on one rank does not desynchronise the next test. Inputs of every rank
are generated from (rank, case) on every rank, so each rank computes the expected result itself
in float64/int64 arithmetic, independently of INC.
"""

import zlib

import pytest
import torch
import torch.distributed as dist

import inc_torch  # noqa: F401  (registers the "inc" backend)

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int32, torch.uint32, torch.int64, torch.uint64]
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
UNSIGNED = (torch.uint8, torch.uint32, torch.uint64)


@pytest.fixture(scope="session", autouse=True)
def world():
    dist.init_process_group("inc")
    yield dist.group.WORLD
    dist.barrier()
    dist.destroy_process_group()


def rank_input(rank, case, dtype, op, numel):
    """Rank `rank`'s input for `case`: small values whose sums and products are exact in every
    dtype INC has (|result| <= 81 for up to 4 ranks)."""
    g = torch.Generator().manual_seed(zlib.crc32(f"{case}/{rank}".encode()))
    if op == "product":
        v = torch.randint(1, 3, (numel,), generator=g)
        if dtype not in UNSIGNED:
            v = v * (torch.randint(0, 2, (numel,), generator=g) * 2 - 1)  # signs
    elif dtype in UNSIGNED:
        v = torch.randint(0, 10, (numel,), generator=g)
    else:
        v = torch.randint(-9, 10, (numel,), generator=g)
    return v.to(dtype)


def reference(inputs, op, dtype):
    """The reduction of `inputs` as torch defines it, computed in float64 / int64; AVG of
    integers truncates toward zero after the sum (as NCCL's ncclAvg)."""
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    s = torch.stack([x.to(wide) for x in inputs])
    n = len(inputs)
    if op == "sum":
        r = s.sum(0)
    elif op == "product":
        r = s.prod(0)
    elif op == "min":
        r = s.amin(0)
    elif op == "max":
        r = s.amax(0)
    else:
        r = s.sum(0) / n if dtype.is_floating_point else torch.div(s.sum(0), n, rounding_mode="trunc")
    return r.to(dtype)


def same(a, b):
    """Bitwise-equal values (through int64 / float64, which every dtype converts to exactly)."""
    wide = torch.float64 if a.dtype.is_floating_point else torch.int64
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.to(wide), b.to(wide))
