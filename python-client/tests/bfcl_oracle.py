"""The BFCL multi-turn oracle: replays call sequences through the ORIGINAL classes of the installed
`bfcl-eval` package, exactly as its harness executes a model's calls, and records what our
JavaScript ports must reproduce: every output text and, after every turn, every involved instance's
public state (type-tagged, so int/float, dict order and key types all count).

Used by test_bfcl_parity.py; also runnable by hand:
    python bfcl_oracle.py OUT.json [--limit N] [--ids ID,...] [--full-state] [--fuzz CALLS_PER_TASK]
"""

from __future__ import annotations

import ast
import copy
import decimal
import hashlib
import inspect
import json
import math
import os
import random
import sys
import zlib

import py_tagged  # beside this script (shared with acebench_oracle.py)

CATEGORIES = ["base", "miss_func", "miss_param", "long_context"]


def package_dir() -> str:
    import bfcl_eval

    return os.path.dirname(bfcl_eval.__file__)


def load_category(cat: str) -> list[tuple[dict, dict]]:
    base = os.path.join(package_dir(), "data")
    with open(os.path.join(base, f"BFCL_v4_multi_turn_{cat}.json")) as f:
        q = [json.loads(line) for line in f]
    with open(os.path.join(base, "possible_answer", f"BFCL_v4_multi_turn_{cat}.json")) as f:
        a = {e["id"]: e for e in (json.loads(line) for line in f)}
    return [(e, a[e["id"]]) for e in q]


# ----- Python values <-> the JSON our ports read (fromJson in py-text.js)


def to_json(v):
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if v is Ellipsis:
        return {"$opaque": "Ellipsis"}
    if isinstance(v, int):
        return v if abs(v) <= 2**53 else {"$int": str(v)}
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return {"$float": "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")}
        return {"$float": v} if v == int(v) else v
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    if isinstance(v, dict):
        return {str(k): to_json(x) for k, x in v.items()}
    raise TypeError(f"no JSON form for {type(v).__name__}")


def tagged(v):
    """Mirrors PyText.tagged in envs/bfcl/py-text.js, with BFCL's sets and file-system nodes."""
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.gorilla_file_system import Directory, File

    def bfcl_values(x):
        if isinstance(x, set):
            return {"set": sorted(json.dumps(tagged(y), ensure_ascii=False, separators=(",", ":")) for y in x)}
        if isinstance(x, File):
            return {"file": x.name, "content": x.content}
        if isinstance(x, Directory):
            return {"dir": x.name, "c": tagged(x.contents)}
        return None

    return py_tagged.tagged(v, bfcl_values)


def public_state(instance) -> dict:
    return {"d": [[f"s:{k}", tagged(v)] for k, v in vars(instance).items() if not k.startswith("_")]}


def canon_text(v) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


# ----- running calls the way bfcl-eval does


class Oracle:
    """One process-wide executor; `reset_process_globals` gives every task the fresh-process state
    our ports have per episode (the original leaks mpmath/Decimal precision, mutable default
    arguments and mutated module constants across tasks of one run)."""

    def __init__(self):
        import importlib

        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
        from bfcl_eval.eval_checker.multi_turn_eval.func_source_code import long_context

        self.utils = multi_turn_utils
        self.classes = {}
        for name in ["GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot", "TravelAPI", "VehicleControlAPI"]:
            self.classes[name] = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[name]), name)
        self.defaults = {(c, m): copy.deepcopy(f.__defaults__) for c, cls in self.classes.items() for m, f in vars(cls).items() if inspect.isfunction(f) and f.__defaults__}
        self.long_context = long_context
        self.lc_snapshot = {k: copy.deepcopy(v) for k, v in vars(long_context).items() if k.isupper()}
        self.run = 0

    def reset_process_globals(self):
        import mpmath

        mpmath.mp.dps = 15
        decimal.getcontext().prec = 28
        for (c, m), d in self.defaults.items():
            getattr(self.classes[c], m).__defaults__ = copy.deepcopy(d)
        for k, v in self.lc_snapshot.items():
            cur = getattr(self.long_context, k)
            if isinstance(cur, dict):
                cur.clear()
                cur.update(copy.deepcopy(v))
            elif isinstance(cur, list):
                cur[:] = copy.deepcopy(v)

    def signature(self, cls_name: str, method: str):
        return inspect.signature(getattr(self.classes[cls_name], method))

    def method_class(self, involved: list[str]) -> dict[str, str]:
        out = {}
        for c in involved:
            for m, _f in inspect.getmembers(self.classes[c], predicate=inspect.isfunction):
                if not m.startswith("_"):
                    out[m] = c
        return out

    def new_episode(self):
        self.run += 1
        self.reset_process_globals()
        return f"oracle{self.run}"

    def execute(self, calls: list[str], entry: dict, model: str, long_ctx: bool):
        return self.utils.execute_multi_turn_func_call(calls, entry["initial_config"], entry["involved_classes"], model, entry["id"], long_context=long_ctx, is_evaL_run=True)


