// Play: an episode of any scenario and seed, by hand or by a model. Tool calls from forms generated
// from the tools' JSON Schemas, or the model's raw text; the observation, the state as a tree with
// the step's diff marked, the checks as they stand now (scored on a throwaway fork of the episode
// after every step), and the reward at the end. Every step can be undone (back to the snapshot
// taken before it) or branched from (a fork, opened in its own episode tab). A model plays through
// the same agent loop as `envscaler rollout`, its steps streamed into the same view.
import { api, badge, clear, errorBox, h, json, PAGE, pretty } from "./dom.js";
import { applyDiff, jsonTree } from "./json-tree.js";
import { toolForm } from "./schema-form.js";

export class PlayView {
  constructor(root, ctx) {
    this.ctx = ctx;
    this.ep = null;
    /** Open episodes of this page, one tab each: the first started, then its branches. */
    this.eps = [];
    this.tabCount = 0;
    this.scenarioSelect = h("select#scenario-select", { "aria-label": "scenario" });
    this.seed = h("input#seed", { type: "number", min: 0, step: 1, placeholder: "random", "aria-label": "seed" });
    this.startBtn = h("button#start.primary", { type: "submit" }, "Start episode");
    const bar = h("form.playbar", { onsubmit: (ev) => { ev.preventDefault(); void this.start(); } },
      h("label", { htmlFor: "scenario-select" }, "Scenario"), this.scenarioSelect, h("label", { htmlFor: "seed" }, "Seed"), this.seed, this.startBtn);
    this.agentPanel = this.agentForm();
    this.tabs = h("div#episode-tabs.ep-tabs", { role: "tablist", "aria-label": "episodes" });
    this.head = h("div#episode-head.episode-head");
    this.transcript = h("div#transcript.transcript", { "aria-live": "polite" });
    this.history = h("div#history.historybar");
    this.composer = h("div#composer.composer");
    this.alert = h("div#play-alert", { role: "alert" });
    this.checks = h("div#checks-panel.panel");
    this.diff = h("div#diff-panel.panel");
    this.stateBox = h("div#state-panel.panel");
    root.append(
      bar,
      this.agentPanel,
      this.tabs,
      this.head,
      h("div.play-grid",
        h("div.play-main", h("h2", "Episode"), this.transcript, this.alert, this.history, this.composer),
        h("div.play-side", h("h2", "Checks"), this.checks, h("h2", "Last step's changes"), this.diff, h("h2", "State"), this.stateBox)),
    );
    this.idle();
  }

  idle() {
    clear(this.head, h("p.muted", "Pick a scenario and a seed (empty: random), then start, or let a model play it. Episodes close when this page closes or after the idle timeout."));
    for (const el of [this.transcript, this.composer, this.history, this.tabs]) clear(el);
    clear(this.checks, h("p.muted", "—"));
    clear(this.diff, h("p.muted", "—"));
    clear(this.stateBox, h("p.muted", "—"));
  }

  setScenarios(envs) {
    const current = this.scenarioSelect.value;
    clear(this.scenarioSelect, envs.map((e) => h("optgroup", { label: `${e.name} (${e.id})` }, e.scenarios.map((s) => h("option", { value: s.id }, `${s.id} · ${s.mode} · ${s.task.slice(0, 70)}${s.task.length > 70 ? "…" : ""}`)))));
    if (current) this.scenarioSelect.value = current;
  }

  /** The agent form starts with what `envscaler ui --agent-base-url/--agent-model` gave. */
  setAgentDefaults(agent) {
    if (agent?.base_url && !this.agent.url.value) this.agent.url.value = agent.base_url;
    if (agent?.model && !this.agent.model.value) this.agent.model.value = agent.model;
  }

  select(scenarioId) {
    this.scenarioSelect.value = scenarioId;
    this.scenarioSelect.focus();
  }

  // ---------------------------------------------------------------- episodes and their tabs

