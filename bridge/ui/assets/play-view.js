// Play: an episode of any scenario and seed, by hand. Tool calls from forms generated from the
// tools' JSON Schemas, or the model's raw text; the observation, the state as a tree with the
// step's diff marked, the checks as they stand now (scored on a throwaway copy of the episode after
// every step), and the reward at the end.
import { api, badge, clear, errorBox, h, json, PAGE, pretty } from "./dom.js";
import { applyDiff, jsonTree } from "./json-tree.js";
import { toolForm } from "./schema-form.js";

export class PlayView {
  constructor(root, ctx) {
    this.ctx = ctx;
    this.ep = null;
    this.scenarioSelect = h("select#scenario-select", { "aria-label": "scenario" });
    this.seed = h("input#seed", { type: "number", min: 0, step: 1, placeholder: "random", "aria-label": "seed" });
    this.startBtn = h("button#start.primary", { type: "submit" }, "Start episode");
    const bar = h("form.playbar", { onsubmit: (ev) => { ev.preventDefault(); void this.start(); } },
      h("label", { htmlFor: "scenario-select" }, "Scenario"), this.scenarioSelect, h("label", { htmlFor: "seed" }, "Seed"), this.seed, this.startBtn,
      h("span.muted.coming", "Coming: a model playing the scenario (envscaler rollout), undo and branch (runtime snapshots)."));
    this.head = h("div#episode-head.episode-head");
    this.transcript = h("div#transcript.transcript", { "aria-live": "polite" });
    this.composer = h("div#composer.composer");
    this.alert = h("div#play-alert", { role: "alert" });
    this.checks = h("div#checks-panel.panel");
    this.diff = h("div#diff-panel.panel");
    this.stateBox = h("div#state-panel.panel");
    root.append(
      bar,
      this.head,
      h("div.play-grid",
        h("div.play-main", h("h2", "Episode"), this.transcript, this.alert, this.composer),
        h("div.play-side", h("h2", "Checks"), this.checks, h("h2", "Last step's changes"), this.diff, h("h2", "State"), this.stateBox)),
    );
    this.idle();
  }

  idle() {
    clear(this.head, h("p.muted", "Pick a scenario and a seed (empty: random), then start. Episodes close when this page closes or after the idle timeout."));
    clear(this.transcript);
    clear(this.composer);
    clear(this.checks, h("p.muted", "—"));
    clear(this.diff, h("p.muted", "—"));
    clear(this.stateBox, h("p.muted", "—"));
  }

  setScenarios(envs) {
    const current = this.scenarioSelect.value;
    clear(this.scenarioSelect, envs.map((e) => h("optgroup", { label: `${e.name} (${e.id})` }, e.scenarios.map((s) => h("option", { value: s.id }, `${s.id} · ${s.mode} · ${s.task.slice(0, 70)}${s.task.length > 70 ? "…" : ""}`)))));
    if (current) this.scenarioSelect.value = current;
  }

  select(scenarioId) {
    this.scenarioSelect.value = scenarioId;
    this.scenarioSelect.focus();
  }

  async start() {
    clear(this.alert);
    if (this.ep && !this.ep.closed) void api("/api/play/close", { episode_id: this.ep.id }).catch(() => {});
    this.startBtn.disabled = true;
    try {
      const r = await api("/api/play/start", { page: PAGE, scenario_id: this.scenarioSelect.value, seed: this.seed.value === "" ? undefined : Number(this.seed.value) });
      this.ep = { id: r.episode_id, info: r.info, state: r.state, ended: false, live: r.live_scoring, checks: null, step: 0 };
      this.ctx.setHash(`play/${r.info.scenario_id}/${r.info.seed}`);
      this.renderHead();
      clear(this.transcript, msg("user", r.info.mode === "conversation" ? "user" : "task", r.observation.content));
      this.renderComposer();
      this.renderChecks(r.score);
      clear(this.diff, h("p.muted", "No step yet."));
      this.renderState(new Map());
    } catch (e) {
      clear(this.alert, errorBox(e));
    } finally {
      this.startBtn.disabled = false;
    }
  }

  renderHead() {
    const i = this.ep.info;
    clear(this.head,
      h("div.meta", h("strong", i.env_id), " · ", h("code", i.scenario_id), " · seed ", h("code#seed-used", String(i.seed)), " · ", badge(i.mode, i.mode === "conversation" ? "conv" : "task"), " · max ", i.max_steps, " steps · ", h("span#step-count", `step ${this.ep.step}`)),
      h("details.raw", h("summary", "introduction and rules the agent sees"), h("p.prose", i.introduction), h("ol.rules", i.rules.map((r) => h("li", r)))),
    );
  }

