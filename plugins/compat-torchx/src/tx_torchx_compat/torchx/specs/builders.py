"""``torchx.specs.builders``: :mod:`tx.components.system.builders` at TorchX 0.7's path, with the
names TorchX code imports from it."""
from tx.specs.api import AppDef  # noqa: F401
from tx.components.system.builders import *  # noqa: F401,F403
from tx.specs.handles import make_app_handle  # noqa: F401
from tx.specs.mounts import BindMount, DeviceMount, MountType, VolumeMount, parse_mounts  # noqa: F401
from tx_torchx_compat.torchx.util.types import decode, decode_optional, is_bool  # noqa: F401
from tx.components.system.file_linter import get_fn_docstring  # noqa: F401,E402
