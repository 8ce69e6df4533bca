// BFCL's TradingBot (func_source_code/trading_bot.py), ported.
const TRADING_DEFAULT_STATE = () =>
  PyText.fromJson({
    account_info: { account_id: 12345, balance: { $float: 10000 }, binding_card: 1974202140965533 },
    authenticated: false,
    market_status: "Closed",
    order_counter: 12446,
    stocks: {
      AAPL: { price: 227.16, percent_change: 0.17, volume: 2.552, "MA(5)": 227.11, "MA(20)": 227.09 },
      GOOG: { price: 2840.34, percent_change: 0.24, volume: 1.123, "MA(5)": 2835.67, "MA(20)": 2842.15 },
      TSLA: { price: 667.92, percent_change: -0.12, volume: 1.654, "MA(5)": 671.15, "MA(20)": 668.2 },
      MSFT: { price: 310.23, percent_change: 0.09, volume: 3.234, "MA(5)": 309.88, "MA(20)": 310.11 },
      NVDA: { price: 220.34, percent_change: 0.34, volume: 1.234, "MA(5)": 220.45, "MA(20)": 220.67 },
      ALPH: { price: 1320.45, percent_change: -0.08, volume: 1.567, "MA(5)": 1321.12, "MA(20)": 1325.78 },
      OMEG: { price: 457.23, percent_change: 0.12, volume: 2.345, "MA(5)": 456.78, "MA(20)": 458.12 },
      QUAS: { price: 725.89, percent_change: -0.03, volume: 1.789, "MA(5)": 726.45, "MA(20)": { $float: 728 } },
      NEPT: { price: 88.34, percent_change: 0.19, volume: 0.654, "MA(5)": 88.21, "MA(20)": 88.67 },
      SYNX: { price: 345.67, percent_change: 0.11, volume: 2.112, "MA(5)": 345.34, "MA(20)": 346.12 },
      ZETA: { price: 22.09, percent_change: -0.05, volume: 0.789, "MA(5)": 22.12, "MA(20)": 22.34 },
    },
    watch_list: ["NVDA"],
    transaction_history: [],
  });
const TRADING_DEFAULT_ORDERS = () =>
  new PyText.PyDict([
    [12345n, PyText.fromJson({ id: 12345, order_type: "Buy", symbol: "AAPL", price: 210.65, amount: 10, status: "Completed" })],
    [12446n, PyText.fromJson({ id: 12446, order_type: "Sell", symbol: "GOOG", price: 2840.56, amount: 5, status: "Pending" })],
  ]);
const TRADING_SYMBOLS = {
  Apple: "AAPL", Google: "GOOG", Tesla: "TSLA", Microsoft: "MSFT", Nvidia: "NVDA", "Zeta Corp": "ZETA", "Alpha Tech": "ALPH",
  "Omega Industries": "OMEG", "Quasar Ltd.": "QUAS", "Neptune Systems": "NEPT", "Synex Solutions": "SYNX", Amazon: "AMZN", Gorilla: "GORI",
};

/** datetime.strptime(s, "%Y-%m-%d %H:%M:%S") (or the date-only format) as a comparable tuple. */
function bfclStrptime(s, withTime) {
  if (typeof s !== "string") throw PyText.TypeError(`strptime() argument 1 must be str, not ${s === null ? "None" : PyText.typeName(s)}`);
  const date = "(\\d{4})-(1[0-2]|0[1-9]|[1-9])-(3[01]|[12]\\d|0[1-9]|[1-9]| [1-9])";
  const re = withTime ? `${date}\\s+(2[0-3]|[0-1]\\d|\\d):([0-5]\\d|\\d):(6[0-1]|[0-5]\\d|\\d)` : date;
  const fmt = withTime ? "%Y-%m-%d %H:%M:%S" : "%Y-%m-%d";
  const m = new RegExp(`^${re}`, "i").exec(s);
  if (!m) throw PyText.ValueError(`time data ${PyText.repr(s)} does not match format '${fmt}'`);
  if (m[0].length !== s.length) throw PyText.ValueError(`unconverted data remains: ${s.slice(m[0].length)}`);
  const v = m.slice(1).map(Number);
  const [y, mo, d] = v;
  const dim = [31, y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo - 1];
  if (y < 1) throw PyText.ValueError(`year ${y} is out of range`);
  if (d > dim) throw PyText.ValueError("day is out of range for month");
  if (withTime && v[5] > 59) throw PyText.ValueError("second must be in 0..59");
  return withTime ? v : [...v, 0, 0, 0];
}
const bfclCmpTuple = (a, b) => {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
};