  renderComposer() {
    const tools = this.ep.info.tools;
    const toolSelect = h("select#tool-select", { "aria-label": "tool" }, tools.map((t, i) => h("option", { value: String(i) }, t.function.name)));
    const formBox = h("div#tool-form-box");
    const showForm = () => {
      const { form, first } = toolForm(tools[Number(toolSelect.value)], (action) => void this.step(action));
      clear(formBox, form);
      return first;
    };
    toolSelect.addEventListener("change", showForm);
    showForm();
    const raw = h("textarea#raw-text", { rows: 4, spellcheck: false, placeholder: this.ep.info.mode === "conversation" ? "Say something to the user, or paste the model's raw output (<tool_call>{…}</tool_call>, OpenAI tool_calls JSON)…" : "Paste the model's raw output: text ends a task episode; <tool_call>{…}</tool_call> or OpenAI tool_calls JSON call tools…" });
    const sendRaw = () => {
      const text = raw.value;
      if (text.trim() === "") return raw.focus();
      // JSON that looks like an action (a tool call, a list of them, an assistant message) is sent as such
      let action = text;
      try {
        const v = JSON.parse(text);
        if (v && typeof v === "object") action = v;
      } catch {}
      void this.step(action).then((ok) => ok && (raw.value = ""));
    };
    raw.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
        ev.preventDefault();
        sendRaw();
      }
    });
    const user = this.ctx.info?.user_attached;
    clear(this.composer,
      h("div.compose-grid",
        h("div.compose-tool", h("h3", h("label", { htmlFor: "tool-select" }, "Call a tool")), toolSelect, formBox),
        h("div.compose-raw", h("h3", h("label", { htmlFor: "raw-text" }, this.ep.info.mode === "conversation" ? "Talk to the user, or raw model text" : "Raw model text")),
          raw,
          this.ep.info.mode === "conversation" && !user ? h("p.muted", "No simulated user is configured (start with --user-model / USER_OPENAI_BASE_URL): messages are recorded, not answered.") : null,
          h("div.form-actions", h("button#send-raw", { type: "button", onclick: sendRaw, title: "Ctrl+Enter" }, "Send"), h("button#finish.danger", { type: "button", onclick: () => void this.finish() }, "Finish and score")))),
    );
  }

  async step(action) {
    if (!this.ep || this.ep.ended) return false;
    clear(this.alert);
    this.transcript.append(actionMsg(action, this.ep.step + 1));
    try {
      const r = await api("/api/play/step", { episode_id: this.ep.id, action });
      this.applyStep(r);
      return true;
    } catch (e) {
      clear(this.alert, errorBox(e));
      if (e.code === "unknown_episode" || e.code === "episode_done") this.end(null, e);
      return false;
    }
  }

  async finish() {
    if (!this.ep || this.ep.ended) return;
    clear(this.alert);
    try {
      this.applyStep(await api("/api/play/finish", { episode_id: this.ep.id }));
    } catch (e) {
      clear(this.alert, errorBox(e));
    }
  }

  applyStep({ result, state, score }) {
    const info = result.info;
    this.ep.step = info.step;
    this.ep.info.state_hash = info.state_hash;
    document.getElementById("step-count").textContent = `step ${info.step}`;
    this.transcript.append(observationMsg(result));
    this.transcript.lastElementChild.scrollIntoView({ block: "nearest" });
    if (state !== undefined) this.ep.state = state;
    else this.ep.state = applyDiff(this.ep.state, info.diff);
    const changed = new Map(info.diff.filter((d) => d.op !== "remove").map((d) => [d.path, d.op]));
    // a removed entry is no longer in the tree: its parent is marked instead
    for (const d of info.diff) if (d.op === "remove") changed.set(d.path.slice(0, d.path.lastIndexOf("/")), changed.get(d.path.slice(0, d.path.lastIndexOf("/"))) ?? "remove-child");
    this.renderDiff(info.diff);
    this.renderState(changed);
    this.renderChecks(score);
    if (result.terminated || result.truncated) this.end(result);
  }

  end(result, error) {
    this.ep.ended = true;
    for (const el of this.composer.querySelectorAll("button, input, select, textarea")) el.disabled = true;
    const e = result?.info?.error ?? error;
    this.transcript.append(
      h("div#final.final", { class: e ? "bad" : "" },
        result ? h("div#reward.reward", `reward ${result.reward}`) : null,
        result ? h("div.muted", `ended: ${result.info.end_reason}${result.truncated ? " (truncated)" : ""}`) : null,
        e ? errorBox(e) : null,
        h("button.primary", { type: "button", onclick: () => void this.start() }, "Play again")),
    );
    this.transcript.lastElementChild.scrollIntoView({ block: "nearest" });
  }

  renderChecks(score) {
    if (score === null || score === undefined) {
      clear(this.checks, h("p.muted", this.ep.live ? "—" : "Scored when the conversation ends: a scoring copy would ask the simulated user again."));
      return;
    }
    if (score.error) return clear(this.checks, h("p.muted", "Could not score a copy of the episode:"), errorBox(score.error));
    const ri = score.reward_info;
    const prev = this.ep.checks;
    const checks = ri?.checks ?? [];
    this.ep.checks = checks.map((c) => c.passed);
    const how = score.how === "copy" ? "as if the episode ended now (scored on a throwaway copy)" : "final";
    clear(this.checks,
      h("div.score-line", h("span#live-reward.big", `${score.how === "copy" ? "would score" : "reward"} ${score.reward}`), h("span.muted", ` ${ri ? `${ri.passed}/${ri.total} passed · ${ri.mode}` : ""} · ${how}`)),
      ri?.no_checks ? h("p.muted", "This scenario has no checks: the reward is 0.") : null,
      !ri ? h("p.muted", "No checks ran: the episode ended on an env fault, which scores 0.") : null,
      h("ul#checks.checklist", checks.map((c, i) => {
        const flipped = prev && prev[i] !== undefined && prev[i] !== c.passed;
        return h("li", { class: `${c.passed ? "pass" : "fail"}${flipped ? " flipped" : ""}` }, h("span.mark", c.passed ? "✓" : "✗"), " ", c.description, flipped ? h("span.flip", c.passed ? " now passes" : " now fails") : null, c.error ? h("div.check-error", c.error) : null);
      })),
    );
  }

  renderDiff(diff) {
    clear(this.diff, diffList(diff, "diff"));
  }

  renderState(changed) {
    clear(this.stateBox, h("div.tree", jsonTree(this.ep.state, changed)), h("div.muted.small", "hash ", h("code", this.ep.info.state_hash?.slice(0, 12) ?? "")));
  }

  /** Closes this page's episodes when it goes away (the server also closes them when idle). */
  closeAll() {
    // keepalive lets the request outlive the page (sendBeacon cannot send application/json)
    void fetch("/api/play/close-page", { method: "POST", keepalive: true, headers: { "content-type": "application/json" }, body: JSON.stringify({ page: PAGE }) }).catch(() => {});
  }
}

