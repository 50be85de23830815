"""The runtime needs numpy and numba only: no module of tape/ or compiler/
imports anything else, even lazily inside a function (a SciPy import in a
rarely used function would pass every test on a machine that happens to have
SciPy and fail for users who do not)."""
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLOWED = set(sys.stdlib_module_names) | {'numpy', 'numba', 'llvmlite', 'tape', 'compiler'}
# optional integrations, imported only after checking that the package is there
OPTIONAL = {('tape/backends/opt_einsum.py', 'opt_einsum')}


def _imports(path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split('.')[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split('.')[0]


def test_runtime_imports_only_numpy_and_numba():
    bad = []
    for pkg in ('tape', 'compiler'):
        for path in sorted((ROOT / pkg).rglob('*.py')):
            for line, name in _imports(path):
                if name not in ALLOWED and (str(path.relative_to(ROOT)), name) not in OPTIONAL:
                    bad.append(f'{path.relative_to(ROOT)}:{line} imports {name}')
    assert not bad, 'imports outside numpy/numba/the standard library:\n' + '\n'.join(bad)