class TradingBot {
  _load_scenario(scenario, long_context = false) {
    const d = TRADING_DEFAULT_STATE();
    const orders = scenario.get("orders", TRADING_DEFAULT_ORDERS());
    this.orders = new PyText.PyDict(orders.items().map(([k, v]) => [typeof k === "string" && /^[0-9]+$/.test(k) ? BigInt(k) : k, v]));
    for (const k of ["account_info", "authenticated", "market_status", "order_counter", "stocks", "watch_list", "transaction_history"]) this[k] = scenario.get(k, d.get(k));
    this.long_context = long_context;
    this._random = new PyText.Random(scenario.get("random_seed", 1053520n));
  }

  _d(...pairs) {
    return new PyText.PyDict(pairs);
  }

  /** CURRENT_TIME plus a random number of seconds within a day (a local-time round trip in the original). */
  _generate_transaction_timestamp() {
    const r = Number(this._random.randbelow(86401n));
    const t = new Date(Date.UTC(2024, 8, 1, 10, 30, 0) + r * 1000);
    const p = (n) => String(n).padStart(2, "0");
    return `${t.getUTCFullYear()}-${p(t.getUTCMonth() + 1)}-${p(t.getUTCDate())} ${p(t.getUTCHours())}:${p(t.getUTCMinutes())}:${p(t.getUTCSeconds())}`;
  }

  get_current_time() {
    return this._d(["current_time", "10:30 AM"]);
  }

  get_symbol_by_name(name) {
    if (Array.isArray(name) || name instanceof PyText.PyDict) throw PyText.TypeError(`unhashable type: '${PyText.typeName(name)}'`);
    return this._d(["symbol", typeof name === "string" && Object.prototype.hasOwnProperty.call(TRADING_SYMBOLS, name) ? TRADING_SYMBOLS[name] : "Stock not found"]);
  }

  get_stock_info(symbol) {
    if (!PyText.contains(this.stocks, symbol)) return this._d(["error", `Stock with symbol '${PyText.str(symbol)}' not found.`]);
    if (PyText.truthy(this.long_context)) {
      const stock = this.stocks.item(symbol).copy();
      stock.set("MA(5)", BfclLongContext("MA_5_EXTENSION"));
      stock.set("MA(20)", BfclLongContext("MA_20_EXTENSION"));
      return stock;
    }
    return this.stocks.item(symbol);
  }

  get_order_details(order_id) {
    if (!PyText.contains(this.orders, order_id)) return this._d(["error", `Order with ID ${PyText.str(order_id)} not found.` + "Here is the list of orders_id: " + PyText.str(this.orders.keys())]);
    if (PyText.truthy(this.long_context)) {
      const order = this.orders.item(order_id).copy();
      const symbol = order.item("symbol");
      const ext = new PyText.PyDict();
      for (const [k, v] of BfclLongContext("ORDER_DETAIL_EXTENSION").items()) ext.set(k, bfclFormatSymbol(v, symbol));
      order.set("metadata", ext);
      return order;
    }
    return this.orders.item(order_id);
  }

  cancel_order(order_id) {
    if (!PyText.contains(this.orders, order_id)) return this._d(["error", `Order with ID ${PyText.str(order_id)} not found.`]);
    const order = this.orders.item(order_id);
    if (PyText.eq(order.item("status"), "Completed")) return this._d(["error", `Can't cancel order ${PyText.str(order_id)}. Order is already completed.`]);
    order.set("status", "Cancelled");
    return this._d(["order_id", order_id], ["status", "Cancelled"]);
  }

