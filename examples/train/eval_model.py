"""Stage 5: evaluate a model on the held-out envs (or any scenarios) with the Python agent loop.

    python examples/train/eval_model.py --run runs/recipe --model runs/recipe/models/grpo --name grpo [--trials 2 --per-env 3]

The model runs in this process (transformers, CPU) as an ``envscaler.Agent`` policy
(``recipe_common.BatchedPolicy``: chat template with the tools in, raw text out; the env parses
```json fences and ``<tool_call>`` tags); ``envscaler.Agent`` plays each scenario ``--trials`` times
(trial t with seed t) on a bridge serving only the evaluated envs, ``--concurrency`` episodes at a
time, their model calls generated as one batch. The same settings for every model: compare runs
only when their ``settings`` match.

For the hackability check every (scenario, seed) is also scored untouched (reset, then finish:
which checks pass on the state the agent was given), and each episode keeps its state hash at the
start and the end.

Writes RUN/eval/NAME/episodes.jsonl (one row per episode), RUN/eval/NAME/results.json (mean
reward and spread, success rate, pass^k, per env; settings; wall time) and the bridge's records
in RUN/eval/NAME/trajectories/. ``--envs-dir`` and ``--scenarios`` evaluate other bundles (the
tau-bench smoke run: taubench_smoke.py).
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recipe_common import IDLE_TIMEOUT, BatchedPolicy, bundle_dirs, load_model, load_split, log, summarize, write_json, write_jsonl


def tracked_env_class() -> type:
    from envscaler import AsyncEnvScalerEnv

    class TrackedEnv(AsyncEnvScalerEnv):  # type: ignore[misc]
        """Keeps the state hash at the reset and after the last step (the hackability check's 'did it
        change anything'), and every tool call the bridge ran, as its step infos report them: in fc
        mode with a text policy the calls are fenced JSON inside the assistant text, so the message
        list has no structured ``tool_calls`` to read them from."""

        start_hash: str | None = None
        end_hash: str | None = None

        async def reset(self, **kw: Any) -> Any:
            obs, info = await super().reset(**kw)
            self.start_hash = self.end_hash = info.get("state_hash")
            self.calls: list[dict[str, Any]] = []
            return obs, info

        async def step(self, action: Any) -> Any:
            out = await super().step(action)
            self.end_hash = out[4].get("state_hash", self.end_hash)
            self.calls.extend(calls_of(out[4]))
            return out

        async def finish(self) -> Any:
            out = await super().finish()
            self.end_hash = out[4].get("state_hash", self.end_hash)
            return out

    return TrackedEnv


def passed_checks(reward_info: dict[str, Any] | None) -> list[int]:
    return [int(c["index"]) for c in (reward_info or {}).get("checks") or [] if c.get("passed")]


def calls_of(info: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls one step ran (or refused: those carry ``error``), from its info."""
    return [{"name": c.get("name"), "arguments": c.get("arguments"), **({"error": c["error"]} if c.get("error") else {})} for c in info.get("tool_calls") or []]


async def play(endpoints: list[str], policy: Any, plan: list[tuple[str, str, int]], concurrency: int, max_steps: int) -> list[dict[str, Any]]:
    from envscaler import Agent, AsyncBridgeClient

    env_cls = tracked_env_class()
    clients = [AsyncBridgeClient(e, timeout=600) for e in endpoints]
    agent = Agent(policy, mode="fc", max_steps=max_steps)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def untouched(client: Any, sid: str, seed: int) -> dict[str, Any]:
        env = env_cls(client=client)
        try:
            await env.reset(seed=seed, options={"scenario_id": sid})
            _, reward, _, _, info = await env.finish()
            return {"reward": float(reward), "passed": passed_checks(info.get("reward_info"))}
        finally:
            await env.close()

    async def one(i: int, env_id: str, sid: str, seed: int) -> dict[str, Any]:
        client = clients[i % len(clients)]
        base = await untouched(client, sid, seed)
        async with gate:
            env = env_cls(client=client)
            t = time.monotonic()
            try:
                r = await agent.run(env, sid, seed=seed)
            finally:
                await env.close()
        info = r.reward_info or {}
        return {
            "env_id": env_id,
            "scenario_id": sid,
            "seed": seed,
            "reward": r.reward,
            "steps": r.steps,
            "end_reason": r.end_reason,
            "failures": sorted({f["kind"] for f in r.failures}),
            "tool_calls": env.calls,
            "final_text": next((str(m.get("content") or "") for m in reversed(r.messages) if m.get("role") == "assistant"), ""),
            "checks_total": info.get("total"),
            "passed": passed_checks(info),
            "start_hash": env.start_hash,
            "end_hash": env.end_hash,
            "changed_state": env.start_hash != env.end_hash,
            "untouched": base,
            "seconds": time.monotonic() - t,
            "messages": r.messages,
        }

    try:
        return list(await asyncio.gather(*(one(i, e, s, seed) for i, (e, s, seed) in enumerate(plan))))
    finally:
        for c in clients:
            await c.close()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--model", required=True, help="a Hugging Face folder or a recipe model folder (RUN/models/sft, RUN/models/grpo)")
    ap.add_argument("--name", required=True, help="the run's name under RUN/eval/ (base, sft, grpo)")
    ap.add_argument("--envs", nargs="*", default=None, help="env ids (default: the split's held-out envs)")
    ap.add_argument("--envs-dir", type=Path, default=None, help="a folder of bundles to serve (default: the split's)")
    ap.add_argument("--scenarios", nargs="*", default=None, help="scenario ids or globs (default: the task scenarios of --envs)")
    ap.add_argument("--per-env", type=int, default=0, help="only the first N task scenarios of each env (0: all)")
    ap.add_argument("--trials", type=int, default=2, help="seeds 0..N-1 per scenario (pass^k for k <= N)")
    ap.add_argument("--max-steps", type=int, default=8, help="agent steps per episode")
    ap.add_argument("--max-new-tokens", type=int, default=128, help="tokens per model turn")
    ap.add_argument("--temperature", type=float, default=0.7, help="0: greedy")
    ap.add_argument("--concurrency", type=int, default=4, help="episodes in flight; their model calls are batched")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0, help="torch's sampling seed")
    args = ap.parse_args(argv)

    import torch

    import envscaler

    t0 = time.monotonic()
    out = args.run / "eval" / args.name
    shutil.rmtree(out / "trajectories", ignore_errors=True)
    split = load_split(args.run)
    envs_dirs = [args.envs_dir] if args.envs_dir else split["envs_dirs"]
    env_ids = args.envs or split["held_out"]
    with envscaler.launch(envs=bundle_dirs(env_ids, envs_dirs), record_dir=out / "trajectories", extra_args=IDLE_TIMEOUT) as bridge:
        listed = envscaler.BridgeClient(bridge.endpoints[0]).list_scenarios()
        if args.scenarios:
            chosen = [s for s in listed if any(s["scenario_id"] == p or fnmatch.fnmatchcase(s["scenario_id"], p) for p in args.scenarios)]
        else:
            chosen = [s for s in listed if s.get("mode") != "conversation"]
        if args.per_env:  # the first N of each env, in the bridge's order
            by_env: dict[str, list[dict[str, Any]]] = {}
            for s in chosen:
                by_env.setdefault(s["env_id"], []).append(s)
            chosen = [s for group in by_env.values() for s in group[: args.per_env]]
        if not chosen:
            raise SystemExit(f"no scenario to evaluate on {env_ids}")
        plan = [(s["env_id"], s["scenario_id"], seed) for s in chosen for seed in range(args.trials)]
        torch.manual_seed(args.seed)
        model, tok = load_model(args.model, args.threads)
        policy = BatchedPolicy(model, tok, max_new_tokens=args.max_new_tokens, temperature=args.temperature, batch=args.concurrency)
        log(f"eval {args.name}: {len(plan)} episodes ({len(chosen)} scenarios x {args.trials} seeds) on {env_ids}")
        t_play = time.monotonic()
        episodes = asyncio.run(play(bridge.endpoints, policy, plan, args.concurrency, args.max_steps))
        play_s = time.monotonic() - t_play
    summary = summarize(episodes)
    results = {
        "name": args.name,
        "model": str(args.model),
        **summary,
        "settings": {k: v for k, v in vars(args).items() if k not in ("run", "name", "model", "threads")} | {"envs": env_ids, "scenarios_played": [s["scenario_id"] for s in chosen]},
        "play_seconds": play_s,
        "wall_seconds": time.monotonic() - t0,
        "model_calls": policy.calls,
        "generated_tokens": policy.generated_tokens,
        "generate_seconds": policy.generate_seconds,
    }
    write_jsonl(out / "episodes.jsonl", episodes)
    write_json(out / "results.json", results)
    t = summary["totals"]
    log(f"eval {args.name}: mean reward {t['mean_reward']:.3f} (sd {t['reward_sd']:.3f}), success {t['success_rate']:.2f}, pass^k {t['pass_k']}, {play_s:.0f} s")
    return results


if __name__ == "__main__":
    main()
