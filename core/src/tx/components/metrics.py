"""Metrics components: ``metrics.tensorboard`` runs a TensorBoard server next to a job.
"""
import tx.specs as specs
from tx.components import DEFAULT_IMAGE

__all__ = ["tensorboard"]


def tensorboard(
    logdir: str,
    image: str = DEFAULT_IMAGE,
    timeout: float = 60 * 60,
    port: int = 6006,
    start_on_file: str = "",
    exit_on_file: str = "",
) -> specs.AppDef:
    """TensorBoard server for logdir that stops when exit_on_file appears or on a timeout.

    TensorBoard runs under a process monitor that starts it once start_on_file exists and
    stops it when exit_on_file appears (the job then succeeds) or after timeout seconds.
    The image needs tensorboard and tx-core installed.

    Args:
        logdir: the TensorBoard log directory (fsspec URL or path)
        image: the image to run in (with tensorboard and tx-core installed)
        timeout: seconds after which TensorBoard is stopped
        port: the port TensorBoard listens on
        start_on_file: start TensorBoard only once this file (fsspec URL or path) exists
        exit_on_file: stop TensorBoard when this file (fsspec URL or path) appears
    """
    args = ["-m", "tx.apps.process_monitor", "--timeout", str(timeout)]
    if start_on_file:
        args += ["--start_on_file", start_on_file]
    if exit_on_file:
        args += ["--exit_on_file", exit_on_file]
    args += ["--", "tensorboard", "--bind_all", "--port", str(port), "--logdir", logdir]
    return specs.AppDef(
        name="tensorboard",
        roles=[
            specs.Role(
                name="tensorboard",
                image=image,
                entrypoint="python",
                args=args,
                port_map={"http": port},
                resource=specs.Resource(cpu=1, gpu=0, memMB=1024),
            )
        ],
    )
