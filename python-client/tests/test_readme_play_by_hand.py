"""The README's "play a BFCL or ACEBench task by hand" snippet runs as written on imported BFCL bundles."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys

import pytest

from helpers import REPO

HAVE_BFCL = importlib.util.find_spec("bfcl_eval") is not None


@pytest.mark.skipif(not HAVE_BFCL, reason=f"bfcl-eval is not importable with {sys.executable}: run scripts/test-all.sh (it installs bfcl-eval==2026.3.23 into .venv)")
def test_readme_play_bfcl_by_hand(tmp_path, capsys, monkeypatch):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("To play a BFCL or ACEBench task by hand") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code, "the README lost its play-by-hand snippet"
    # the import the snippet's comment names, then the snippet itself from the folder it ran in
    cli = [shutil.which("node"), str(REPO / "dist" / "cli" / "main.js")]
    subprocess.run([*cli, "import", "bfcl", "--category", "base", "--python", sys.executable, "--out", str(tmp_path / "bundles" / "bfcl")], check=True, capture_output=True)
    scope: dict[str, object] = {}
    monkeypatch.chdir(tmp_path)
    exec(compile(code.group(1), "README.md", "exec"), scope)  # the README's own example
    # the first user turn was printed; the text reply ended the turn and the next one came, unscored yet
    assert "final_report.pdf" in capsys.readouterr().out
    assert scope["terminated"] is False and scope["truncated"] is False
    assert scope["reward"] == 0.0
    assert "budget analysis" in str(scope["obs"])
