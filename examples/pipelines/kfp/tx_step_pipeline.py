"""A pipeline whose steps run apps on a tx scheduler, run here with ``kfp.local``.

``run_app`` adds a step that launches an AppDef on any tx scheduler (``local_cwd`` here;
``slurm``, ``kubernetes``, ``aws_batch``, ... from a step image that has their plugin), relays
its logs into the step's log and waits; the step fails with the app's error when the app
fails. ``kfp.local``'s SubprocessRunner runs the steps in this Python environment.

    python examples/pipelines/kfp/tx_step_pipeline.py [--scheduler local_cwd] [--fail]
"""
import argparse
import sys

from kfp import dsl, local

from tx.specs import AppDef, Role
from tx_pipelines_kfp.step import run_app


def py_app(name: str, code: str, replicas: int = 1) -> AppDef:
    """An app of ``replicas`` Python processes running ``code``."""
    return AppDef(name=name, roles=[Role(name=name, image="", entrypoint=sys.executable, args=["-c", code],
                                         num_replicas=replicas)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheduler", default="local_cwd")
    parser.add_argument("--fail", action="store_true", help="make the training step fail")
    parser.add_argument("--pipeline_root", default="./local_outputs")
    args = parser.parse_args()

    prepare = py_app("prepare", "print('data ready')")
    train = py_app("train", "import os, sys; r = os.environ['TX_REPLICA_ID']; print('training on replica', r); "
                            + ("sys.exit('loss is NaN')" if args.fail else "pass"), replicas=2)

    @dsl.pipeline(name="tx-steps")
    def pipeline() -> None:
        data = run_app(prepare, args.scheduler)
        run_app(train, args.scheduler).after(data)

    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=args.pipeline_root)
    pipeline()


if __name__ == "__main__":
    main()
