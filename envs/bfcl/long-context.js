// The long_context.py constants (read from the installed bfcl-eval by the importer and defined as
// BFCL_LONG_CONTEXT ahead of this file). Converted once per realm and shared, as module globals
// are in Python: a port that mutates one (VehicleControlAPI's weather dict) mutates it for the
// rest of the episode, as the original does for the rest of its process.
const BfclLongContext = (function () {
  const cache = new Map();
  return function get(name) {
    if (!cache.has(name)) {
      if (typeof BFCL_LONG_CONTEXT === "undefined" || !(name in BFCL_LONG_CONTEXT)) throw new Error(`long-context constant ${name} is missing from the bundle`);
      cache.set(name, PyText.fromJson(BFCL_LONG_CONTEXT[name]));
    }
    return cache.get(name);
  };
})();
