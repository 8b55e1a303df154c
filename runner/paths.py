"""Where the project's own files are: configs, tasks, manifests (next to the package); and kbench's folder in the
user's cache."""

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = REPO_ROOT / "conf"
TASKS_DIR = REPO_ROOT / "tasks"
MANIFESTS_DIR = REPO_ROOT / "manifests"
SUITES_DIR = MANIFESTS_DIR / "suites"


def user_cache_dir() -> Path | None:
    """kbench's folder in the user's cache (``$XDG_CACHE_HOME/kbench``, else ``~/.cache/kbench``): what depends on the
    install and this machine only, never on a run's candidates, kept from one run to the next (bytecode, the output
    checks' kernels). None where there is no home to hold it."""
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no HOME and no password entry
            return None
    return Path(base) / "kbench"
