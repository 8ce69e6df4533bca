// the page.evaluate callbacks below run in the browser: they see the DOM
/// <reference lib="dom" />
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture, type FixtureRequest } from "../openai-fixture.js";
import { haveShared, needsShared, sharedPath } from "../shared-data.js";

const run = promisify(execFile);
const CLI = join(import.meta.dirname, "..", "..", "cli", "main.ts");
const CHROMIUM = "/usr/bin/chromium";
/** Screenshots are kept as test artifacts (gitignored) for people to look at. */
const ARTIFACTS = join(import.meta.dirname, "..", "..", "test-artifacts", "reports");
const VIEWPORTS = [
  { width: 1400, height: 1000 },
  { width: 1920, height: 1080 },
];
const TAUBENCH = sharedPath("benchmarks", "taubench");
const cli = (args: string[]) => run(process.execPath, ["--import", "tsx", CLI, ...args], { maxBuffer: 1 << 24 });

/** Solves notes-1 (both calls in one step), answers notes-2's user; the user asks once and stops. */
function good(r: FixtureRequest) {
  if (r.model === "user-sim") return r.messages.some((m) => m.role === "assistant") ? "# Thought:\nok\n# Reply:\n###STOP###" : "# Thought:\nask\n# Reply:\nHow many notes do I have? I am Carol (u3).";
  if (r.messages.some((m) => m.role === "tool")) return "Task Completed";
  if (/Add a note titled 'todo'/.test(r.messages[1]!.content))
    return { content: null, tool_calls: [{ id: "a", type: "function" as const, function: { name: "add_note", arguments: '{"user_id":"u2","title":"todo","body":"call mom"}' } }, { id: "b", type: "function" as const, function: { name: "delete_note", arguments: '{"note_id":"n1"}' } }] };
  return "You have 1 note.";
}

/** The other checkpoint: adds the note but never deletes the old one, and answers the user wrongly. */
function worse(r: FixtureRequest) {
  if (r.model === "user-sim") return good(r);
  if (r.messages.some((m) => m.role === "tool")) return "Done.";
  if (/Add a note titled 'todo'/.test(r.messages[1]!.content)) return { content: null, tool_calls: [{ id: "a", type: "function" as const, function: { name: "add_note", arguments: '{"user_id":"u2","title":"todo","body":"call mom"}' } }] };
  return "You have 7 notes.";
}