  place_order(order_type, symbol, price, amount) {
    if (!PyText.truthy(this.authenticated)) return this._d(["error", "User not authenticated. Please log in to place an order."]);
    if (!PyText.contains(this.stocks, symbol)) return this._d(["error", `Invalid stock symbol: ${PyText.str(symbol)}`]);
    if (PyText.le(price, 0n) || PyText.le(amount, 0n)) return this._d(["error", "Price and amount must be positive values."]);
    if (BfclRuntime.strOnly(order_type, "lower").toLowerCase() === "buy") {
      const total = PyText.mul(PyText.float(price), PyText.int(amount));
      const balance = this.account_info.get("balance", 0n);
      if (PyText.gt(total, balance)) return this._d(["error", `Insufficient funds: required $${bfclFixed2(total)} but only $${bfclFixed2(balance)} available.`]);
    }
    price = PyText.float(price);
    const order_id = this.order_counter;
    this.orders.set(order_id, this._d(["id", order_id], ["order_type", order_type], ["symbol", symbol], ["price", price], ["amount", amount], ["status", "Open"]));
    this.order_counter = PyText.add(this.order_counter, 1n);
    return this._d(["order_id", order_id], ["order_type", order_type], ["status", "Pending"], ["price", price], ["amount", amount]);
  }

  withdraw_funds(amount) {
    if (!PyText.truthy(this.authenticated)) return this._d(["error", "User not authenticated. Please log in to make a transaction."]);
    if (!PyText.eq(this.market_status, "Open")) return this._d(["error", "Market is closed. Transactions are not allowed."]);
    if (PyText.le(amount, 0n)) return this._d(["error", "Transaction amount must be positive."]);
    if (PyText.gt(amount, this.account_info.item("balance"))) return this._d(["error", "Insufficient funds for withdrawal."]);
    this.account_info.set("balance", PyText.sub(this.account_info.item("balance"), amount));
    this.transaction_history.push(this._d(["type", "withdrawal"], ["amount", amount], ["timestamp", this._generate_transaction_timestamp()]));
    return this._d(["status", "Withdrawal successful"], ["new_balance", this.account_info.item("balance")]);
  }

  get_account_info() {
    if (!PyText.truthy(this.authenticated)) return this._d(["error", "User not authenticated. Please log in to view account information."]);
    return this.account_info;
  }

  trading_login(username, password) {
    if (PyText.truthy(this.authenticated)) return this._d(["status", "Already logged in"]);
    this.authenticated = true;
    return this._d(["status", "Logged in successfully"]);
  }

  trading_get_login_status() {
    return this._d(["status", PyText.truthy(this.authenticated)]);
  }

  trading_logout() {
    if (!PyText.truthy(this.authenticated)) return this._d(["status", "No user is currently logged in"]);
    this.authenticated = false;
    return this._d(["status", "Logged out successfully"]);
  }

  fund_account(amount) {
    if (!PyText.truthy(this.authenticated)) return this._d(["error", "User not authenticated. Please log in to fund the account."]);
    if (PyText.le(amount, 0n)) return this._d(["error", "Funding amount must be positive."]);
    this.account_info.set("balance", PyText.add(this.account_info.item("balance"), amount));
    this.transaction_history.push(this._d(["type", "deposit"], ["amount", amount], ["timestamp", this._generate_transaction_timestamp()]));
    return this._d(["status", "Account funded successfully"], ["new_balance", this.account_info.item("balance")]);
  }

  remove_stock_from_watchlist(symbol) {
    if (!PyText.truthy(this.authenticated)) return this._d(["error", "User not authenticated. Please log in to modify the watchlist."]);
    if (!PyText.contains(this.watch_list, symbol)) return this._d(["error", `Stock ${PyText.str(symbol)} not found in watchlist.`]);
    this.watch_list.splice(this.watch_list.findIndex((s) => PyText.eq(s, symbol)), 1);
    return this._d(["status", `Stock ${PyText.str(symbol)} removed from watchlist successfully.`]);
  }

  get_watchlist() {
    if (!PyText.truthy(this.authenticated)) return ["Error: User not authenticated. Please log in to view the watchlist."];
    if (PyText.truthy(this.long_context)) return [...this.watch_list, ...BfclLongContext("WATCH_LIST_EXTENSION")];
    return this._d(["watchlist", this.watch_list]);
  }

  get_order_history() {
    if (!PyText.truthy(this.authenticated)) return [this._d(["error", "User not authenticated. Please log in to view order history."])];
    return this._d(["history", this.orders.keys()]);
  }