def long_context_data() -> dict:
    """The constants of long_context.py (the padding long_context tasks add), as JSON for the ports."""
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code import long_context

    return {k: to_json(v) for k, v in vars(long_context).items() if k.isupper()}


def travel_base_costs() -> list:
    """TravelAPI.get_flight_cost's route table (a literal inside the method), read from the package."""
    import inspect as _inspect
    import textwrap

    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking import TravelAPI

    tree = ast.parse(textwrap.dedent(_inspect.getsource(TravelAPI.get_flight_cost)))
    for n in ast.walk(tree):
        if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "base_costs":
            return [[a, b, c] for (a, b), c in ast.literal_eval(n.value).items()]
    raise RuntimeError("base_costs not found in TravelAPI.get_flight_cost")


def call_to_kwargs(call: str, method_class: dict, oracle: Oracle):
    """A ground-truth call string as (name, JSON kwargs); positional arguments bound by signature."""
    node = ast.parse(call, mode="eval").body
    name = node.func.id
    kwargs = {}
    if node.args:
        params = [p for p in oracle.signature(method_class[name], name).parameters if p != "self"]
        for p, a in zip(params, node.args):
            kwargs[p] = ast.literal_eval(a)
    for k in node.keywords:
        kwargs[k.arg] = ast.literal_eval(k.value)
    return name, kwargs


def kwargs_to_call(name: str, kwargs: dict) -> str:
    """What BFCL's FC decoders build from a model's JSON arguments: name(k=repr(v), ...)."""
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"


def replay(oracle: Oracle, entry: dict, turns: list[list[tuple[str, dict]]], long_ctx: bool, full_state=False) -> dict:
    """Runs the given calls (one list per turn) and records outputs and per-turn states."""
    model = oracle.new_episode()
    out_turns = []
    for turn in turns:
        calls = [kwargs_to_call(n, kw) for n, kw in turn]
        outs, instances = oracle.execute(calls, entry, model, long_ctx)
        states = {c: public_state(i) for c, i in instances.items()}
        out_turns.append(
            {
                "calls": [{"name": n, "args": to_json(kw), "out": o} for (n, kw), o in zip(turn, outs)],
                "state_sha256": {c: hashlib.sha256(canon_text(s).encode()).hexdigest() for c, s in states.items()},
                **({"state": states} if full_state else {}),
            }
        )
    return {"turns": out_turns}


def ground_truth_turns(oracle: Oracle, entry: dict, answer: dict):
    mc = oracle.method_class(entry["involved_classes"])
    return [[call_to_kwargs(c, mc, oracle) for c in turn] for turn in answer["ground_truth"]]


# ----- error paths and perturbed trajectories (the ground truth has no error outputs)

BAD_VALUES = [7, 2.5, -3, "zz_nonexistent", None, ["zz"], {"k": "v"}, True, 0, ""]


# inputs the ports do not cover, each because the original's answer is not a port target:
#  - mpmath.log of a negative number or of a str gives an mpc / parses text (no GT or model use);
#  - (-x) ** fraction gives a Python complex;
#  - mv(d, d) / cp(d, d) on a directory make the tree cyclic.
def excluded(name: str, kwargs: dict) -> bool:
    if name == "logarithm":
        return any(isinstance(kwargs.get(k), str) or (isinstance(kwargs.get(k), (int, float)) and kwargs.get(k) < 0) for k in ("value", "base"))
    if name in ("mv", "cp") and kwargs.get("source") == kwargs.get("destination"):
        return True  # moving/copying a directory into itself makes the original's tree cyclic (its own == then recurses forever)
    if name == "power":
        b, e = kwargs.get("base"), kwargs.get("exponent")
        return isinstance(b, (int, float)) and isinstance(e, float) and b < 0
    return False


def fuzz_calls(oracle: Oracle, entry: dict, gt_turns, rng, n: int):
    """n calls to methods of the task's classes: plausible arguments (from the task's own ground
    truth where the method appears) with one perturbation each: none, a missing or an extra
    argument, a value of a wrong type or an unknown id/path/user."""
    mc = oracle.method_class(entry["involved_classes"])
    seen = {}
    for turn in gt_turns:
        for name, kw in turn:
            seen.setdefault(name, []).append(kw)
    methods = sorted(mc)
    out = []
    while len(out) < n:
        name = rng.choice(methods)
        params = [p for p in oracle.signature(mc[name], name).parameters.values() if p.name != "self"]
        base = dict(rng.choice(seen[name])) if name in seen else {p.name: (p.default if p.default is not inspect.Parameter.empty else "zz_nonexistent") for p in params}
        kind = rng.choice(["none", "missing", "extra", "wrong", "wrong", "unknown"])
        kw = copy.deepcopy(base)
        required = [p.name for p in params if p.default is inspect.Parameter.empty]
        if kind == "missing" and required:
            kw.pop(rng.choice(required), None)
        elif kind == "extra":
            kw["bogus_arg"] = 1
        elif kind in ("wrong", "unknown") and params:
            kw[rng.choice(params).name] = rng.choice(BAD_VALUES) if kind == "wrong" else "zz_nonexistent"
        if excluded(name, kw):
            continue
        out.append((name, kw))
    return out


