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

For the preemption benchmark (bench/chaos_preemption.py) it can also save every
``--save-every`` steps, evaluate every ``--eval-every`` steps (``--eval-sleep`` pauses inside
the evaluation, before its all-reduce), keep ``--keep`` checkpoints, and append each rank's
phase transitions to ``--phase-log`` as JSON lines with wall-clock times (``start``,
``resumed``/``fresh``, ``step``/``stepped``, ``save``/``saved``, ``eval``/``evaled``,
``warned``, ``preempt``, ``exit``): which phase of the loop a warning hit, which step each
attempt completed, saved and resumed from, and a digest of the model saved and loaded.
Without these options it behaves as above.

It reads the rank and world size the launcher provides (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT: torchrun's environment), so it runs unchanged under plain
``torchrun --nproc_per_node 2 examples/train.py`` and under
``tx run -s local_cwd dist.ddp -j 1x2 --script examples/train.py``.

Usage: train.py [--epochs N] [--batch-size B] [--lr LR] [--output-dir DIR] [--seed S]
                [--checkpoint-dir URL] [--epoch-sleep SECONDS] [--step-sleep SECONDS]
                [--backend auto|nccl|gloo] [--save-every N] [--eval-every N]
                [--eval-sleep SECONDS] [--keep K] [--phase-log PATH]
"""
from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import importlib.util
import json
import os
import signal
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
    p.add_argument("--save-every", type=int, default=0,
                   help="also save a checkpoint every N optimizer steps (default 0: after each epoch only)")
    p.add_argument("--eval-every", type=int, default=0,
                   help="evaluate on the held-out set every N optimizer steps (default 0: at the end only)")
    p.add_argument("--eval-sleep", type=float, default=0.0,
                   help="seconds to pause inside each --eval-every evaluation (a longer evaluation)")
    p.add_argument("--keep", type=int, default=2, help="complete checkpoints to keep (default 2)")
    p.add_argument("--phase-log", default="",
                   help="append this rank's phase transitions to this file as JSON lines (the benchmark's)")
    return p.parse_args()


class Phases:
    """Each rank's phase transitions, one JSON line each (``{"t": wall-clock s, "rank", "pid",
    "phase", ...}``) appended to ``--phase-log`` (one ``write`` per line: the ranks' lines
    never interleave); nothing without it."""

    def __init__(self, path: str, rank: int) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if path else -1
        self.rank = rank

    def __call__(self, phase: str, **extra: object) -> None:
        if self.fd >= 0:
            line = {"t": round(time.time(), 4), "rank": self.rank, "pid": os.getpid(), "phase": phase, **extra}
            os.write(self.fd, json.dumps(line).encode() + b"\n")

    def on_warning(self, sig: int) -> None:
        """Log ``warned`` when the warning signal comes, then let tx's handler record it."""
        before = signal.getsignal(sig)

        def handler(signum: int, frame: object) -> None:
            self("warned", signal=signum)
            if callable(before):
                before(signum, frame)

        signal.signal(sig, handler)


def digest(model: nn.Module) -> str:
    """A short digest of the model's parameters (the same state saved and loaded: the same digest)."""
    h = hashlib.sha1()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


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
    phase = Phases(args.phase_log, rank)
    phase("start", since=round(time.perf_counter() - t0, 3))
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
        if args.phase_log:
            from tx.distributed import preempt_signal

            phase.on_warning(preempt_signal())
        state = {"model": model.module.state_dict(), "optim": opt.state_dict(), "epoch": 0, "batch": 0}
        found = load_latest_checkpoint(state, root=args.checkpoint_dir)
        if found is not None:
            model.module.load_state_dict(state["model"])
            opt.load_state_dict(state["optim"])
            start, skip, step = int(state["epoch"]), int(state["batch"]), found
            saved = step
            phase("resumed", step=step, digest=digest(model.module))
            if rank == 0 and start >= args.epochs:
                print(f"epoch {start}/{args.epochs} done at step {step}: nothing left to train", flush=True)

        else:
            phase("fresh", step=0)

    def save(epoch: int, batch: int, why: str) -> None:  # every rank takes part; complete once all have written
        nonlocal saved
        if step != saved:
            phase("save", step=step, why=why)
            save_checkpoint({"model": model.module.state_dict(), "optim": opt.state_dict(),
                             "epoch": epoch, "batch": batch}, step=step, root=args.checkpoint_dir,
                            keep=args.keep)
            saved = step
            phase("saved", step=step, why=why, digest=digest(model.module))

    for epoch in range(start, args.epochs):
        model.train()
        train_sampler.set_epoch(epoch)
        total = torch.zeros(2, device=device)
        for batch, (xb, yb) in enumerate(train_loader):
            if epoch == start and batch < skip:
                continue  # done before the checkpoint this attempt resumed from
            phase("step", step=step + 1)
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()  # DDP all-reduces the gradients here
            opt.step()
            step += 1
            total += torch.tensor([loss.item() * len(yb), len(yb)], device=device)
            time.sleep(args.step_sleep)
            phase("stepped", step=step)
            here = (epoch + 1, 0) if batch + 1 == len(train_loader) else (epoch, batch + 1)
            if args.checkpoint_dir and preempted():  # the same step on every rank
                print(f"rank {rank}: preempted at step {step}", flush=True)
                phase("preempt", step=step)
                save(*here, "preempt")
                phase("exit", step=step)
                exit_preempted()  # killed by the warning's signal: tx counts a preemption
            if args.checkpoint_dir and args.save_every and step % args.save_every == 0:
                save(*here, "periodic")
            if args.eval_every and step % args.eval_every == 0:
                phase("eval", step=step)
                counts = evaluate(model, test_loader, device)
                time.sleep(args.eval_sleep)
                dist.all_reduce(counts)
                model.train()
                phase("evaled", step=step, accuracy=round((counts[0] / counts[1]).item(), 4))
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs} train_loss={total[0] / total[1]:.4f}", flush=True)
        if args.checkpoint_dir:
            save(epoch + 1, 0, "epoch")
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
