"""docs/training.md's snippets (issue 29: a new user's paste of them failed: `bridge` undefined,
GRPOConfig without use_cpu, 3 epochs of 494 s steps).

Default suite: every Python snippet parses and is self-contained (no name it uses comes from
nowhere), and the TRL snippet's GRPOConfig runs on a CPU for a bounded number of steps. Trainer
suite (``-m trainers``): the TRL, SkyRL and verl snippets are executed as written (the TRL one on
the tiny model with ``max_steps=1``)."""

from __future__ import annotations

import ast
import builtins
import re
import sys
from typing import Any

import pytest

from helpers import REPO

DOC = REPO / "docs" / "training.md"


def snippets() -> list[tuple[str, str]]:
    """(section heading, code) of every ```python block, in order."""
    text = DOC.read_text(encoding="utf-8")
    out, heading = [], ""
    for m in re.finditer(r"^(#{2,3} [^\n]*)$|^```python\n(.*?)^```$", text, re.S | re.M):
        if m.group(1):
            heading = m.group(1).lstrip("#").strip()
        else:
            out.append((heading, m.group(2)))
    return out


def snippet(heading: str) -> str:
    found = [code for h, code in snippets() if h == heading]
    assert len(found) == 1, f"expected one python block under '{heading}', found {len(found)}"
    return found[0]


def free_names(code: str) -> set[str]:
    """Names the code reads that it never binds (imports, assignments, with/for targets, defs) and
    that are not builtins: each would be a NameError when the snippet is pasted alone."""
    tree = ast.parse(code)
    bound: set[str] = set()
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return used - bound - set(dir(builtins))


def test_every_python_snippet_is_self_contained() -> None:
    found = snippets()
    assert len(found) >= 6, [h for h, _ in found]
    for heading, code in found:
        assert not free_names(code), f"the snippet under '{heading}' uses names it never defines: {sorted(free_names(code))}"


def _grpo_config_kwargs(code: str) -> dict[str, Any]:
    calls = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "GRPOConfig"]
    assert len(calls) == 1
    return {k.arg: ast.literal_eval(k.value) for k in calls[0].keywords if k.arg}


def test_trl_snippets_run_on_a_cpu_for_a_bounded_number_of_steps() -> None:
    for heading in ("TRL", "TRL `rollout_func`: conversation scenarios and fork groups"):
        kw = _grpo_config_kwargs(snippet(heading))
        assert kw["use_cpu"] is True and kw["bf16"] is False, heading  # without them TRL raises on a CPU
        assert isinstance(kw.get("max_steps"), int) and 0 < kw["max_steps"] <= 10, heading  # not TRL's 3 epochs
    kw = _grpo_config_kwargs(snippet("TRL"))
    assert kw["max_completion_length"] <= 128 and kw["num_generations"] <= 4 and kw["max_tool_calling_iterations"] <= 4


# ---------------------------------------------------------------------------------------------- executed (trainer suite)


def _run(code: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)  # the snippets write out/ and train.parquet where they run
    namespace: dict[str, Any] = {"__name__": "__snippet__"}
    exec(compile(code, str(DOC), "exec"), namespace)
    return namespace


@pytest.mark.trainers
@pytest.mark.timeout(1800)  # bundled-env prompts of 3.6-6.3k tokens on a shared 2-core machine
def test_trl_snippet_runs_as_written(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer_helpers import KIT, missing_kit, require

    require("trl", "the trainer suite needs the [train] extra (trl)")
    if not (KIT / "tiny_model.py").exists():
        missing_kit()
    sys.path.insert(0, str(KIT))
    from tiny_model import tiny_qwen2

    model = tiny_qwen2(tmp_path / "tiny")
    code = snippet("TRL")
    # the two edits a reader makes: where the model is, and (here) one step instead of the doc's few
    code, n = re.subn(r'^MODEL = ".*?"', f"MODEL = {str(model)!r}", code, flags=re.M)
    assert n == 1
    code, n = re.subn(r"max_steps=\d+", "max_steps=1", code)
    assert n == 1
    ns = _run(code, tmp_path, monkeypatch)
    trainer = ns["trainer"]
    assert trainer.state.global_step == 1
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert logs and logs[0]["reward"] is not None, trainer.state.log_history
    assert {r["environment"] for r in ns["dataset"]} <= {"library-v1", "bank-v1"} and len(ns["dataset"]) > 0


@pytest.mark.trainers
def test_skyrl_snippet_runs_as_written(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer_helpers import require

    require("skyrl_gym", "the trainer suite needs the [train] extra (skyrl-gym)")
    require("pyarrow", "to_parquet needs pyarrow")
    ns = _run(snippet("SkyRL"), tmp_path, monkeypatch)
    import pandas as pd

    table = pd.read_parquet(tmp_path / "train.parquet")
    ids = sorted({r["scenario_id"] for r in table["extra_info"]})
    assert ids and all(i.startswith("library-") for i in ids) and len(table) == 8 * len(ids)
    # the snippet's call is library-1's first reference action: a tool result, the episode goes on
    assert ns["out"]["done"] is False and ns["out"]["reward"] == 0.0
    assert [m["role"] for m in ns["out"]["observations"]] == ["tool"] and "L0009" in ns["out"]["observations"][0]["content"]
    assert ns["env"].get_metrics() == {"steps": 1, "env_faults": 0, "infra_failures": 0.0, "success": 0.0}


@pytest.mark.trainers
def test_verl_snippet_runs_as_written(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer_helpers import require

    require("pyarrow", "to_parquet needs pyarrow")
    ns = _run(snippet("verl"), tmp_path, monkeypatch)
    import pandas as pd

    table = pd.read_parquet(tmp_path / "train.parquet")
    assert len(table) == len(ns["rows"]) > 0 and set(table["agent_name"]) == {"envscaler"}
    assert {r["env_id"] for r in table["extra_info"]} == {"library-v1", "bank-v1"}