  /** Closes every episode of this page (a new start replaces them all). */
  closeEpisodes() {
    const run = this.run;
    if (run && !run.ended) {
      void api("/api/agent/stop", { run_id: run.id }).catch(() => {});
      this.agentDone(run);
      this.agentStatus(h("span.muted", "the model's run was stopped: a new episode was started"));
    }
    for (const ep of this.eps) {
      ep.agent?.source.close();
      if (!ep.closed) void api("/api/play/close", { episode_id: ep.id }).catch(() => {});
      ep.closed = true;
    }
    this.eps = [];
    this.ep = null;
  }

  async start() {
    clear(this.alert);
    this.closeEpisodes();
    this.startBtn.disabled = true;
    try {
      const r = await api("/api/play/start", { page: PAGE, scenario_id: this.scenarioSelect.value, seed: this.seed.value === "" ? undefined : Number(this.seed.value) });
      this.begin(r);
    } catch (e) {
      this.idle();
      clear(this.alert, errorBox(e));
    } finally {
      this.startBtn.disabled = false;
    }
  }

  /** A started episode (by hand or by an agent run): a new episode tree with one tab. */
  begin(r) {
    const log = h("div.log", msg("user", r.info.mode === "conversation" ? "user" : "task", r.observation.content, 0));
    const ep = this.addEpisode({ id: r.episode_id, info: r.info, state: r.state, score: r.score, undo: r.undo, log, label: `seed ${r.info.seed}` });
    this.ctx.setHash(`play/${r.info.scenario_id}/${r.info.seed}`);
    this.show(ep);
    return ep;
  }

  addEpisode({ id, info, state, score, undo, log, label, step = 0, parent = null }) {
    const ep = { id, n: ++this.tabCount, info: { ...info }, state, score, prevChecks: null, undo, log, label, step, parent, ended: false, closed: false, diff: null, changed: new Map(), agent: null, final: null };
    ep.tab = h("span.ep-tab", { role: "presentation" },
      h("button.ep-tab-open", { type: "button", role: "tab", dataset: { episode: id }, onclick: () => this.show(ep) }, `#${ep.n} `, label),
      h("button.ep-tab-close", { type: "button", title: "close this episode", "aria-label": `close episode #${ep.n}`, onclick: () => this.closeTab(ep) }, "×"));
    this.eps.push(ep);
    this.tabs.append(ep.tab);
    return ep;
  }

  closeTab(ep) {
    ep.closed = true;
    const run = ep.agent;
    if (run && !run.ended) {
      // stopped first: the run would otherwise end on its next step, against a closed episode
      void api("/api/agent/stop", { run_id: run.id }).catch(() => {}).finally(() => void api("/api/play/close", { episode_id: ep.id }).catch(() => {}));
      this.agentDone(run);
      this.agentStatus(h("span.muted", "the model's run was stopped: its episode was closed"));
    } else void api("/api/play/close", { episode_id: ep.id }).catch(() => {});
    ep.tab.remove();
    this.eps = this.eps.filter((x) => x !== ep);
    if (this.ep === ep) {
      this.ep = null;
      if (this.eps.length) this.show(this.eps[this.eps.length - 1]);
      else this.idle();
    }
  }

  /** Makes `ep` the episode on screen: its transcript, composer, undo controls and panels. */
  show(ep) {
    this.ep = ep;
    for (const x of this.eps) {
      const b = x.tab.querySelector(".ep-tab-open");
      b.setAttribute("aria-selected", String(x === ep));
      x.tab.classList.toggle("active", x === ep);
    }
    clear(this.alert);
    this.renderHead();
    clear(this.transcript, ep.log);
    this.renderComposer();
    this.renderHistory();
    this.renderChecks();
    if (ep.diff) clear(this.diff, diffList(ep.diff, "diff"));
    else clear(this.diff, h("p.muted", ep.step === 0 ? "No step yet." : `Back at step ${ep.step}.`));
    this.renderState();
    ep.log.lastElementChild?.scrollIntoView({ block: "nearest" });
  }

