"""The layering of docs/architecture.md as tests, read off the source (AST), not off running code.

Imports are those of the whole module, imports inside functions included (``from __future__``
is not one). An import names one module: ``import a.b`` the module ``a.b`` (not ``a``), and
``from a import b`` the module ``a.b`` when there is one, else ``a``; relative imports are resolved.
"""

from __future__ import annotations

import ast
import functools
import os
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import networkx as nx
import pytest

from redis_fixture import redis_server  # noqa: F401  (rule 4, redis store)

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "topiccrawl"


class Import(NamedTuple):
    module: str  # the importing module
    target: str  # the module it names
    line: int


# -- the source -----------------------------------------------------------------------------------
def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    return {module_name(p): p for p in sorted((REPO / PACKAGE).rglob("*.py"))}


@functools.cache
def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def python_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (REPO / folder).rglob("*.py"))


@functools.cache
def imports_of(name: str) -> tuple[Import, ...]:
    path = modules()[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            found += [Import(name, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            if node.level:
                base = package[: len(package) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.append(Import(name, sub if sub in modules() else source, node.lineno))
    return tuple(sorted(found, key=lambda i: (i.line, i.target)))


def all_imports() -> list[Import]:
    return [i for name in modules() for i in imports_of(name)]


def inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def show(imports) -> str:
    return "\n".join(f"  {i.module} -> {i.target}  ({rel(modules()[i.module])}:{i.line})" for i in imports)


# -- (1) no import cycle --------------------------------------------------------------------------
def import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(modules())
    for i in all_imports():
        if i.target in modules() and i.target != i.module:
            graph.add_edge(i.module, i.target, line=i.line)
    return graph


def test_no_import_cycle_among_topiccrawl_modules():
    graph = import_graph()
    problems = []
    for component in sorted(map(sorted, nx.strongly_connected_components(graph))):
        if len(component) < 2:
            continue
        sub = graph.subgraph(component)
        cycle = [a for a, _b in nx.find_cycle(sub)]
        edges = [Import(a, b, sub.edges[a, b]["line"]) for a, b in sorted(sub.edges)]
        problems.append(f"cycle {' -> '.join([*cycle, cycle[0]])}; all imports among "
                        f"{len(component)} modules that import each other:\n{show(edges)}")
    assert not problems, "\n".join(problems)


# -- (2) pure packages --------------------------------------------------------------------------------
#: algorithms and the web lab: no Scrapy, Twisted, redis-py or itemadapter, and no import of a
#: module that is not pure itself (the crawl layer, spiders, the Redis store)
PURE_PACKAGES = ("topiccrawl.strategies", "topiccrawl.scoring", "topiccrawl.discovery",
                 "topiccrawl.sitefinder", "topiccrawl.learning", "topiccrawl.weblab")
CRAWL_FRAMEWORK = {"scrapy", "twisted", "redis", "itemadapter"}
#: the web lab's own server, the only weblab modules allowed Twisted (and only Twisted)
WEBLAB_ON_TWISTED = {
    "topiccrawl.weblab.server": "the lab's forward proxy is a Twisted web server",
    "topiccrawl.weblab.__main__": "`python -m topiccrawl.weblab` / `scrapy serveweb` runs that server on the reactor",
}


def is_pure(name: str) -> bool:
    return any(inside(name, p) for p in PURE_PACKAGES) and name not in WEBLAB_ON_TWISTED


def test_pure_packages_import_no_crawl_framework():
    bad = []
    for name in filter(is_pure, modules()):
        for i in imports_of(name):
            root = i.target.split(".")[0]
            if root in CRAWL_FRAMEWORK or (root == PACKAGE and i.target in modules() and not is_pure(i.target)):
                bad.append(i)
    for name in WEBLAB_ON_TWISTED:
        bad += [i for i in imports_of(name) if i.target.split(".")[0] in CRAWL_FRAMEWORK - {"twisted"}]
    assert not bad, f"pure modules importing Scrapy, Twisted, redis-py or a non-pure module:\n{show(bad)}"


# -- (3) spiders -------------------------------------------------------------------------------------
SPIDERS = "topiccrawl.spiders"


def test_nothing_outside_the_spiders_imports_a_spider():
    bad = [i for i in all_imports() if inside(i.target, SPIDERS) and not inside(i.module, SPIDERS)]
    assert not bad, f"modules importing a spider module:\n{show(bad)}"


def test_spiders_import_neither_the_scheduler_nor_the_redis_store():
    bad = [i for i in all_imports() if inside(i.module, SPIDERS)
           and (inside(i.target, "topiccrawl.crawl.scheduler") or inside(i.target, "topiccrawl.redis"))]
    assert not bad, f"spiders importing a scheduler or the Redis store:\n{show(bad)}"


# -- (4) the SCHEDULER setting names the class that is built -----------------------------------------
@contextmanager
def working_directory(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


@functools.cache
def project_settings():
    """The project's settings (scrapy.cfg -> topiccrawl.settings), as ``scrapy crawl`` reads them."""
    from scrapy.utils.project import get_project_settings

    with working_directory(REPO):
        return get_project_settings()


@pytest.mark.parametrize("store", ["memory", "redis"])
def test_scheduler_setting_is_the_class_built(store, request, tmp_path):
    from scrapy.settings import SETTINGS_PRIORITIES
    from scrapy.spiderloader import SpiderLoader
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    project = project_settings()
    values = {k: v for k, v in project.items() if project.getpriority(k) >= SETTINGS_PRIORITIES["project"]}
    values.update(TOPICCRAWL_STORE=store, TOPICCRAWL_OUTPUT_DIR=str(tmp_path / "out"))
    if store == "redis":
        values.update(TOPICCRAWL_REDIS_URL=request.getfixturevalue("redis_server").url,
                      TOPICCRAWL_CRAWL_ID="architecture")
    loader = SpiderLoader.from_settings(project)
    names = sorted(loader.list())
    assert names, "no spider found in the project's SPIDER_MODULES"
    wrong = []
    for name in names:
        spidercls = loader.load(name)
        # the live web, over the spiders' own offline webs too (nothing is fetched here): building a
        # spider for an offline web starts its lab, which only the end of a crawl stops; one per
        # spider would build the lab's search index beside the rest of the suite
        spidercls = type(spidercls.__name__, (spidercls,),
                         {"custom_settings": {**(spidercls.custom_settings or {}), "TOPICCRAWL_WEB": "live"}})
        crawler = get_crawler(spidercls, values)
        crawler.spider = spidercls.from_crawler(crawler)
        path = crawler.settings["SCHEDULER"]
        cls = load_object(path)
        built = type(cls.from_crawler(crawler))
        if built is not cls:
            wrong.append(f"  {name}: SCHEDULER={path}, {cls.__name__}.from_crawler built "
                         f"{built.__module__}.{built.__qualname__}")
    assert not wrong, (f"TOPICCRAWL_STORE={store}: the scheduler built is not the SCHEDULER setting's:\n"
                       + "\n".join(wrong))


# -- (5) Scrapy internals in one adapter -------------------------------------------------------------
#: private attributes of Scrapy objects the crawl layer needs (Spider._parse,
#: RFPDupeFilter._fingerprints, ExecutionEngine._slot, Crawler._create_engine)
PRIVATE_ATTRIBUTES = {"_parse", "_fingerprints", "_slot", "_create_engine"}
#: attribute chains into the engine's live request sets
PRIVATE_CHAINS = {("downloader", "active"), ("scraper", "slot")}
#: where Scrapy internals may be read, with what and why
INTERNALS_ALLOWED = {
    "topiccrawl/crawl/engine.py": ({"attribute", "chain", "dict"},
                                   "the one adapter over Scrapy internals: a Scrapy upgrade is checked there"),
    # topiccrawl/crawl/codec.py packs request headers through engine.raw_header/set_raw_header,
    # so it needs no entry of its own
}


def internals(tree: ast.AST):
    """(kind, line, text) of every read of a Scrapy internal in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in PRIVATE_ATTRIBUTES:
                yield "attribute", node.lineno, f".{node.attr}"
            if isinstance(node.value, ast.Attribute) and (node.value.attr, node.attr) in PRIVATE_CHAINS:
                yield "chain", node.lineno, f".{node.value.attr}.{node.attr}"
        # dict.get(headers, ...), dict.__setitem__(headers, ...): Headers' storage, past its API
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "dict"
                and node.func.attr != "fromkeys"):
            yield "dict", node.lineno, f"dict.{node.func.attr}(...)"


def test_scrapy_internals_are_read_in_one_adapter_only():
    bad, unused = [], []
    for path in python_files(PACKAGE):
        allowed, _reason = INTERNALS_ALLOWED.get(rel(path), (set(), ""))
        found = list(internals(parse(path)))
        bad += [f"  {rel(path)}:{line}: {text}" for kind, line, text in found if kind not in allowed]
        if allowed and not found:
            unused.append(rel(path))
    assert not bad, "Scrapy internals outside topiccrawl/crawl/engine.py:\n" + "\n".join(bad)
    assert not unused, f"allowed but reads no Scrapy internal (drop it from INTERNALS_ALLOWED): {unused}"


def engine_plumbing(tree: ast.AST):
    """(line, text): a Crawler's engine built by hand, or an engine's slot set by hand."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "_create_engine":
            yield node.lineno, "._create_engine()"
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        for target in targets:
            if isinstance(target, ast.Attribute) and target.attr in ("_slot", "_engine"):
                yield node.lineno, f".{target.attr} = ..."


def test_tests_and_benchmarks_drive_scrapy_through_its_public_api():
    bad = [f"  {rel(p)}:{line}: {text}" for p in python_files("tests", "bench")
           for line, text in sorted(set(engine_plumbing(parse(p))))]
    assert not bad, ("engine internals set by hand (use the public API: crawler.engine, a real crawl):\n"
                     + "\n".join(bad))


# -- (6) no sys.path edits, no machine paths ----------------------------------------------------------
def is_sys_path(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "path"
            and isinstance(node.value, ast.Name) and node.value.id == "sys")


def sys_path_edits(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_sys_path(node.func.value):
            yield node.lineno, f"sys.path.{node.func.attr}(...)"
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if is_sys_path(target) or (isinstance(target, ast.Subscript) and is_sys_path(target.value)):
                    yield node.lineno, "sys.path assigned"


def test_no_sys_path_edits_in_tests_and_benchmarks():
    bad = [f"  {rel(p)}:{line}: {text}" for p in python_files("tests", "bench")
           for line, text in sys_path_edits(parse(p))]
    assert not bad, "sys.path edited (the package is installed with `pip install -e .`; run bench scripts as " \
                    "`python -m bench.NAME`):\n" + "\n".join(bad)


#: paths of one machine (spelled in pieces so that this file does not contain them)
MACHINE_PATHS = tuple(f"/{folder}/" for folder in ("work", "home")) + ("../" + "shared",)


def test_no_machine_paths_in_code_tests_and_benchmarks():
    bad = []
    for path in python_files(PACKAGE, "tests", "bench"):
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                hits = [m for m in MACHINE_PATHS if m in node.value]
                if hits:
                    bad.append(f"  {rel(path)}:{node.lineno}: {hits[0]!r} in {node.value[:80]!r}")
    assert not bad, "machine paths in string literals (take data folders from TOPICCRAWL_DATA_DIR or an option):\n" \
                    + "\n".join(bad)
