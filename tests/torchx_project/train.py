"""The project's training script: reads what TorchX sets inside every replica."""
import argparse
import json
import os


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--worker", required=True)
    args = p.parse_args()
    seen = {name: os.environ.get(name) for name in (
        "TORCHX_JOB_ID", "TORCHX_RANK0_HOST", "TORCHX_ROLE_NAME", "TORCHX_REPLICA_IDX", "PROJECT")}
    for epoch in range(args.epochs):
        print(f"worker {args.worker} epoch {epoch}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"worker-{args.worker}.json"), "w") as f:
        json.dump({"epochs": args.epochs, "env": seen}, f)


if __name__ == "__main__":
    main()
