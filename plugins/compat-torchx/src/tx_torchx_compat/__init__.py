"""tx-torchx-compat: TorchX 0.7.0 projects run on tx unchanged.

* ``import torchx`` (and ``torchx.specs``, ``torchx.runner``, ``torchx.schedulers`` ...)
  resolves to tx's modules at TorchX 0.7.0's module paths, through an import finder that a
  ``.pth`` file installs (:mod:`tx_torchx_compat._finder`). It acts only where no real
  TorchX can be imported: a real TorchX always wins.
* TorchX's plugin entry-point groups (``torchx.schedulers``, ``torchx.components``,
  ``torchx.named_resources``, ``torchx.tracker``) are registered with tx's plugin registry
  (:mod:`tx_torchx_compat.hooks`).
* Schedulers written against TorchX 0.7 (``_validate(self, app, scheduler)``,
  ``WorkspaceMixin``) are fitted to tx's Scheduler contract when defined
  (:mod:`tx_torchx_compat.scheduler_api`); those of TorchX's entry-point group also get
  tx's replica environment contract (:mod:`tx_torchx_compat.adapter`).

This module imports nothing: the ``.pth`` file imports the finder at every interpreter
start.
"""
