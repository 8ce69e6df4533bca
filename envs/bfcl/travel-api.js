// BFCL's TravelAPI (func_source_code/travel_booking.py), ported. The route-cost table is read from
// the installed package by the importer (BFCL_TRAVEL_BASE_COSTS: [[from, to, cost], ...]).
const TRAVEL_AIRPORTS = ["RMS", "SBK", "MPC", "SVP", "SHD", "CDG", "LHR", "SSV", "OKD", "WLB", "PEK", "HND", "HKG", "CIA", "CRH", "ATV", "PHV", "GFD", "SFO", "LAX", "JFK", "ORD", "BOS"];
const TRAVEL_EXCHANGE = [["USD", "RMB", 7n], ["USD", "EUR", 0.8], ["USD", "JPY", 110n], ["USD", "GBP", 0.7], ["USD", "CAD", 1.3], ["USD", "AUD", 1.4], ["USD", "INR", 70n], ["USD", "RUB", 60n], ["USD", "BRL", 3.8], ["USD", "MXN", 20n]];
const TRAVEL_NEAREST = {
  Rivermist: "RMS", Stonebrook: "SBK", Maplecrest: "MPC", Silverpine: "SVP", Shadowridge: "SHD", London: "LHR", Paris: "CDG", "Sunset Valley": "SSV",
  Oakendale: "OKD", Willowbend: "WLB", "Crescent Hollow": "CRH", Autumnville: "ATV", Pinehaven: "PHV", Greenfield: "GFD", "San Francisco": "SFO",
  "Los Angeles": "LAX", "New York": "JFK", Chicago: "ORD", Boston: "BOS", Beijing: "PEK", "Hong Kong": "HKG", Rome: "CIA", Tokyo: "HND",
};

/** datetime.strptime(s, "%Y-%m-%d") as far as the ports need it: [year, month, day] or ValueError. */
function bfclStrptimeDate(s) {
  if (typeof s !== "string") throw PyText.TypeError(`strptime() argument 1 must be str, not ${s === null ? "None" : PyText.typeName(s)}`);
  const m = /^(\d{4})-(1[0-2]|0[1-9]|[1-9])-(3[01]|[12]\d|0[1-9]|[1-9]| [1-9])$/.exec(s);
  if (!m) {
    const head = /^(\d{4})-(1[0-2]|0[1-9]|[1-9])-(3[01]|[12]\d|0[1-9]|[1-9]| [1-9])/.exec(s);
    if (head) throw PyText.ValueError(`unconverted data remains: ${s.slice(head[0].length)}`);
    throw PyText.ValueError(`time data ${PyText.repr(s)} does not match format '%Y-%m-%d'`);
  }
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const dim = [31, y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo - 1];
  if (y < 1) throw PyText.ValueError(`year ${y} is out of range`);
  if (d > dim) throw PyText.ValueError("day is out of range for month");
  return [y, mo, d];
}

class TravelAPI {
  constructor() {
    this._flight_cost_lookup = new PyText.PyDict();
  }

  _load_scenario(scenario, long_context = false) {
    const g = (k, d) => scenario.get(k, d);
    this._random = new PyText.Random(g("random_seed", 141053n));
    this.credit_card_list = g("credit_card_list", new PyText.PyDict());
    this.booking_record = g("booking_record", new PyText.PyDict());
    for (const k of ["access_token", "token_type", "token_expires_in", "token_scope", "user_first_name", "user_last_name", "budget_limit"]) this[k] = g(k, null);
    this.long_context = long_context;
    if (PyText.truthy(long_context)) {
      for (const [id, info] of BfclLongContext("CREDIT_CARD_EXTENSION").items()) if (!PyText.contains(this.credit_card_list, id)) this.credit_card_list.set(id, info);
      for (const [id, info] of BfclLongContext("BOOKING_RECORD_EXTENSION").items()) if (!PyText.contains(this.booking_record, id)) this.booking_record.set(id, info);
    }
  }

  static _costs() {
    if (!TravelAPI._table) {
      if (typeof BFCL_TRAVEL_BASE_COSTS === "undefined") throw new Error("the route-cost table (BFCL_TRAVEL_BASE_COSTS) is missing from the bundle");
      TravelAPI._table = new PyText.PyDict(BFCL_TRAVEL_BASE_COSTS.map(([a, b, c]) => [new PyText.PyTuple([a, b]), BigInt(c)]));
    }
    return TravelAPI._table;
  }

  _d(...pairs) {
    return new PyText.PyDict(pairs);
  }

