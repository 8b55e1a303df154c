"""Where the project's own files are: configs, tasks, manifests (next to the package)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = REPO_ROOT / "conf"
TASKS_DIR = REPO_ROOT / "tasks"
MANIFESTS_DIR = REPO_ROOT / "manifests"
SUITES_DIR = MANIFESTS_DIR / "suites"
