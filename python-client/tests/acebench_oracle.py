"""Differential oracle for the ACEBench-Agent ports (envs/acebench): runs ACEBench's own code from
an ACEBench folder (../shared/benchmarks/acebench: the original classes, its executor
execute_agent_func_call, its call decoder, and the checker functions of eval_main.py/checker.py)
on the ground-truth milestone calls, on perturbed sequences (dropped, duplicated, swapped calls)
and on generated error-path calls, each call as a message of its own, and on the same kinds of
sequences cut into messages of several calls (each run as one batch, as the original runs an agent
message); it writes every output text, the public state of every instance after every call (or
message), and the official verdict of every sequence.

Usage: python acebench_oracle.py ACEBENCH_DIR OUT.json [--fuzz N]
Nothing of ACEBench is copied: the files are imported from the folder at run time.
"""

import argparse
import ast
import importlib.util
import io
import json
import os
import random
import sys
import types

import py_tagged  # beside this script (shared with bfcl_oracle.py)

CLASSES = [
    ("phone_platform.base_api", "phone_platform/base_api.py", "BaseApi"),
    ("phone_platform.message", "phone_platform/message.py", "MessageApi"),
    ("phone_platform.reminder", "phone_platform/reminder.py", "ReminderApi"),
    ("phone_platform.food_services", "phone_platform/food_services.py", "FoodPlatform"),
    ("travel", "travel.py", "Travel"),
]


def package(name):
    if name not in sys.modules:
        m = types.ModuleType(name)
        m.__path__ = []
        sys.modules[name] = m
    return sys.modules[name]


def load_file(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    spec.loader.exec_module(m)
    return m


def load(root):
    """Registers the original modules under the package paths they import each other by."""
    for mode in ("multi_turn", "multi_step"):
        for p in ["model_inference", f"model_inference.{mode}", f"model_inference.{mode}.scenariosen", f"model_inference.{mode}.scenariosen.phone_platform"]:
            package(p)
    for mode in ("multi_turn", "multi_step"):
        for mod, rel, _ in CLASSES:
            load_file(f"model_inference.{mode}.scenariosen.{mod}", os.path.join(root, mode, rel))
    ref = os.path.join(root, "reference")
    utils = {
        "multi_turn": load_file("model_inference.multi_turn.multi_turn_utils", os.path.join(ref, "model_inference_multi_turn_multi_turn_utils.py")),
        "multi_step": load_file("model_inference.multi_step.multi_step_utils", os.path.join(ref, "model_inference_multi_step_multi_step_utils.py")),
    }
    execution = load_file("model_inference.multi_step.execution_role_step", os.path.join(ref, "model_inference_multi_step_execution_role_step.py"))
    # the checker: agent_checker from checker.py, agent_eval/agent_eval_process from eval_main.py (its other imports are not needed)
    package("model_eval")
    sys.modules["model_eval.utils"] = types.ModuleType("model_eval.utils")
    checker = load_file("model_eval.checker", os.path.join(root, "checker.py"))
    with open(os.path.join(ref, "eval_main.py")) as f:
        tree = ast.parse(f.read())
    wanted = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("agent_eval", "agent_eval_process")]
    saved = []
    # (their score files are not written: `open` here is an in-memory sink)
    ns = {
        "agent_checker": checker.agent_checker,
        "os": os,
        "json": json,
        "open": lambda *a, **k: io.StringIO(),
        "OUTPUT_PATH": "",
        "language": "en",
        "save_score_as_json": lambda name, result, d: saved.append(result),
    }
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "eval_main.py", "exec"), ns)
    return utils, execution.EXECUTION_STEP("oracle", {}, [], "0", "en"), ns, saved


def tagged(v):
    """Mirrors PyText.tagged in envs/bfcl/py-text.js (the ports share it)."""
    return py_tagged.tagged(v, fallback="?:")


def enc(v):
    """A value as the JSON our env reads (PyText.fromJson): integral floats as {"$float": x}."""
    if isinstance(v, float) and v == int(v):
        return {"$float": v}
    if isinstance(v, (list, tuple)):
        return [enc(x) for x in v]
    if isinstance(v, dict):
        return {str(k): enc(x) for k, x in v.items()}
    return v