describe.skipIf(!existsSync(CHROMIUM))(`rollout reports and the comparison page in headless Chromium (needs ${CHROMIUM})`, () => {
  let dir: string;
  let browser: Browser;

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    dir = mkdtempSync(join(tmpdir(), "envscaler-reports-"));
    for (const [name, responder] of [["run-a", good], ["run-b", worse]] as const) {
      const fixture = await OpenAIFixture.start(responder);
      try {
        await cli(["rollout", "--envs", FIXTURES, "--scenarios", "notes-*", "--trials", "3", "--model", name === "run-a" ? "ckpt-100" : "ckpt-200", "--base-url", fixture.baseURL, "--api-key", "k", "--user-model", "user-sim", "--user-base-url", fixture.baseURL, "--out", join(dir, name)]);
      } finally {
        await fixture.close();
      }
    }
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"] });
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
  });

  /** Opens a page at each size; fails on any console error, page error or request that leaves the file. */
  async function look(file: string, name: string, check: (tab: Page) => Promise<void>): Promise<void> {
    for (const vp of VIEWPORTS) {
      const tab = await browser.newPage({ viewport: vp });
      const errors: string[] = [];
      tab.on("console", (m) => void (m.type() === "error" && errors.push(m.text())));
      tab.on("pageerror", (e) => errors.push(e.message));
      tab.on("request", (r) => void (r.url().startsWith("file://") || errors.push(`fetched ${r.url()}`)));
      try {
        await tab.goto(`file://${file}`);
        await check(tab);
        // nothing wider than the window: no sideways scrolling at 1400 px
        expect(await tab.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
        const path = join(ARTIFACTS, `${name}-${vp.width}x${vp.height}.png`);
        await tab.screenshot({ path, fullPage: true });
        expect(statSync(path).size).toBeGreaterThan(20_000);
        if (vp.width === 1400) {
          // the print layout (A4-ish width): charts stay inside the page
          await tab.emulateMedia({ media: "print" });
          await tab.setViewportSize({ width: 800, height: 1100 });
          expect(await tab.evaluate(() => [...document.querySelectorAll("svg.chart")].every((s) => s.getBoundingClientRect().right <= window.innerWidth))).toBe(true);
          await tab.screenshot({ path: join(ARTIFACTS, `${name}-print.png`), fullPage: true });
        }
        expect(errors).toEqual([]);
      } finally {
        await tab.close();
      }
    }
  }

  test("a run's report.html has the five charts, with the run's numbers on them", async () => {
    const html = readFileSync(join(dir, "run-a", "report.html"), "utf8");
    expect(html).not.toMatch(/<script|https?:\/\/(?!127\.0\.0\.1)(?!www\.w3\.org)/);
    await look(join(dir, "run-a", "report.html"), "report-run-a", async (tab) => {
      expect(await tab.locator("svg.chart").count()).toBe(5);
      // 6 episodes: notes-1 solved 3 times (reward 1), notes-2 scored 0.5 three times
      expect(await tab.locator("#ch-reward rect title").allTextContents()).toEqual(["ckpt-100: 3 episodes (50%) in 0.5–0.6", "ckpt-100: 3 episodes (50%) in 0.9–1"]);
      // pass^k for k = 1..3, a marker and a label each
      expect(await tab.locator("#ch-passk text").allTextContents()).toEqual(expect.arrayContaining(["1", "2", "3", "50%"]));
      expect(await tab.locator("#ch-end text").allTextContents()).toEqual(expect.arrayContaining(["text reply", "user stopped"]));
      expect(await tab.locator("#ch-env text").allTextContents()).toEqual(expect.arrayContaining(["notes-v1", "0.75 ± 0.27 · 50% · 6"]));
    });
  });

  test("envscaler report RUN_A RUN_B -o compare.html: both runs on every chart, the change from A, the settings that differ", async () => {
    const out = join(dir, "compare.html");
    const { stdout } = await cli(["report", join(dir, "run-a"), join(dir, "run-b"), "-o", out]);
    expect(stdout).toContain(`comparison of 2 runs → ${out}`);
    await look(out, "compare", async (tab) => {
      expect(await tab.locator("svg.chart").count()).toBe(5);
      expect(await tab.textContent("#totals")).toMatch(/mean reward0\.750(0\.\d+) \(-0\.\d+ vs A\)/);
      // each chart names both runs (the legend tells them apart by pattern, not colour)
      for (const id of ["ch-reward", "ch-env", "ch-passk", "ch-end", "ch-steps"]) {
        const text = (await tab.locator(`#${id}`).textContent()) ?? "";
        expect(text, id).toMatch(/A: run-a/);
        expect(text, id).toMatch(/B: run-b/);
      }
      // the model differs (and the fixtures' endpoints); the trials, seeds and scenarios do not
      const diff = await tab.locator("#settings-diff tbody tr").allTextContents();
      expect(diff).toContain("agent modelckpt-100ckpt-200");
      expect(diff.filter((r) => /^(trials|base seed|scenarios)/.test(r))).toEqual([]);
      // A's report is linked
      await tab.locator("#runs a").first().click();
      expect(await tab.title()).toBe("rollout · ckpt-100");
      await tab.goBack();
    });
    // one run: its report page again
    const again = await cli(["report", join(dir, "run-b"), "-o", join(dir, "b.html")]);
    expect(again.stdout).toContain("report →");
    expect(readFileSync(join(dir, "b.html"), "utf8")).toContain("rollout · ckpt-200");
  });

  test("report refuses a folder with no results, naming it", async () => {
    const err = await cli(["report", dir, join(dir, "run-a")]).then(() => null, (e: { code: number; stderr: string }) => e);
    expect(err?.code).toBe(1);
    expect(err?.stderr).toContain(`${dir}: no results.json`);
  });
  test.skipIf(!haveShared(TAUBENCH))(`two evals (taubench, on the fixture) compared from the CLI: the benchmark and both models named, every chart drawn (${needsShared(TAUBENCH)})`, async () => {
    const user = (r: FixtureRequest) => (r.messages.some((m) => m.role === "assistant") ? "# Thought:\nno help\n# Reply:\n###STOP###" : "# Thought:\nstart\n# Reply:\nHi, I need to change an order.");
    for (const model of ["polite-1", "polite-2"]) {
      const fixture = await OpenAIFixture.start((r) => (r.model === "user-sim" ? user(r) : "Sorry, I cannot help with that."));
      try {
        await cli(["eval", "taubench", "--from", TAUBENCH, "--domain", "retail", "--limit", "2", "--trials", "2", "--model", model, "--base-url", fixture.baseURL, "--api-key", "k", "--user-model", "user-sim", "--user-base-url", fixture.baseURL, "--out", join(dir, model)]);
      } finally {
        await fixture.close();
      }
    }
    const out = join(dir, "compare-eval.html");
    await cli(["report", join(dir, "polite-1"), join(dir, "polite-2"), "-o", out]);
    await look(out, "compare-eval", async (tab) => {
      expect(await tab.textContent("#runs")).toMatch(/A: polite-1 — eval taubench · polite-1.*B: polite-2 — eval taubench · polite-2/s);
      expect(await tab.locator("svg.chart").count()).toBe(5);
      expect(await tab.locator("#ch-end text").allTextContents()).toEqual(expect.arrayContaining(["user stopped", "A: 4 (100%)", "B: 4 (100%)"]));
    });
  }, 300_000);
});
