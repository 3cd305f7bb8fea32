"""The import graph points one way (regmap -> spec -> model -> tb; spec, regmap -> hw), checked on the source.

``kvfabric.model`` is the oracle: it may import only the standard library,
``kvfabric.spec``, the register map and itself, so a bug in the RTL or the
testbench can never leak into the reference they are checked against.
``kvfabric.spec`` imports only the register map (the widths of the
configuration registers); ``kvfabric.regmap`` (the register map compiled from the
SystemRDL description) only its generated table; ``kvfabric.hw`` never reaches the model, the testbench or the
system model; ``kvfabric.axi`` (the AXI front end's parameters and split
rule, spec §14) is as neutral as the spec. Every import of our own code goes through the ``kvfabric`` root
(a bare ``import model`` would load a second copy of a module).
"""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Folder -> its package under the kvfabric root (pyproject.toml's package-dir).
PACKAGES = {"kvfabric": "kvfabric", "hw": "kvfabric.hw", "model": "kvfabric.model",
            "sim": "kvfabric.sim", "tb": "kvfabric.tb", "scripts": "kvfabric.scripts",
            "examples": "kvfabric.examples"}
OURS = {"kvfabric", *PACKAGES} - {"examples"}
#: PyPI's copy of a standard-library module, for interpreters older than the
#: module: ``tomli`` is ``tomllib`` before Python 3.11 (model/compat.py imports it
#: only where ``tomllib`` is missing, i.e. under PyPy 3.9).
BACKPORTS = {"tomli": ("kvfabric.model.compat",)}


def _modules():
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            yield name, path


def _imports(name, path):
    """Absolute names of every module ``path`` imports (relative ones resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    base = name.split(".") if is_package else name.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[:len(base) - node.level + 1]
                module = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                module = node.module
            found.append((module, node.lineno))
    return found


MODULES = list(_modules())


def _layer(module):
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "kvfabric" and len(parts) > 1 else parts[0]


def _check(prefix, allowed, forbid_third_party=False):
    errors = []
    for name, path in MODULES:
        if not name.startswith(prefix):
            continue
        for module, line in _imports(name, path):
            top = module.split(".")[0]
            if top == "kvfabric":
                if _layer(module) not in allowed and module != "kvfabric":
                    errors.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
            elif name in BACKPORTS.get(top, ()):
                continue
            elif forbid_third_party and top not in sys.stdlib_module_names and top != "__future__":
                errors.append(f"{path.relative_to(ROOT)}:{line} imports {module} (not the standard library)")
    return errors


def test_every_module_was_found():
    names = {name for name, _ in MODULES}
    assert {"kvfabric.spec", "kvfabric.model.channel", "kvfabric.hw.top", "kvfabric.tb.scoreboard",
            "kvfabric.sim.system", "kvfabric.cli"} <= names


def test_model_is_a_leaf():
    assert _check("kvfabric.model", {"kvfabric.model", "kvfabric.spec", "kvfabric.regmap"},
                  forbid_third_party=True) == []


def test_spec_imports_only_the_register_map():
    assert _check("kvfabric.spec", {"kvfabric.regmap"}, forbid_third_party=True) == []


def test_regmap_is_neutral():
    assert _check("kvfabric.regmap", {"kvfabric.regmap", "kvfabric.regmap_table"},
                  forbid_third_party=True) == []


def test_axi_spec_module_is_neutral():
    """``kvfabric.axi`` (spec §14's parameters and split rule) is read by the
    RTL and the test benches alike, so it holds to the spec's own rule."""
    assert _check("kvfabric.axi", {"kvfabric.axi", "kvfabric.spec"}, forbid_third_party=True) == []


def test_hw_reaches_only_the_spec_and_the_register_map():
    assert _check("kvfabric.hw", {"kvfabric.hw", "kvfabric.spec", "kvfabric.axi", "kvfabric.regmap"}) == []


def test_testbench_never_imports_the_application_or_the_system_model():
    assert _check("kvfabric.tb", {"kvfabric.tb", "kvfabric.model", "kvfabric.spec", "kvfabric.axi", "kvfabric.hw",
                                  "kvfabric.regmap", "kvfabric.examples"}) == []


@pytest.mark.parametrize("folder", ["tests", *PACKAGES])
def test_our_code_is_imported_through_the_kvfabric_root(folder):
    errors = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for module, line in _imports("x.y", path):
            if module and module.split(".")[0] in OURS - {"kvfabric"}:
                errors.append(f"{path.relative_to(ROOT)}:{line} imports {module}; "
                              f"write kvfabric.{module}")
    assert errors == []


def _imports_under(prefix, forbidden):
    """Imports of ``forbidden`` (a package, by name prefix) by modules whose name starts with ``prefix``."""
    errors = []
    for name, path in MODULES:
        if not name.startswith(prefix) or name.startswith(forbidden):
            continue
        for module, line in _imports(name, path):
            if module and (module == forbidden or module.startswith(forbidden + ".")):
                errors.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return errors


def test_system_model_engine_never_imports_the_studies():
    """Issue #28: the engine (channel, controller, policies, tenants, workloads)
    and the essay's studies are two rooms; only the studies look into the engine."""
    assert {name for name, _ in MODULES} >= {"kvfabric.sim.studies.experiments", "kvfabric.sim.dram"}
    assert _imports_under("kvfabric.sim", "kvfabric.sim.studies") == []


def test_user_commands_borrow_nothing_from_the_essays_setups():
    """``kvfabric system`` runs a user's workload on the engine alone."""
    assert _imports_under("kvfabric.system", "kvfabric.sim.studies") == []
    assert _imports_under("kvfabric.cli", "kvfabric.sim.studies") == []
