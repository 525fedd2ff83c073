"""``torchx.pipelines.kfp.adapter``: tx-pipelines-kfp's adapter (``component_from_app``,
``container_from_app``, ``component_spec_from_app``, ``resource_from_app``) on the KFP v2 SDK."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_pipelines_kfp.adapter", "tx-pipelines-kfp")
