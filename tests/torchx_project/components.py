"""The project's components, written for TorchX 0.7.0 (``torchx run components.py:train``)."""
import torchx.specs as specs
from torchx.components.dist import ddp


def train(epochs: int = 1, replicas: int = 2, out: str = "results") -> specs.AppDef:
    """Trains the model on ``replicas`` workers.

    Args:
        epochs: passes over the data
        replicas: worker processes
        out: directory of each worker's result file
    """
    return specs.AppDef(
        name="train",
        roles=[
            specs.Role(
                name="trainer",
                image=".",
                entrypoint="python",
                args=["train.py", "--epochs", str(epochs), "--out", out, "--worker", specs.macros.replica_id],
                num_replicas=replicas,
                resource=specs.Resource(cpu=1, gpu=0, memMB=256),
                env={"PROJECT": "acme-vision"},
            )
        ],
    )


def ddp_train(nodes: int = 2) -> specs.AppDef:
    """Distributed training through TorchX's dist.ddp.

    Args:
        nodes: nodes to train on
    """
    return ddp("--epochs", "1", script="train.py", j=f"{nodes}x2", name="acme/ddp")
