"""Stage 2: SFT data from the train envs: each task scenario's reference solution played through
the bridge (recorded), then ``envscaler export chat`` of the records.

    python examples/train/make_sft_data.py --run runs/recipe [--seeds 2]

The reference actions are played by ``envscaler.rollout`` with a policy that answers each turn with
the next reference call (an assistant message with ``tool_calls``) and ends with the scenario's
reference reply (or the agent's ``Task Completed`` where it has none), so the records are exactly the conversations an agent would have had. Only
episodes scoring 1 are kept (``--min-reward 1``), and the system message is the rollout agent's
prompt (``--system-prompt agent``), the same opening GRPO and the evaluation give the model.

Writes RUN/sft/trajectories/ (the bridge's records) and RUN/sft/sft.jsonl: one row per episode,
``{"messages": [...], "tools": [...]}`` (OpenAI chat with tool calls: what TRL's SFTTrainer reads).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recipe_common import bundle_dirs, bundled_scenarios, envscaler_cli, load_split, log, read_jsonl, write_json


def reference_policy(actions: list[dict[str, Any]], final: Sequence[str]) -> Any:
    from envscaler.agent import TASK_DONE

    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        i = sum(m["role"] == "assistant" for m in messages)
        if i >= len(actions):
            # the scenario's reference reply when it has one (checks on the agent's last message read it)
            return "\n".join(final) if final else TASK_DONE
        a = actions[i]
        return {"role": "assistant", "content": "", "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": a["name"], "arguments": json.dumps(a["arguments"])}}]}

    return policy


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--seeds", type=int, default=2, help="each reference solution is played with seeds 0..N-1")
    args = ap.parse_args(argv)

    import envscaler

    split = load_split(args.run)
    out = args.run / "sft"
    traj = out / "trajectories"
    shutil.rmtree(traj, ignore_errors=True)
    scenarios = [s for s in bundled_scenarios(split["train"], split["envs_dirs"]) if s.get("mode", "task") == "task" and s.get("reference_actions")]
    played: list[dict[str, Any]] = []
    with envscaler.launch(envs=bundle_dirs(split["train"], split["envs_dirs"]), record_dir=traj) as bridge:
        for s in scenarios:
            results = asyncio.run(envscaler.rollout(bridge, reference_policy(s["reference_actions"], s.get("reference_messages") or []), [s["id"]], trials=args.seeds, seed=0, mode="fc"))
            played += [{"scenario_id": s["id"], "seed": r.seed, "reward": r.reward, "steps": r.steps, "end_reason": r.end_reason} for r in results]
    log(f"sft data: played {len(played)} reference episodes, {sum(p['reward'] >= 1 for p in played)} scored 1")
    printed = envscaler_cli("export", "chat", str(traj), "-o", str(out / "sft.jsonl"), "--min-reward", "1", "--system-prompt", "agent")
    rows = read_jsonl(out / "sft.jsonl")
    summary = {"episodes": played, "rows": len(rows), "export_log": printed.strip().splitlines()[-5:]}
    write_json(out / "summary.json", summary)
    log(f"sft data: {len(rows)} rows in {out / 'sft.jsonl'}")
    return summary


if __name__ == "__main__":
    main()
