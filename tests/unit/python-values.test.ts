import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { checkBundle } from "../../bridge/tools/check/check-bundle.js";
import { EnvSession } from "../../bridge/core/episode/env-session.js";
import { bundleStateBase } from "../../bridge/core/state/bundle-state.js";
import { StateBase, StateView } from "../../bridge/core/state/state-base.js";
import { loadBundle } from "../../envs/format/load-bundle.js";
import { fileSandboxHost } from "../helpers.js";

/** This file's episodes' and sessions' sandboxes (disposed after its tests). */
const sandboxes = fileSandboxHost();

// The Py layer as the guest gets it (an expression), here evaluated in Node.
interface PyLayer {
  parse(text: string): unknown;
  dumps(v: unknown): string;
  observation(v: unknown): string;
  dict(entries?: [string, unknown][]): Record<string, unknown>;
  copy(v: unknown): unknown;
  float(x: number): unknown;
  isFloat(v: unknown): boolean;
  num(v: unknown): unknown;
}
const PY_SOURCE = readFileSync(join(import.meta.dirname, "..", "..", "bridge", "core", "sandbox", "python-values.js"), "utf8");
// eslint-disable-next-line @typescript-eslint/no-implied-eval -- the sandbox's own source, evaluated as the sandbox's prelude evaluates it
const Py = new Function(`return (\n${PY_SOURCE}\n);`)() as PyLayer;

// JSON texts whose json.loads -> json.dumps round trip exercises every rule of the python format:
// integer-like keys out of JS order (at every depth, including "0", a 10-digit id under 2**32-1 and
// one over it), integral floats (46.0, -0.0, 1e3, 1E+16), float repr switching to exponent form,
// ensure_ascii (é, a non-BMP character as a surrogate pair, DEL, control characters, escapes),
// empty containers, and keys that start with the layer's internal mark.
const SAMPLES = [
  '{"9523456873": {"variants": {"4294967295": 1, "1151293680": 2, "0": 3, "42": 4.0, "x": [46.0, -0.0, 1e3, 1E+16, 0.1]}}, "12": null}',
  '{"b": 1, "a": [1.5, 1e-05, 0.0001, 123456789012345680.0, 1e22, 5e-324, 1.7976931348623157e308]}',
  '{"s": "caf\\u00e9 \\ud83d\\ude00 \\u007f \\u0001 \\t\\n\\r\\b\\f \\" \\\\ / é 😀", "k\\u00e9y": true, "3": false}',
  '{"e": {}, "l": [], "z": 0, "neg": -7, "big": 9007199254740991, "f": -1.5e-10}',
  '{"\\u0000": 1, "\\u00001": 2, "7": {"\\u0000": 3.0}, "__proto__": {"1": 1, "0": 0}}',
  '[{"2": 1, "1": 2}, 3.0, "x", [[]]]',
  '{"plain": {"b": [1, 2.5, "x y"], "n": -3}, "c": "2024-05-15T15:00:00"}',
];

