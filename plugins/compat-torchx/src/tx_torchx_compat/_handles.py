"""TorchX 0.7's app-handle parsing, on top of :mod:`tx.specs.handles`."""
from tx.specs.api import MalformedAppHandleException
from tx.specs.handles import AppHandle, ParsedAppHandle
from tx.specs.handles import parse_app_handle as _tx_parse_app_handle


def parse_app_handle(app_handle: AppHandle) -> ParsedAppHandle:
    """Split ``{scheduler}://{session_name}/{app_id}`` as TorchX 0.7 does.

    Unlike :func:`tx.specs.parse_app_handle`, which accepts an empty session as TorchX's
    later releases do (``kubernetes:///ns:job``), an empty session is malformed here, as in
    TorchX 0.7.

    Raises:
        MalformedAppHandleException: a malformed handle or an empty session name.
    """
    parsed = _tx_parse_app_handle(app_handle)
    if not parsed.session_name:
        raise MalformedAppHandleException(app_handle, "the session name is empty")
    return parsed
