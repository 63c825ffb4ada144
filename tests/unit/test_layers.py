"""The layers of docs/architecture.md, enforced over the import graph of the package.

Each module of reginamq belongs to a layer by its path; a module may import its own package and
the layers below its own, never a layer above or a sibling package of its own layer. Imports
inside functions count the same as the ones at the top, and no set of modules may import each
other in a circle. Only ``reginamq.store`` (and the bench, which measures PostgreSQL itself)
may talk to PostgreSQL's driver.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import reginamq

ROOT = Path(reginamq.__file__).parent

# Lowest first. A module may import any package of a lower layer, and its own package.
LAYERS: list[tuple[str, ...]] = [
    ("reginamq.common", "reginamq.config"),
    ("reginamq.store",),
    ("reginamq.engine", "reginamq.security"),
    ("reginamq.http", "reginamq.maintenance"),
    ("reginamq.process", "reginamq.library"),
    ("reginamq.server",),
    ("reginamq.bench", "reginamq.ctl"),
    ("reginamq.cli",),
    ("reginamq.__main__",),
]
DRIVER_USERS = ("reginamq.store", "reginamq.bench")
# Pairs of packages where the first never imports the second, whatever their layers allow: the
# library calls the engine as the HTTP layer does, never through it.
NEVER: list[tuple[str, str]] = [("reginamq.library", "reginamq.http")]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, ast.Module]:
    return {module_name(path): ast.parse(path.read_text(encoding="utf-8"))
            for path in sorted(ROOT.rglob("*.py"))}


def imports(name: str, tree: ast.Module) -> set[str]:
    """Every module ``tree`` imports, wherever the import stands. The package imports itself by
    absolute names only, so what an import names is what it loads."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{name}: relative import of {node.module}; name it absolutely"
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def package_of(module: str) -> str | None:
    """The layered package (from LAYERS) that holds ``module``."""
    for packages in LAYERS:
        for package in packages:
            if module == package or module.startswith(package + "."):
                return package
    return None


def layer_of(package: str) -> int:
    return next(index for index, packages in enumerate(LAYERS) if package in packages)


TREES = modules()
GRAPH = {name: {target for target in imports(name, tree) if target in TREES} for name, tree in TREES.items()}


def test_every_module_belongs_to_a_layer():
    homeless = [name for name in TREES if name != "reginamq" and package_of(name) is None]
    assert not homeless, f"modules outside every layer of LAYERS: {homeless}"


@pytest.mark.parametrize("name", sorted(name for name in TREES if name != "reginamq"))
def test_imports_point_down(name):
    own = package_of(name)
    wrong = []
    for target in sorted(GRAPH[name]):
        theirs = package_of(target)
        if theirs is None or theirs == own:
            continue
        if layer_of(theirs) >= layer_of(own):
            wrong.append(target)
    assert not wrong, f"{name} ({own}) imports {wrong}, which is not below it"


@pytest.mark.parametrize("name", sorted(name for name in TREES if name != "reginamq"))
def test_only_the_store_talks_to_the_driver(name):
    if name.startswith(DRIVER_USERS):
        return
    assert "asyncpg" not in {target.split(".")[0] for target in imports(name, TREES[name])}, (
        f"{name} imports asyncpg: database access belongs in reginamq.store")


@pytest.mark.parametrize(("importer", "imported"), NEVER)
def test_packages_that_never_import_each_other(importer, imported):
    wrong = sorted(f"{name} -> {target}" for name, targets in GRAPH.items() if package_of(name) == importer
                   for target in targets if package_of(target) == imported)
    assert not wrong, f"{importer} must not import {imported}: {wrong}"


def test_no_import_circles():
    graph = {name: {target for target in targets if target not in (name, "reginamq")}
             for name, targets in GRAPH.items()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"modules that import each other in a circle: {error.args[1]}")


def test_the_check_sees_a_wrong_arrow():
    """The check itself: an engine module importing the HTTP layer is reported."""
    tree = ast.parse("from reginamq.http import responses\n")
    targets = {target for target in imports("reginamq.engine.fake", tree) if target in TREES}
    assert "reginamq.http.responses" in targets
    assert layer_of(package_of("reginamq.http.responses")) >= layer_of(package_of("reginamq.engine.fake"))
