// Small DOM and API helpers. Env text is untrusted: it only ever reaches the page as text nodes.

/** h("div.card#x", {onclick, title}, child, "text", [children]) */
export function h(spec, attrs, ...children) {
  const tag = /^[a-z0-9]*/i.exec(spec)[0] || "div";
  const el = document.createElement(tag);
  const classes = [];
  for (const [, sigil, name] of spec.slice(tag.length).matchAll(/([#.])([\w-]+)/g)) {
    if (sigil === "#") el.id = name;
    else classes.push(name);
  }
  if (classes.length) el.className = classes.join(" ");
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className += (el.className ? " " : "") + v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k in el && k !== "list" && k !== "type") el[k] = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** The app's one page session: episodes it starts are closed when it goes away. */
export const PAGE = crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2);

export class ApiError extends Error {
  constructor(code, message, status) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

export async function api(path, body) {
  const res = await fetch(path, body === undefined ? {} : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  let value;
  try {
    value = await res.json();
  } catch {
    throw new ApiError("bad_response", `${res.status} ${res.statusText}`, res.status);
  }
  if (!res.ok || value?.error) throw new ApiError(value?.error?.code ?? "error", value?.error?.message ?? res.statusText, res.status);
  return value;
}

/** A typed error as the page shows it: its code, then what it means. */
export function errorBox(e) {
  return h("div.error-box", { role: "alert" }, h("code.code", e.code ?? "error"), " ", e.message ?? String(e));
}

export const json = (v, indent = 2) => JSON.stringify(v, null, indent);

/** Pretty JSON when the text is JSON, else the text. */
export function pretty(text) {
  try {
    return json(JSON.parse(text));
  } catch {
    return text;
  }
}

export function badge(text, kind = "") {
  return h(`span.badge${kind ? "." + kind : ""}`, text);
}

export function provenanceBadge(p) {
  if (!p) return null;
  const label = { synth: "synth run", import: "imported", bundled: "bundled", local: "local folder" }[p.kind] ?? p.kind;
  return badge(label, `prov-${p.kind}`);
}