def view_json(v):
    """A value as the port's tracked state shows it (PyText.toJson in envs/bfcl/py-text.js), to compare states through the bridge."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v if abs(v) <= 2**53 - 1 else {"$int": str(v)}
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return {"$float": {"inf": "Infinity", "-inf": "-Infinity"}.get(str(v), "NaN")}
        return {"$float": v} if v == int(v) else v
    if isinstance(v, (list, tuple)):
        return [view_json(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return {"$set": [view_json(x) for x in v]}
    if isinstance(v, dict):
        return {k if isinstance(k, str) else repr(k): view_json(x) for k, x in v.items()}
    return str(v)


SAVED_CLASS = {"BaseApi": ["wifi", "logged_in"], "MessageApi": ["inbox"], "ReminderApi": ["reminder_list"], "FoodPlatform": ["users", "logged_in_users", "orders"], "Travel": ["users", "reservations"]}


class Run:
    """One call sequence through the original executor, one call per message (as one agent message each)."""

    counter = 0

    def __init__(self, utils, entry, mode):
        Run.counter += 1
        self.model = f"oracle{Run.counter}"
        self.utils = utils[mode]
        self.entry = entry
        self.mode = mode
        self.test_id = entry["id"].split("_")[-1]
        self.result_instance_list = []
        self.calls = []

    def instances(self):
        g = vars(self.utils)
        return {c: g.get(f"{self.model}_{self.test_id}_{c.lower()}_instance") for c in self.entry["involved_classes"]}

    def call(self, name, kwargs):
        text = f"{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
        results, inst = self.utils.execute_agent_func_call([text], self.entry["initial_config"], self.entry["involved_classes"], self.model, self.test_id, "en")
        out = results if isinstance(results, str) else results[0]
        if isinstance(inst, dict) and inst not in self.result_instance_list:
            self.result_instance_list.append(inst)
        state = {c: {"d": sorted([["s:" + k, tagged(x)] for k, x in vars(i).items()], key=lambda p: p[0])} for c, i in self.instances().items() if i is not None}
        # the saved attributes as the env's tracked state shows them (what the bridge serves)
        view = {c: {k: view_json(getattr(i, k)) for k in SAVED_CLASS[c] if hasattr(i, k)} for c, i in self.instances().items() if i is not None}
        self.calls.append({"name": name, "args": enc(kwargs), "out": out, "text": f"[{text}]", "state": state, "view": view})

    def message(self, calls):
        """Several calls as one agent message: the executor runs them as one batch, the message is one process entry."""
        texts = [f"{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})" for name, kwargs in calls]
        results, inst = self.utils.execute_agent_func_call(texts, self.entry["initial_config"], self.entry["involved_classes"], self.model, self.test_id, "en")
        if isinstance(inst, dict) and inst not in self.result_instance_list:
            self.result_instance_list.append(inst)
        state = {c: {"d": sorted([["s:" + k, tagged(x)] for k, x in vars(i).items()], key=lambda p: p[0])} for c, i in self.instances().items() if i is not None}
        view = {c: {k: view_json(getattr(i, k)) for k in SAVED_CLASS[c] if hasattr(i, k)} for c, i in self.instances().items() if i is not None}
        # outs: one text per call, or (multi-turn, a call raised) the one error text the executor returns instead
        self.calls.append({"calls": [{"name": n, "args": enc(k)} for n, k in calls], "outs": results, "text": f"[{', '.join(texts)}]", "state": state, "view": view})

    def result(self):
        out = []
        for ri in self.result_instance_list:
            for name, instance in ri.items():
                out.append({name: {k: v for k, v in instance.__dict__.items() if k in SAVED_CLASS[name]}})
        return json.loads(json.dumps(out))


def verdict(ns, saved, run, answer, category):
    saved.clear()
    model_result = [{"result": run.result(), "process": [c["text"] for c in run.calls]}]
    prompt = [{"id": run.entry["id"]}]
    _, process = ns["agent_eval"](model_result, prompt, [answer], category, "oracle")
    rows = saved[-1][1:]
    return {"valid": not rows, "error_type": rows[0]["error_type"] if rows else None, "process_accuracy": process}


def fuzz_calls(rng, entry, n, undocumented=True):
    """Error paths: wrong types, missing and extra arguments, unknown names and ids, undocumented names."""
    docs = entry["function"]
    pool = [
        "Eve",
        "Frank",
        "Grace",
        "Nobody",
        "",
        "Domino's",
        "Heytea",
        "Hema Fresh",
        "Nowhere",
        "Margherita Pizza",
        "Fresh Gift Pack",
        "password123",
        "wrong",
        "user1",
        "user2",
        "user3",
        "user9",
        "res_1",
        "res_2",
        "res_4",
        "res_9",
        "CA1234",
        "MU5678",
        "CZ4352",
        "MH2616",
        "XX0000",
        "Beijing",
        "Shanghai",
        "Nanjing",
        "Shenzhen",
        "Economy Class",
        "Business Class",
        "First Class",
        "cash",
        "bank",
        "card",
        "regular",
        "gold",
        "The airline has canceled the flight.",
        "2024-07-15 09:30",
        "To-do list",
        "milk",
    ]

    def value(schema):
        t = (schema or {}).get("type")
        r = rng.random()
        if r < 0.12:
            return rng.choice([None, 3, 2.5, 1.0, True, [], {}, "x", -1])
        if t == "integer":
            return rng.choice([1, 2, 3, 4, 6, 7, 99, 0, -1, 1.0, "3"])
        if t in ("list", "array"):
            return rng.choice(
                [
                    [{"product": rng.choice(pool), "quantity": rng.choice([1, 2, 0, -1, 1.5, True, "2"])}],
                    [{"product": "Fresh Gift Pack", "quantity": 2}],
                    [{"product": "Margherita Pizza"}],
                    "items",
                    [1],
                    [{"quantity": 1}],
                    [],
                ]
            )
        if t in ("dict", "object"):
            return rng.choice([{"user_name": "Eve", "cash_balance": 1.0}, {}, {"cash_balance": 5}, "u"])
        return rng.choice(pool)

    out = []
    for _ in range(n):
        r = rng.random()
        if undocumented and r < 0.05:
            out.append(
                (
                    rng.choice(
                        [
                            "no_such_tool",
                            "view_all_reminders",
                            "authenticate_user",
                            "process_refund",
                            "update_balance",
                            "get_baggage_allowance",
                            "calculate_baggage_fee",
                            "delete_reminder",
                            "search_orders",
                            "view_orders",
                            "get_all_message_times_with_ids",
                            "view_logged_in_users",
                        ]
                    ),
                    {},
                )
            )
            continue
        doc = rng.choice(docs)
        props = (doc.get("parameters") or {}).get("properties") or {}
        kwargs = {k: value(s) for k, s in props.items()}
        if kwargs and rng.random() < 0.15:
            kwargs.pop(rng.choice(list(kwargs)))
        if rng.random() < 0.08:
            kwargs["unexpected"] = 1
        out.append((doc["name"], kwargs))
    # undocumented public methods the executor still dispatches, with arguments
    extra = [
        ("process_refund", {"user": {"user_name": "Eve", "cash_balance": 1.0}, "amount": 2}),
        ("update_balance", {"user": {"cash_balance": 5.0, "bank_balance": 1}, "payment_method": rng.choice(["cash", "bank", "x"]), "amount": -3}),
        ("calculate_baggage_fee", {"membership_level": rng.choice(["gold", "silver", "platinum"]), "cabin_class": "Economy Class", "baggage_count": rng.choice([5, 1.0, 0, "2"])}),
        ("get_baggage_allowance", {"membership_level": "silver", "cabin_class": rng.choice(["Business Class", "x"])}),
        ("view_all_reminders", {}),
        ("delete_reminder", {"reminder_id": rng.choice([1, 2, 9])}),
        ("get_all_message_times_with_ids", {}),
        ("view_orders", {"user_name": "Eve"}),
        ("search_orders", {"keyword": rng.choice(["pizza", 3])}),
        ("view_logged_in_users", {}),
    ]
    if undocumented:
        out.extend(rng.sample(extra, 3))
    rng.shuffle(out)
    return out


# Calls to names the task's docs do not list, which ACEBench's executor still looks up on the
# involved instances: every public method of the five classes (documented for other tasks, or
# never: view_all_reminders, process_refund, ...), with fitting, missing, extra and mistyped
# arguments; names no class has; private methods; attributes that are no methods; and names the
# JavaScript port itself has (its env's helpers, Object.prototype's), which must not leak.
UNLISTED_VALUES = {
    "add_baggage": [1, 2.5],
    "amount": [2, -3, 10.5],
    "baggage_count": [1, 5, 1.0],
    "cabin": ["Economy Class", "Business Class"],
    "cabin_class": ["Economy Class", "Business Class", "x"],
    "description": ["d"],
    "destination": ["Beijing", "Nowhere"],
    "destination_city": ["Shenzhen"],
    "flight": [{"flight_no": "CA1234", "prices": {"Economy Class": 1000, "Business Class": 3000.0}}, {"flight_no": "X"}],
    "flight_no": ["CA1234", "XX0000"],
    "items": [[{"product": "Fresh Gift Pack", "quantity": 1}], []],
    "keyword": ["TEA", "pizza", "zzz"],
    "membership_level": ["gold", "silver", "regular"],
    "merchant_name": ["Heytea", "Hema Fresh", "Nowhere"],
    "message": ["hello"],
    "message_id": [1, 3, 99],
    "new_cabin": ["Business Class", "First Class"],
    "new_flight_no": ["CZ4321"],
    "new_payment_method": ["cash"],
    "old_cabin": ["Economy Class"],
    "origin": ["Beijing"],
    "origin_city": ["Beijing"],
    "password": ["password123", "wrong"],
    "payment_method": ["cash", "bank", "x"],
    "reason": ["change of plans"],
    "receiver_name": ["Frank", "Nobody"],
    "reminder_id": [1, 2, 9],
    "reservation_id": ["res_1", "res_9"],
    "sender_name": ["Eve", "Grace"],
    "time": ["2024-07-15 09:30"],
    "title": ["To-do list", "nothing"],
    "transfer_city": ["Nanjing"],
    "user": [{"user_name": "Eve", "cash_balance": 1.0, "bank_balance": 5}, {"cash_balance": 5.0}],
    "user_id": ["user1", "user9"],
    "user_name": ["Eve", "Grace", "Nobody"],
    "username": ["Eve", "Jack"],
}
UNLISTED_UNKNOWN = [
    ("no_such_tool", {}),
    ("search_reminders", {"keyword": "x"}),
    ("Turn_On_Wifi", {}),
    ("_check_capacity", {}),
    ("_load_scenario", {"scenario": {}}),
    ("__init__", {}),
    ("__class__", {}),
    ("wifi", {}),
    ("inbox", {}),
    ("reminder_list", {"x": 1}),
    # the port's own names: its env's helpers and what every JavaScript object has
    ("_call", {"name": "turn_on_wifi", "args": {}}),
    ("_unlisted_call", {"name": "turn_on_wifi", "arguments": {}}),
    ("_refresh", {}),
    ("state", {}),
    ("acebench", {}),
    ("constructor", {}),
    ("toString", {}),
    ("hasOwnProperty", {"v": "wifi"}),
    ("__proto__", {}),
    ("valueOf", {}),
]


def public_methods():
    """Every public method of the five original classes, with its parameters (name, required)."""
    import inspect

    out = {}
    for mod, _, cls in CLASSES:
        c = getattr(sys.modules[f"model_inference.multi_step.scenariosen.{mod}"], cls)
        for name, f in inspect.getmembers(c, inspect.isfunction):
            if not name.startswith("_"):
                out[name] = [(p.name, p.default is inspect.Parameter.empty) for p in list(inspect.signature(f).parameters.values())[1:]]
    return out


def unlisted_calls(rng, entry, methods):
    """One call per public method the task's docs do not list (fitting, missing, extra or mistyped arguments), and the names above."""
    docs = {f["name"] for f in entry["function"]}
    out = []
    for name, params in sorted(methods.items()):
        if name in docs:
            continue
        kwargs = {p: rng.choice(UNLISTED_VALUES[p]) for p, required in params if required or rng.random() < 0.5}
        kind = rng.choice(["fit", "fit", "missing", "extra", "type"])
        if kind == "missing" and kwargs:
            kwargs.pop(rng.choice(list(kwargs)))
        elif kind == "extra":
            kwargs["unexpected"] = 1
        elif kind == "type" and kwargs:
            kwargs[rng.choice(list(kwargs))] = rng.choice([None, 3, 2.5, [], {}, "x", True])
        out.append((name, kwargs))
    out.extend(UNLISTED_UNKNOWN)
    rng.shuffle(out)
    return out


