"""Model serving components: ``serve.torchserve`` registers a model with a running
TorchServe server (https://pytorch.org/serve/management_api.html).
"""
from typing import Dict, Optional

import tx.specs as specs
from tx.components import DEFAULT_IMAGE

__all__ = ["MODEL_DOWNLOAD_PORT", "torchserve", "TORCHSERVE_PARAMS"]

#: TorchServe "register a model" parameters accepted in ``--params``
TORCHSERVE_PARAMS = (
    "model_name",
    "handler",
    "runtime",
    "batch_size",
    "max_batch_delay",
    "initial_workers",
    "synchronous",
    "response_timeout",
)
#: the port the job serves the model file on while TorchServe downloads it
MODEL_DOWNLOAD_PORT = 8222


def torchserve(
    model_path: str,
    management_api: str,
    image: str = DEFAULT_IMAGE,
    params: Optional[Dict[str, str]] = None,
    dryrun: bool = False,
) -> specs.AppDef:
    """Registers a model archive (.mar) with a running TorchServe server.

    The job fetches the model (any fsspec URL), serves it over HTTP on port 8222 and asks
    the TorchServe management API to load it from there. The image needs tx-core installed and TorchServe must reach
    the job on port 8222.

    Args:
        model_path: the model archive to serve (fsspec URL or path)
        management_api: the TorchServe management API (e.g. http://torchserve:8081)
        image: the image to run in (with tx-core installed)
        params: TorchServe registration parameters (model_name=NAME,initial_workers=2,...)
        dryrun: print what would be done without downloading, serving or registering
    """
    params = dict(params or {})
    unknown = sorted(set(params) - set(TORCHSERVE_PARAMS))
    if unknown:
        raise ValueError(
            f"unknown TorchServe parameter(s) {', '.join(unknown)}; known: {', '.join(TORCHSERVE_PARAMS)}"
        )
    args = ["-m", "tx.apps.serve", "--model_path", model_path, "--management_api", management_api]
    for key, value in params.items():
        args += [f"--{key}", str(value)]
    if dryrun:
        args.append("--dryrun")
    return specs.AppDef(
        name="tx-serve-torchserve",
        roles=[
            specs.Role(
                name="worker",
                image=image,
                entrypoint="python",
                args=args,
                port_map={"model-download": MODEL_DOWNLOAD_PORT},
                resource=specs.Resource(cpu=1, gpu=0, memMB=1024),
            )
        ],
    )
