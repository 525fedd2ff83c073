"""tx-pipelines-kfp: tx apps in Kubeflow Pipelines, on the KFP v2 SDK (``kfp`` 2.x).

* :mod:`tx_pipelines_kfp.adapter`: TorchX's ``component_from_app``, ``container_from_app``,
  ``component_spec_from_app`` (an AppDef of one role and one replica as a container
  component) and ``resource_from_app``;
* :mod:`tx_pipelines_kfp.step`: ``run_app``, a step that runs any AppDef on any tx scheduler
  and waits for it, its logs in the step's log.

Importing this package imports no kfp (the step's own process imports
:mod:`tx_pipelines_kfp._run` alone, inside KFP's executor); its modules do. Also
``torchx.pipelines.kfp`` / ``torchx.pipelines.kfp.adapter`` through tx-torchx-compat.
"""
from tx_pipelines_kfp.version import __version__

__all__ = ["__version__"]
