"""``torchx.components.dist``: :mod:`tx.components.dist` with TorchX 0.7.0's AppDef shape.

``ddp`` and ``spmd`` here build what tx's do, but the role's entrypoint is always ``bash``
with ``["-c", "torchrun ..."]`` as in TorchX 0.7.0, where tx runs ``torchrun`` directly on
a single node: code written for TorchX reads or edits ``role.args[1]`` as the torchrun
command line. Both run the same torchrun arguments (each word ``shlex.quote``-d).
"""
import functools
import shlex

from tx.components.dist import TORCH_DEBUG_FLAGS, parse_nnodes  # noqa: F401
from tx.components.dist import TORCH_DEBUG_FLAGS as _TORCH_DEBUG_FLAGS  # noqa: F401 - TorchX's name
from tx.components.dist import ddp as _tx_ddp
from tx.components.dist import spmd as _tx_spmd
from tx.specs.api import AppDef, macros  # noqa: F401

__all__ = ["ddp", "parse_nnodes", "spmd", "TORCH_DEBUG_FLAGS"]


def _torchx_shape(app: AppDef) -> AppDef:
    """Turn a role whose entrypoint is ``torchrun`` into ``bash -c "torchrun ..."`` (in place)."""
    for role in app.roles:
        if role.entrypoint == "torchrun":
            role.args = ["-c", shlex.join(["torchrun", *role.args])]
            role.entrypoint = "bash"
    return app


@functools.wraps(_tx_ddp)
def ddp(*script_args: str, **kwargs: object) -> AppDef:
    return _torchx_shape(_tx_ddp(*script_args, **kwargs))  # type: ignore[arg-type]


@functools.wraps(_tx_spmd)
def spmd(*args: str, **kwargs: object) -> AppDef:
    return _torchx_shape(_tx_spmd(*args, **kwargs))  # type: ignore[arg-type]