  renderHead() {
    const ep = this.ep;
    const i = ep.info;
    clear(this.head,
      h("div.meta", h("strong", i.env_id), " · ", h("code", i.scenario_id), " · seed ", h("code#seed-used", String(i.seed)), " · ", badge(i.mode, i.mode === "conversation" ? "conv" : "task"), " · max ", i.max_steps, " steps · ", h("span#step-count", `step ${ep.step}`),
        ep.parent ? h("span.muted", ` · branched from #${ep.parent.n} at step ${ep.branchedAt}`) : null,
        ep.agent ? h("span", " · ", badge("model playing", "agent")) : null),
      h("details.raw", h("summary", "introduction and rules the agent sees"), h("p.prose", i.introduction), h("ol.rules", i.rules.map((r) => h("li", r)))),
    );
  }

  /** Whether the page may act on the episode by hand (not ended, no model playing it). */
  handsFree(ep = this.ep) {
    return ep && !ep.ended && !ep.agent && !ep.closed;
  }

  renderComposer() {
    const ep = this.ep;
    const tools = ep.info.tools;
    const toolSelect = h("select#tool-select", { "aria-label": "tool" }, tools.map((t, i) => h("option", { value: String(i) }, t.function.name)));
    const formBox = h("div#tool-form-box");
    const showForm = () => {
      const { form, first } = toolForm(tools[Number(toolSelect.value)], (action) => void this.step(action));
      clear(formBox, form);
      this.lockComposer();
      return first;
    };
    toolSelect.addEventListener("change", showForm);
    const raw = h("textarea#raw-text", { rows: 4, spellcheck: false, placeholder: ep.info.mode === "conversation" ? "Say something to the user, or paste the model's raw output (<tool_call>{…}</tool_call>, OpenAI tool_calls JSON)…" : "Paste the model's raw output: text ends a task episode; <tool_call>{…}</tool_call> or OpenAI tool_calls JSON call tools…" });
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
        h("div.compose-raw", h("h3", h("label", { htmlFor: "raw-text" }, ep.info.mode === "conversation" ? "Talk to the user, or raw model text" : "Raw model text")),
          raw,
          ep.info.mode === "conversation" && !user ? h("p.muted", "No simulated user is configured (start with --user-model / USER_OPENAI_BASE_URL): messages are recorded, not answered.") : null,
          h("div.form-actions", h("button#send-raw", { type: "button", onclick: sendRaw, title: "Ctrl+Enter" }, "Send"), h("button#finish.danger", { type: "button", onclick: () => void this.finish() }, "Finish and score")))),
    );
    showForm();
  }

  lockComposer() {
    const off = !this.handsFree();
    for (const el of this.composer.querySelectorAll("button, input, select, textarea")) el.disabled = off;
  }

  /** Undo (back to before the last step), back to any held step, and branch (now or from a held step). */
  renderHistory() {
    const ep = this.ep;
    const steps = ep.undo?.steps ?? [];
    const busy = !!ep.agent || ep.closed;
    const pick = h("select#history-step", { "aria-label": "an earlier step" },
      steps.slice().reverse().map((s) => h("option", { value: String(s) }, s === 0 ? "step 0 (the start)" : `step ${s}`)));
    const last = steps[steps.length - 1];
    clear(this.history,
      h("button#undo", { type: "button", title: "u", disabled: busy || last === undefined, onclick: () => void this.undo() }, last === undefined ? "Undo" : `Undo (back to step ${last})`),
      h("label", { htmlFor: "history-step" }, "or"), pick,
      h("button#go-back", { type: "button", disabled: busy || !steps.length, onclick: () => void this.undo(Number(pick.value)) }, "Go back there"),
      h("button#branch-at", { type: "button", disabled: busy || !steps.length, onclick: () => void this.branch(Number(pick.value)) }, "Branch from there"),
      h("button#branch", { type: "button", title: "b", disabled: busy || ep.ended, onclick: () => void this.branch() }, "Branch from now"),
      ep.undo?.snapshot_error ? h("div#undo-note.undo-note", errorBox(ep.undo.snapshot_error)) : null,
    );
  }

  async step(action) {
    const ep = this.ep;
    if (!this.handsFree(ep)) return false;
    clear(this.alert);
    const shown = actionMsg(action, ep.step + 1);
    ep.log.append(shown);
    try {
      this.applyStep(ep, await api("/api/play/step", { episode_id: ep.id, action }), action, shown);
      return true;
    } catch (e) {
      shown.remove();
      clear(this.alert, errorBox(e));
      if (e.code === "unknown_episode" || e.code === "episode_done") this.end(ep, null, e);
      return false;
    }
  }

  async finish() {
    const ep = this.ep;
    if (!this.handsFree(ep)) return;
    clear(this.alert);
    try {
      this.applyStep(ep, await api("/api/play/finish", { episode_id: ep.id }));
    } catch (e) {
      clear(this.alert, errorBox(e));
    }
  }

  /** A step's (or finish's) result into its episode; the panels follow when it is the one on screen. */
  applyStep(ep, { result, state, score, undo }, action, shown) {
    const info = result.info;
    if (action !== undefined && !shown) ep.log.append(actionMsg(action, info.step));
    ep.step = info.step;
    ep.info.state_hash = info.state_hash;
    const obs = observationMsg(result);
    if (action === undefined || action === null) obs.dataset.finish = "1";
    ep.log.append(obs);
    ep.state = state !== undefined ? state : applyDiff(ep.state, info.diff);
    ep.diff = info.diff;
    ep.changed = changedPaths(info.diff);
    ep.prevChecks = checkMarks(ep.score);
    ep.score = score;
    ep.undo = undo ?? ep.undo;
    if (result.terminated || result.truncated) this.end(ep, result);
    if (ep !== this.ep) return;
    document.getElementById("step-count").textContent = `step ${info.step}`;
    ep.log.lastElementChild?.scrollIntoView({ block: "nearest" });
    clear(this.diff, diffList(info.diff, "diff"));
    this.renderState();
    this.renderChecks();
    this.renderHistory();
  }

  end(ep, result, error) {
    ep.ended = true;
    const e = result?.info?.error ?? error;
    ep.final = h("div#final.final", { class: e ? "bad" : "", dataset: { step: String(ep.step) } },
      result ? h("div#reward.reward", `reward ${result.reward}`) : null,
      result ? h("div.muted", `ended: ${result.info.end_reason}${result.truncated ? " (truncated)" : ""}`) : null,
      e ? errorBox(e) : null,
      h("span.muted", ep.undo?.steps?.length ? "Undo or branch to play on from an earlier step, or" : ""),
      h("button.primary", { type: "button", onclick: () => void this.start() }, "Play again"));
    ep.log.append(ep.final);
    if (ep === this.ep) {
      this.lockComposer();
      this.renderHistory();
      ep.final.scrollIntoView({ block: "nearest" });
    }
  }

  /** Back to the point after `toStep` steps (default: before the last step or finish). */
  async undo(toStep) {
    const ep = this.ep;
    if (!ep || ep.agent || ep.closed) return;
    clear(this.alert);
    try {
      const r = await api("/api/play/undo", { episode_id: ep.id, ...(toStep === undefined ? {} : { to_step: toStep }) });
      for (const el of [...ep.log.children]) if (Number(el.dataset.step) > r.step || el.dataset.finish || el === ep.final) el.remove();
      ep.final = null;
      ep.ended = false;
      ep.step = r.step;
      ep.info.state_hash = r.state_hash;
      ep.state = r.state;
      ep.diff = null;
      ep.changed = new Map();
      ep.prevChecks = checkMarks(ep.score);
      ep.score = r.score;
      ep.undo = r.undo;
      this.show(ep);
    } catch (e) {
      clear(this.alert, errorBox(e));
      // the episode could not be put back and is gone (its snapshot was lost with a stopped worker)
      if (e.code === "unknown_episode") this.end(ep, null, e);
      else this.renderHistory();
    }
  }

  /** A fork of this episode (now, or at a held step), opened in a tab of its own. */
  async branch(atStep) {
    const ep = this.ep;
    if (!ep || ep.agent || ep.closed) return;
    clear(this.alert);
    try {
      const r = await api("/api/play/branch", { episode_id: ep.id, ...(atStep === undefined ? {} : { at_step: atStep }) });
      const log = h("div.log");
      for (const el of ep.log.children) if (Number(el.dataset.step) <= r.step && !el.dataset.finish && el !== ep.final) log.append(el.cloneNode(true));
      log.append(h("div.branch-note", { dataset: { step: String(r.step) } }, `branched from #${ep.n} at step ${r.step}`));
      const child = this.addEpisode({ id: r.episode_id, info: { ...ep.info, state_hash: r.state_hash }, state: r.state, score: r.score, undo: r.undo, log, label: `↳ #${ep.n}@${r.step}`, step: r.step, parent: ep });
      child.branchedAt = r.step;
      this.show(child);
    } catch (e) {
      clear(this.alert, errorBox(e));
    }
  }

  renderChecks() {
    const ep = this.ep;
    const score = ep.score;
    if (score === null || score === undefined) return clear(this.checks, h("p.muted", "—"));
    if (score.error) return clear(this.checks, h("p.muted", "Could not score a copy of the episode:"), errorBox(score.error));
    const ri = score.reward_info;
    const prev = ep.prevChecks;
    const checks = ri?.checks ?? [];
    const how = score.how === "copy" ? "as if the episode ended now (scored on a throwaway fork)" : "final";
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

  renderState() {
    const ep = this.ep;
    clear(this.stateBox, h("div.tree", jsonTree(ep.state, ep.changed)), h("div.muted.small", "hash ", h("code", ep.info.state_hash?.slice(0, 12) ?? "")));
  }

  // ---------------------------------------------------------------- a model playing

  agentForm() {
    const a = (this.agent = {
      url: h("input#agent-url", { type: "url", placeholder: "http://127.0.0.1:8000/v1", size: 30, "aria-label": "endpoint base URL" }),
      model: h("input#agent-model", { type: "text", placeholder: "model name", size: 16, "aria-label": "model" }),
      key: h("input#agent-key", { type: "password", placeholder: "API key (optional)", size: 14, autocomplete: "off", "aria-label": "API key" }),
      mode: h("select#agent-mode", { "aria-label": "agent mode" }, h("option", { value: "fc" }, "fc: the endpoint's tool calling"), h("option", { value: "prompt" }, "prompt: tool calls in the text")),
      maxSteps: h("input#agent-max-steps", { type: "number", min: 1, max: 1000, step: 1, placeholder: "scenario's", "aria-label": "max steps" }),
      timeout: h("input#agent-timeout", { type: "number", min: 1, max: 600, step: 1, value: "60", "aria-label": "timeout per model call in seconds" }),
      go: h("button#agent-start.primary", { type: "submit" }, "Let the model play"),
      stop: h("button#agent-stop.danger", { type: "button", disabled: true, onclick: () => void this.stopAgent() }, "Stop"),
      status: h("div#agent-status.agent-status", { "aria-live": "polite" }),
    });
    return h("details#agent-panel.agent-panel",
      h("summary", "Let a model play this scenario (any OpenAI-compatible endpoint; the same loop as ", h("code", "envscaler rollout"), ")"),
      h("form.agentbar", { onsubmit: (ev) => { ev.preventDefault(); void this.startAgent(); } },
        h("label", { htmlFor: "agent-url" }, "Endpoint"), a.url, h("label", { htmlFor: "agent-model" }, "Model"), a.model, a.key,
        h("label", { htmlFor: "agent-mode" }, "Mode"), a.mode, h("label", { htmlFor: "agent-max-steps" }, "Max steps"), a.maxSteps,
        h("label", { htmlFor: "agent-timeout" }, "Timeout (s)"), a.timeout, a.go, a.stop),
      a.status);
  }

  agentStatus(...children) {
    clear(this.agent.status, ...children);
  }

  async startAgent() {
    const a = this.agent;
    clear(this.alert);
    this.closeEpisodes();
    this.idle();
    a.go.disabled = true;
    this.agentStatus(h("span.muted", "starting…"));
    let run;
    try {
      run = await api("/api/agent/start", {
        page: PAGE, scenario_id: this.scenarioSelect.value, seed: this.seed.value === "" ? undefined : Number(this.seed.value),
        base_url: a.url.value.trim(), model: a.model.value.trim(), api_key: a.key.value || undefined, agent_mode: a.mode.value,
        max_steps: a.maxSteps.value === "" ? undefined : Number(a.maxSteps.value), timeout_s: a.timeout.value === "" ? undefined : Number(a.timeout.value),
      });
    } catch (e) {
      a.go.disabled = false;
      this.agentStatus(errorBox(e));
      return;
    }
    a.stop.disabled = false;
    this.run = { id: run.run_id, ep: null, ended: false };
    this.follow(this.run);
  }

  /** Follows a run's event stream (an EventSource reconnects by itself, resuming after the last event it saw). */
  follow(run) {
    const source = new EventSource(`/api/agent/events?run_id=${encodeURIComponent(run.id)}`);
    run.source = source;
    source.onmessage = (m) => this.onAgentEvent(run, JSON.parse(m.data));
    source.onerror = () => {
      if (run.ended || source.readyState !== EventSource.CLOSED) return;
      this.agentDone(run);
      this.agentStatus(errorBox({ code: "stream_lost", message: "the run's event stream closed before the run ended (the server stopped, or the run is gone)" }));
    };
  }

  onAgentEvent(run, e) {
    if (e.type === "start") {
      run.ep = this.begin(e);
      run.ep.agent = run;
      this.show(run.ep);
      this.agentStatus(h("span.muted", `playing ${e.info.scenario_id} (seed ${e.info.seed})…`));
    } else if (e.type === "thinking") {
      this.agentStatus(h("span.muted", `step ${e.step}: waiting for the model…`));
    } else if (e.type === "model") {
      this.agentStatus(h("span.muted", `step ${e.step}: the model replied in ${e.latency_ms} ms (${e.usage.completion_tokens} tokens)`));
    } else if (e.type === "step" && run.ep) {
      this.applyStep(run.ep, e, e.finish ? undefined : e.action);
    } else if (e.type === "end") {
      this.agentDone(run);
      const o = e.outcome;
      this.agentStatus(
        h("div#agent-outcome", e.stopped ? `stopped by you after ${o.steps} steps; the episode stays open to play on by hand.` : `the model ${o.success ? "solved it" : "is done"}: reward ${o.reward} after ${o.steps} steps (${o.end_reason ?? "no end"}) · ${o.model_calls} model calls, ${o.usage.prompt_tokens}+${o.usage.completion_tokens} tokens`),
        o.failures.map((f) => errorBox({ code: f.kind, message: `step ${f.step}: ${f.message}` })),
      );
      this.agent.status.scrollIntoView({ block: "nearest" });
    }
  }

  agentDone(run) {
    run.ended = true;
    run.source.close();
    this.agent.go.disabled = false;
    this.agent.stop.disabled = true;
    if (run.ep) {
      run.ep.agent = null;
      if (run.ep === this.ep) this.show(run.ep);
    }
  }

  async stopAgent() {
    const run = this.run;
    if (!run || run.ended) return;
    this.agent.stop.disabled = true;
    this.agentStatus(h("span.muted", "stopping…"));
    try {
      await api("/api/agent/stop", { run_id: run.id });
    } catch (e) {
      this.agentStatus(errorBox(e));
    }
  }

  /** Closes this page's episodes when it goes away (the server also closes them when idle). */
  closeAll() {
    // keepalive lets the request outlive the page (sendBeacon cannot send application/json)
    void fetch("/api/play/close-page", { method: "POST", keepalive: true, headers: { "content-type": "application/json" }, body: JSON.stringify({ page: PAGE }) }).catch(() => {});
  }
}

