"""DistributedDataParallel on scikit-learn's bundled digits set (1797 8x8 images, shipped inside
the scikit-learn wheel: nothing is downloaded), with the backend named on the command line.

    torchrun --standalone --nproc-per-node=4 python/examples/ddp_digits.py --backend inc
    inc testbed --hosts 4 --link 1gbit -- python3 python/examples/ddp_digits.py   # or inc launch

Every rank trains on its shard of the training set; DDP averages the gradients with
all_reduce. Rank 0 prints the loss curve and writes one JSON line (--json FILE): losses, test
accuracy, per-iteration times and, for inc, the payload bytes each rank sent per iteration
(the INC reports' bytes, on the hosts or to and from the switch). python/examples/compare_ddp.sh
runs gloo and inc (with and without a switch) and prints the table.
"""

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from sklearn.datasets import load_digits

import inc_torch


def data(rank, world):
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    x, y = x[order], y[order]
    n_test = 297
    train_x, train_y, test_x, test_y = x[n_test:], y[n_test:], x[:n_test], y[:n_test]
    return train_x[rank::world], train_y[rank::world], test_x, test_y


def init(backend):
    if "RANK" in os.environ or "INC_RANK" not in os.environ:
        dist.init_process_group(backend)  # torchrun
        return
    # Started by `inc launch` or `inc testbed`: rank and size are INC's; torch's store is a file
    # (one machine), named after this job's INC store; rank 0 runs on the INC store's host, where
    # inc_torch then hosts the group's own INC store (MASTER_ADDR names it, docs/PYTORCH.md).
    host, port = os.environ["INC_STORE"].rsplit(":", 1)
    os.environ.setdefault("MASTER_ADDR", host)
    dist.init_process_group(backend, init_method=f"file:///tmp/ddp_digits.{port}",
                            rank=int(os.environ["INC_RANK"]), world_size=int(os.environ["INC_WORLD_SIZE"]))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="inc", choices=["inc", "gloo"])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch", type=int, default=32, help="samples per rank and iteration")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--json", help="rank 0 appends its results here as one JSON line")
    p.add_argument("--label", default=None, help="name of this run in the JSON line")
    args = p.parse_args()

    init(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    train_x, train_y, test_x, test_y = data(rank, world)
    grad_bytes = sum(q.numel() * q.element_size() for q in model.parameters())

    losses, times = [], []
    before = inc_torch.totals() if args.backend == "inc" else None
    steps = len(train_x) // args.batch
    for epoch in range(args.epochs):
        perm = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(epoch * world + rank))
        for step in range(steps):
            idx = perm[step * args.batch:(step + 1) * args.batch]
            start = time.perf_counter()
            opt.zero_grad()
            loss = loss_fn(ddp(train_x[idx]), train_y[idx])
            loss.backward()  # DDP's all_reduce of the gradient buckets
            opt.step()
            times.append(time.perf_counter() - start)
            global_loss = loss.detach().clone()
            dist.all_reduce(global_loss)  # the mean loss over the ranks, for the curve
            losses.append(global_loss.item() / world)
    after = inc_torch.totals() if args.backend == "inc" else None
    with torch.no_grad():
        accuracy = (model(test_x).argmax(1) == test_y).float().mean().item()
    iters = len(times)
    result = {
        "label": args.label or args.backend, "backend": args.backend, "world": world, "iterations": iters,
        "losses": losses, "accuracy": accuracy, "median_iter_ms": 1e3 * statistics.median(times),
        "gradient_bytes": grad_bytes,
    }
    if after is not None:
        # Includes the one-float loss all_reduce per iteration and DDP's start-up broadcasts.
        result["inc_bytes_sent_per_iter"] = (after["bytes_sent"] - before["bytes_sent"]) / iters
        result["inc_in_network"] = after["in_network"] - before["in_network"]
        result["inc_collectives"] = after["collectives"] - before["collectives"]
    if rank == 0:
        every = max(1, iters // 8)
        print(f"{result['label']}: {world} ranks, {iters} iterations, test accuracy {accuracy:.3f}, "
              f"median iteration {result['median_iter_ms']:.2f} ms")
        print("  loss: " + " ".join(f"{i}:{losses[i]:.3f}" for i in range(0, iters, every)) +
              f" {iters - 1}:{losses[-1]:.3f}")
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(result) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
