"""A run from a checkout that differs from its commit keeps the difference (``runner/tracking/source_diff.py``): the
sixty-fifth session's manifests said ``dba02ba…-dirty`` for a tree three commits on, and nothing told which."""

from __future__ import annotations

import subprocess
from pathlib import Path

from runner.tracking.source_diff import MAX_UNTRACKED_BYTES, source_diff


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=root, check=True, timeout=30)


def _checkout(root: Path) -> Path:
    (root / "runner").mkdir(parents=True)
    (root / "runner" / "timing.py").write_text("TARGET = 0.5\n")
    (root / "runner" / "gone.py").write_text("x = 1\n")
    (root / "conf").mkdir()
    (root / "conf" / "h100.yaml").write_bytes(b"peak: 3.35\n\x00binary\n")
    (root / "README.md").write_text("readme\n")
    (root / ".gitignore").write_text("runs/\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "base")
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for top in ("runner", "conf")
        for path in sorted((root / top).rglob("*"))
        if path.is_file()
    }


def test_the_patch_on_a_checkout_of_the_commit_gives_the_tree_that_ran(tmp_path):
    ran = _checkout(tmp_path / "ran")
    (ran / "runner" / "timing.py").write_text("TARGET = 0.2\n")  # a tracked file changed
    (ran / "runner" / "gone.py").unlink()  # one removed
    (ran / "runner" / "new.py").write_text("y = 2\n")  # one new, never added
    (ran / "conf" / "h100.yaml").write_bytes(b"peak: 3.2\n\x00binary\n")  # a binary one changed
    (ran / "README.md").write_text("not the code\n")  # outside what kbench runs from: not in the patch
    (ran / "runs").mkdir()
    (ran / "runs" / "ignored.py").write_text("z = 3\n")  # ignored: not in it either
    (ran / "runner" / "big.bin").write_bytes(b"\0" * (MAX_UNTRACKED_BYTES + 1))  # named, not copied
    diff = source_diff(ran)
    assert sorted(diff.changed) == [
        "conf/h100.yaml",
        "runner/big.bin",
        "runner/gone.py",
        "runner/new.py",
        "runner/timing.py",
    ]
    assert diff.too_large == ["runner/big.bin"] and diff.record()["left_out_for_size"] == ["runner/big.bin"]
    rebuilt = tmp_path / "rebuilt"
    subprocess.run(["git", "clone", "-q", str(ran), str(rebuilt)], check=True, timeout=30)
    (rebuilt / "source.diff").write_bytes(diff.patch)
    _git(rebuilt, "apply", "source.diff")
    expected = _files(ran)
    del expected["runner/big.bin"]
    assert _files(rebuilt) == expected
    assert (rebuilt / "README.md").read_text() == "readme\n"


def test_a_clean_checkout_records_nothing_and_a_folder_outside_git_says_so(tmp_path):
    clean = _checkout(tmp_path / "clean")
    (clean / "README.md").write_text("changed, but not the code\n")
    diff = source_diff(clean)
    assert diff.patch == b"" and diff.changed == [] and diff.record() is None
    plain = tmp_path / "plain"
    plain.mkdir()
    assert source_diff(plain) == "not a git checkout"


def test_a_kbench_folder_inside_a_larger_repository_gets_paths_from_the_top(tmp_path):
    """``git apply`` takes a patch's paths from the repository's top (run in a folder, it skips, without a word, what
    lies outside that folder): a patch with paths from kbench's own folder would have rebuilt nothing."""
    outer = tmp_path / "outer"
    _checkout(outer / "kb")
    _git(outer, "init", "-q")  # the repository is the outer folder; kbench is its kb/
    (outer / "kb" / ".git").rename(tmp_path / "inner-git")
    _git(outer, "add", ".")
    _git(outer, "commit", "-qm", "outer")
    (outer / "kb" / "runner" / "timing.py").write_text("TARGET = 0.3\n")
    (outer / "kb" / "runner" / "new.py").write_text("y = 2\n")
    diff = source_diff(outer / "kb")
    assert sorted(diff.changed) == ["kb/runner/new.py", "kb/runner/timing.py"]
    rebuilt = tmp_path / "rebuilt"
    subprocess.run(["git", "clone", "-q", str(outer), str(rebuilt)], check=True, timeout=30)
    (tmp_path / "source.diff").write_bytes(diff.patch)
    _git(rebuilt, "apply", str(tmp_path / "source.diff"))
    assert _files(rebuilt / "kb") == _files(outer / "kb")
