// the page.evaluate callbacks below run in the browser: they see the DOM
/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
import { existsSync, mkdirSync, mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { ModelAgentPlayer } from "../../agent/ui-agent-player.js";
import { UiServer } from "../../bridge/fronts/ui/ui-server.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture } from "../openai-fixture.js";
import { HOSTILE, makeSynthRun, recordEpisodes } from "../ui-fixtures.js";

const CHROMIUM = "/usr/bin/chromium";
/** Screenshots are kept as test artifacts (gitignored) for people to look at. */
const ARTIFACTS = join(import.meta.dirname, "..", "..", "test-artifacts", "ui");

let ui: UiServer;
let browser: Browser;
let tab: Page;
/** Console errors (a CSP violation is one) and uncaught page errors of every page the tests open; each test must leave none. */
const consoleErrors: string[] = [];

/**
 * Fails the test on any console error. Chromium also logs "Failed to load resource" for an API
 * answer with an error status: a typed error the page shows is expected there, so those count only
 * when the request was not to our own /api/.
 */
function watch(page: Page): Page {
  page.on("console", (m) => {
    if (m.type() !== "error") return;
    const at = m.location().url;
    if (/^Failed to load resource: the server responded with a status of (4|5)\d\d/.test(m.text()) && at.startsWith(ui.url) && new URL(at).pathname.startsWith("/api/")) return;
    consoleErrors.push(`${page.url()}: ${m.text()}${at ? ` (${at})` : ""}`);
  });
  page.on("pageerror", (e) => consoleErrors.push(`${page.url()}: ${e.message}`));
  return page;
}

async function shot(name: string): Promise<void> {
  const path = join(ARTIFACTS, `${name}.png`);
  await tab.screenshot({ path });
  expect(statSync(path).size).toBeGreaterThan(10_000);
}

/** Calls add_note through the page's tool form and waits for its diff. */
async function addNoteByForm(page: Page, note: { user_id: string; title: string; body: string }): Promise<void> {
  await page.selectOption("#tool-select", { label: "add_note" });
  for (const [name, value] of Object.entries(note)) await page.fill(`#tool-form-box [name="${name}"]`, value);
  await page.click("#tool-form-box button[type=submit]");
  await page.waitForSelector("#diff li.op-add");
}

describe.skipIf(!existsSync(CHROMIUM))(`the playground in headless Chromium (needs ${CHROMIUM})`, () => {
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const dir = mkdtempSync(join(tmpdir(), "envscaler-ui-browser-"));
    await recordEpisodes(join(dir, "traj", "t.jsonl"));
    ui = await UiServer.start({ envs: [makeSynthRun(join(dir, "run")), HOSTILE, BUNDLED_ENVS], trajectories: join(dir, "traj"), port: 0, hardStopGraceMs: 300, agentPlayer: new ModelAgentPlayer() });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"] });
    tab = watch(await browser.newPage({ viewport: { width: 1440, height: 900 } }));
    // everything the page loads comes from the UI's own server
    tab.on("request", (r) => {
      if (!r.url().startsWith(ui.url) && !r.url().startsWith("blob:") && !r.url().startsWith("data:")) throw new Error(`fetched from elsewhere: ${r.url()}`);
    });
  });

  afterAll(async () => {
    await browser?.close();
    await ui?.close();
  });

  afterEach(() => {
    const seen = consoleErrors.splice(0);
    expect(seen, "console errors").toEqual([]);
  });

  test("envs: search, an env's tools and state schema rendered readably, a synth env's evidence", async () => {
    const errors: string[] = [];
    tab.on("pageerror", (e) => errors.push(e.message));
    await tab.goto(ui.url);
    await tab.waitForSelector("#env-list button.navitem");
    expect(await tab.locator("#env-list button.navitem").count()).toBeGreaterThanOrEqual(10);
    // keyboard: / focuses the search, typing filters, Enter opens the first match
    await tab.keyboard.press("/");
    await tab.keyboard.type("circulation");
    await tab.waitForFunction(() => [...document.querySelectorAll<HTMLElement>("#env-list button.navitem")].map((b) => b.dataset.env).join() === "library-v1");
    await tab.keyboard.press("Enter");
    await tab.waitForSelector("#env-detail h1");
    expect(await tab.textContent("#env-detail h1")).toBe("Public library circulation desk");
    // tools as tables of parameters, the state schema as a table too
    await tab.locator("details.tool > summary").first().click();
    expect(await tab.locator("details.tool[open] table.schema td.pname").first().textContent()).toMatch(/query/);
    expect(await tab.locator("#sec-state table.schema td.pname").allTextContents()).toEqual(expect.arrayContaining(["books*", "members*"]));
    await shot("1-env-library");

    await tab.fill("#env-search", "note-taking");
    await tab.waitForFunction(() => [...document.querySelectorAll<HTMLElement>("#env-list button.navitem")].map((b) => b.dataset.env).join() === "notes-v1");
    await tab.click("#env-list button.navitem");
    await tab.waitForSelector("#sec-provenance table.cases");
    expect(await tab.locator("#sec-provenance table.cases tbody tr").count()).toBe(2);
    expect(await tab.textContent("#sec-provenance")).toMatch(/the reference solution scores 0\.5/);
    await tab.locator("#sec-provenance").scrollIntoViewIfNeeded();
    await shot("2-env-synth-provenance");
    expect(errors).toEqual([]);
  });

  test("play: start from a scenario card, call a tool through its generated form, see the diff and a check flip, finish with the reward", async () => {
    await tab.locator('.scenario[data-scenario="notes-1"] button').click();
    expect(await tab.isVisible("#view-play")).toBe(true);
    expect(await tab.inputValue("#scenario-select")).toBe("notes-1");
    await tab.fill("#seed", "7");
    await tab.click("#start");
    await tab.waitForSelector("#checks li");
    expect(await tab.textContent("#seed-used")).toBe("7");
    expect(await tab.locator("#checks li.fail").count()).toBe(3);

    await addNoteByForm(tab, { user_id: "u2", title: "todo", body: "call mom" });
    expect(await tab.textContent("#diff li.op-add")).toMatch(/\/notes\/n\d+.*call mom/);
    // the check that now holds flipped, the others still fail
    await tab.waitForSelector("#checks li.flipped");
    expect(await tab.locator("#checks li.pass.flipped").textContent()).toMatch(/Has Bob got a 'todo' note\?/);
    expect(await tab.locator("#checks li.fail").count()).toBe(2);
    // the state tree marks the added note
    expect(await tab.locator("#state-panel .changed.op-add").count()).toBeGreaterThan(0);
    await shot("3-play-after-add");

    // the second call as the model's raw text, sent with Ctrl+Enter
    await tab.fill("#raw-text", '<tool_call>{"name": "delete_note", "arguments": {"note_id": "n1"}}</tool_call>');
    await tab.press("#raw-text", "Control+Enter");
    await tab.waitForSelector("#diff li.op-remove");
    // the removed note is gone from the tree; its parent is marked
    expect(await tab.locator('#state-panel details.changed.op-remove-child[data-path="/notes"]').count()).toBe(1);
    await tab.waitForFunction(() => document.querySelectorAll("#checks li.pass").length === 3);
    await tab.click("#finish");
    await tab.waitForSelector("#reward");
    expect(await tab.textContent("#reward")).toBe("reward 1");
    expect(await tab.isDisabled("#finish")).toBe(true);
    await shot("4-play-finished");
  });

  test("play: a hostile env's typed error is shown, and the page stays usable", async () => {
    await tab.selectOption("#scenario-select", "hostile-1");
    await tab.click("#start");
    await tab.waitForSelector("#tool-select");
    await tab.selectOption("#tool-select", { label: "spin" });
    await tab.click("#tool-form-box button[type=submit]");
    await tab.waitForSelector("#final .error-box");
    expect(await tab.textContent("#final .error-box")).toMatch(/env_timeout/);
    await shot("5-play-hostile");
    await tab.selectOption("#scenario-select", "notes-1");
    await tab.click("#start");
    await tab.waitForSelector("#checks li.fail");
    expect(await tab.locator("#transcript .msg").count()).toBe(1);
    // the page's episodes close with it
    expect(ui.play.count()).toBeGreaterThan(0);
    await tab.reload();
    await tab.waitForSelector("#scenario-select option", { state: "attached" }); // booted: keys work from here
    for (let i = 0; i < 100 && ui.play.count() > 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(ui.play.count()).toBe(0);
  });

  test("trajectories: filter, open an episode, step through it, replay it, export SFT", async () => {
    await tab.keyboard.press("Escape");
    await tab.keyboard.press("3");
    await tab.waitForSelector("table.episodes tbody tr");
    expect(await tab.locator("table.episodes tbody tr").count()).toBe(3);
    await tab.fill("#f-min-reward", "1");
    await tab.waitForFunction(() => document.querySelectorAll("table.episodes tbody tr").length === 1);
    await tab.fill("#f-min-reward", "");
    await tab.waitForFunction(() => document.querySelectorAll("table.episodes tbody tr").length === 3);

    await tab.locator('tr[data-episode="ep-solved"] button.link').click();
    await tab.waitForSelector("#episode-frame");
    const frame = tab.frameLocator("#episode-frame");
    await frame.locator("h1").waitFor();
    expect(await frame.locator("h1").textContent()).toBe("notes-v1 · notes-1");
    expect(await tab.textContent("#step-pos")).toBe("reset (of 3 steps)");
    await tab.click("#next-step");
    expect(await tab.textContent("#step-pos")).toBe("step 1 of 3");
    expect(await tab.textContent("#step-detail")).toMatch(/add_note/);
    expect(await frame.locator('.msg[data-step="1"].ui-current').count()).toBe(1);
    // keys step too
    await tab.locator("#step-detail").click();
    await tab.keyboard.press("n");
    expect(await tab.textContent("#step-pos")).toBe("step 2 of 3");
    expect(await tab.locator("#step-detail ul.diff li.op-remove").count()).toBe(1);
    await tab.click("#replay");
    await tab.waitForSelector("#replay-result .replay");
    expect(await tab.textContent("#replay-result")).toMatch(/replayed exactly \(3 steps\)/);
    await shot("6-trajectory-step");

    await tab.locator('tr[data-episode="ep-solved"] input[type=checkbox]').check();
    await tab.locator('tr[data-episode="ep-finished"] input[type=checkbox]').check();
    const download = tab.waitForEvent("download");
    await tab.click("#export-sft");
    expect((await download).suggestedFilename()).toBe("sft.jsonl");
    expect(await tab.textContent("#traj-status")).toMatch(/2 episodes exported/);
  });

  test("play a conversation: talk as the agent to the simulated user; the reward when the user stops", async () => {
    const user = await OpenAIFixture.start(["# Reply:\nHi! How many notes do I have? I'm Carol, u3.", "# Reply:\nGreat, thanks. ###STOP###"]);
    const conv = await UiServer.start({ envs: [FIXTURES], trajectories: join(ARTIFACTS, "none"), port: 0, user: { baseURL: user.baseURL, apiKey: "x", model: "m", maxRetries: 0 } });
    const page = watch(await browser.newPage({ viewport: { width: 1440, height: 900 } }));
    try {
      await page.goto(`${conv.url}#play/notes-2`);
      await page.waitForSelector("#scenario-select option[value=notes-2]", { state: "attached" });
      expect(await page.inputValue("#scenario-select")).toBe("notes-2");
      await page.click("#start");
      await page.waitForSelector("#transcript .msg.user");
      expect(await page.textContent("#transcript .msg.user")).toMatch(/How many notes do I have/);
      // scored live on a fork, which asks the simulated user nothing
      expect(await page.locator("#checks li.fail").count()).toBe(2);
      await addNoteByForm(page, { user_id: "u3", title: "x", body: "y" });
      expect(await page.locator("#checks li.pass.flipped").textContent()).toMatch(/Has Carol got a note 'x'\?/);
      expect(user.requests).toHaveLength(1);
      await page.fill("#raw-text", "You have 1 note. I added 'x'.");
      await page.click("#send-raw");
      await page.waitForSelector("#reward");
      expect(await page.textContent("#reward")).toBe("reward 1");
      expect(await page.textContent("#final")).toMatch(/user_stop/);
      expect(await page.locator("#checks li.pass").count()).toBe(2);
      const path = join(ARTIFACTS, "7-play-conversation.png");
      await page.screenshot({ path });
      expect(statSync(path).size).toBeGreaterThan(10_000);
    } finally {
      await page.close();
      await conv.close();
      await user.close();
    }
  });
  test("play: undo a step, go back to the start, branch into a tab of its own", async () => {
    await tab.keyboard.press("Escape");
    await tab.keyboard.press("2");
    await tab.selectOption("#scenario-select", "notes-1");
    await tab.fill("#seed", "3");
    await tab.click("#start");
    await tab.waitForSelector("#checks li.fail");
    expect(await tab.isDisabled("#undo")).toBe(true);
    await addNoteByForm(tab, { user_id: "u2", title: "todo", body: "call mom" });
    await tab.fill("#raw-text", '<tool_call>{"name": "delete_note", "arguments": {"note_id": "n1"}}</tool_call>');
    await tab.press("#raw-text", "Control+Enter");
    await tab.waitForFunction(() => document.querySelectorAll("#checks li.pass").length === 3);
    expect(await tab.textContent("#undo")).toBe("Undo (back to step 1)");

    // undo the delete: its messages go, n1 is back, and the check it satisfied fails again
    await tab.click("#undo");
    await tab.waitForFunction(() => document.getElementById("step-count")?.textContent === "step 1");
    expect(await tab.locator('#transcript [data-step="2"]').count()).toBe(0);
    expect(await tab.locator('#transcript [data-step="1"]').count()).toBe(2);
    expect(await tab.textContent("#diff-panel")).toMatch(/Back at step 1/);
    expect(await tab.locator("#checks li.fail.flipped").allTextContents()).toEqual([expect.stringMatching(/Is n1 deleted\?.*now fails/), expect.stringMatching(/final state equals.*now fails/)]);
    expect(await tab.locator("#checks li.pass").count()).toBe(1);
    expect(await tab.textContent('#state-panel details[data-path="/notes"] > summary')).toMatch(/\bn1\b/);

    // branch from here: a second tab, its own episode; the delete there does not reach the first
    await tab.click("#branch");
    await tab.waitForFunction(() => document.querySelectorAll("#episode-tabs .ep-tab").length === 2);
    expect(await tab.textContent("#episode-tabs .ep-tab.active")).toMatch(/#2 ↳ #1@1/);
    expect(await tab.textContent("#transcript .branch-note")).toBe("branched from #1 at step 1");
    await tab.fill("#raw-text", '{"name": "delete_note", "arguments": {"note_id": "n1"}}');
    await tab.click("#send-raw");
    await tab.waitForFunction(() => document.querySelectorAll("#checks li.pass").length === 3);
    expect(await tab.textContent("#live-reward")).toBe("would score 1");
    await shot("8-play-branch");
    await tab.locator("#episode-tabs .ep-tab-open").first().click();
    await tab.waitForFunction(() => document.querySelector("#episode-tabs .ep-tab.active")?.textContent?.includes("#1"));
    expect(await tab.textContent("#step-count")).toBe("step 1");
    expect(await tab.textContent('#state-panel details[data-path="/notes"] > summary')).toMatch(/\bn1\b/);

    // finish, then go back to the start from the list of held steps (keys work too: u undoes)
    await tab.click("#finish");
    await tab.waitForSelector("#reward");
    await tab.locator("body").click({ position: { x: 5, y: 5 } });
    await tab.keyboard.press("u");
    await tab.waitForFunction(() => !document.getElementById("reward") && !(document.getElementById("finish") as HTMLButtonElement).disabled);
    await tab.selectOption("#history-step", "0");
    await tab.click("#go-back");
    await tab.waitForFunction(() => document.getElementById("step-count")?.textContent === "step 0");
    expect(await tab.locator("#checks li.pass").count()).toBe(0);
    expect(await tab.locator("#transcript .msg").count()).toBe(1);
    await shot("9-play-undo-to-start");
  });

  test("agent: a model plays the scenario, streamed turn by turn; a hung endpoint times out; a run can be stopped", async () => {
    const add = { id: "call_1", type: "function" as const, function: { name: "add_note", arguments: JSON.stringify({ user_id: "u2", title: "todo", body: "call mom" }) } };
    const good = await OpenAIFixture.start([{ tool_calls: [add] }, 'Now the old one.\n```json\n{"name": "delete_note", "arguments": {"note_id": "n1"}}\n```', "Task Completed"]);
    const hung = await OpenAIFixture.start([{ hang: true }, { hang: true }]);
    try {
      await tab.selectOption("#scenario-select", "notes-1");
      await tab.fill("#seed", "4");
      await tab.click("#agent-panel > summary");
      await tab.fill("#agent-url", good.baseURL);
      await tab.fill("#agent-model", "fixture-model");
      await tab.selectOption("#agent-mode", "fc");
      await tab.click("#agent-start");
      await tab.waitForSelector("#agent-outcome");
      expect(await tab.textContent("#agent-outcome")).toMatch(/solved it: reward 1 after 3 steps \(text_reply\)/);
      expect(await tab.locator("#transcript .msg.call").first().textContent()).toMatch(/add_note/);
      expect(await tab.textContent("#transcript")).toMatch(/```json/);
      expect(await tab.textContent("#reward")).toBe("reward 1");
      expect(await tab.locator("#checks li.pass").count()).toBe(3);
      // the model's episode is the page's: undo works on it
      expect(await tab.isDisabled("#undo")).toBe(false);
      await shot("10-agent-played");

      // a hung endpoint: the call times out and the page says so
      await tab.fill("#agent-url", hung.baseURL);
      await tab.fill("#agent-timeout", "1");
      await tab.click("#agent-start");
      await tab.waitForSelector("#agent-status .error-box");
      expect(await tab.textContent("#agent-status .error-box")).toMatch(/endpoint_error.*timed out/i);
      expect(await tab.isDisabled("#agent-start")).toBe(false);
      await shot("11-agent-timeout");

      // stopped while the model thinks: the episode stays open for hand play
      await tab.fill("#agent-timeout", "120");
      await tab.click("#agent-start");
      await tab.waitForFunction(() => /waiting for the model/.test(document.getElementById("agent-status")?.textContent ?? ""));
      expect(await tab.isDisabled("#finish")).toBe(true);
      await tab.click("#agent-stop");
      await tab.waitForSelector("#agent-outcome");
      expect(await tab.textContent("#agent-outcome")).toMatch(/stopped by you after 0 steps/);
      expect(await tab.isDisabled("#finish")).toBe(false);
    } finally {
      await good.close();
      await hung.close();
    }
  });
  test("play: a step beyond the snapshot limit runs, and the page shows why it cannot be undone", async () => {
    const small = await UiServer.start({ envs: [FIXTURES], trajectories: join(ARTIFACTS, "none"), port: 0, maxSnapshots: 1 });
    const page = watch(await browser.newPage({ viewport: { width: 1440, height: 900 } }));
    try {
      await page.goto(`${small.url}#play/notes-1/2`);
      await page.waitForSelector("#scenario-select option[value=notes-1]", { state: "attached" });
      await page.click("#start");
      await page.waitForSelector("#checks li.fail");
      for (const [i, call] of ['{"name": "add_note", "arguments": {"user_id": "u2", "title": "todo", "body": "call mom"}}', '{"name": "delete_note", "arguments": {"note_id": "n1"}}'].entries()) {
        await page.fill("#raw-text", call);
        await page.click("#send-raw");
        await page.waitForFunction((n) => document.getElementById("step-count")?.textContent === `step ${n}`, i + 1);
      }
      expect(await page.textContent("#undo-note .error-box")).toMatch(/too_large.*cannot be undone.*limit of 1 snapshots/);
      expect(await page.textContent("#undo")).toBe("Undo (back to step 0)");
      expect(await page.textContent("#live-reward")).toBe("would score 1");
      const path = join(ARTIFACTS, "12-play-snapshot-limit.png");
      await page.screenshot({ path });
      expect(statSync(path).size).toBeGreaterThan(10_000);
    } finally {
      await page.close();
      await small.close();
    }
  });
  test("every tab at 1400x1000 and 1920x1080: no console errors, the episode table fits its pane, charts of the listed episodes, no invented user turn", async () => {
    for (const vp of [{ width: 1400, height: 1000 }, { width: 1920, height: 1080 }]) {
      const page = watch(await browser.newPage({ viewport: vp }));
      const size = `${vp.width}x${vp.height}`;
      const keep = async (name: string) => {
        const path = join(ARTIFACTS, `tabs-${size}-${name}.png`);
        await page.screenshot({ path });
        expect(statSync(path).size).toBeGreaterThan(10_000);
      };
      const fitsWindow = () => page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);
      try {
        await page.goto(ui.url);
        await page.waitForSelector("#env-list button.navitem");
        await page.locator('#env-list button.navitem[data-env="library-v1"]').click();
        await page.waitForSelector("#env-detail h1");
        expect(await fitsWindow()).toBe(true);
        await keep("1-envs");

        // a task episode ended by a text reply: the end is marked as such, not as a user's "Task finished"
        await page.click("#tab-play");
        await page.selectOption("#scenario-select", "notes-1");
        await page.click("#start");
        await page.waitForSelector("#checks li");
        await addNoteByForm(page, { user_id: "u2", title: "todo", body: "call mom" });
        await page.fill("#raw-text", "I added the note.");
        await page.click("#send-raw");
        await page.waitForSelector("#transcript .msg.end");
        expect(await page.textContent("#transcript .msg.end")).toMatch(/episode ended.*text reply ended the task/i);
        expect(await page.locator("#transcript .msg.user", { hasText: "Task finished" }).count()).toBe(0);
        expect(await fitsWindow()).toBe(true);
        await keep("2-play");

        await page.click("#tab-trajectories");
        await page.waitForSelector("table.episodes tbody tr");
        // the table keeps to its pane (long names cut, whole on hover), and the episode pane stays on screen
        const fit = await page.evaluate(() => {
          const wrap = document.getElementById("traj-table")!;
          const viewer = document.getElementById("traj-viewer")!.getBoundingClientRect();
          return { table: wrap.querySelector("table")!.scrollWidth, pane: wrap.clientWidth, viewerRight: viewer.right, viewerWidth: viewer.width, window: window.innerWidth };
        });
        expect(fit.table).toBeLessThanOrEqual(fit.pane);
        expect(fit.viewerRight).toBeLessThanOrEqual(fit.window);
        expect(fit.viewerWidth).toBeGreaterThan(vp.width * 0.4);
        expect(await page.getAttribute('tr[data-episode="ep-solved"] td:last-child', "title")).toBe("t.jsonl");
        // one line per row: nothing wraps
        const heights = await page.locator("table.episodes tbody tr").evaluateAll((rows) => rows.map((r) => r.getBoundingClientRect().height));
        expect(Math.max(...heights)).toBeLessThan(60);

        await page.locator('tr[data-episode="ep-solved"] button.link').click();
        const frame = page.frameLocator("#episode-frame");
        await frame.locator(".msg.end").waitFor();
        expect(await frame.locator(".msg.user", { hasText: "Task finished" }).count()).toBe(0);
        await page.click("#next-step");
        expect(await frame.locator('.msg[data-step="1"].ui-current').count()).toBe(1);

        await page.click("#traj-charts > summary");
        const charts = page.frameLocator("#charts-frame");
        await charts.locator("svg.chart").first().waitFor();
        expect(await charts.locator("svg.chart").count()).toBe(5);
        expect(await charts.locator("#ch-end text").allTextContents()).toEqual(expect.arrayContaining(["text reply", "finished by the client"]));
        expect(await fitsWindow()).toBe(true);
        await keep("3-trajectories");
        await page.locator("#charts-frame").scrollIntoViewIfNeeded();
        await page.locator("#charts-frame").screenshot({ path: join(ARTIFACTS, `tabs-${size}-4-trajectory-charts.png`) });
      } finally {
        await page.close();
      }
    }
  }, 120_000);
});
