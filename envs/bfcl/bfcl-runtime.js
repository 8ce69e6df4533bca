// How bfcl-eval's executor runs one call on a backend instance, in JavaScript: bind keyword
// arguments to the method's Python signature (with Python's TypeError texts), run it, and render
// the result as the harness does (a str as is, a dict through json.dumps or else str(), anything
// else through str(); an exception becomes "Error during execution: {e}").
const BfclRuntime = (function () {
  "use strict";
  const REQUIRED = Symbol("required");

  /** AttributeError for a method a value's type does not have (what Python raises on misuse). */
  function noAttr(v, name) {
    return new PyText.PyError("AttributeError", `'${PyText.typeName(v)}' object has no attribute '${name}'`);
  }
  /** Calls a str method on v, raising Python's AttributeError when v is not a str. */
  function strOnly(v, name) {
    if (typeof v !== "string") throw noAttr(v, name);
    return v;
  }

  function missingText(qual, names) {
    const q = names.map((n) => `'${n}'`);
    const list = q.length === 1 ? q[0] : q.length === 2 ? `${q[0]} and ${q[1]}` : `${q.slice(0, -1).join(", ")}, and ${q[q.length - 1]}`;
    return `${qual}() missing ${names.length} required positional argument${names.length > 1 ? "s" : ""}: ${list}`;
  }

  /** Binds kwargs (a PyDict or a plain object of Python values) to a signature: [[name, default?], ...]. */
  function bind(className, method, sig, kwargs) {
    const qual = `${className}.${method}`;
    const given = kwargs instanceof PyText.PyDict ? kwargs : new PyText.PyDict(Object.entries(kwargs));
    const names = sig.map((p) => p[0]);
    for (const k of given.keys()) if (!names.includes(k)) throw new PyText.PyError("TypeError", `${qual}() got an unexpected keyword argument '${k}'`);
    const missing = sig.filter((p) => p.length < 2 && !given.has(p[0])).map((p) => p[0]);
    if (missing.length) throw new PyText.PyError("TypeError", missingText(qual, missing));
    return sig.map((p) => (given.has(p[0]) ? given.get(p[0]) : p[1]));
  }

  /** Runs `method(**kwargs)` on an instance and returns the observation text. */
  function execute(instance, method, kwargs) {
    const cls = instance.constructor;
    try {
      const sig = cls.SIGNATURES[method];
      if (!sig) throw new PyText.PyError("AttributeError", `'${cls.name}' object has no attribute '${method}'`);
      const args = bind(cls.name, method, sig, kwargs);
      return PyText.render(instance[method](...args));
    } catch (e) {
      if (e instanceof PyText.PyError) return `Error during execution: ${e.message}`;
      throw e;
    }
  }

  return { REQUIRED, bind, execute, noAttr, strOnly };
})();
