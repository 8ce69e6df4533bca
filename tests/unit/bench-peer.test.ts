// The bench's OpenEnv reference rows are only fair if the Python port serves the same env logic
// and the ratios are worded so they cannot mislead; both are checked here, without OpenEnv itself
// (the bench installs that into its own venv and checks the served results again before timing).
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { Episode } from "../../bridge/core/episode/episode.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { EnvRegistry } from "../../envs/format/registry.js";
import { versus } from "../../bench/rows.js";
import { fileSandboxHost } from "../helpers.js";

/** This file's episodes' and sessions' sandboxes (disposed after its tests). */
const sandboxes = fileSandboxHost();

const ROOT = join(import.meta.dirname, "..", "..");
const hasPython = (() => {
  try {
    execFileSync("python3", ["--version"]);
    return true;
  } catch {
    return false;
  }
})();

test("ratios are words with a direction, never a fraction called faster", () => {
  expect(versus(5.2, 1, false)).toBe("5.2× slower");
  expect(versus(1, 5.2, false)).toBe("5.2× faster");
  expect(versus(100, 400, true)).toBe("4.0× slower");
  expect(versus(400, 100, true)).toBe("4.0× faster");
  expect(versus(0.62, 0.14, false, ["less", "more"])).toBe("4.4× more");
  expect(versus(26, 1, false)).toBe("26× slower");
  expect(versus(1.02, 1, false)).toBe("about the same (1.02× slower)");
  expect(versus(0, 1, true)).toBe("—");
  for (const [a, b] of [[0.2, 1], [1, 0.2], [3, 7], [7, 3]] as const) {
    for (const hib of [true, false]) expect(versus(a, b, hib)).toMatch(/^(\d+(\.\d)?)× (faster|slower)$/);
  }
});

describe.skipIf(!hasPython)("the Python port of envs/library (bench/py/library_env.py)", () => {
  test("gives the same tool results as the bundled env for every call the bench makes", async () => {
    const scenarios = JSON.parse(readFileSync(join(BUNDLED_ENVS, "library", "scenarios.json"), "utf8")) as { id: string; reference_actions: { name: string; arguments: Record<string, unknown> }[] }[];
    const reads = [
      { name: "get_member", arguments: { member_id: "M013" } },
      { name: "search_books", arguments: { query: "the" } },
      { name: "list_member_loans", arguments: { member_id: "M013" } },
      { name: "get_book", arguments: { book_id: "B006" } },
    ];
    // bench/py/peer.py's long-episode cycle; loans are numbered from the state's next_loan_number (25)
    const cycle = Array.from({ length: 16 }, (_, i) => {
      const loan = `L${String(25 + Math.floor(i / 4)).padStart(4, "0")}`;
      return [
        { name: "checkout_book", arguments: { member_id: "M009", book_id: "B003" } },
        { name: "get_member", arguments: { member_id: "M009" } },
        { name: "return_book", arguments: { loan_id: loan } },
        { name: "search_books", arguments: { query: "the" } },
      ][i % 4]!;
    });
    const failing = [{ name: "checkout_book", arguments: { member_id: "M006", book_id: "B001" } }, { name: "get_book", arguments: { book_id: "B999" } }, { name: "return_book", arguments: { loan_id: "L0001" } }, { name: "pay_fine", arguments: { fine_id: "F0003", payment_method: "cash" } }, { name: "list_fines", arguments: { member_id: "M008" } }];
    const sequences = [scenarios.find((s) => s.id === "library-1")!.reference_actions, [...reads, ...reads, ...cycle], failing];

    const found = EnvRegistry.load([join(BUNDLED_ENVS, "library")]).scenario("library-1")!;
    const ours: unknown[][] = [];
    for (const seq of sequences) {
      const ep = new Episode({ sandboxes, bundle: found.bundle, scenario: found.scenario, seed: 0, episodeId: "port-check" });
      try {
        await ep.reset();
        const out: unknown[] = [];
        for (const a of seq) out.push(JSON.parse((await ep.step(a)).observation.content));
        ours.push(out);
      } finally {
        ep.close();
      }
    }
    const py = "import json, sys\nfrom library_env import Library, initial_state\nout = []\nfor seq in json.load(sys.stdin):\n    lib = Library(initial_state('library-1'))\n    out.append([lib.call(a['name'], a['arguments']) for a in seq])\nprint(json.dumps(out))\n";
    const theirs = JSON.parse(execFileSync("python3", ["-c", py], { cwd: join(ROOT, "bench", "py"), input: JSON.stringify(sequences), encoding: "utf8" })) as unknown[][];
    expect(theirs).toEqual(ours);
    // the calls did what the rows assume: the cycle's checkouts and returns succeed, the reads too
    expect((ours[1] as { success: boolean }[]).every((r) => r.success)).toBe(true);
    expect((ours[2] as { success: boolean }[]).filter((r) => !r.success)).toHaveLength(3);
  });
});