# names a model may call that the task's tools do not list: the executor evaluates them anyway
# (its NameError for a name no involved class has, its safety list), and our env must not leak
# its own JavaScript names
UNLISTED_NAMES = ["no_such_tool", "kill", "exit", "run", "_load_scenario", "__init__", "constructor", "toString", "hasOwnProperty", "__proto__", "_call", "_unlisted_call", "_bfcl_end_turn"]


def unlisted_calls(oracle: Oracle, entry: dict, rng) -> list:
    """The names above, and two methods of classes the task does not involve, with or without arguments."""
    mc = oracle.method_class(entry["involved_classes"])
    others = sorted(m for m in oracle.method_class(list(oracle.classes)) if m not in mc and m not in UNLISTED_NAMES)
    out = [(n, rng.choice([{}, {"x": 1}])) for n in UNLISTED_NAMES]
    out += [(m, rng.choice([{}, {"path": "a"}])) for m in rng.sample(others, 2)]
    return out


def perturb(gt_turns, rng, fuzz):
    """Drops, duplicates or swaps one call per turn (at random), then mixes the fuzz calls in."""
    turns = [list(t) for t in gt_turns]
    for t in turns:
        op = rng.choice(["keep", "drop", "dup", "swap"])
        if op == "drop" and t:
            t.pop(rng.randrange(len(t)))
        elif op == "dup" and t:
            i = rng.randrange(len(t))
            t.insert(i, t[i])
        elif op == "swap" and len(t) > 1:
            i = rng.randrange(len(t) - 1)
            t[i], t[i + 1] = t[i + 1], t[i]
    for call in fuzz:
        t = turns[rng.randrange(len(turns))]
        t.insert(rng.randrange(len(t) + 1), call)
    return turns


def official_verdict(oracle: Oracle, entry: dict, answer: dict, cat: str, turns) -> dict:
    """The official checker's verdict for a model that made exactly these calls (one call per step)."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    model = oracle.new_episode()
    decoded = [[[kwargs_to_call(n, kw)] for n, kw in t] for t in turns]
    r = multi_turn_checker(decoded, answer["ground_truth"], entry, f"multi_turn_{cat}", model)
    return {"valid": r["valid"], **({"error_type": r["error_type"]} if not r["valid"] else {})}


def main(argv: list[str]) -> int:
    out = argv[0]
    limit = int(argv[argv.index("--limit") + 1]) if "--limit" in argv else None
    ids = set(argv[argv.index("--ids") + 1].split(",")) if "--ids" in argv else None
    full = "--full-state" in argv
    variants = int(argv[argv.index("--fuzz") + 1]) if "--fuzz" in argv else 0
    oracle = Oracle()
    tasks = []
    for cat in CATEGORIES:
        for entry, answer in load_category(cat)[:limit]:
            if ids and entry["id"] not in ids:
                continue
            long_ctx = "long_context" in cat
            turns = ground_truth_turns(oracle, entry, answer)
            task = {
                "id": entry["id"],
                "category": cat,
                "involved_classes": entry["involved_classes"],
                "initial_config": to_json(entry["initial_config"]),
                "long_context": long_ctx,
                **replay(oracle, entry, turns, long_ctx, full),
            }
            task["verdict"] = official_verdict(oracle, entry, answer, cat, turns)
            if variants:
                rng = random.Random(zlib.crc32(entry["id"].encode()))
                mutated = perturb(turns, rng, [])
                fuzzed = perturb(turns, rng, fuzz_calls(oracle, entry, turns, rng, variants))
                nothing = [[] for _ in turns]
                # (its own generator, so that adding it left the other variants as they were)
                urng = random.Random(zlib.crc32(("unlisted:" + entry["id"]).encode()))
                unlisted = [list(t) for t in turns]  # the ground truth intact, the names mixed in
                for call in unlisted_calls(oracle, entry, urng):
                    t = unlisted[urng.randrange(len(unlisted))]
                    t.insert(urng.randrange(len(t) + 1), call)
                # only such calls: each counts as a model call, so a turn with them is not an empty turn
                unlisted_only = [[urng.choice(unlisted_calls(oracle, entry, urng))] for _ in turns]
                task["variants"] = [
                    {"kind": kind, **replay(oracle, entry, vt, long_ctx, full), "verdict": official_verdict(oracle, entry, answer, cat, vt)}
                    for kind, vt in (("perturbed", mutated), ("fuzzed", fuzzed), ("nothing", nothing), ("unlisted", unlisted), ("unlisted_only", unlisted_only))
                ]
            tasks.append(task)
    with open(out, "w") as f:
        json.dump({"tasks": tasks, "long_context_data": long_context_data(), "travel_base_costs": travel_base_costs()}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
