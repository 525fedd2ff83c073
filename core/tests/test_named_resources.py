"""tx.specs.named_resources: the generic table, lookups, resource() and plugin resources."""
import pytest

from tx import hookimpl
from tx.plugins import PluginConflictError, PluginRegistry, set_registry
from tx.specs import NULL_RESOURCE, Resource, get_named_resources, named_resources, resource

GiB = 1024


@pytest.fixture
def registry():
    """An isolated registry with tx-core's built-ins only (no installed plugins)."""
    reg = PluginRegistry(entry_points=[])
    old = set_registry(reg)
    yield reg
    set_registry(old)


@pytest.mark.parametrize("name,cpu,gpu,mem", [
    ("gpu.small", 8, 1, 32 * GiB), ("gpu.medium", 16, 2, 64 * GiB), ("gpu.large", 32, 4, 128 * GiB),
    ("gpu.xlarge", 64, 8, 256 * GiB), ("cpu.nano", 1, 0, 512), ("cpu.micro", 1, 0, GiB),
    ("cpu.small", 1, 0, 2 * GiB), ("cpu.medium", 2, 0, 4 * GiB), ("cpu.large", 2, 0, 8 * GiB),
    ("cpu.xlarge", 8, 0, 32 * GiB),
])
def test_generic_table(registry, name, cpu, gpu, mem):
    assert named_resources[name] == Resource(cpu=cpu, gpu=gpu, memMB=mem)
    assert get_named_resources(name) == Resource(cpu=cpu, gpu=gpu, memMB=mem)
    assert name in named_resources


@pytest.mark.parametrize("name", ["NULL", "MISSING"])
def test_null_and_missing(registry, name):
    res = named_resources[name]
    assert res == NULL_RESOURCE and res is not NULL_RESOURCE


def test_each_access_is_a_fresh_resource(registry):
    a = named_resources["gpu.small"]
    a.capabilities["x"] = 1
    a.cpu = 99
    assert named_resources["gpu.small"] == Resource(8, 1, 32 * GiB)


def test_keys_and_contains(registry):
    keys = named_resources.keys()
    assert {"gpu.small", "cpu.xlarge", "NULL", "MISSING"} <= set(keys)
    assert "gpu.tiny" not in named_resources
    assert 3 not in named_resources


def test_did_you_mean(registry):
    with pytest.raises(KeyError) as ei:
        named_resources["gpu.smal"]
    assert ei.value.args[0].startswith("unknown named resource 'gpu.smal'; did you mean gpu.small")


def test_unknown_without_match_lists_known(registry):
    with pytest.raises(KeyError) as ei:
        get_named_resources("zzzzzzzz")
    msg = ei.value.args[0]
    assert msg.startswith("unknown named resource 'zzzzzzzz'; known: ")
    assert "cpu.nano" in msg and "gpu.xlarge" in msg


def test_resource_defaults(registry):
    assert resource() == Resource(cpu=2, gpu=0, memMB=1024)
    assert resource(cpu=4, gpu=1, memMB=2048) == Resource(4, 1, 2048)
    assert resource(cpu=0, gpu=None, memMB=0) == Resource(2, 0, 1024)  # falsy -> default


def test_resource_h_takes_precedence(registry):
    assert resource(cpu=64, gpu=0, memMB=1, h="gpu.small") == Resource(8, 1, 32 * GiB)
    with pytest.raises(KeyError, match="unknown named resource 'nope'"):
        resource(h="nope")


class AcmeResources:
    @staticmethod
    @hookimpl
    def tx_register_named_resources(register):
        register("acme.big", lambda: Resource(cpu=96, gpu=8, memMB=1024 * GiB,
                                              capabilities={"acme/type": "big"}))
        register("acme.lazy", "tx.specs.named_resources:null_resource")


def test_plugin_registered_resources(registry):
    info = registry.add_plugin(AcmeResources, "acme", "acme-tx", "1.0")
    assert info.error is None
    assert info.registered == {"named_resources": ["acme.big", "acme.lazy"]}
    assert named_resources["acme.big"] == Resource(96, 8, 1024 * GiB, capabilities={"acme/type": "big"})
    assert named_resources["acme.lazy"] == NULL_RESOURCE
    assert resource(h="acme.big").gpu == 8
    reg = registry.get("named_resources", "acme.big")
    assert (reg.plugin, reg.distribution, reg.version) == ("acme", "acme-tx", "1.0")


class Shadow:
    @staticmethod
    @hookimpl
    def tx_register_named_resources(register):
        register("gpu.small", lambda: Resource(1, 1, 1))


def test_plugin_shadowing_a_builtin_is_a_conflict(registry):
    registry.add_plugin(Shadow, "shadow", "shadow-tx", "0.1")
    with pytest.raises(PluginConflictError, match="'gpu.small' is registered by both tx-core .* and shadow-tx 0.1"):
        named_resources["gpu.small"]
    assert "gpu.small" in named_resources  # still listed, so `tx plugins` can show it
    assert named_resources["gpu.medium"] == Resource(16, 2, 64 * GiB)