  authenticate_travel(client_id, client_secret, refresh_token, grant_type, user_first_name, user_last_name) {
    this.token_expires_in = 2n;
    this.access_token = PyText.str(this._random.randint(100000n, 999999n));
    this.token_type = "Bearer";
    this.token_scope = grant_type;
    this.user_first_name = user_first_name;
    this.user_last_name = user_last_name;
    return this._d(["expires_in", 2n], ["access_token", this.access_token], ["token_type", "Bearer"], ["scope", grant_type]);
  }

  travel_get_login_status() {
    const out = this.token_expires_in === null || PyText.eq(this.token_expires_in, 0n);
    return this._d(["status", !out]);
  }

  get_budget_fiscal_year(lastModifiedAfter, includeRemoved) {
    return this._d(["budget_fiscal_year", "2018"]);
  }

  register_credit_card(access_token, card_number, expiration_date, cardholder_name, card_verification_number) {
    if (this.token_expires_in === null) return this._d(["error", "Token not initialized"]);
    if (PyText.eq(this.token_expires_in, 0n)) return this._d(["error", "Token expired"]);
    if (!PyText.eq(access_token, this.access_token)) return this._d(["error", "Invalid access token"]);
    if (PyText.contains(this.credit_card_list, card_number)) return this._d(["error", "Card already registered"]);
    const card_id = PyText.str(this._random.randint(100000000000n, 999999999999n));
    this.credit_card_list.set(card_id, this._d(["card_number", card_number], ["expiration_date", expiration_date], ["cardholder_name", cardholder_name], ["card_verification_number", card_verification_number], ["balance", this._random.randint(10000n, 99999n)]));
    return this._d(["card_id", card_id]);
  }

  get_flight_cost(travel_from, travel_to, travel_date, travel_class) {
    const costs = TravelAPI._costs();
    const pair = new PyText.PyTuple([travel_from, travel_to]);
    if (!costs.has(pair)) throw PyText.ValueError("No available route for the given airports.");
    let factor;
    if (PyText.eq(travel_class, "economy")) factor = 1n;
    else if (PyText.eq(travel_class, "business")) factor = 2n;
    else if (PyText.eq(travel_class, "first")) factor = 5n;
    else throw PyText.ValueError("Invalid travel class. Options are: economy, business, first.");
    let digitSum = 0n;
    for (const ch of PyText.iter(travel_date)) if (/^[0-9]$/.test(ch)) digitSum += BigInt(ch);
    const mult = digitSum % 2n === 0n ? 2n : 1n;
    let list = [];
    if (PyText.truthy(this.long_context)) {
      this._flight_cost_lookup = new PyText.PyDict();
      for (const [key, base] of costs.items()) {
        const cost = Number(base * factor * mult);
        this._flight_cost_lookup.set(`${PyText.str(key.items[0])}|${PyText.str(key.items[1])}|${PyText.str(travel_class)}|${PyText.str(travel_date)}`, this._d(["cost", cost]));
        list.push(cost);
      }
    } else {
      const cost = Number(costs.get(pair) * factor * mult);
      list = [cost];
      this._flight_cost_lookup = this._d([`${PyText.str(travel_from)}|${PyText.str(travel_to)}|${PyText.str(travel_class)}|${PyText.str(travel_date)}`, this._d(["cost", cost])]);
    }
    return this._d(["travel_cost_list", list]);
  }

  get_credit_card_balance(access_token, card_id) {
    if (PyText.eq(this.token_expires_in, 0n)) return this._d(["error", "Token expired"]);
    if (!PyText.eq(access_token, this.access_token)) return this._d(["error", "Invalid access token"]);
    if (!PyText.contains(this.credit_card_list, card_id)) return this._d(["error", "Card not registered. Here are a list of card_id's: " + PyText.str(this.credit_card_list.keys())]);
    return this._d(["card_balance", this.credit_card_list.item(card_id).item("balance")]);
  }

