"""Version of the tx-core distribution and of the plugin API it offers."""

__all__ = ["__version__", "PLUGIN_API_VERSION"]

__version__ = "0.1.0"

#: Version of the plugin contract (hookspecs and registration callbacks). A plugin may
#: declare ``TX_PLUGIN_API = 1`` in its hooks module; tx-core refuses plugins that name a
#: newer major API than this one.
PLUGIN_API_VERSION = 1
