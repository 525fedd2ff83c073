#!/usr/bin/env python3
"""A small, real DDP training job: a classifier of handwritten digits.

The data is scikit-learn's bundled digits dataset (1,797 8x8 images, no download), read
from the file scikit-learn installs (its ``load_digits`` where that file is not found): a
seeded quarter of it is held out for the test. Each rank trains on its shard (DistributedSampler) of the training split, over NCCL on its own
GPU (``cuda:<LOCAL_RANK>``) where the host has CUDA devices and over gloo on the CPU
otherwise (``--backend`` chooses); the held-out accuracy is all-reduced across ranks and
printed by rank 0 with the world size and the backend, and rank 0 writes a checkpoint to
the output directory.

Under tx every replica has ``TX_CHECKPOINT_DIR`` (the run's own, the same for every attempt
of the run: docs/recovery.md): after each epoch all ranks save a
``torch.distributed.checkpoint`` there (tx.distributed.save_checkpoint; its step is the
number of optimizer steps done), and an attempt that starts again (a retry, an infra retry,
a failover hop) resumes at the newest complete one, mid-epoch if it was saved there; so
does a new run given ``tx run --resume HANDLE`` of an earlier one. A new run without it
starts fresh. The first line says which (``resumed from checkpoint step 44 at URL (tx run
--resume HANDLE)``, ``no checkpoint at URL: starting fresh``). After every optimizer step
all ranks ask ``tx.distributed.preempted()``; once the backend has warned any rank of a
preemption, every rank prints ``rank R: preempted at step N``, saves step N and leaves with
``exit_preempted()`` (tx records the attempt as preempted and starts it again).

It reads the rank and world size the launcher provides (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT: torchrun's environment), so it runs unchanged under plain
``torchrun --nproc_per_node 2 examples/train.py`` and under
``tx run -s local_cwd dist.ddp -j 1x2 --script examples/train.py``.

Usage: train.py [--epochs N] [--batch-size B] [--lr LR] [--output-dir DIR] [--seed S]
                [--checkpoint-dir URL] [--epoch-sleep SECONDS] [--step-sleep SECONDS]
                [--backend auto|nccl|gloo]
"""
from __future__ import annotations

import argparse
import csv
import gzip
import importlib.util
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=32, help="per-rank batch size")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output-dir", default=os.environ.get("TX_OUTPUT_DIR", "outputs"),
                   help="where rank 0 writes checkpoint.pt (default: ./outputs)")
    p.add_argument("--checkpoint-dir", default=os.environ.get("TX_CHECKPOINT_DIR"),
                   help="fsspec URL or path of the per-epoch checkpoints to resume from "
                        "(default: $TX_CHECKPOINT_DIR; none: no per-epoch checkpoints)")
    p.add_argument("--epoch-sleep", type=float, default=0.0,
                   help="seconds to pause after each epoch (a longer job, to see it resume)")
    p.add_argument("--step-sleep", type=float, default=0.0,
                   help="seconds to pause after each optimizer step (to see a preemption mid-epoch)")
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                   help="process group backend (default auto: nccl where CUDA devices are, else gloo)")
    return p.parse_args()


def backend_and_device(choice: str) -> tuple:
    """The process group backend and this rank's device: nccl on ``cuda:<LOCAL_RANK>``
    (of the devices CUDA_VISIBLE_DEVICES leaves visible), or gloo on the CPU."""
    if choice == "auto":
        choice = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    if choice == "gloo":
        return choice, torch.device("cpu")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    return choice, device


def digits() -> tuple:
    """scikit-learn's digits as ``(x, y)``: x float32 [1797, 64] scaled to 0..1, y int64 [1797].

    Read from ``sklearn/datasets/data/digits.csv.gz`` (64 pixel values 0..16, then the label,
    per row: what ``sklearn.datasets.load_digits`` reads) without importing scikit-learn,
    whose import costs each rank about two seconds of CPU; ``load_digits`` where the file is
    not there."""
    spec = importlib.util.find_spec("sklearn")  # finds the package without importing it
    path = os.path.join(spec.submodule_search_locations[0], "datasets", "data", "digits.csv.gz") if spec else ""
    if os.path.isfile(path):
        with gzip.open(path, "rt") as f:
            rows = torch.tensor([[float(v) for v in row] for row in csv.reader(f)])
        return rows[:, :64] / 16.0, rows[:, 64].long()
    from sklearn.datasets import load_digits  # only where the bundled file moved

    data = load_digits()
    return torch.tensor(data.data, dtype=torch.float32) / 16.0, torch.tensor(data.target, dtype=torch.long)


