"""Reset and step of the original BFCL / ACEBench backends, run the way their harnesses run them
(by hand, with bench/benchmark-ports.ts; not part of `npm run bench`).

reset: the executor's first call of a task with no calls, which builds the involved instances
(class, `_load_scenario(deepcopy(initial_config))`) into its globals; step: one call string through
the executor (`eval` on the cached instance, the result rendered to text).

Usage: python ports_speed.py bfcl|acebench PLAN.json   (PLAN: [{id, involved_classes, initial_config, long_context?, calls: [call strings]}])
Prints JSON {reset_ms: [...], step_ms: [...]}.
"""
import json
import os
import sys
import time

which, plan_file = sys.argv[1], sys.argv[2]
plan = json.load(open(plan_file))
sys.stdout_real = sys.stdout
sys.stdout = open(os.devnull, "w")  # the originals print

if which == "bfcl":
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    def execute(calls, task, model):
        return execute_multi_turn_func_call(calls, task["initial_config"], task["involved_classes"], model, task["id"], long_context=task.get("long_context", False))
else:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python-client", "tests"))
    import acebench_oracle

    utils, _, _, _ = acebench_oracle.load(os.environ["ACEBENCH_DIR"])

    def execute(calls, task, model):
        return utils["multi_step"].execute_agent_func_call(calls, task["initial_config"], task["involved_classes"], model, task["id"].split("_")[-1], "en")

resets, steps = [], []
for rep in range(int(os.environ.get("REPS", "3"))):
    for task in plan:
        model = f"bench{rep}"
        t = time.perf_counter()
        execute([], task, model)
        resets.append((time.perf_counter() - t) * 1000)
        for call in task["calls"]:
            t = time.perf_counter()
            execute([call], task, model)
            steps.append((time.perf_counter() - t) * 1000)
print(json.dumps({"reset_ms": resets, "step_ms": steps}), file=sys.stdout_real)
