"""Model serving components: ``serve.torchserve`` registers a model with a running
TorchServe server (https://pytorch.org/serve/management_api.html).
"""
from typing import Dict, Optional

import tx.specs as specs
from tx.components import DEFAULT_IMAGE

__all__ = ["APP_PARAMS", "MODEL_DOWNLOAD_PORT", "torchserve", "TORCHSERVE_PARAMS"]

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
#: the upload program's own options also accepted in ``--params`` (as TorchX, which passes
#: every parameter on as ``--KEY VALUE``): ``port`` (serve the model file there; 0: any free
#: port) and ``timeout`` (seconds to wait for the management API)
APP_PARAMS = ("port", "timeout")
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

    The job (``python -m tx.apps.serve``) fetches the model (any fsspec URL), serves it over
    HTTP on port 8222 and asks the TorchServe management API to load it from there
    (``POST /models?url=...``); it ends once TorchServe answered: exit 0 when the model is
    registered, 1 with a one-line error (TorchServe's own message when it refuses the model)
    otherwise. The image needs tx-core installed and TorchServe must reach the job on the
    port. TorchServe 0.12 needs ``--enable-model-api`` to register models and, unless it
    runs with ``--disable-token-auth``, a token this program does not send.

    Args:
        model_path: the model archive to serve (fsspec URL or path)
        management_api: the TorchServe management API (e.g. http://torchserve:8081)
        image: the image to run in (with tx-core installed)
        params: TorchServe registration parameters (model_name=NAME,initial_workers=2,
            synchronous=true,...: :data:`TORCHSERVE_PARAMS`), and the program's own ``port``
            (default 8222; 0 picks a free one) and ``timeout`` (seconds, default 60)
        dryrun: print what would be done without downloading, serving or registering

    Raises:
        ValueError: a parameter that is neither TorchServe's nor the program's, or a
            ``port`` that is no number from 0 to 65535.
    """
    params = dict(params or {})
    unknown = sorted(set(params) - set(TORCHSERVE_PARAMS) - set(APP_PARAMS))
    if unknown:
        raise ValueError(
            f"unknown TorchServe parameter(s) {', '.join(unknown)}; known: {', '.join(TORCHSERVE_PARAMS + APP_PARAMS)}"
        )
    port = MODEL_DOWNLOAD_PORT
    if "port" in params:
        try:
            port = int(str(params["port"]))
        except ValueError:
            port = -1
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be a number from 0 to 65535 (0: any free port), not {params['port']!r}")
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
                port_map={"model-download": port} if port else {},
                resource=specs.Resource(cpu=1, gpu=0, memMB=1024),
            )
        ],
    )
