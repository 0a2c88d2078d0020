"""The package's layers: core < training < analysis < book (README, Layout).

Every module is parsed with ``ast`` (nothing is imported): a module may import from its own layer
or a lower one, never another module's private names (``_x``), and the imports between modules
form no cycle.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "npformer"
LAYERS = ["core", "training", "analysis", "book"]  # low to high
TOP = len(LAYERS)  # npformer/__init__.py and __main__.py sit above every layer


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def layer(name: str) -> int:
    parts = name.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else TOP


def imports(path: Path, known) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names) for every import of the package, also inside functions."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names if a.name in known]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("npformer"):
            names = [a.name for a in node.names]
            submodules = [f"{node.module}.{n}" for n in names if f"{node.module}.{n}" in known]
            if submodules:  # from npformer.core import model
                found += [(node.lineno, m, []) for m in submodules]
            else:
                found.append((node.lineno, node.module, names))
    return found


def problems(package: Path = PACKAGE) -> list[str]:
    known = modules(package)
    found, graph = [], {name: set() for name in known}
    for name, path in known.items():
        for line, target, names in imports(path, known):
            where = f"{path.relative_to(package.parent)}:{line}"
            if target not in known:
                found.append(f"{where} imports {target}, which is no module of the package")
                continue
            if layer(target) > layer(name):
                found.append(f"{where} imports the higher layer's {target}")
            private = [n for n in names if n.startswith("_")]
            if private and target != name:
                found.append(f"{where} imports private {', '.join(private)} from {target}")
            if target != name:
                graph[name].add(target)
    return found + [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of two or more modules (depth-first search)."""
    found, state = [], {}  # state: 1 on the path, 2 done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_the_four_layers_and_nothing_else():
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(LAYERS)
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py"]
    assert all((PACKAGE / name / "__init__.py").is_file() for name in LAYERS)


def test_no_import_from_a_higher_layer_no_private_import_no_cycle():
    found = problems()
    assert not found, "\n".join(found)


def test_a_planted_bad_import_is_found(tmp_path):
    for name in ["core", "book"]:
        (tmp_path / "npformer" / name).mkdir(parents=True)
        (tmp_path / "npformer" / name / "__init__.py").write_text("")
    root = tmp_path / "npformer"
    (root / "core" / "a.py").write_text("from npformer.book.b import _hidden\n")
    (root / "book" / "b.py").write_text("def f():\n    from npformer.core import a\n")
    assert problems(root) == [
        "npformer/core/a.py:1 imports the higher layer's npformer.book.b",
        "npformer/core/a.py:1 imports private _hidden from npformer.book.b",
        "import cycle: npformer.book.b -> npformer.core.a -> npformer.book.b",
    ]