const python = (() => {
  try {
    execFileSync("python3", ["-c", "import json"]);
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(!python)("Py.dumps(Py.parse(text)) is Python's json.dumps(json.loads(text)) (oracle: python3's json module)", () => {
  test("every sample, byte for byte", () => {
    // the oracle: CPython's own json module with default arguments
    const oracle = JSON.parse(
      execFileSync("python3", ["-c", "import json,sys\nprint(json.dumps([json.dumps(json.loads(t)) for t in json.load(sys.stdin)]))"], { input: JSON.stringify(SAMPLES), encoding: "utf8" }),
    ) as string[];
    expect(SAMPLES.map((t) => Py.dumps(Py.parse(t)))).toEqual(oracle);
  });
});

describe("the Py layer", () => {
  test("a string result is the observation itself; anything else is json.dumps", () => {
    expect(Py.observation("Error: product not found")).toBe("Error: product not found");
    expect(Py.observation('yusuf_rossi_9620 "quoted" é')).toBe('yusuf_rossi_9620 "quoted" é');
    expect(Py.observation({ a: [1, "é"] })).toBe('{"a": [1, "\\u00e9"]}');
    expect(Py.observation(null)).toBe("null");
    // json.dumps(float("nan")) etc. (allow_nan=True is the default)
    expect(Py.observation([NaN, Infinity, -Infinity])).toBe("[NaN, Infinity, -Infinity]");
  });

  test("ordered dicts keep insertion order through writes, deletes, copies and JSON.stringify", () => {
    const d = Py.dict([["5", 1], ["x", 2], ["1", 3]]);
    d["0"] = 4;
    delete d["x"];
    d["x"] = 5;
    expect(Object.keys(d)).toEqual(["5", "1", "0", "x"]);
    expect(JSON.stringify(d)).toBe('{"5":1,"1":3,"0":4,"x":5}');
    const c = Py.copy({ outer: d }) as { outer: Record<string, unknown> };
    expect(Object.keys(c.outer)).toEqual(["5", "1", "0", "x"]);
    c.outer["2"] = 0;
    expect(Object.keys(d)).toEqual(["5", "1", "0", "x"]); // a copy, not a view
    const proto = Py.copy(JSON.parse('{"__proto__": {"1": 1}, "b": 2}')) as object;
    expect(Object.keys(proto)).toEqual(["__proto__", "b"]); // a key, as in a Python dict
    expect(Object.getPrototypeOf(proto)).toBe(Object.prototype);
  });

  test("float boxes: arithmetic and JSON see the number, dumps sees a float", () => {
    const f = Py.float(46) as number;
    expect(Py.isFloat(f)).toBe(true);
    expect(Py.isFloat(46)).toBe(false);
    expect(Py.isFloat(46.5)).toBe(true);
    expect(f + 1).toBe(47);
    expect(f < 47).toBe(true);
    expect(JSON.stringify({ f })).toBe('{"f":46}');
    expect(Py.dumps([f, 46, Py.float(-0), Py.float(1e16)])).toBe("[46.0, 46, -0.0, 1e+16]");
    expect(Py.num(f)).toBe(46);
  });
});

// A python-format bundle run in the sandbox: the state file's order and floats reach the tool code
// and the observation; the same bundle as "json" keeps today's JSON observations; state hashes
// do not depend on the format.
const ENV_SOURCE = `class Shop {
  show({ id }) { return this.items[id] ?? "Error: no item"; }
  name({ id }) { return this.items[id]?.name ?? "Error: no item"; }
  add_variant({ id, vid }) { if (!this.items[id]) return "Error: no item"; this.items[id].variants[vid] = { price: Py ? Py.float(10) : 10 }; return this.items[id]; }
  drop_variant({ id, vid }) { if (!this.items[id]) return "Error: no item"; delete this.items[id].variants[vid]; return this.items[id]; }
  list() { return Object.keys(this.items); }
  copy({ id }) { return this.items[id] ? Py.copy(this.items[id]) : "Error: no item"; }
}
var Py = typeof Py === "undefined" ? null : Py;`;

function shopBundle(format: "json" | "python"): string {
  const dir = mkdtempSync(join(tmpdir(), "envscaler-py-"));
  const tools = ["show", "name", "add_variant", "drop_variant", "list", "copy"].map((name) => ({
    type: "function",
    function: { name, description: name, parameters: { type: "object", properties: {}, additionalProperties: true } },
  }));
  const manifest = { format: "envscaler.env/v1", id: "shop-v1", name: "shop", introduction: "shop", class_name: "Shop", tools, default_state_file: "state.json", observation_format: format };
  writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifest));
  writeFileSync(join(dir, "env.js"), ENV_SOURCE.replace("var Py = typeof Py === \"undefined\" ? null : Py;", format === "json" ? "var Py = null;" : ""));
  // ids and variant ids in an order JS would change; 46.0 and 12.0 are floats to Python
  writeFileSync(
    join(dir, "state.json"),
    '{"items": {"9000000001": {"name": "Caf\\u00e9", "variants": {"3000000000": {"price": 46.0}, "1151293680": {"price": 12.5}}}, "42": {"name": "b", "variants": {}}, "7": {"name": "c", "variants": {"2": {"price": 12.0}, "1": {"price": 1}}}}}',
  );
  return dir;
}

describe("observation_format in the sandbox", () => {
  test("python: verbatim strings, json.dumps text, the file's dict order and floats, order kept through writes", async () => {
    const bundle = loadBundle(shopBundle("python"));
    using s = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 1, sandboxes });
    const text = (name: string, args: Record<string, unknown> = {}) => {
      const out = s.call(name, args);
      if (out.kind !== "result") throw new Error(JSON.stringify(out.error));
      return out.text;
    };
    expect(text("name", { id: "9000000001" })).toBe("Café");
    expect(text("list")).toBe('["9000000001", "42", "7"]');
    expect(text("show", { id: "9000000001" })).toBe('{"name": "Caf\\u00e9", "variants": {"3000000000": {"price": 46.0}, "1151293680": {"price": 12.5}}}');
    expect(text("show", { id: "7" })).toBe('{"name": "c", "variants": {"2": {"price": 12.0}, "1": {"price": 1}}}');
    // records only read are not changes: the host keeps them in the guest's form (file order, 12.0 as 12)
    expect(s.tracker.view.records.get("items")?.size ?? 0).toBe(0);
    expect(text("add_variant", { id: "7", vid: "0" })).toBe('{"name": "c", "variants": {"2": {"price": 12.0}, "1": {"price": 1}, "0": {"price": 10.0}}}');
    expect(text("drop_variant", { id: "7", vid: "2" })).toBe('{"name": "c", "variants": {"1": {"price": 1}, "0": {"price": 10.0}}}');
    expect(text("copy", { id: "7" })).toBe('{"name": "c", "variants": {"1": {"price": 1}, "0": {"price": 10.0}}}');
    // the host's copy of the state is plain JSON values, as for any env
    expect(JSON.parse(s.stateJson()).items["7"]).toEqual({ name: "c", variants: { "1": { price: 1 }, "0": { price: 10 } } });
  });

  test("json: results stay JSON.stringify text; the state hash is the same whichever the format", async () => {
    const json = loadBundle(shopBundle("json"));
    const py = loadBundle(shopBundle("python"));
    using a = await EnvSession.open(json, bundleStateBase(json), { seed: 1, sandboxes });
    using b = await EnvSession.open(py, bundleStateBase(py), { seed: 1, sandboxes });
    expect(a.call("name", { id: "9000000001" })).toMatchObject({ kind: "result", json: '"Café"' });
    expect(a.call("name", { id: "9000000001" })).not.toHaveProperty("text");
    expect(a.stateHash()).toBe(b.stateHash());
    a.call("drop_variant", { id: "7", vid: "2" });
    b.call("drop_variant", { id: "7", vid: "2" });
    expect(a.stateHash()).toBe(b.stateHash());
  });

  test("StateBase.fromStateText keeps the text's id order and hands the guest each record's text", () => {
    const text = '{"t": {"5": {"a": 1.0}, "x": 2, "1": [3]}, "v": [1.0]}';
    const base = StateBase.fromStateText(text);
    expect(base.ids("t")).toEqual(["5", "x", "1"]);
    expect(base.read("get", "t", "5")).toBe('{"a": 1.0}');
    expect(base.record("t", "5")).toBe('{"a":1}'); // hashes and diffs use the normalised JSON
    expect(StateBase.fromStateText('{"t": {"r": {"b": 1, "2": 3.0, "s": "\\u00e9"}}}').record("t", "r")).toBe('{"b":1,"2":3,"s":"é"}');
    expect(base.layout().values).toEqual({ v: "[1.0]" });
    expect(base.hash().hex()).toBe(StateBase.fromState(JSON.parse(text)).hash().hex());
    const over = base.withOverrides({ t: { "5": { a: 2 }, "0": { b: 1 } } });
    expect(over.ids("t")).toEqual(["5", "x", "1", "0"]);
    expect(over.read("get", "t", "5")).toBe('{"a":2}');
    expect(over.read("get", "t", "x")).toBe("2");
    // no bulk read of python texts (not JSON to splice), unchanged or changed; a JSON base answers one
    expect(base.read("all", "t", "")).toBeUndefined();
    expect(new StateView(base, new Map([["t", new Map([["x", "3"]])]])).read("all", "t", "")).toBeUndefined();
    const json = StateBase.fromState(JSON.parse(text));
    expect(JSON.parse(json.read("all", "t", "")!)).toEqual({ "5": { a: 1 }, x: 2, "1": [3] });
    expect(JSON.parse(new StateView(json, new Map([["t", new Map([["x", "3"]])]])).read("all", "t", "")!)).toEqual({ "5": { a: 1 }, x: 3, "1": [3] });
  });

  test("envscaler check runs a python env whose results are plain text", async () => {
    const dir = shopBundle("python");
    const scenario = {
      id: "shop-1",
      env_id: "shop-v1",
      task: "Drop variant 2 of item 7.",
      checks: [{ kind: "reference_state" }],
      reference_actions: [{ name: "name", arguments: { id: "7" } }, { name: "drop_variant", arguments: { id: "7", vid: "2" } }],
    };
    writeFileSync(join(dir, "scenarios.json"), JSON.stringify([scenario]));
    const report = await checkBundle(loadBundle(dir));
    expect(report.problems).toEqual([]);
  });
});