/** RFC 6902 ops (with the old value, as info.diff carries them), each coloured by its op. */
export function diffList(diff, id) {
  if (!diff.length) return h("p.muted", "No state change.");
  return h(`ul${id ? "#" + id : ""}.diff`, diff.map((d) => h("li", { class: `op-${d.op}` }, h("span.op", d.op), " ", h("code.path", d.path), d.old !== undefined ? h("div.old", json(d.old, 0)) : null, d.value !== undefined ? h("div.new", json(d.value, 0)) : null)));
}

export function msg(kind, who, text) {
  return h(`div.msg.${kind}`, h("div.who", who), h("pre", text));
}

export function actionMsg(action, step) {
  if (typeof action === "string") return msg("assistant", `step ${step} · agent`, action);
  if (action && typeof action === "object" && !Array.isArray(action) && typeof action.name === "string") return h("div.msg.call", h("div.who", `step ${step} · tool call`), h("pre", `${action.name}(${json(action.arguments ?? {}, 0)})`));
  return msg("assistant", `step ${step} · agent (structured)`, json(action));
}

export function observationMsg(result) {
  const o = result.observation;
  if (o.role === "tool" && o.tool_results) {
    return h("div.results", o.tool_results.map((r) => h(`div.msg.${r.ok ? "tool" : "error"}`, h("div.who", `${r.name} → ${r.ok ? "result" : "error"}`), h("pre", pretty(r.content)))));
  }
  const isError = /^\{"error":/.test(o.content);
  return msg(isError ? "error" : "user", isError ? "error" : "user", pretty(o.content));
}