function checkMarks(score) {
  return score?.reward_info?.checks?.map((c) => c.passed) ?? null;
}

/** The tree marks what a step changed; a removed entry is no longer in the tree, so its parent is marked instead. */
function changedPaths(diff) {
  const changed = new Map(diff.filter((d) => d.op !== "remove").map((d) => [d.path, d.op]));
  for (const d of diff) {
    if (d.op !== "remove") continue;
    const parent = d.path.slice(0, d.path.lastIndexOf("/"));
    changed.set(parent, changed.get(parent) ?? "remove-child");
  }
  return changed;
}

/** RFC 6902 ops (with the old value, as info.diff carries them), each coloured by its op. */
export function diffList(diff, id) {
  if (!diff.length) return h("p.muted", "No state change.");
  return h(`ul${id ? "#" + id : ""}.diff`, diff.map((d) => h("li", { class: `op-${d.op}` }, h("span.op", d.op), " ", h("code.path", d.path), d.old !== undefined ? h("div.old", json(d.old, 0)) : null, d.value !== undefined ? h("div.new", json(d.value, 0)) : null)));
}

export function msg(kind, who, text, step) {
  return h(`div.msg.${kind}`, step === undefined ? null : { dataset: { step: String(step) } }, h("div.who", who), h("pre", text));
}

