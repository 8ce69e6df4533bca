// The state as a browsable tree: objects and arrays fold (native <details>, so the keyboard works),
// children are built when first opened (tau-bench states are megabytes), and the paths the last
// step changed are marked, with their ancestors opened.
import { h, json } from "./dom.js";

const seg = (k) => "/" + String(k).replace(/~/g, "~0").replace(/\//g, "~1");
export const unseg = (s) => s.replace(/~1/g, "/").replace(/~0/g, "~");

function preview(v) {
  if (Array.isArray(v)) return `[${v.length}]`;
  const keys = Object.keys(v);
  return `{${keys.length}} ${keys.slice(0, 4).join(", ")}${keys.length > 4 ? ", …" : ""}`;
}

function leaf(v) {
  const t = v === null ? "null" : typeof v;
  return h(`span.v-${t}`, json(v, 0));
}

/**
 * changed: Map of JSON pointer → op ("add" | "replace"); a node is marked when its path is one,
 * and opened when one lies under it.
 */
export function jsonTree(value, changed = new Map(), path = "", key = null, openDepth = 1) {
  const mark = changed.get(path);
  const under = !mark && [...changed.keys()].some((p) => p.startsWith(path + "/"));
  const label = key === null ? h("span.key.root", "state") : h("span.key", key);
  if (value === null || typeof value !== "object") {
    return h("div.node.leaf", { class: mark ? `changed op-${mark}` : "", dataset: { path } }, label, h("span.colon", ": "), leaf(value));
  }
  const det = h("details.node", { class: mark ? `changed op-${mark}` : under ? "contains-change" : "", dataset: { path } }, h("summary", label, " ", h("span.preview", preview(value))));
  let built = false;
  const build = () => {
    if (built) return;
    built = true;
    const kids = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
    const box = h("div.children");
    const LIMIT = 500;
    for (const [k, v] of kids.slice(0, LIMIT)) box.append(jsonTree(v, changed, path + seg(k), k, openDepth - 1));
    if (kids.length > LIMIT) box.append(h("div.muted", `… ${kids.length - LIMIT} more (see the raw state)`));
    det.append(box);
  };
  det.addEventListener("toggle", () => det.open && build());
  if (openDepth > 0 || under || mark) {
    det.open = true;
    build();
  }
  return det;
}

/** Applies RFC 6902 add / remove / replace ops (what info.diff carries) to a JSON value in place; returns the new root. */
export function applyDiff(root, ops) {
  for (const op of ops) {
    const parts = op.path.split("/").slice(1).map(unseg);
    if (parts.length === 0) {
      root = op.op === "remove" ? null : structuredClone(op.value);
      continue;
    }
    let parent = root;
    for (const p of parts.slice(0, -1)) parent = parent?.[p];
    if (parent === null || typeof parent !== "object") throw new Error(`diff path ${op.path} is not in the state`);
    const last = parts.at(-1);
    if (op.op === "remove") {
      if (Array.isArray(parent)) parent.splice(Number(last), 1);
      else delete parent[last];
    } else parent[last] = structuredClone(op.value);
  }
  return root;
}
