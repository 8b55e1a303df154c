"""Where kbench's Python processes get their bytecode: the install's, or a cache of their own (workers: compiled ahead).

Where the installed torch carries no bytecode for this interpreter (a ``pip --no-compile`` or ``uv`` install, read
under ``PYTHONDONTWRITEBYTECODE=1``: the H100 and H200 machines), every fresh interpreter compiled torch and its
compiler stack from source, 11-16 s of each fork server's start. There the workers' Python keeps its bytecode in a
cache (``PYTHONPYCACHEPREFIX``), so only the first interpreter to import a module compiles it, and nothing is written
beside any source. Where the install has its bytecode, workers read it and write none. The local executor's cache is
kbench's folder in the user's cache (``runner.paths.user_cache_dir``), the one the run's own process uses: bytecode
depends on the sources and the interpreter only, so a run with a new compile cache (every run without
``executor.compile_cache_dir``, ``make bench``'s first pass) reads what earlier runs on the machine compiled. In the
run's compile cache it was compiled again by each: the fork server's imports took 6.6 s instead of 4.0 s on the H200
(BENCHMARKS.md, fiftieth session). Where there is no home, the run's cache folder holds it.

The first interpreter is the fork server, and on a cache that is still empty (a machine's first run) its imports
compiled about 2,500 modules one after another: 13.8 s, against 3 s from a filled cache, while the run's own set-up
took 7.7-10.2 s, so the first evaluations waited (BENCHMARKS.md, twenty-eighth session). ``compile_ahead`` compiles
the packages the server imports into the same cache, on every core but one, while the server imports: it finds most
modules compiled by the time it reaches them. Only for a run on GPUs: on a CPU its processes would share the cores
with measurements on the host's clock. The files are written atomically, so two processes (or two runs) writing one
module at once is harmless; a compile that is killed leaves the modules it had not reached to be compiled on import,
as before.

The run's own process follows the same rule for its own imports (Hydra, OmegaConf, MLflow with SQLAlchemy and
Alembic): on the H200 machine, where they were installed without bytecode, ``import mlflow`` took 2.7-3.6 s and
opening its store 2.3-4.0 s of every run's set-up, 5-6 s of the 7.3-9.4 s (BENCHMARKS.md, forty-sixth session).
``keep_own_bytecode`` keeps that process's bytecode in the same folder (``$XDG_CACHE_HOME/kbench/pycache``, else
``~/.cache/kbench/pycache``): it is needed before the configuration is read.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

from runner.paths import REPO_ROOT, user_cache_dir

PYCACHE_PREFIX_ENV = "PYTHONPYCACHEPREFIX"

# The packages whose modules the fork server imports (``zygote.preload``: torch, its compiler stack, the worker's
# modules), by how many it imports from each (torch 2.11: torch about 1,300, sympy 420, networkx 285, numpy 99,
# mpmath 51, triton 45, ...). One missing here is compiled on import, as before.
AHEAD_PACKAGES = (
    "torch",
    "sympy",
    "networkx",
    "numpy",
    "mpmath",
    "triton",
    "filelock",
    "jinja2",
    "markupsafe",
    "torchgen",
    "functorch",
)
# What the run's own process imports from outside kbench and the standard library, as ``keep_own_bytecode`` asks.
OWN_PACKAGES = ("hydra", "omegaconf", "mlflow")
# Never imported by a worker, and a third of what the packages hold: their tests and torch's test helpers.
_NOT_AHEAD = r"/(tests?|testing/_internal|benchmarks)/"


def bytecode_env(cache_dir: Path, package: str = "torch") -> dict[str, str]:
    """How the workers' Python treats bytecode: read the install's and write none, where ``package`` is
    installed with bytecode for this interpreter; else keep it under ``cache_dir``/pycache (module docstring; the
    local executor's ``cache_dir`` is ``user_cache_dir()`` where there is one)."""
    if installed_with_bytecode(package):
        return {"PYTHONDONTWRITEBYTECODE": "1"}
    return {PYCACHE_PREFIX_ENV: str(cache_dir / "pycache")}


@cache
def installed_with_bytecode(package: str) -> bool:
    """Whether ``package``'s ``__init__`` has a compiled file beside it for this interpreter (found, not
    imported). True where the package is not found: nothing to gain from a cache of its own."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return True
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return True
    source = Path(spec.origin)
    return (source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc").exists()


# The compile ahead: ``compileall`` over each folder, then its marker written (``ahead_marker``). Arguments: the
# marker, the number of processes, the paths left out (a regular expression), the folders.
_COMPILE_AND_MARK = """
import compileall, pathlib, re, sys
marker, workers, left_out, *folders = sys.argv[1:]
for folder in folders:
    compileall.compile_dir(folder, quiet=1, workers=int(workers), rx=re.compile(left_out))
pathlib.Path(marker).parent.mkdir(parents=True, exist_ok=True)
pathlib.Path(marker).write_text("\\n".join(folders) + "\\n")
"""


def compile_ahead(
    cache_dir: Path, packages: tuple[str, ...] = AHEAD_PACKAGES, package: str = "torch", preexec_fn=None
) -> subprocess.Popen | None:
    """Start compiling ``packages`` (those installed without bytecode) and the worker's own package into the
    workers' bytecode cache under ``cache_dir``, in the background, on all cores but one (``compileall``, which
    skips what is compiled already), and mark the cache once done (``ahead_marker``). Returns the process, or None
    where the workers read the install's bytecode (``package`` decides, as in ``bytecode_env``), nothing is left
    to compile, or an earlier compile went over the same installs (``compiled_ahead_before``). ``preexec_fn``: run
    in the process before it starts (the executor's death with the run)."""
    plan = _ahead_plan(cache_dir, packages, package)
    if plan is None or plan[1].exists():
        return None
    folders, marker = plan
    folders.append(REPO_ROOT / "runner")
    workers = max(1, (os.cpu_count() or 2) - 1)
    command = [sys.executable, "-c", _COMPILE_AND_MARK, str(marker), str(workers), _NOT_AHEAD, *map(str, folders)]
    return subprocess.Popen(
        command,
        env={"PATH": os.environ.get("PATH", ""), **bytecode_env(cache_dir, package)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,  # syntax errors in files nobody imports (templates, examples): not ours to report
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=preexec_fn,
    )


def ahead_marker(cache_dir: Path, folders: list[Path]) -> Path:
    """The file that says a compile ahead went over ``folders`` as they are installed now: named for the
    interpreter and, per folder, its path and the identity of its ``__init__.py`` and of the folder itself (an
    upgrade writes new files). With a cache already filled, ``compileall`` still read every module's bytecode
    header to find nothing to do, on 15 processes beside the fork server's imports: 2.5-3.9 s on the H200, where
    the server's imports took 3.2-4.4 s (BENCHMARKS.md, fifty-first session); a later run that finds the marker
    starts no compile. A module changed without its package's ``__init__.py`` or folder (an editable install's
    source) is compiled again on import, as before: only its first importer pays it. kbench's own package is
    compiled with the rest and left out of the name (its sources change between runs while it is developed)."""
    parts = [sys.version, sys.executable]
    for folder in folders:
        own = folder.stat()
        init = (folder / "__init__.py").stat() if (folder / "__init__.py").exists() else own
        parts.append(f"{folder} {init.st_ino} {init.st_size} {init.st_mtime_ns} {own.st_ino} {own.st_mtime_ns}")
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return cache_dir / "pycache" / f"compiled-ahead-{digest}"


def compiled_ahead_before(cache_dir: Path, packages: tuple[str, ...] = AHEAD_PACKAGES, package: str = "torch") -> bool:
    """Whether an earlier compile ahead went over ``packages`` as installed now (``compile_ahead``'s arguments)."""
    plan = _ahead_plan(cache_dir, packages, package)
    return plan is not None and plan[1].exists()


def _ahead_plan(cache_dir: Path, packages: tuple[str, ...], package: str) -> tuple[list[Path], Path] | None:
    """The folders of ``packages`` a compile ahead goes over and their marker (``ahead_marker``); None where the
    workers read the install's bytecode (``package`` decides, as in ``bytecode_env``) or nothing is left to compile."""
    if PYCACHE_PREFIX_ENV not in bytecode_env(cache_dir, package):
        return None
    folders = [folder for package in packages if (folder := _uncompiled_folder(package)) is not None]
    return (folders, ahead_marker(cache_dir, folders)) if folders else None


def _uncompiled_folder(package: str) -> Path | None:
    """The folder of ``package`` where it is installed without bytecode, else None (not found, or compiled)."""
    if installed_with_bytecode(package):
        return None
    spec = importlib.util.find_spec(package)
    return Path(spec.origin).parent


def own_bytecode_cache() -> Path | None:
    """Where the run's own process keeps its bytecode (``keep_own_bytecode``), and the local executor's workers
    theirs: ``pycache`` in kbench's folder of the user's cache, or None where there is no home to hold it."""
    base = user_cache_dir()
    return None if base is None else base / "pycache"


def keep_own_bytecode(cache: Path | None, packages: tuple[str, ...] = OWN_PACKAGES) -> str | None:
    """Where one of ``packages`` is installed without bytecode for this interpreter, this process's later imports
    read and write theirs under ``cache`` (``sys.pycache_prefix``), also under ``PYTHONDONTWRITEBYTECODE=1``, and
    nothing is written beside a source. Returns the folder now in use; None where the install's bytecode serves, and
    a prefix already set (``PYTHONPYCACHEPREFIX``, ``-X pycache_prefix``) is kept. Only for a process started for
    kbench: the prefix holds for every module the process imports after it, those installed with their bytecode too,
    so the first process on an empty cache compiles those as well (once; a set-up of 13.7 s, then 3.5 s, on the H200
    machine)."""
    if sys.pycache_prefix is not None:
        return sys.pycache_prefix
    if cache is None or all(installed_with_bytecode(package) for package in packages):
        return None
    sys.pycache_prefix = str(cache)
    sys.dont_write_bytecode = False
    return sys.pycache_prefix