  get_transaction_history(start_date, end_date) {
    if (!PyText.truthy(this.authenticated)) return [this._d(["error", "User not authenticated. Please log in to view transaction history."])];
    const start = PyText.truthy(start_date) ? bfclStrptime(start_date, false) : [1, 1, 1, 0, 0, 0];
    const end = PyText.truthy(end_date) ? bfclStrptime(end_date, false) : [9999, 12, 31, 23, 59, 59.999999];
    const filtered = this.transaction_history.filter((t) => {
      const ts = bfclStrptime(t.item("timestamp"), true);
      return bfclCmpTuple(start, ts) <= 0 && bfclCmpTuple(ts, end) <= 0;
    });
    if (PyText.truthy(this.long_context)) filtered.push(...BfclLongContext("TRANSACTION_HISTORY_EXTENSION"));
    return this._d(["transaction_history", filtered]);
  }

  get_available_stocks(sector) {
    const map = new PyText.PyDict([["Technology", ["AAPL", "GOOG", "MSFT", "NVDA"]], ["Automobile", ["TSLA", "F", "GM"]]]);
    if (PyText.truthy(this.long_context)) {
      map.item("Technology").push(...BfclLongContext("TECHNOLOGY_EXTENSION"));
      map.item("Automobile").push(...BfclLongContext("AUTOMOBILE_EXTENSION"));
    }
    return this._d(["stock_list", map.get(sector, [])]);
  }

  filter_stocks_by_price(stocks, min_price, max_price) {
    const price = (s) => {
      const st = this.stocks.get(s, new PyText.PyDict());
      if (!(st instanceof PyText.PyDict)) throw BfclRuntime.noAttr(st, "get");
      return st.get("price", 0n);
    };
    return this._d(["filtered_stocks", PyText.iter(stocks).filter((s) => PyText.ge(price(s), min_price) && PyText.le(price(s), max_price))]);
  }

  add_to_watchlist(stock) {
    if (!PyText.contains(this.watch_list, stock) && PyText.contains(this.stocks, stock)) this.watch_list.push(stock);
    return this._d(["watchlist", this.watch_list]);
  }

  notify_price_change(stocks, threshold) {
    const changed = PyText.iter(stocks).filter((s) => PyText.contains(this.stocks, s) && PyText.ge(PyText.abs(this.stocks.item(s).item("percent_change")), threshold));
    if (changed.length) {
      for (const s of changed) if (typeof s !== "string") throw PyText.TypeError(`sequence item 0: expected str instance, ${PyText.typeName(s)} found`);
      return this._d(["notification", `Stocks ${changed.join(", ")} have significant price changes.`]);
    }
    return this._d(["notification", "No significant price changes in the selected stocks."]);
  }
}

/** `format(x, ".2f")` for an int or a float. */
function bfclFixed2(x) {
  if (typeof x !== "number" && typeof x !== "bigint") throw PyText.ValueError(`Unknown format code 'f' for object of type '${PyText.typeName(x)}'`);
  return PyText.formatFixed(PyText.toF(x), 2);
}

/** `text.format(symbol=symbol)` for templates whose only field is {symbol}. */
function bfclFormatSymbol(text, symbol) {
  return text.replace(/\{\{|\}\}|\{symbol\}/g, (m) => (m === "{{" ? "{" : m === "}}" ? "}" : PyText.str(symbol)));
}

TradingBot.SIGNATURES = {
  get_current_time: [],
  get_symbol_by_name: [["name"]],
  get_stock_info: [["symbol"]],
  get_order_details: [["order_id"]],
  cancel_order: [["order_id"]],
  place_order: [["order_type"], ["symbol"], ["price"], ["amount"]],
  withdraw_funds: [["amount"]],
  get_account_info: [],
  trading_login: [["username"], ["password"]],
  trading_get_login_status: [],
  trading_logout: [],
  fund_account: [["amount"]],
  remove_stock_from_watchlist: [["symbol"]],
  get_watchlist: [],
  get_order_history: [],
  get_transaction_history: [["start_date", null], ["end_date", null]],
  get_available_stocks: [["sector"]],
  filter_stocks_by_price: [["stocks"], ["min_price"], ["max_price"]],
  add_to_watchlist: [["stock"]],
  notify_price_change: [["stocks"], ["threshold"]],
};