/** What the agent did: a tool call, the model's text, or an assistant message (text and tool calls, as fc mode sends it). */
export function actionMsg(action, step) {
  const tag = (el) => (step === undefined ? el : ((el.dataset.step = String(step)), el));
  if (typeof action === "string") return tag(msg("assistant", step === undefined ? "agent" : `step ${step} · agent`, action));
  if (action && typeof action === "object" && !Array.isArray(action) && typeof action.name === "string") return tag(h("div.msg.call", h("div.who", `step ${step} · tool call`), h("pre", `${action.name}(${json(action.arguments ?? {}, 0)})`)));
  if (action && typeof action === "object" && action.role === "assistant") {
    const calls = action.tool_calls ?? [];
    return tag(h("div.msg.assistant", h("div.who", `step ${step} · model`),
      action.content ? h("pre", action.content) : null,
      calls.map((c) => h("div.msg.call", h("div.who", "tool call"), h("pre", `${c.function?.name}(${c.function?.arguments ?? ""})`)))));
  }
  return tag(msg("assistant", `step ${step} · agent (structured)`, json(action)));
}

export function observationMsg(result) {
  const o = result.observation;
  const step = String(result.info.step);
  if (o.role === "tool" && o.tool_results) {
    return h("div.results", { dataset: { step } }, o.tool_results.map((r) => h(`div.msg.${r.ok ? "tool" : "error"}`, h("div.who", `${r.name} → ${r.ok ? "result" : "error"}`), h("pre", pretty(r.content)))));
  }
  // a task episode's text reply ends it with the env's "Task finished" note: no user wrote that turn
  if (result.info.end_reason === "text_reply" && o.content === "Task finished") return h("div.msg.end", { dataset: { step } }, h("div.who", "episode ended"), "the agent's text reply ended the task");
  const isError = /^\{"error":/.test(o.content);
  return msg(isError ? "error" : "user", isError ? "error" : "user", pretty(o.content), step);
}
