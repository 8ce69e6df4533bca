// Guest-side prelude. Evaluated first in every fresh QuickJS context, before any env or checker code.
// It is an expression: a function the host calls once with its capabilities, returning the
// dispatcher the host keeps a handle to. Everything it needs is captured here, before untrusted code
// runs, so an env that patches JSON, Object or Array later cannot change how state is read out.
(function installPrelude(hostRead, configJson) {
  "use strict";
  const config = JSON.parse(configJson);
  const G = globalThis;
  const ObjectKeys = Object.keys;
  const ObjectCreate = Object.create;
  const ObjectFreeze = Object.freeze;
  const ObjectAssign = Object.assign;
  const ObjectDefineProperty = Object.defineProperty;
  const ObjectGetPrototypeOf = Object.getPrototypeOf;
  const ObjectGetOwnPropertyNames = Object.getOwnPropertyNames;
  const hasOwn = Object.prototype.hasOwnProperty;
  const ArrayIsArray = Array.isArray;
  const JSONStringify = JSON.stringify;
  const JSONParse = JSON.parse;
  const ReflectGet = Reflect.get;
  const ReflectSet = Reflect.set;
  const ReflectHas = Reflect.has;
  const ReflectOwnKeys = Reflect.ownKeys;
  const ReflectDelete = Reflect.deleteProperty;
  const ReflectApply = Reflect.apply;
  const ReflectConstruct = Reflect.construct;
  const ReflectGetOwnPropertyDescriptor = Reflect.getOwnPropertyDescriptor;
  const ReflectDefineProperty = Reflect.defineProperty;
  const ProxyCtor = Proxy;
  const WeakMapCtor = WeakMap;
  const wmGet = WeakMap.prototype.get;
  const wmSet = WeakMap.prototype.set;
  const wmHas = WeakMap.prototype.has;
  const OrigDate = Date;
  const indirectEval = eval;
  const StringCtor = String;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const RangeErrorCtor = RangeError;
  const MathFloor = Math.floor;
  const push = (arr, v) => { arr[arr.length] = v; };
  // f(thisArg, ...args) calling the built-in f: bound now to the original Function.prototype.call,
  // so later patches of call/apply do not reach it, and cheaper than Reflect.apply with an array
  // per call (these run for every state record an env reads)
  const uncurry = (f) => ReflectApply(Function.prototype.bind, Function.prototype.call, [f]);
  const own = uncurry(hasOwn);
  const wmap = () => new WeakMapCtor();
  const wget = uncurry(wmGet);
  const wset = uncurry(wmSet);
  const whas = uncurry(wmHas);

  //// determinism: seeded Math.random, virtual clock, no GC-timing or timing APIs ////

  // sfc32, seeded from the episode seed by `configure`; the same seed gives the same sequence on
  // every machine. Configured after the env's class is evaluated (images are taken before any
  // episode exists), so top-level code of an env runs unseeded, once per env, never per episode.
  let a = 0, b = 0, c = 0, d = 0;
  // draws since configure: an episode that drew none did not depend on its seed (the host reuses
  // one reference replay for every seed of such a scenario)
  let draws = 0;
  function random() {
    draws++;
    a |= 0; b |= 0; c |= 0; d |= 0;
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  }
  ObjectDefineProperty(Math, "random", { value: random, writable: false, configurable: false });

  // Virtual clock: starts at the configured time, advances 1 ms per read and by tickMs per tool call.
  let clockMs = 0;
  let tickMs = 0;
  // where configure set the clock: a clock still there was never read
  let clockStart = 0;
  function configure(json) {
    const c2 = JSONParse(json);
    a = c2.seed[0] | 0; b = c2.seed[1] | 0; c = c2.seed[2] | 0; d = c2.seed[3] | 0;
    for (let i = 0; i < 12; i++) random();
    draws = 0;
    clockMs = c2.clockMs;
    clockStart = clockMs;
    tickMs = c2.tickMs;
    return null;
  }
  const now = () => ++clockMs;
  function VirtualDate(...args) {
    if (new.target === undefined) return new OrigDate(now()).toString();
    const target = new.target === VirtualDate ? OrigDate : new.target;
    return args.length === 0 ? ReflectConstruct(OrigDate, [now()], target) : ReflectConstruct(OrigDate, args, target);
  }
  VirtualDate.now = now;
  VirtualDate.parse = OrigDate.parse;
  VirtualDate.UTC = OrigDate.UTC;
  ObjectDefineProperty(VirtualDate, "prototype", { value: OrigDate.prototype, writable: false, configurable: false });
  // the prototype's constructor is the usual way around a naive Date wrapper: pin it to ours
  ObjectDefineProperty(OrigDate.prototype, "constructor", { value: VirtualDate, writable: false, configurable: false, enumerable: false });
  ObjectDefineProperty(G, "Date", { value: VirtualDate, writable: false, configurable: false, enumerable: false });
  for (const name of ["performance", "WeakRef", "FinalizationRegistry", "SharedArrayBuffer", "Atomics", "os", "std", "scriptArgs", "print"]) {
    if (own(G, name)) ReflectDelete(G, name);
  }
  // Code logs as its authors' code does (the 1.5B's envs call console.log; the original's Python envs
  // print), and a ReferenceError there ended the env's tool calls in synth's dual-agent test. So
  // `console` exists and its methods do nothing: nothing reaches the host (no channel to fill or to
  // leak through), and a log line cannot change an outcome.
  const quietConsole = {};
  for (const name of ["log", "info", "warn", "error", "debug", "trace", "dir", "table", "group", "groupCollapsed", "groupEnd", "time", "timeEnd", "timeLog", "count", "countReset", "assert", "clear"]) {
    quietConsole[name] = function () {};
  }
  ObjectDefineProperty(G, "console", { value: quietConsole, writable: true, configurable: true, enumerable: false });

  //// builtins that loop in C without polling the interrupt handler ////

  // QuickJS only checks the deadline in the bytecode loop; these natives can spin for minutes on a
  // huge sparse array or array-like (measured: indexOf on {length: 2**32-1} ignored a 1 s deadline).
  // No real array in a memory-capped sandbox is this long, so refusing is not observable otherwise.
  const MAX_NATIVE_LENGTH = 1 << 24;
  const guardedArrayMethods = ["indexOf", "lastIndexOf", "includes", "join", "toString", "toLocaleString", "fill", "copyWithin",
    "reverse", "find", "findIndex", "findLast", "findLastIndex", "every", "some", "forEach", "map", "filter", "reduce", "reduceRight",
    "slice", "splice", "concat", "flat", "flatMap", "at", "keys", "values", "entries", "sort", "toSorted", "toReversed", "toSpliced", "with"];
  const ArrayProto = Array.prototype;
  for (const name of guardedArrayMethods) {
    const original = ArrayProto[name];
    if (typeof original !== "function") continue;
    const guarded = {
      [name](...args) {
        const len = this == null ? 0 : +this.length;
        if (len > MAX_NATIVE_LENGTH) throw new RangeErrorCtor("array length " + len + " is over the sandbox limit for " + name);
        return ReflectApply(original, this, args);
      },
    }[name];
    ObjectDefineProperty(ArrayProto, name, { value: guarded, writable: true, configurable: true, enumerable: false });
  }
  const StringProto = String.prototype;
  for (const [proto, names] of [[StringProto, ["repeat", "padStart", "padEnd"]]]) {
    for (const name of names) {
      const original = proto[name];
      const guarded = {
        [name](...args) {
          const n = +args[0];
          if (name === "repeat" ? n * StringCtor(this).length > MAX_NATIVE_LENGTH : n > MAX_NATIVE_LENGTH)
            throw new RangeErrorCtor("string length is over the sandbox limit for " + name);
          return ReflectApply(original, this, args);
        },
      }[name];
      ObjectDefineProperty(proto, name, { value: guarded, writable: true, configurable: true, enumerable: false });
    }
  }
  const ArrayCtor = Array;
  const guardedArray = function Array(...args) {
    if (args.length === 1 && typeof args[0] === "number" && args[0] > MAX_NATIVE_LENGTH)
      throw new RangeErrorCtor("array length is over the sandbox limit");
    return new.target ? ReflectConstruct(ArrayCtor, args, new.target === guardedArray ? ArrayCtor : new.target) : ReflectApply(ArrayCtor, undefined, args);
  };
  for (const k of ObjectGetOwnPropertyNames(ArrayCtor)) {
    if (k !== "prototype" && k !== "length" && k !== "name") ObjectDefineProperty(guardedArray, k, ReflectGetOwnPropertyDescriptor(ArrayCtor, k));
  }
  ObjectDefineProperty(guardedArray, "prototype", { value: ArrayProto, writable: false, configurable: false, enumerable: false });
  ObjectDefineProperty(ArrayProto, "constructor", { value: guardedArray, writable: true, configurable: true, enumerable: false });
  ObjectDefineProperty(G, "Array", { value: guardedArray, writable: true, configurable: true, enumerable: false });

  //// state: collections keyed by id, loaded lazily from the host and tracked for changes ////

  const readOnly = config.mode !== "env";
  const toRaw = wmap();            // proxy -> raw object
  const rawToProxy = wmap();       // raw object -> proxy (keeps identity: users[id] === users[id])
  const collections = ObjectCreate(null); // name -> collection record

  function fail(message) { throw new TypeErrorCtor(message); }
  function unwrap(v) { return v !== null && typeof v === "object" && whas(toRaw, v) ? wget(toRaw, v) : v; }

  // `touched`: the collection has something to report (every hot record is dirty too), so a call
  // that wrote nothing in it costs the report a flag test, not two key lists and two new objects
  function markDirty(coll, id) { coll.dirty[id] = true; coll.touched = true; }

  // Two ways a record's objects are tracked. A record the prelude owns (parsed from the host's text,
  // or copied at the end of a call) is tracked eagerly: as it comes in, every object in it is put
  // behind a proxy in place, so the proxies need no `get` trap and reading a field costs the env a
  // native property access, not a call into a trap (that was ~20 % of a library read tool's guest
  // time): a call costs what it writes. An object the env assigns into the state is the env's own
  // (it may still hold it and its parts), so it is not rewritten: its reads are wrapped as they
  // happen (`wrap`), and its record, marked hot, is reported and replaced by an eagerly tracked
  // copy at the end of the call (see reportRecord). The handler below serves both (`lazy` adds the
  // `get` trap); a tracking proxy met inside an env's object (a part of another record it put
  // there) is handed out as it is, so a write through it marks the record it belongs to.
  function recordHandler(coll, id, lazy) {
    const handler = {
      set(t, key, value) {
        if (readOnly) fail("state is read-only here");
        markDirty(coll, id);
        // an assigned object may be mutated later through a reference that bypasses the proxies;
        // a proxy assigned stays one (a part of another record keeps marking that record)
        if (value !== null && typeof value === "object") coll.hot[id] = true;
        return ReflectSet(t, key, value);
      },
      deleteProperty(t, key) {
        if (readOnly) fail("state is read-only here");
        markDirty(coll, id);
        return ReflectDelete(t, key);
      },
      defineProperty(t, key, desc) {
        if (readOnly) fail("state is read-only here");
        markDirty(coll, id);
        if (desc.value !== null && typeof desc.value === "object") coll.hot[id] = true;
        return ReflectDefineProperty(t, key, desc);
      },
      setPrototypeOf() { return false; },
    };
    if (lazy) {
      handler.get = (t, key) => {
        const v = t[key];
        return v === null || typeof v !== "object" || whas(toRaw, v) ? v : wrap(v, coll, id);
      };
    }
    return handler;
  }

  // `raw` (a tree the prelude owns) tracked eagerly, with one handler for the whole record. Float
  // boxes of python-format envs are frozen values, not containers: they stay as they are.
  function track(raw, coll, id, handler) {
    if (raw === null || typeof raw !== "object" || (pyValues !== null && pyValues.isFloat(raw))) return raw;
    for (let i = 0, all = ObjectKeys(raw); i < all.length; i++) {
      const k = all[i];
      const v = raw[k];
      if (v !== null && typeof v === "object") raw[k] = track(v, coll, id, handler);
    }
    const proxy = new ProxyCtor(raw, handler);
    wset(toRaw, proxy, raw);
    return proxy;
  }

  // A record the prelude owns, tracked eagerly; its proxy is the one every read of it returns.
  function trackRecord(coll, id, raw) {
    if (raw === null || typeof raw !== "object") return raw;
    // checks only read: a frozen plain record is read natively, with no proxy in the way
    if (readOnly) return deepFreeze(raw);
    const proxy = track(raw, coll, id, recordHandler(coll, id, false));
    if (proxy !== raw) wset(rawToProxy, raw, proxy);
    return proxy;
  }

  // Lazy tracking of an object the env assigned (see above).
  function wrap(raw, coll, id) {
    if (raw === null || typeof raw !== "object") return raw;
    const existing = wget(rawToProxy, raw);
    if (existing !== undefined) return existing;
    const handler = recordHandler(coll, id, true);
    const proxy = new ProxyCtor(raw, handler);
    wset(rawToProxy, raw, proxy);
    wset(toRaw, proxy, raw);
    return proxy;
  }

  function load(coll, id) {
    if (own(coll.loaded, id)) return coll.loaded[id];
    if (own(coll.deleted, id)) return undefined;
    if (fromBase(coll, id)) {
      if (!own(coll.base, id)) return undefined;
      const frozen = coll.base[id];
      setLoaded(coll, id, frozen, true);
      return frozen;
    }
    const text = hostRead("get", coll.name, id);
    if (text === undefined) return undefined;
    const value = parseStateText(text); // python-format envs: see usePythonValues
    setLoaded(coll, id, value);
    return value;
  }

  // The record as the env sees it: its tracking proxy (a primitive as is).
  function view(coll, id, v) { return v !== null && typeof v === "object" && !readOnly ? wrap(v, coll, id) : v; }

  // Every change of a loaded record goes through here, so a populated target (see populate) holds
  // what a read returns. `untracked`: the env assigned this object (tracked lazily, see
  // trackRecord), or it is a check realm's preloaded base record (frozen already).
  function setLoaded(coll, id, value, untracked) {
    coll.loaded[id] = value;
    if (!untracked) trackRecord(coll, id, value);
    if (!coll.populated) return;
    ObjectDefineProperty(coll.target, id, { value: view(coll, id, value), writable: true, enumerable: true, configurable: true });
    if (own(coll.pending, id)) unpend(coll, id);
    if (isIndexKey(id)) coll.handler.ownKeys = coll.ownKeys;
  }

  function unpend(coll, id) {
    delete coll.pending[id];
    // every record has been read: the get trap has nothing left to load
    if (--coll.unloaded === 0) delete coll.handler.get;
  }

  // A canonical array index ("0", "17"): a plain object lists those first, in numeric order, so a
  // collection holding one keeps the ownKeys trap that lists the state's own order.
  function isIndexKey(k) { const n = +k; return n >>> 0 === n && n !== 4294967295 && StringCtor(n) === k; }

  // A collection starts as an empty proxy target whose traps answer every question lazily (a key's
  // existence, the key list, its descriptor) without loading records. The first time the env
  // enumerates it (the ownKeys trap), every key goes onto the target and those traps are removed
  // from the handler, so Object.keys/values/entries, for-in, `in` and hasOwnProperty run natively
  // from then on: a trap cost about 2 µs a key, more than the env's own work when it scans a
  // collection. In a JSON-format env a collection of up to BULK_KEYS records comes in with one host
  // read (an env that enumerates a collection nearly always reads its records) and loses its get
  // trap too; otherwise each record not read yet is an accessor that reads it, and the get trap
  // goes once every record has been read. Writes and deletes keep their traps: they are what is
  // tracked.
  const BULK_KEYS = 1024;
  function populate(coll) {
    if (coll.populated) return;
    coll.populated = true;
    const t = coll.target;
    const keys = baseKeys(coll);
    // python-format envs parse each record with Py.parse (far slower than JSON.parse) and often
    // stop at the first match, so they keep reading records one by one
    // (the host answers nothing when the records add up to over 1 MiB of text: those stay lazy)
    // a check realm with the base preloaded asks only for the records the episode changed
    const allText = keys.length <= BULK_KEYS && pyValues === null ? hostRead(coll.base !== null ? "changed" : "all", coll.name, "") : undefined;
    const all = allText === undefined ? null : JSONParse(allText);
    let index = false;
    for (let j = 0; j < keys.length; j++) {
      const k = keys[j];
      if (isIndexKey(k)) index = true;
      if (!own(coll.loaded, k) && fromBase(coll, k) && own(coll.base, k)) coll.loaded[k] = coll.base[k];
      if (!own(coll.loaded, k) && all !== null && own(all, k)) trackRecord(coll, k, (coll.loaded[k] = all[k]));
      if (own(coll.loaded, k)) {
        ObjectDefineProperty(t, k, { value: view(coll, k, coll.loaded[k]), writable: true, enumerable: true, configurable: true });
      } else {
        coll.pending[k] = true;
        coll.unloaded++;
        const p = coll.proxy;
        ObjectDefineProperty(t, k, { get: () => p[k], set: (v) => { p[k] = v; }, enumerable: true, configurable: true });
      }
    }
    const h = coll.handler;
    delete h.getOwnPropertyDescriptor;
    delete h.has;
    if (!index) delete h.ownKeys;
    if (coll.unloaded === 0) delete h.get;
  }

  function baseKeys(coll) {
    if (coll.order === null) coll.order = coll.baseOrder !== null ? coll.baseOrder : JSONParse(hostRead("keys", coll.name, ""));
    return coll.order;
  }

  // Check realms only: whether the record is the scenario's base record (preloaded, see `preload`),
  // which the episode did not change.
  function fromBase(coll, id) { return coll.base !== null && !own(coll.changed, id); }

  function exists(coll, id) {
    if (own(coll.loaded, id)) return true;
    if (own(coll.deleted, id)) return false;
    if (fromBase(coll, id)) return own(coll.base, id);
    if (coll.order !== null) return own(indexKeys(coll), id);
    return hostRead("has", coll.name, id) === "1";
  }
  function indexKeys(coll) {
    if (coll.orderSet === null) {
      const set = ObjectCreate(null);
      for (let i = 0, all = coll.order; i < all.length; i++) { const k = all[i]; set[k] = true; }
      coll.orderSet = set;
    }
    return coll.orderSet;
  }
  function addKey(coll, id) {
    baseKeys(coll);
    const set = indexKeys(coll);
    if (!own(set, id)) { push(coll.order, id); set[id] = true; }
  }
  function removeKey(coll, id) {
    baseKeys(coll);
    const out = [];
    for (let i = 0, all = coll.order; i < all.length; i++) { const k = all[i]; if (k !== id) push(out, k); }
    coll.order = out;
    if (coll.orderSet !== null) delete coll.orderSet[id];
  }

  function makeCollection(name) {
    const coll = {
      name, loaded: ObjectCreate(null), deleted: ObjectCreate(null), dirty: ObjectCreate(null), hot: ObjectCreate(null), touched: false, order: null, orderSet: null,
      // see populate: whether the target holds every key, and the keys whose record is not read yet
      populated: false, pending: ObjectCreate(null), unloaded: 0, target: null, handler: null, proxy: null, ownKeys: null,
      // check realms (see buildScoped): the preloaded base records, the ids the episode changed
      // (records not among them are the base's), and the base's id order when it changed none
      base: null, changed: null, baseOrder: null,
    };
    const isKey = (key) => typeof key === "string";
    const target = {};
    const handler = {
      get(t, key, receiver) {
        if (!isKey(key)) return ReflectGet(t, key, receiver);
        // every write through the proxy handed out marks the record then, so a read marks nothing
        if (exists(coll, key)) return view(coll, key, load(coll, key));
        return ReflectGet(t, key, receiver); // inherited members such as hasOwnProperty
      },
      set(t, key, value) {
        if (readOnly) fail("state is read-only here");
        if (!isKey(key)) return false;
        const raw = unwrap(value);
        if (!exists(coll, key)) addKey(coll, key);
        setLoaded(coll, key, raw, true);
        delete coll.deleted[key];
        markDirty(coll, key);
        if (raw !== null && typeof raw === "object") coll.hot[key] = true;
        return true;
      },
      has(t, key) { return isKey(key) ? exists(coll, key) || ReflectHas(t, key) : ReflectHas(t, key); },
      deleteProperty(t, key) {
        if (readOnly) fail("state is read-only here");
        if (!isKey(key) || !exists(coll, key)) return true;
        delete coll.loaded[key];
        delete coll.hot[key];
        coll.deleted[key] = true;
        markDirty(coll, key);
        removeKey(coll, key);
        if (coll.populated) {
          delete t[key];
          if (own(coll.pending, key)) unpend(coll, key);
        }
        return true;
      },
      ownKeys() {
        populate(coll);
        return [...baseKeys(coll)];
      },
      // One key asked about (hasOwnProperty, a descriptor) is not an enumeration: answered for that
      // key alone, as an accessor, so a large collection is not read in for a membership test.
      // (Once populated, this trap is gone and the target answers.)
      getOwnPropertyDescriptor(t, key) {
        if (!isKey(key) || !exists(coll, key)) return undefined;
        return { get: () => handler.get(t, key, t), set: (v) => { handler.set(t, key, v); }, enumerable: true, configurable: true };
      },
      defineProperty(t, key, desc) {
        if (!own(desc, "value")) fail("accessor properties are not allowed in state");
        return handler.set(t, key, desc.value);
      },
      setPrototypeOf() { return false; },
      preventExtensions() { return false; },
    };
    coll.proxy = new ProxyCtor(target, handler);
    coll.target = target;
    coll.handler = handler;
    coll.ownKeys = handler.ownKeys;
    wset(toRaw, coll.proxy, target);
    collections[name] = coll;
    return coll;
  }

  //// observation_format "python": the Py layer (python-values.js) reads state and renders results ////

  // null for "json" envs. The host binds the layer to a frozen, non-configurable global `Py` before
  // the env source runs, so what init finds there is the layer itself.
  let pyValues = null;
  function usePythonValues(format) {
    if (format !== "python") return;
    const py = G.Py;
    if (py === null || typeof py !== "object" || typeof py.parse !== "function" || typeof py.observation !== "function") fail("observation_format python needs the Py layer");
    pyValues = py;
  }
  function parseStateText(text) { return pyValues === null ? JSONParse(text) : pyValues.parse(text); }
  /** A detached copy of a value whose JSON is `json` (python envs: keeping dict order and float boxes). */
  function copyOf(value, json) { return pyValues === null ? JSONParse(json) : pyValues.copy(unwrap(value)); }
  /** The text the agent reads: python envs render it here, where dict order and float boxes still exist. */
  function observationText(result) { return pyValues === null ? undefined : pyValues.observation(result === undefined ? null : result); }

  function buildState(layout) {
    // layout: { keys: [top-level keys in order], collections: [names], values: {key: json} }
    const state = {};
    for (let i = 0, all = layout.keys; i < all.length; i++) {
      const key = all[i];
      if (layout.collections.indexOf(key) >= 0) state[key] = makeCollection(key).proxy;
      else state[key] = parseStateText(layout.values[key]);
    }
    return state;
  }

  //// env mode: one env instance, its tools and its change reports ////

  let instance = null;
  // top-level key -> what was last reported: COLLECTION for a tracked collection, else
  // {value, json, tracked}: the field's value then, its JSON, and whether it is our tracking proxy
  const COLLECTION = {};
  const reported = ObjectCreate(null);
  let reportedCount = 0;
  // Top-level values that are plain objects or arrays are kept behind the same write-tracking
  // proxies as records (a pseudo-collection keyed by field name), so an unchanged field costs an
  // identity check per call, not a JSON.stringify that grows with the episode.
  const TOP = { name: "", dirty: ObjectCreate(null), hot: ObjectCreate(null), touched: false };
  const ObjectProto = Object.prototype;

  function collectionAt(key, v) {
    const coll = collections[key];
    return coll !== undefined && coll.proxy === v ? coll : null;
  }

  function isPlain(v) {
    const proto = ObjectGetPrototypeOf(v);
    return proto === ObjectProto || proto === ArrayProto || proto === null;
  }

  function recordJson(coll, id) {
    if (!exists(coll, id)) return null;
    const v = load(coll, id);
    return JSONStringify(v === undefined ? null : v);
  }

  // A record that had an object assigned into it may still be reachable through the env's own
  // (untracked) reference to that object until the call ends. At the end of the call it is
  // reported and replaced by a copy of itself, so from the next call on every reference into the
  // state goes through a tracking proxy again: a call costs what it wrote, never what earlier
  // calls created. (A reference an env keeps across calls to an object it assigned into the state
  // then points at a detached copy: read the record back from the state instead.)
  function reportRecord(coll, key, id, records) {
    const json = recordJson(coll, id);
    push(records, [key, id, json]);
    if (json !== null && own(coll.hot, id)) setLoaded(coll, id, copyOf(coll.loaded[id], json));
  }

  // Reports every record written since the last report, with its current JSON (null = deleted),
  // and every top-level value whose JSON changed (null = removed). The host diffs against its own
  // copy, so reporting an unchanged record is harmless and missing a changed one is not.
  // (Loops here and wherever guest code has run are indexed: `for...of` asks Array.prototype's
  // iterator, which an env can replace, and allocates a result per element, ~1 µs a key here.)
  function collectChanges() {
    const records = [];
    const values = [];
    const keys = ObjectKeys(instance);
    // every key ends up in `reported`; fewer known than were reported means some were removed
    const before = reportedCount;
    let known = 0;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      const v = instance[key];
      const last = reported[key];
      if (last !== undefined) known++;
      else reportedCount++;
      const coll = collectionAt(key, v);
      if (coll !== null) {
        if (coll.touched) {
          for (let j = 0, ids = ObjectKeys(coll.dirty); j < ids.length; j++) { const id = ids[j]; reportRecord(coll, key, id, records); }
          for (let j = 0, ids = ObjectKeys(coll.hot); j < ids.length; j++) { const id = ids[j]; if (!own(coll.dirty, id)) reportRecord(coll, key, id, records); }
          coll.dirty = ObjectCreate(null);
          coll.hot = ObjectCreate(null);
          coll.touched = false;
        }
        reported[key] = COLLECTION;
        continue;
      }
      const prev = last !== undefined && last !== COLLECTION ? last : null;
      const isObject = v !== null && typeof v === "object";
      // our own tracking proxy for this field, unchanged since the last report: nothing to do
      if (prev !== null && prev.value === v && (!isObject || prev.tracked) && (!TOP.touched || (!own(TOP.dirty, key) && !own(TOP.hot, key)))) continue;
      const json = JSONStringify(v === undefined ? null : v);
      let value = v;
      let tracked = false;
      // A plain object or array the env put in this field is copied behind a tracking proxy (see
      // reportRecord). Not an alias into the state (a record's proxy kept in a field: it must stay
      // that record) nor a non-plain object (a Map, a class instance): those are compared by JSON
      // on every call, as they cannot be tracked.
      if (isObject && isPlain(v) && (!whas(toRaw, v) || (prev !== null && prev.value === v && prev.tracked))) {
        tracked = true;
        if (!(prev !== null && prev.value === v) || own(TOP.hot, key)) {
          value = trackRecord(TOP, key, copyOf(v, json));
          instance[key] = value;
        }
      }
      if (prev === null || json !== prev.json) push(values, [key, json]);
      reported[key] = { value, json, tracked };
    }
    if (known < before) {
      const seen = ObjectCreate(null);
      for (let i = 0; i < keys.length; i++) seen[keys[i]] = true;
      for (let i = 0, all = ObjectKeys(reported); i < all.length; i++) {
        const key = all[i];
        if (!seen[key]) { push(values, [key, null]); delete reported[key]; reportedCount--; }
      }
    }
    if (TOP.touched) {
      TOP.dirty = ObjectCreate(null);
      TOP.hot = ObjectCreate(null);
      TOP.touched = false;
    }
    return { records, values };
  }

  function methodNames(obj) {
    const names = [];
    let proto = ObjectGetPrototypeOf(obj);
    while (proto !== null && proto !== Object.prototype) {
      for (let i = 0, all = ObjectGetOwnPropertyNames(proto); i < all.length; i++) {
        const name = all[i];
        if (name !== "constructor" && typeof ReflectGetOwnPropertyDescriptor(proto, name).value === "function" && names.indexOf(name) < 0) push(names, name);
      }
      proto = ObjectGetPrototypeOf(proto);
    }
    for (let i = 0, all = ObjectKeys(obj); i < all.length; i++) { const name = all[i]; if (typeof obj[name] === "function" && names.indexOf(name) < 0) push(names, name); }
    return names;
  }

  function errorInfo(e) {
    if (e !== null && typeof e === "object") {
      let name = "Error", message = "";
      try { name = StringCtor(e.name); } catch (_) { /* hostile getter */ }
      try { message = StringCtor(e.message); } catch (_) { /* hostile getter */ }
      return { name, message };
    }
    let text = "";
    try { text = StringCtor(e); } catch (_) { text = "<unprintable>"; }
    return { name: "Error", message: text };
  }

  function ok(value) { return JSONStringify({ ok: true, value }); }
  // A tool's result JSON goes after the envelope, behind a U+001E (a control character, which JSON text never holds raw),
  // instead of inside it as a string: escaping it again cost ~20 µs for a 4 KB result.
  let trailer = null;

  const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
  const validNames = ObjectCreate(null);

  const envOps = {
    init(className, layoutJson, optionsJson) {
      if (typeof className !== "string" || !identifier.test(className)) fail("invalid class name");
      if (optionsJson !== undefined) usePythonValues(JSONParse(optionsJson).observation_format);
      const Cls = indirectEval(className);
      if (typeof Cls !== "function") fail("class " + className + " is not defined by the env source");
      const layout = JSONParse(layoutJson);
      const state = buildState(layout);
      instance = new Cls(state);
      if (instance === null || typeof instance !== "object") fail("the env constructor did not return an object");
      // As EnvScaler does with setattr: the initial state's top-level keys become the instance's
      // fields whatever the constructor did, so collections stay the tracked, lazily loaded ones.
      for (let i = 0, all = layout.keys; i < all.length; i++) { const key = all[i]; instance[key] = state[key]; }
      const changes = collectChanges();
      // pristine: the init drew nothing from the seed and did not read the clock, so it ran the same
      // for every episode of this state and its memory can start them all (post-init-images.ts)
      return { methods: methodNames(instance), changes, pristine: draws === 0 && clockMs === clockStart };
    },
    call(name, argsJson) {
      if (instance === null) fail("env is not initialised");
      if (validNames[name] !== true) {
        if (typeof name !== "string" || !identifier.test(name) || name === "constructor") fail("invalid tool name");
        validNames[name] = true; // a regex test per call cost more than the rest of a no-op call's dispatch
      }
      const fn = instance[name];
      if (typeof fn !== "function") fail("tool " + name + " is not a method of the env");
      clockMs += tickMs;
      let result;
      let threw = null;
      try {
        result = ReflectApply(fn, instance, [JSONParse(argsJson)]);
        if (result !== null && typeof result === "object" && typeof result.then === "function") throw new TypeErrorCtor("tools must be synchronous; " + name + " returned a promise");
      } catch (e) {
        threw = errorInfo(e);
      }
      let resultJson = null;
      let text;
      if (threw === null) {
        try { resultJson = JSONStringify(result === undefined ? null : result); text = observationText(result); }
        catch (e) { threw = errorInfo(e); threw.message = "the tool's return value is not JSON: " + threw.message; }
      }
      const changes = collectChanges();
      if (threw !== null) return { error: threw, changes };
      trailer = resultJson;
      return { text, changes };
    },
    methods() { return methodNames(instance); },
    draws() { return draws; },
    // Loads every collection of the state now, as the env's first enumeration of each would (see
    // populate): the host runs it once, on a small state, before it captures the post-init image,
    // so every episode started from that image has the records in its heap already (a copy of
    // memory) instead of parsing and tracking them again on its first steps. Reads only: nothing
    // is reported and the env sees the same values in the same order either way.
    warm() {
      if (instance === null) fail("env is not initialised");
      for (let i = 0, all = ObjectKeys(collections); i < all.length; i++) populate(collections[all[i]]);
      return null;
    },
    configure,
  };

  //// checker mode: one check function over read-only initial and final states ////

  // A scenario's checks run one after another in one realm (one restore per scoring, not one per
  // check; the records they read are parsed once): `inputs` builds the frozen views once, `check`
  // runs one check on them. The realm is hardened before its image is captured (see `harden`), and
  // the host re-runs `configure` before every check, so no check can leave anything a later one sees.
  let checkInputs = null;
  // The scenario's initial state as parsed, deep-frozen records: collection -> id -> record, and
  // collection -> id order. Set by `preload` in a realm then captured per scenario (checker.ts), so
  // a scoring parses only what its episode changed: parsing is most of what checks cost in QuickJS.
  let baseRecords = null;
  let baseOrders = null;
  // collection -> the base's records as one frozen plain object in the state's order, for
  // collections a plain object can hold in that order (see plainBase); null where it cannot.
  let baseViews = null;
  const checkOps = {
    configure,
    preload(namesJson) {
      const names = JSONParse(namesJson);
      baseRecords = ObjectCreate(null);
      baseOrders = ObjectCreate(null);
      baseViews = ObjectCreate(null);
      for (let i = 0; i < names.length; i++) {
        const name = names[i];
        // (no answer for a collection over the "all" read's size: it stays read record by record)
        const text = hostRead("all", "base/" + name, "");
        if (text === undefined) continue;
        const all = JSONParse(text);
        const records = ObjectCreate(null);
        for (let j = 0, ids = ObjectKeys(all); j < ids.length; j++) { const id = ids[j]; records[id] = deepFreeze(all[id]); }
        baseRecords[name] = records;
        baseOrders[name] = JSONParse(hostRead("keys", "base/" + name, ""));
        baseViews[name] = plainBase(records, baseOrders[name]);
      }
      return null;
    },
    inputs(layoutsJson, extrasJson) {
      const layouts = JSONParse(layoutsJson);
      checkInputs = { initial: buildScoped("initial", layouts.initial), final: buildScoped("final", layouts.final), extrasJson };
      return null;
    },
    // `configJson`: the seed and clock to start from (configure's), set in the same call: one
    // host→guest crossing a check instead of two
    check(source, configJson) {
      if (checkInputs === null) fail("check before inputs");
      if (configJson !== undefined) configure(configJson);
      const fn = indirectEval("(" + source + "\n)");
      if (typeof fn !== "function") fail("check source does not evaluate to a function");
      // the states are shared read-only views; the action and message lists are each check's own
      // copies, as they were when every check had a realm of its own (a check may sort or reverse
      // them), parsed when the check first reads either: most checks read only the states, and
      // parsing an episode's calls with their results took most of such a check's time (QuickJS
      // parses JSON at ~20 MB/s: 8 KB of library calls, ~0.4 ms a check)
      let extras = null;
      const parsed = () => (extras === null ? (extras = JSONParse(checkInputs.extrasJson)) : extras);
      const arg = {};
      ObjectDefineProperty(arg, "initial", { value: checkInputs.initial, enumerable: true });
      ObjectDefineProperty(arg, "final", { value: checkInputs.final, enumerable: true });
      ObjectDefineProperty(arg, "actions", { get: () => parsed().actions, enumerable: true });
      ObjectDefineProperty(arg, "messages", { get: () => parsed().messages, enumerable: true });
      const verdict = fn(ObjectFreeze(arg));
      return { verdict: typeof verdict === "boolean" ? verdict : null, type: verdict === null ? "null" : typeof verdict };
    },
    // Freezes every object reachable from the global object (the intrinsics, their prototypes and
    // accessors) and the global object itself. Run once on the check image before it is captured:
    // a check can then neither patch a built-in (Object.prototype.toJSON, Array.prototype.some) nor
    // leave a global behind for the next check of the same scenario.
    harden() {
      const seen = wmap();
      const stack = [G];
      while (stack.length > 0) {
        const o = stack.pop();
        if (o === null || (typeof o !== "object" && typeof o !== "function") || whas(seen, o)) continue;
        wset(seen, o, true);
        const keys = ReflectOwnKeys(o);
        for (let i = 0; i < keys.length; i++) {
          const d = ReflectGetOwnPropertyDescriptor(o, keys[i]);
          if (d === undefined) continue;
          if (own(d, "value")) push(stack, d.value);
          else { push(stack, d.get); push(stack, d.set); }
        }
        push(stack, ObjectGetPrototypeOf(o));
        ObjectFreeze(o);
      }
      return null;
    },
  };
  // `layout.changed`: collection -> the ids whose record this state has other than the base's
  // (changed, added, deleted), for collections the scenario's base has (see `preload`). A collection's
  // view is made when a check first reads it (then the same one every time): checks read one or two
  // of a state's collections, and making the views of all of them was most of a scoring's `inputs`.
  function buildScoped(scope, layout) {
    const state = {};
    for (let i = 0, all = layout.keys; i < all.length; i++) {
      const key = all[i];
      if (layout.collections.indexOf(key) >= 0) {
        let proxy = null;
        const make = () => {
          const changed = layout.changed !== undefined && own(layout.changed, key) ? layout.changed[key] : [];
          const plain = plainView(scope + "/" + key, key, changed);
          if (plain !== null) return new ProxyCtor(plain, readOnlyCollection);
          const coll = makeCollection(scope + "/" + key);
          if (baseRecords !== null && own(baseRecords, key)) {
            coll.base = baseRecords[key];
            coll.changed = ObjectCreate(null);
            for (let j = 0; j < changed.length; j++) coll.changed[changed[j]] = true;
            if (changed.length === 0) coll.baseOrder = baseOrders[key];
          }
          return coll.proxy;
        };
        ObjectDefineProperty(state, key, { get: () => (proxy === null ? (proxy = make()) : proxy), enumerable: true });
      } else state[key] = deepFreeze(JSONParse(layout.values[key]));
    }
    return ObjectFreeze(state);
  }
  // A check's view of a preloaded collection, when it can be a plain frozen object: the base's own
  // (plainBase) when the episode changed nothing in it, else a copy of it with the changed records
  // put in (ids() order on the host: base ids in place, deleted ones gone, added ones appended in
  // the order they were changed). Building one is a few native calls; the lazy collection proxy
  // (makeCollection) costs a guest call or two per key the first time a check enumerates it (about
  // 200 µs of a 24-record collection), and most checks enumerate a collection. null: use that proxy
  // (no preloaded base, more than BULK_KEYS records, an index-like id or one Object.prototype has,
  // or a changed part over the host's "all" size). `changed`: the ids whose record differs from the base's.
  function plainView(scoped, key, changed) {
    if (baseViews === null || !own(baseViews, key) || baseViews[key] === null) return null;
    const base = baseViews[key];
    if (changed.length === 0) return base;
    for (let i = 0; i < changed.length; i++) if (!plainKey(changed[i])) return null;
    const text = hostRead("changed", scoped, "");
    if (text === undefined) return null;
    const records = JSONParse(text);
    // [[Set]] on a fresh object, as every key is plainKey: in place for a base id, appended otherwise
    const view = ObjectAssign({}, base);
    for (let i = 0; i < changed.length; i++) {
      const id = changed[i];
      if (own(records, id)) view[id] = deepFreeze(records[id]);
      else delete view[id];
    }
    return ObjectFreeze(view);
  }
  // The preloaded records as one frozen plain object in the base's order, or null when a plain
  // object cannot hold that order (it lists index-like keys first) or it would be large to copy.
  function plainBase(records, order) {
    if (order.length > BULK_KEYS) return null;
    const view = {};
    for (let i = 0; i < order.length; i++) {
      const id = order[i];
      if (!plainKey(id)) return null;
      view[id] = records[id];
    }
    return ObjectFreeze(view);
  }
  // an id Object.prototype has ("__proto__", "toString"; frozen in a hardened realm) would not be
  // [[Set]] as an own property
  function plainKey(id) { return !isIndexKey(id) && !ReflectHas(ObjectProto, id); }
  // Reads go to the frozen target natively (no trap); a write of any kind fails as it does on the
  // lazy views. One handler for every plain view: a check cannot reach it.
  const readOnlyCollection = {
    set() { fail("state is read-only here"); },
    deleteProperty() { fail("state is read-only here"); },
    defineProperty() { fail("state is read-only here"); },
    setPrototypeOf() { return false; },
    preventExtensions() { return false; },
  };
  function deepFreeze(v) {
    if (v !== null && typeof v === "object") { for (const k of ObjectKeys(v)) deepFreeze(v[k]); ObjectFreeze(v); }
    return v;
  }

  const ops = config.mode === "env" ? envOps : checkOps;
  // The one entry point the host calls. Always returns a JSON string, so the host never walks guest
  // objects; guest exceptions become {ok:false}. Interrupts and OOM escape by design.
  return function dispatch(op, x, y, z) {
    trailer = null;
    try {
      if (!own(ops, op)) fail("unknown op " + op);
      const envelope = ok(ops[op](x, y, z));
      return trailer === null ? envelope : envelope + "\u001e" + trailer;
    } catch (e) {
      return JSONStringify({ ok: false, error: errorInfo(e) });
    }
  };
})
