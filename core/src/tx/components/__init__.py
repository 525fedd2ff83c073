"""Built-in components: functions that return a :class:`tx.specs.AppDef`.

``tx builtins`` lists them and ``tx run <name> --help`` shows their arguments; the names
and parameters are TorchX's:

* ``utils.echo``, ``utils.touch``, ``utils.sh``, ``utils.python``, ``utils.binary``,
  ``utils.copy``, ``utils.booth``: small jobs and glue steps (:mod:`tx.components.utils`);
* ``dist.ddp``, ``dist.spmd``: distributed PyTorch through ``torchrun``
  (:mod:`tx.components.dist`);
* ``serve.torchserve``: register a model with a TorchServe server (:mod:`tx.components.serve`);
* ``metrics.tensorboard``: a TensorBoard server that stops on a file or timeout
  (:mod:`tx.components.metrics`).

Components that run a helper program launch ``python -m tx.apps.<program>``, so their
image must have tx-core installed (the local schedulers use the current environment).
Writing your own: see :mod:`tx.components.system.file_linter` for the rules a component follows.
"""

#: The image the built-in components use unless ``--image`` is given: TorchX's published
#: image (it has torch and torchrun). Schedulers that run in the current directory
#: (local_cwd) ignore images.
DEFAULT_IMAGE: str = "ghcr.io/pytorch/torchx:0.7.0"

__all__ = ["DEFAULT_IMAGE"]