  book_flight(access_token, card_id, travel_date, travel_from, travel_to, travel_class) {
    const fail = (e) => this._d(["booking_status", false], ["error", e]);
    if (PyText.eq(this.token_expires_in, 0n)) return fail("Token expired");
    if (!PyText.eq(access_token, this.access_token)) return fail("Invalid access token");
    if (!PyText.contains(this.credit_card_list, card_id)) return fail("Card not registered");
    const card = this.credit_card_list.item(card_id);
    if (!PyText.contains(card, "balance")) return fail("Balance not found");
    if (!PyText.contains(TRAVEL_AIRPORTS, travel_from)) return fail(`Invalid departure airport code: ${PyText.str(travel_from)}`);
    if (!PyText.contains(TRAVEL_AIRPORTS, travel_to)) return fail(`Invalid destination airport code: ${PyText.str(travel_to)}`);
    try {
      bfclStrptimeDate(travel_date);
    } catch (e) {
      if (e instanceof PyText.PyError && e.pyType === "ValueError") return fail("Invalid date format. Use YYYY-MM-DD.");
      throw e;
    }
    // a set literal: with PYTHONHASHSEED random, Python prints its three names in a per-process order
    const valid = new PyText.PySet(["economy", "business", "first"]);
    if (!PyText.contains(valid, travel_class)) return fail(`Invalid travel class. Must be one of ${PyText.repr(valid)}`);
    let travel_cost;
    try {
      this.get_flight_cost(travel_from, travel_to, travel_date, travel_class);
      const entry = this._flight_cost_lookup.get(`${PyText.str(travel_from)}|${PyText.str(travel_to)}|${PyText.str(travel_class)}|${PyText.str(travel_date)}`, null);
      if (entry === null) return fail("No available route for the given parameters");
      travel_cost = entry.item("cost");
    } catch (e) {
      if (e instanceof PyText.PyError && e.pyType === "ValueError") return fail(e.message);
      throw e;
    }
    if (PyText.lt(card.item("balance"), travel_cost)) return fail("Insufficient funds");
    if (this.budget_limit !== null && PyText.lt(card.item("balance"), this.budget_limit)) return fail("Balance is less than budget limit");
    card.set("balance", PyText.sub(card.item("balance"), travel_cost));
    const booking_id = PyText.str(this._random.randint(1000000n, 9999999n));
    const transaction_id = PyText.str(this._random.randint(10000000n, 99999999n));
    this.booking_record.set(booking_id, this._d(["card_id", card_id], ["travel_date", travel_date], ["travel_from", travel_from], ["travel_to", travel_to], ["travel_class", travel_class], ["travel_cost", travel_cost], ["transaction_id", transaction_id]));
    return this._d(["booking_id", booking_id], ["transaction_id", transaction_id], ["booking_status", true], ["booking_history", PyText.truthy(this.long_context) ? this.booking_record : new PyText.PyDict()]);
  }

  retrieve_invoice(access_token, booking_id, insurance_id) {
    if (PyText.eq(this.token_expires_in, 0n)) return this._d(["error", "Token expired"]);
    if (!PyText.eq(access_token, this.access_token)) return this._d(["error", "Invalid access token"]);
    if (!PyText.contains(this.booking_record, booking_id)) return this._d(["error", "Booking not found"]);
    const b = this.booking_record.item(booking_id);
    const invoice = this._d(["booking_id", booking_id], ...["travel_date", "travel_from", "travel_to", "travel_class", "travel_cost", "transaction_id"].map((k) => [k, b.item(k)]));
    return this._d(["invoice", invoice]);
  }

  get_booking_history(access_token) {
    if (PyText.eq(this.token_expires_in, 0n)) return this._d(["error", "Token expired"]);
    if (!PyText.eq(access_token, this.access_token)) return this._d(["error", "Invalid access token"]);
    return this._d(["booking_history", this.booking_record]); // a deepcopy renders the same
  }

  list_all_airports() {
    return [...TRAVEL_AIRPORTS];
  }

  cancel_booking(access_token, booking_id) {
    const fail = (e) => this._d(["cancel_status", false], ["error", e]);
    if (PyText.eq(this.token_expires_in, 0n)) return fail("Token expired");
    if (!PyText.eq(access_token, this.access_token)) return fail("Invalid access token");
    if (!PyText.contains(this.booking_record, booking_id)) return fail("Booking not found");
    const b = this.booking_record.item(booking_id);
    const card_id = b.item("card_id");
    const cost = b.item("travel_cost");
    const card = this.credit_card_list.item(card_id);
    card.set("balance", PyText.add(card.item("balance"), cost));
    this.booking_record.pop(booking_id);
    return this._d(["cancel_status", true]);
  }

  compute_exchange_rate(base_currency, target_currency, value) {
    for (const [a, b, rate] of TRAVEL_EXCHANGE) {
      if (PyText.eq(base_currency, a) && PyText.eq(target_currency, b)) return this._d(["exchanged_value", PyText.float(PyText.mul(value, rate))]);
      if (PyText.eq(base_currency, b) && PyText.eq(target_currency, a)) return this._d(["exchanged_value", PyText.round(PyText.div(value, rate), 2n)]);
    }
    throw PyText.ValueError("No available exchange rate for the given currencies.");
  }

