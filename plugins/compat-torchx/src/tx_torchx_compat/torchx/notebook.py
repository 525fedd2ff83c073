"""``torchx.notebook``: tx-notebook's workspace (``get_workspace()``, the ``memory://``
workspace; ``workspacefile``). As in TorchX, importing it inside IPython registers the cell
magic ``%%workspacefile PATH`` (``%load_ext tx_notebook`` also adds ``%tx run``)."""
from tx_torchx_compat._missing import reexport

_nb = reexport(globals(), "tx_notebook", "tx-notebook")


def _register() -> None:
    try:
        # IPython is tx-notebook's dependency; only a running shell gets the magic
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None:
        ip.register_magic_function(lambda line, cell: _nb.workspacefile(line, cell), "cell", "workspacefile")


_register()