def parses(decoder, stone):
    try:
        decoder.ast_parse("[" + stone.strip().strip("[]") + "]")
        return True
    except Exception:
        return False


UNKNOWN_NAMES = ["no_such_tool", "search_reminders", "_check_capacity", "wifi", "get_flight_details", "turn_on_wifi"]


def messages_of(rng, calls):
    """A call sequence cut into messages of 1-4 calls, with calls to names no involved class may have inserted (a third of the messages)."""
    out, i = [], 0
    while i < len(calls):
        size = rng.randint(1, 4)
        msg = list(calls[i : i + size])
        i += size
        if rng.random() < 0.35:
            # the task's classes may have the name (then it runs): both ways are fine
            msg.insert(rng.randint(0, len(msg)), (rng.choice(UNKNOWN_NAMES), {}))
        out.append(msg)
    return out


def keyword_decoding(decoder):
    """Which Python keywords, as a call's name, the original's decoder cannot read ([class(x=1)] is a SyntaxError)."""
    import keyword

    failed = []
    for kw in keyword.kwlist:
        try:
            decoder.decode_function_list(f"[{kw}(x=1)]")
        except SyntaxError:
            failed.append(kw)
    return failed


# Hand-written sequences through the branches random calls rarely reach (refunds, cabin and
# baggage changes, capacity limits, messages without a time, float and bool arguments).
TRAVEL_PATHS = [
    ("get_flight_details", {}),
    ("get_flight_details", {"origin": "Nowhere"}),
    ("get_flight_details", {"destination": "Beijing"}),
    ("get_user_details", {"user_id": "user1", "password": "password123"}),
    ("get_user_details", {"user_id": "user1", "password": "x"}),
    ("get_reservation_details", {"user_id": "user2"}),
    ("get_reservation_details", {}),
    ("get_reservation_details", {"reservation_id": "res_1", "user_id": "user2"}),
    ("find_transfer_flights", {"origin_city": "Beijing", "transfer_city": "Nanjing", "destination_city": "Shenzhen"}),
    ("reserve_flight", {"user_id": "user1", "password": "password123", "flight_no": "CA1234", "cabin": "Economy Class", "payment_method": "bank", "baggage_count": 1.0}),
    ("reserve_flight", {"user_id": "user1", "password": "password123", "flight_no": "CZ1765", "cabin": "Business Class", "payment_method": "cash", "baggage_count": 5}),
    ("reserve_flight", {"user_id": "user3", "password": "password789", "flight_no": "MU1566", "cabin": "Business Class", "payment_method": "cash", "baggage_count": 3}),
    ("reserve_flight", {"user_id": "user1", "password": "password123", "flight_no": "CA1234", "cabin": "Economy Class", "payment_method": "card", "baggage_count": 1}),
    ("reserve_flight", {"user_id": "user2", "password": "nope", "flight_no": "CA1234", "cabin": "Economy Class", "payment_method": "bank", "baggage_count": 1}),
    ("reserve_flight", {"user_id": "user1", "password": "password123", "flight_no": "XX0000", "cabin": "Economy Class", "payment_method": "bank", "baggage_count": 1}),
    ("reserve_flight", {"user_id": "user1", "password": "password123", "flight_no": "CA1234", "cabin": "Economy Class", "payment_method": "bank", "baggage_count": True}),
    ("modify_flight", {"user_id": "user1", "reservation_id": "res_1", "new_cabin": "Business Class"}),
    ("modify_flight", {"user_id": "user1", "reservation_id": "res_2", "new_cabin": "Economy Class", "new_payment_method": "cash"}),
    ("modify_flight", {"user_id": "user1", "reservation_id": "res_2", "new_flight_no": "CZ4321"}),
    ("modify_flight", {"user_id": "user1", "reservation_id": "res_2", "new_flight_no": "CA1234"}),
    ("modify_flight", {"user_id": "user1", "reservation_id": "res_1", "add_baggage": 3}),
    ("modify_flight", {"user_id": "user1", "reservation_id": "res_1", "add_baggage": 2.5, "new_payment_method": "cash"}),
    ("modify_flight", {"user_id": "user1", "reservation_id": "res_1", "add_baggage": "2"}),
    ("modify_flight", {"user_id": "user1", "reservation_id": "res_1", "new_cabin": "First Class", "new_payment_method": "wire"}),
    ("modify_flight", {"user_id": "user2", "reservation_id": "res_4", "add_baggage": 1}),
    ("modify_flight", {"user_id": "user1", "reservation_id": "res_1"}),
    ("modify_flight", {"user_id": "user3", "reservation_id": "res_1", "new_cabin": "Business Class"}),
    ("cancel_reservation", {"user_id": "user1", "reservation_id": "res_1", "reason": "The airline has canceled the flight."}),
    ("cancel_reservation", {"user_id": "user1", "reservation_id": "res_2", "reason": "change of plans"}),
    ("cancel_reservation", {"user_id": "user2", "reservation_id": "res_4", "reason": "x"}),
    ("cancel_reservation", {"user_id": "user1", "reservation_id": "res_3", "reason": "x"}),
    ("cancel_reservation", {"user_id": "user9", "reservation_id": "res_1", "reason": "x"}),
    ("cancel_reservation", {"user_id": ["user1"], "reservation_id": "res_1", "reason": "x"}),
    ("get_user_details", {"user_id": "user1", "password": "password123"}),
    ("get_reservation_details", {"user_id": "user1"}),
]
PHONE_PATHS = [
    ("check_balance", {"user_name": "Nobody"}),
    ("get_products", {"merchant_name": "Nowhere"}),
    ("get_products", {"merchant_name": "Hema Fresh"}),
    ("login_food_platform", {"username": "Eve", "password": "password123"}),
    ("turn_on_wifi", {}),
    ("login_device", {}),
    ("login_food_platform", {"username": "Eve", "password": "bad"}),
    ("login_food_platform", {"username": "Nobody", "password": "x"}),
    ("login_food_platform", {"username": "Eve", "password": "password123"}),
    ("login_food_platform", {"username": "Eve", "password": "password123"}),
    ("login_food_platform", {"username": "Jack", "password": "password654"}),
    ("login_food_platform", {"username": ["Eve"], "password": "x"}),
    ("add_food_delivery_order", {"username": "Eve", "merchant_name": "Hema Fresh", "items": [{"product": "Fresh Gift Pack", "quantity": 2}, {"product": "Organic Vegetable Pack"}]}),
    ("add_food_delivery_order", {"username": "Eve", "merchant_name": "Heytea", "items": [{"product": "Cheese Milk Tea", "quantity": True}]}),
    ("add_food_delivery_order", {"username": "Eve", "merchant_name": "Heytea", "items": [{"product": "Cheese Milk Tea", "quantity": 0}]}),
    ("add_food_delivery_order", {"username": "Eve", "merchant_name": "Heytea", "items": [{"product": "Cheese Milk Tea", "quantity": 1.5}]}),
    ("add_food_delivery_order", {"username": "Eve", "merchant_name": "Heytea", "items": [{"product": "Cheese Milk Tea", "quantity": "2"}]}),
    ("add_food_delivery_order", {"username": "Eve", "merchant_name": "Heytea", "items": [{"product": "Bubble Tea"}]}),
    ("add_food_delivery_order", {"username": "Eve", "merchant_name": "Heytea", "items": {"product": "Cheese Milk Tea"}}),
    ("add_food_delivery_order", {"username": "Eve", "merchant_name": "Heytea", "items": None}),
    ("add_food_delivery_order", {"username": "Jack", "merchant_name": "Jiutian BBQ", "items": [{"product": "Korean Grilled Beef", "quantity": 1}]}),
    ("add_food_delivery_order", {"username": "Jack", "merchant_name": "Nowhere", "items": []}),
    ("add_food_delivery_order", {"username": "Jack", "merchant_name": "Heytea", "items": []}),
    ("check_balance", {"user_name": "Eve"}),
    ("check_balance", {"user_name": "Jack"}),
    ("view_orders", {"user_name": "Eve"}),
    ("view_orders", {"user_name": "Grace"}),
    ("search_orders", {"keyword": "TEA"}),
    ("search_orders", {"keyword": "zzz"}),
    ("view_logged_in_users", {}),
    ("view_messages_between_users", {"sender_name": "Eve", "receiver_name": "Frank"}),
    ("view_messages_between_users", {"sender_name": "Eve", "receiver_name": "Jack"}),
    ("view_messages_between_users", {"sender_name": "Nobody", "receiver_name": "Jack"}),
    ("view_messages_between_users", {"sender_name": "Eve", "receiver_name": "Nobody"}),
    ("search_messages", {"user_name": "Grace", "keyword": "MILK"}),
    ("search_messages", {"user_name": "Grace", "keyword": "zzz"}),
    ("search_messages", {"user_name": "Grace", "keyword": 3}),
    ("search_messages", {"user_name": "Nobody", "keyword": "x"}),
    ("send_message", {"sender_name": "Eve", "receiver_name": "Frank", "message": "full?"}),
    ("get_earliest_message_id", {}),
    ("delete_message", {"message_id": 3.0}),
    ("delete_message", {"message_id": "4"}),
    ("delete_message", {"message_id": 99}),
    ("send_message", {"sender_name": "Eve", "receiver_name": "Nobody", "message": "x"}),
    ("send_message", {"sender_name": "Eve", "receiver_name": "Frank", "message": 'caf\u00e9 "quoted"\n'}),
    ("get_latest_message_id", {}),
    ("get_earliest_message_id", {}),
    ("get_all_message_times_with_ids", {}),
    ("search_messages", {"user_name": "Eve", "keyword": "CAF"}),
    ("view_reminder_by_title", {"title": "To-do list"}),
    ("view_reminder_by_title", {"title": "nothing"}),
    ("add_reminder", {"title": "a", "description": "b", "time": "2024-07-15 09:30"}),
    ("add_reminder", {"title": "c", "description": "d", "time": 5}),
    ("add_reminder", {"title": "e", "description": "f", "time": None}),
    ("add_reminder", {"title": "g", "description": "h", "time": "x"}),
    ("delete_reminder", {"reminder_id": 1}),
    ("delete_reminder", {"reminder_id": 99}),
    ("add_reminder", {"title": "i", "description": "j", "time": "y"}),
    ("view_all_reminders", {}),
    ("view_reminder_by_title", {"title": "c"}),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("out")
    ap.add_argument("--fuzz", type=int, default=20)
    a = ap.parse_args()
    utils, decoder, ns, saved = load(a.root)
    # the originals print (refunds, unknown users); keep stdout clean
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 -- stays open until the process exits
    rng = random.Random(20250824)
    brng = random.Random(17)  # the batches' own stream, so the other sequences stay as they were
    tasks = []
    stats = {"milestones": 0, "unparseable": 0}
    methods = public_methods()
    keywords = keyword_decoding(decoder)
    for category in ("multi_step", "multi_turn"):
        with open(os.path.join(a.root, "data", f"data_agent_{category}.json")) as f:
            entries = [json.loads(line) for line in f if line.strip()]
        with open(os.path.join(a.root, "possible_answer", f"data_agent_{category}.json")) as f:
            answers = {x["id"]: x for x in (json.loads(line) for line in f if line.strip())}
        for entry in entries:
            answer = answers[entry["id"]]
            stones = answer["mile_stone"][0] if answer["mile_stone"] and isinstance(answer["mile_stone"][0], list) else answer["mile_stone"]
            gt = []
            for stone in stones:
                stats["milestones"] += 1
                try:
                    for call in decoder.ast_parse(stone.strip().strip("[]") and "[" + stone.strip().strip("[]") + "]"):
                        for name, kwargs in call.items():
                            gt.append((name, kwargs))
                except Exception:
                    stats["unparseable"] += 1
            variants = {"gt": gt, "nothing": []}
            if gt:
                i = rng.randrange(len(gt))
                variants["drop"] = gt[:i] + gt[i + 1 :]
                variants["duplicate"] = gt[: i + 1] + gt[i:]
                if len(gt) > 1:
                    j = rng.randrange(len(gt) - 1)
                    variants["swap"] = [*gt[:j], gt[j + 1], gt[j], *gt[j + 2 :]]
            fz = fuzz_calls(rng, entry, a.fuzz)
            variants["fuzz"] = fz
            variants["fuzz_docs"] = fuzz_calls(rng, entry, min(a.fuzz, 15), undocumented=False)  # fits the 20-step cap through the bridge
            variants["fuzz_then_gt"] = fz[: a.fuzz // 2] + gt
            variants["gt_then_fuzz"] = gt + fz[a.fuzz // 2 :]
            variants["paths"] = TRAVEL_PATHS if "Travel" in entry["involved_classes"] else PHONE_PATHS
            # unlisted names, in pieces that fit the 20-step cap through the bridge, and mixed into the ground truth
            un = unlisted_calls(rng, entry, methods)
            # (18 calls: a multi-turn episode also needs a step for the message that ends it; on the
            # phone platform after Wi-Fi and device login, without which most methods only refuse)
            ready = [("turn_on_wifi", {}), ("login_device", {})] if "BaseApi" in entry["involved_classes"] else []
            size = 18 - len(ready)
            for k in range(0, len(un), size):
                variants[f"unlisted_{k // size}"] = ready + un[k : k + size]
            mixed = rng.sample(un, 12) + [None] * min(len(gt), 6)
            rng.shuffle(mixed)
            rest = iter(gt[:6])
            variants["unlisted_gt"] = [c if c is not None else next(rest) for c in mixed]
            # messages of several calls, run as the original runs an agent message (one batch):
            # the ground truth grouped as its milestone messages, and sequences cut into messages of
            # 1-4 calls with names no class has put in among them (the executor's leftover result)
            batched = {"milestone_messages": [[(n, k) for call in decoder.ast_parse("[" + st.strip().strip("[]") + "]") for n, k in call.items()] for st in stones if parses(decoder, st)]}
            for kind in ("gt", "fuzz", "paths", "unlisted_gt"):
                batched[f"{kind}_messages"] = messages_of(brng, variants[kind])
            record = {"id": entry["id"], "category": category, "involved_classes": entry["involved_classes"], "initial_config": entry["initial_config"], "variants": []}
            for kind, calls in variants.items():
                # each sequence in the task's own executor, and the error texts of the other one too
                for mode in (category, "multi_turn" if category == "multi_step" else "multi_step"):
                    if mode != category and kind not in ("fuzz", "paths") and not kind.startswith("unlisted"):
                        continue
                    run = Run(utils, entry, mode)
                    for name, kwargs in calls:
                        run.call(name, kwargs)
                    record["variants"].append({"kind": kind, "mode": mode, "calls": run.calls, "verdict": verdict(ns, saved, run, answer, f"agent_{category}")})
            for kind, messages in batched.items():
                for mode in (category, "multi_turn" if category == "multi_step" else "multi_step"):
                    if mode != category and kind == "milestone_messages":
                        continue
                    run = Run(utils, entry, mode)
                    for m in messages:
                        run.message(m)
                    record["variants"].append({"kind": kind, "mode": mode, "messages": run.calls, "verdict": verdict(ns, saved, run, answer, f"agent_{category}")})
            tasks.append(record)
    with open(a.out, "w") as f:
        json.dump({"tasks": tasks, "stats": stats, "public_methods": sorted(methods), "unparseable_keywords": keywords}, f)
    single = sum(len(v["calls"]) for t in tasks for v in t["variants"] if "calls" in v)
    batched = sum(len(m["calls"]) for t in tasks for v in t["variants"] if "messages" in v for m in v["messages"])
    print(f"acebench oracle: {len(tasks)} tasks, {single} calls, {batched} more in messages, {stats}", file=sys.stderr)


if __name__ == "__main__":
    main()