def datasets(seed: int) -> tuple:
    """The training and test sets: a random quarter (450 images, fixed by ``seed``) is the test."""
    x, y = digits()
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    test, train = order[: (len(y) + 3) // 4], order[(len(y) + 3) // 4:]
    return TensorDataset(x[train], y[train]), TensorDataset(x[test], y[test])


def evaluate(model: nn.Module, loader: DataLoader, device: torch.device) -> torch.Tensor:
    """Correct and total counts on this rank's shard, as a tensor [correct, total]."""
    model.eval()
    counts = torch.zeros(2, device=device)
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            counts[0] += (model(xb).argmax(dim=1) == yb).sum()
            counts[1] += len(yb)
    return counts


def main() -> None:
    args = parse_args()
    t0 = time.perf_counter()
    backend, device = backend_and_device(args.backend)
    dist.init_process_group(backend=backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    train_set, test_set = datasets(args.seed)
    train_sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    test_sampler = DistributedSampler(test_set, num_replicas=world, rank=rank, shuffle=False)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=train_sampler)
    test_loader = DataLoader(test_set, batch_size=256, sampler=test_sampler)

    net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
    model = DDP(net, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    start, skip, step, saved = 0, 0, 0, -1
    if args.checkpoint_dir:
        # tx-core only where checkpoints are asked for: plain torchrun needs no tx
        from tx.distributed import exit_preempted, load_latest_checkpoint, preempted, save_checkpoint

        preempted()  # from here on a warning is noted (a collective: every rank calls it)
        state = {"model": model.module.state_dict(), "optim": opt.state_dict(), "epoch": 0, "batch": 0}
        found = load_latest_checkpoint(state, root=args.checkpoint_dir)
        if found is not None:
            model.module.load_state_dict(state["model"])
            opt.load_state_dict(state["optim"])
            start, skip, step = int(state["epoch"]), int(state["batch"]), found
            saved = step
            if rank == 0 and start >= args.epochs:
                print(f"epoch {start}/{args.epochs} done at step {step}: nothing left to train", flush=True)

    def save(epoch: int, batch: int) -> None:  # every rank takes part; complete once all have written
        nonlocal saved
        if step != saved:
            save_checkpoint({"model": model.module.state_dict(), "optim": opt.state_dict(),
                             "epoch": epoch, "batch": batch}, step=step, root=args.checkpoint_dir)
            saved = step

    for epoch in range(start, args.epochs):
        model.train()
        train_sampler.set_epoch(epoch)
        total = torch.zeros(2, device=device)
        for batch, (xb, yb) in enumerate(train_loader):
            if epoch == start and batch < skip:
                continue  # done before the checkpoint this attempt resumed from
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()  # DDP all-reduces the gradients here
            opt.step()
            step += 1
            total += torch.tensor([loss.item() * len(yb), len(yb)], device=device)
            time.sleep(args.step_sleep)
            if args.checkpoint_dir and preempted():  # the same step on every rank
                print(f"rank {rank}: preempted at step {step}", flush=True)
                save(*((epoch + 1, 0) if batch + 1 == len(train_loader) else (epoch, batch + 1)))
                exit_preempted()  # killed by the warning's signal: tx counts a preemption
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs} train_loss={total[0] / total[1]:.4f}", flush=True)
        if args.checkpoint_dir:
            save(epoch + 1, 0)
        time.sleep(args.epoch_sleep)

    counts = evaluate(model, test_loader, device)
    dist.all_reduce(counts)  # sum of correct and total over every rank's shard
    accuracy = (counts[0] / counts[1]).item()
    print(f"rank {rank}: done, {len(train_sampler)} training samples on this rank", flush=True)
    if rank == 0:
        os.makedirs(args.output_dir, exist_ok=True)
        path = os.path.join(args.output_dir, "checkpoint.pt")
        torch.save({"model": model.module.state_dict(), "accuracy": accuracy, "world_size": world,
                    "epochs": args.epochs}, path)
        print(
            f"world_size={world} test_accuracy={accuracy:.4f} test_samples={int(counts[1])} "
            f"checkpoint={path} seconds={time.perf_counter() - t0:.2f} backend={backend} device={device}",
            flush=True,
        )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
