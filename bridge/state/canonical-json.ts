// Moved to protocol/canonical-json.ts (state_hash is defined by the protocol). This re-export
// stays until bridge/episode/checker.ts, which is being rewritten on another branch, imports it
// from there (issue 21).
export { canonicalJson } from "../../protocol/canonical-json.js";