  verify_traveler_information(first_name, last_name, date_of_birth, passport_number) {
    if (!PyText.eq(this.user_first_name, first_name) || !PyText.eq(this.user_last_name, last_name)) {
      return this._d(["verification_status", false], ["verification_failure", "Cannot book flight information for another user." + `Expected ${PyText.str(this.user_first_name)} ${PyText.str(this.user_last_name)}, got ${PyText.str(first_name)} ${PyText.str(last_name)}`]);
    }
    let age;
    try {
      const [y, m, d] = bfclStrptimeDate(date_of_birth);
      const today = new Date(); // the episode's virtual clock (the original reads the host's local date)
      const ty = today.getFullYear();
      const tm = today.getMonth() + 1;
      const td = today.getDate();
      age = ty - y - (tm < m || (tm === m && td < d) ? 1 : 0);
    } catch (e) {
      if (e instanceof PyText.PyError && e.pyType === "ValueError") return this._d(["verification_status", false], ["verification_failure", "Invalid date of birth format. Please use YYYY-MM-DD."]);
      throw e;
    }
    if (age < 18) return this._d(["verification_status", false], ["verification_failure", "Traveler must be at least 18 years old."]);
    if (!BfclRuntime.strOnly(passport_number, "startswith").startsWith("US")) return this._d(["verification_status", false], ["verification_failure", "Passport must be issued by the United States."]);
    return this._d(["verification_status", true]);
  }

  set_budget_limit(access_token, budget_limit) {
    if (PyText.eq(this.token_expires_in, 0n)) return this._d(["error", "Token expired"]);
    if (!PyText.eq(access_token, this.access_token)) return this._d(["error", "Invalid access token"]);
    budget_limit = PyText.float(budget_limit);
    this.budget_limit = budget_limit;
    return this._d(["budget_limit", budget_limit]);
  }

  get_nearest_airport_by_city(location) {
    if (Array.isArray(location) || location instanceof PyText.PyDict) throw PyText.TypeError(`unhashable type: '${PyText.typeName(location)}'`);
    const hit = typeof location === "string" && Object.prototype.hasOwnProperty.call(TRAVEL_NEAREST, location) ? TRAVEL_NEAREST[location] : "Unknown";
    return this._d(["nearest_airport", hit]);
  }

  purchase_insurance(access_token, insurance_type, booking_id, insurance_cost, card_id) {
    const fail = (e) => this._d(["insurance_status", false], ["error", e]);
    if (PyText.eq(this.token_expires_in, 0n)) return fail("Token expired");
    if (!PyText.eq(access_token, this.access_token)) return fail("Invalid access token");
    if (this.budget_limit !== null && PyText.lt(this.budget_limit, insurance_cost)) return fail("Exceeded budget limit");
    if (!PyText.contains(this.booking_record, booking_id)) return fail("Booking not found");
    if (!PyText.contains(this.credit_card_list, card_id)) return fail("Credit card not registered");
    const card = this.credit_card_list.item(card_id);
    card.set("balance", PyText.sub(card.item("balance"), insurance_cost));
    return this._d(["insurance_id", PyText.str(this._random.randint(100000000n, 999999999n))], ["insurance_status", true]);
  }

  contact_customer_support(booking_id, message) {
    if (!PyText.contains(this.booking_record, booking_id)) return this._d(["error", "Booking not found"]);
    return this._d(["customer_support_message", "Thank you for contacting customer support. Your message has been received and we will get back to you shortly."]);
  }

  get_all_credit_cards() {
    return this._d(["credit_card_list", this.credit_card_list]);
  }
}
TravelAPI.SIGNATURES = {
  authenticate_travel: [["client_id"], ["client_secret"], ["refresh_token"], ["grant_type"], ["user_first_name"], ["user_last_name"]],
  travel_get_login_status: [],
  get_budget_fiscal_year: [["lastModifiedAfter", null], ["includeRemoved", null]],
  register_credit_card: [["access_token"], ["card_number"], ["expiration_date"], ["cardholder_name"], ["card_verification_number"]],
  get_flight_cost: [["travel_from"], ["travel_to"], ["travel_date"], ["travel_class"]],
  get_credit_card_balance: [["access_token"], ["card_id"]],
  book_flight: [["access_token"], ["card_id"], ["travel_date"], ["travel_from"], ["travel_to"], ["travel_class"]],
  retrieve_invoice: [["access_token"], ["booking_id", null], ["insurance_id", null]],
  get_booking_history: [["access_token"]],
  list_all_airports: [],
  cancel_booking: [["access_token"], ["booking_id"]],
  compute_exchange_rate: [["base_currency"], ["target_currency"], ["value"]],
  verify_traveler_information: [["first_name"], ["last_name"], ["date_of_birth"], ["passport_number"]],
  set_budget_limit: [["access_token"], ["budget_limit"]],
  get_nearest_airport_by_city: [["location"]],
  purchase_insurance: [["access_token"], ["insurance_type"], ["booking_id"], ["insurance_cost"], ["card_id"]],
  contact_customer_support: [["booking_id"], ["message"]],
  get_all_credit_cards: [],
};
