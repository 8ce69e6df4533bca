// JavaScript ports of ACEBench's agent backends (BaseApi, MessageApi, ReminderApi, FoodPlatform,
// Travel), written from the originals' behaviour with PyText's Python value model (int = BigInt,
// float = number, dict = PyDict in insertion order): every branch, message text, int/float result
// and Python exception the original produces. The hard-coded data of the originals' __init__ is
// not here: `envscaler import acebench` reads it from the original classes (ACE_DEFAULTS).
const AceClasses = (function () {
  "use strict";
  const P = PyText;
  const D = (o) => new P.PyDict(Object.entries(o));
  const S = (v) => P.str(v);

  /** `obj[key]` with Python's errors. */
  function gi(obj, key) {
    if (obj instanceof P.PyDict) return obj.item(key);
    if (Array.isArray(obj) || typeof obj === "string") {
      const kind = Array.isArray(obj) ? "list" : "string";
      if (typeof key === "bigint" || typeof key === "boolean") {
        const n = Array.isArray(obj) ? obj.length : [...obj].length;
        let i = Number(P.toI(key));
        if (i < 0) i += n;
        if (i < 0 || i >= n) throw new P.PyError("IndexError", `${kind} index out of range`);
        return Array.isArray(obj) ? obj[i] : [...obj][i];
      }
      if (Array.isArray(obj)) throw P.TypeError(`list indices must be integers or slices, not ${P.typeName(key)}`);
      throw P.TypeError(`string indices must be integers, not '${P.typeName(key)}'`);
    }
    throw P.TypeError(`'${P.typeName(obj)}' object is not subscriptable`);
  }
  /** `obj[key] = value`. */
  function si(obj, key, value) {
    if (obj instanceof P.PyDict) return obj.set(key, value);
    if (Array.isArray(obj)) {
      if (typeof key !== "bigint" && typeof key !== "boolean") throw P.TypeError(`list indices must be integers or slices, not ${P.typeName(key)}`);
      let i = Number(P.toI(key));
      if (i < 0) i += obj.length;
      if (i < 0 || i >= obj.length) throw new P.PyError("IndexError", "list assignment index out of range");
      obj[i] = value;
      return;
    }
    throw P.TypeError(`'${P.typeName(obj)}' object does not support item assignment`);
  }
  /** `v.name` for a method a value's type may not have. */
  function attr(v, type, name) {
    if (type === "dict" ? !(v instanceof P.PyDict) : typeof v !== "string") throw new P.PyError("AttributeError", `'${P.typeName(v)}' object has no attribute '${name}'`);
    return v;
  }
  const lower = (v) => attr(v, "str", "lower").toLowerCase();
  /** dict.get(k, d). */
  const dget = (d, k, dflt = null) => attr(d, "dict", "get").get(k, dflt);
  /** max(a, b): the first maximal one, as Python's max. */
  const max2 = (a, b) => (P.gt(b, a) ? b : a);
  const ne = (a, b) => !P.eq(a, b);
  /** next((x for x in xs if pred(x)), None) */
  const next = (xs, pred) => {
    for (const x of xs) if (pred(x)) return x;
    return null;
  };
  /** datetime.strptime(s, fmt) as epoch seconds (only the two formats the originals parse). */
  function strptime(s, fmt) {
    const re = fmt === "%Y-%m-%d" ? /^(\d{4})-(\d{1,2})-(\d{1,2})$/ : /^(\d{4})-(\d{1,2})-(\d{1,2}) (\d{1,2}):(\d{1,2}):(\d{1,2})$/;
    if (typeof s !== "string") throw P.TypeError(`strptime() argument 1 must be str, not ${P.typeName(s)}`);
    const m = re.exec(s);
    const bad = () => new P.PyError("ValueError", `time data ${P.strRepr(s)} does not match format '${fmt}'`);
    if (!m) throw bad();
    const [y, mo, d, h = 0, mi = 0, se = 0] = m.slice(1).map(Number);
    const t = Date.UTC(y, mo - 1, d, h, mi, se);
    const back = new Date(t);
    if (back.getUTCMonth() !== mo - 1 || back.getUTCDate() !== d || h > 23 || mi > 59 || se > 61) throw new P.PyError("ValueError", mo > 12 || mo < 1 ? `time data ${P.strRepr(s)} does not match format '${fmt}'` : "day is out of range for month");
    return t / 1000;
  }
  const status = (ok, message) => D({ status: ok, message });

  class BaseApi {
    constructor() {
      this.wifi = false;
      this.logged_in = true;
    }
    _load_scenario(scenario) {
      this.wifi = scenario.get("wifi", false);
      this.logged_in = scenario.get("logged_in", true);
    }
    turn_on_wifi() {
      this.wifi = true;
      return status(true, "Wi-Fi has been turned on");
    }
    login_device() {
      this.logged_in = true;
      return status(true, "Device has been logged in");
    }
  }
  BaseApi.SIGNATURES = { turn_on_wifi: [], login_device: [] };

  /** The attributes the original's __init__ sets, in its order, from the data the importer read. */
  function initFrom(self, cls) {
    const d = ACE_DEFAULTS[cls];
    for (const k of Object.keys(d)) self[k] = AceValues.decode(d[k]);
  }

  class MessageApi extends BaseApi {
    constructor() {
      super();
      initFrom(this, "MessageApi");
    }
    send_message(sender_name, receiver_name, message) {
      if (P.eq(this.logged_in, false)) return status(false, "Device not logged in, unable to send message");
      if (P.eq(this.wifi, false)) return status(false, "Wi-Fi is turned off, cannot send messages at this time");
      if (P.ge(P.len(this.inbox), this.max_capacity)) return status(false, "Inbox capacity is full. You need to ask the user which message to delete.");
      if (!P.contains(this.user_list, sender_name) || !P.contains(this.user_list, receiver_name)) return status(false, "Sender or receiver does not exist");
      const sender_id = gi(gi(this.user_list, sender_name), "user_id");
      const receiver_id = gi(gi(this.user_list, receiver_name), "user_id");
      this.message_id_counter = P.add(this.message_id_counter, 1n);
      si(this.inbox, this.message_id_counter, D({ sender_id, receiver_id, message }));
      return status(true, `Message successfully sent to ${S(receiver_name)}.`);
    }
    delete_message(message_id) {
      if (P.eq(this.logged_in, false)) return status(false, "Device not logged in, unable to delete message");
      if (!P.contains(this.inbox, message_id)) return status(false, "Message ID does not exist");
      this.inbox.pop(message_id);
      return status(true, `Message ID ${S(message_id)} has been successfully deleted.`);
    }
    view_messages_between_users(sender_name, receiver_name) {
      if (P.eq(this.logged_in, false)) return status(false, "Device not logged in, unable to view message information");
      if (!P.contains(this.user_list, sender_name)) return status(false, "Sender does not exist");
      if (!P.contains(this.user_list, receiver_name)) return status(false, "Receiver does not exist");
      const sender_id = gi(gi(this.user_list, sender_name), "user_id");
      const receiver_id = gi(gi(this.user_list, receiver_name), "user_id");
      const out = [];
      for (const [id, msg] of this.inbox.items()) {
        if (P.eq(gi(msg, "sender_id"), sender_id) && P.eq(gi(msg, "receiver_id"), receiver_id)) out.push(D({ id, sender: sender_name, receiver: receiver_name, message: gi(msg, "message") }));
      }
      if (!out.length) return status(false, "No related message records found");
      return D({ status: true, messages: out });
    }
    search_messages(user_name, keyword) {
      if (!P.contains(this.user_list, user_name)) return status(false, "User does not exist");
      const user_id = gi(gi(this.user_list, user_name), "user_id");
      const out = [];
      for (const [id, msg] of this.inbox.items()) {
        if ((P.eq(gi(msg, "sender_id"), user_id) || P.eq(gi(msg, "receiver_id"), user_id)) && lower(gi(msg, "message")).includes(lower(keyword))) {
          out.push(D({ id, sender_id: gi(msg, "sender_id"), receiver_id: gi(msg, "receiver_id"), message: gi(msg, "message") }));
        }
      }
      if (!out.length) return status(false, "No messages found containing the keyword");
      return D({ status: true, messages: out });
    }
    get_all_message_times_with_ids() {
      if (P.eq(this.logged_in, false)) return status(false, "Device not logged in, unable to retrieve all message times and their corresponding message IDs.");
      return new P.PyDict(this.inbox.items().map(([id, msg]) => [id, gi(msg, "time")]));
    }
    _extreme(later, what) {
      if (!P.truthy(this.inbox)) return status(false, "No message records found");
      let bestId = null;
      let best = null;
      for (const [id, msg] of this.inbox.items()) {
        const t = strptime(gi(msg, "time"), "%Y-%m-%d");
        if (best === null || (later ? t > best : t < best)) {
          best = t;
          bestId = id;
        }
      }
      return D({ status: true, message: `The ${what} message ID is ${S(bestId)}`, message_id: bestId });
    }
    get_latest_message_id() {
      if (P.eq(this.logged_in, false)) return status(false, "Device not logged in, unable to retrieve the latest sent message ID.");
      return this._extreme(true, "latest");
    }
    get_earliest_message_id() {
      if (P.eq(this.logged_in, false)) return status(false, "Device not logged in, unable to retrieve the earliest sent message ID.");
      return this._extreme(false, "earliest");
    }
  }
  MessageApi.SIGNATURES = {
    send_message: [["sender_name"], ["receiver_name"], ["message"]],
    delete_message: [["message_id"]],
    view_messages_between_users: [["sender_name"], ["receiver_name"]],
    search_messages: [["user_name"], ["keyword"]],
    get_all_message_times_with_ids: [],
    get_latest_message_id: [],
    get_earliest_message_id: [],
  };

  class ReminderApi extends BaseApi {
    constructor() {
      super();
      // the original's __init__ does not call BaseApi's: wifi and logged_in exist only once _load_scenario ran
      delete this.wifi;
      delete this.logged_in;
      initFrom(this, "ReminderApi");
    }
    view_reminder_by_title(title) {
      if (P.eq(this.logged_in, false)) return status(false, "The device is not logged in, so you cannot view notifications");
      for (const r of this.reminder_list.values()) if (P.eq(gi(r, "title"), title)) return D({ status: true, reminder: r });
      return status(false, `No reminder found with the title '${S(title)}'.`);
    }
    add_reminder(title, description, time) {
      if (P.eq(this.logged_in, false)) return status(false, "Device not logged in. Unable to add a new reminder.");
      if (P.ge(P.len(this.reminder_list), this.max_capacity)) return status(false, "Reminder capacity is full. Unable to add a new reminder.");
      this.reminder_id_counter = P.add(this.reminder_id_counter, 1n);
      const id = this.reminder_id_counter;
      si(this.reminder_list, id, D({ reminder_id: id, title, description, time, notified: false }));
      return status(true, `Reminder '${S(title)}' was successfully added.`);
    }
    delete_reminder(reminder_id) {
      if (P.eq(this.logged_in, false)) return status(false, "Device not logged in. Unable to delete the specified reminder.");
      if (!P.contains(this.reminder_list, reminder_id)) return status(false, "Reminder ID does not exist.");
      this.reminder_list.pop(reminder_id);
      return status(true, `Reminder ID ${S(reminder_id)} was successfully deleted.`);
    }
    view_all_reminders() {
      if (!P.truthy(this.reminder_list)) return status(false, "No reminders found.");
      const out = this.reminder_list.values().map((r) => D({ title: gi(r, "title"), description: gi(r, "description"), time: gi(r, "time"), notified: gi(r, "notified") }));
      return D({ status: true, reminders: out });
    }
  }
  ReminderApi.SIGNATURES = { view_reminder_by_title: [["title"]], add_reminder: [["title"], ["description"], ["time"]], delete_reminder: [["reminder_id"]], view_all_reminders: [] };

  class FoodPlatform extends BaseApi {
    constructor() {
      super();
      delete this.wifi;
      delete this.logged_in;
      initFrom(this, "FoodPlatform");
    }
    _load_scenario(scenario) {
      super._load_scenario(scenario);
      this.logged_in_users = scenario.get("logged_in_users", []);
    }
    login_food_platform(username, password) {
      if (P.eq(this.wifi, false)) return status(false, "Wi-Fi is not enabled, unable to login");
      if (!P.contains(this.users, username)) return status(false, "User does not exist");
      if (ne(gi(gi(this.users, username), "password"), password)) return status(false, "Incorrect password");
      if (P.contains(this.logged_in_users, username)) return status(false, `${S(username)} is already logged in`);
      this.logged_in_users.push(username);
      return status(true, `User ${S(username)} has successfully logged in!`);
    }
    view_logged_in_users() {
      if (!P.truthy(this.logged_in_users)) return status(false, "No users are currently logged in to the food platform");
      return D({ status: true, logged_in_users: this.logged_in_users });
    }
    check_balance(user_name) {
      if (P.contains(this.users, user_name)) return gi(gi(this.users, user_name), "balance");
      return 0.0;
    }
    add_food_delivery_order(username, merchant_name, items) {
      if (!P.contains(this.logged_in_users, username)) return status(false, `User ${S(username)} is not logged in to the food platform`);
      if (!P.contains(this.merchant_list, merchant_name)) return status(false, "Merchant does not exist");
      let total = 0.0;
      const orderItems = [];
      for (const item of P.iter(items)) {
        const product_name = dget(item, "product");
        const quantity = dget(item, "quantity", 1n);
        if (!(typeof quantity === "bigint" || typeof quantity === "boolean") || P.le(quantity, 0n)) return status(false, `Invalid quantity ${S(quantity)} for product ${S(product_name)}`);
        let found = false;
        for (const product of P.iter(gi(gi(this.merchant_list, merchant_name), "menu"))) {
          if (P.eq(gi(product, "product"), product_name)) {
            total = P.add(total, P.mul(gi(product, "price"), quantity));
            orderItems.push(D({ product: product_name, quantity, price_per_unit: gi(product, "price") }));
            found = true;
            break;
          }
        }
        if (!found) return status(false, `Product ${S(product_name)} does not exist in ${S(merchant_name)}'s menu`);
      }
      const user = gi(this.users, username);
      if (P.gt(total, gi(user, "balance"))) return status(false, "Insufficient balance to place the order");
      si(user, "balance", P.sub(gi(user, "balance"), total));
      this.orders.push(D({ user_name: username, merchant_name, items: orderItems, total_price: total }));
      return status(true, `Food delivery order successfully placed with ${S(merchant_name)}. Total amount: ${S(total)} yuan`);
    }
    get_products(merchant_name) {
      const merchant = this.merchant_list.get(merchant_name, null);
      if (P.truthy(merchant)) return gi(merchant, "menu");
      return status(false, `Merchant '${S(merchant_name)}' does not exist`);
    }
    view_orders(user_name) {
      const mine = this.orders.filter((o) => P.eq(gi(o, "user_name"), user_name));
      if (!mine.length) return status(false, "User has no order records");
      return D({ status: true, orders: mine });
    }
    search_orders(keyword) {
      const matched = this.orders.filter((o) => lower(gi(o, "merchant_name")).includes(lower(keyword)) || P.iter(dget(o, "items", [])).some((it) => lower(gi(it, "product")).includes(lower(keyword))));
      if (!matched.length) return status(false, "No matching orders found");
      return D({ status: true, orders: matched });
    }
  }
  FoodPlatform.SIGNATURES = {
    login_food_platform: [["username"], ["password"]],
    view_logged_in_users: [],
    check_balance: [["user_name"]],
    add_food_delivery_order: [["username"], ["merchant_name"], ["items"]],
    get_products: [["merchant_name"]],
    view_orders: [["user_name"]],
    search_orders: [["keyword"]],
  };

  const FREE_BAGGAGE = () =>
    new P.PyDict([
      ["regular", D({ "Economy Class": 1n, "Business Class": 2n })],
      ["silver", D({ "Economy Class": 2n, "Business Class": 3n })],
      ["gold", D({ "Economy Class": 3n, "Business Class": 3n })],
    ]);
  /** The original's fixed "now" in cancel_reservation. */
  const CANCEL_NOW = Date.UTC(2024, 6, 14, 6, 0, 0) / 1000;

  class Travel {
    constructor() {
      initFrom(this, "Travel");
    }
    _load_scenario() {}
    get_flight_details(origin = null, destination = null) {
      let flights = this.flights;
      if (P.truthy(origin)) flights = flights.filter((f) => P.eq(gi(f, "origin"), origin));
      if (P.truthy(destination)) flights = flights.filter((f) => P.eq(gi(f, "destination"), destination));
      if (flights.length === 0) return "There are no direct flights that meet the criteria.";
      const keys = ["flight_no", "origin", "destination", "depart_time", "arrival_time", "status", "seats_available", "economy_price", "business_price"];
      return flights.map((f) => new P.PyDict(keys.map((k) => [k, gi(f, k)])));
    }
    get_user_details(user_id, password) {
      const user = this.users.get(user_id, null);
      if (P.truthy(user) && P.eq(gi(user, "password"), password)) return new P.PyDict(user.items().filter(([k]) => ne(k, "password")));
      return D({ status: "error", message: "Incorrect username or password." });
    }
    get_reservation_details(reservation_id = null, user_id = null) {
      let reservations;
      if (P.truthy(reservation_id)) reservations = this.reservations.filter((r) => P.eq(gi(r, "reservation_id"), reservation_id));
      else if (P.truthy(user_id)) reservations = this.reservations.filter((r) => P.eq(gi(r, "user_id"), user_id));
      else return D({ status: "error", message: "Please provide a valid reservation ID or user ID" });
      return reservations.map((r) => {
        const flight_info = next(this.flights, (f) => P.eq(gi(f, "flight_no"), gi(r, "flight_no")));
        const d = r.copy();
        d.set("flight_info", flight_info);
        return d;
      });
    }
    authenticate_user(user_id, password) {
      const user = this.users.get(user_id, null);
      if (P.truthy(user) && P.eq(gi(user, "password"), password)) return user;
      return D({ status: "error", message: "Incorrect username or password." });
    }
    get_baggage_allowance(membership_level, cabin_class) {
      const inner = FREE_BAGGAGE().get(membership_level, new P.PyDict());
      return inner.get(cabin_class, 0n);
    }
    find_transfer_flights(origin_city, transfer_city, destination_city) {
      const avail = (f) => P.eq(gi(f, "status"), "available");
      const first = this.flights.filter((f) => P.eq(gi(f, "origin"), origin_city) && P.eq(gi(f, "destination"), transfer_city) && avail(f));
      const second = this.flights.filter((f) => P.eq(gi(f, "origin"), transfer_city) && P.eq(gi(f, "destination"), destination_city) && avail(f));
      const out = [];
      for (const a of first) {
        const arrival = strptime(gi(a, "arrival_time"), "%Y-%m-%d %H:%M:%S");
        for (const b of second) {
          const depart = strptime(gi(b, "depart_time"), "%Y-%m-%d %H:%M:%S");
          if (arrival < depart) out.push(D({ first_leg: a, second_leg: b }));
        }
      }
      return out.length ? out : "No connecting flights that meet the criteria were found.";
    }
    calculate_baggage_fee(membership_level, cabin_class, baggage_count) {
      const limit = gi(gi(FREE_BAGGAGE(), membership_level), cabin_class);
      const extra = max2(P.sub(baggage_count, limit), 0n);
      return P.mul(extra, 50n);
    }
    update_balance(user, payment_method, amount) {
      for (const [method, key] of [["cash", "cash_balance"], ["bank", "bank_balance"]]) {
        if (P.eq(payment_method, method)) {
          if (P.lt(P.add(gi(user, key), amount), 0n)) return false;
          si(user, key, P.add(gi(user, key), amount));
          break;
        }
      }
      return true;
    }
    reserve_flight(user_id, password, flight_no, cabin, payment_method, baggage_count) {
      const user = this.authenticate_user(user_id, password);
      if (!P.truthy(user)) return "Authentication failed. Please check your user ID and password.";
      const flight = next(this.flights, (f) => P.eq(gi(f, "flight_no"), flight_no) && P.eq(gi(f, "status"), "available"));
      const price = P.eq(cabin, "Economy Class") ? gi(flight, "economy_price") : gi(flight, "business_price");
      let total = price;
      const fee = this.calculate_baggage_fee(gi(user, "membership_level"), cabin, baggage_count);
      total = P.add(total, fee);
      if (!["cash", "bank"].some((m) => P.eq(m, payment_method))) return "Invalid payment method";
      const key = P.eq(payment_method, "cash") ? "cash_balance" : "bank_balance";
      const account = gi(this.users.get(user_id, null), key);
      if (P.gt(total, account)) return `Your ${key === "cash_balance" ? "cash" : "bank"} balance is insufficient. Please consider using another payment method.`;
      const u = this.users.get(user_id, null);
      si(u, key, P.sub(gi(u, key), total));
      si(flight, "seats_available", P.sub(gi(flight, "seats_available"), 1n));
      const reservation_id = `res_${this.reservations.length + 1}`;
      this.reservations.push(D({ reservation_id, user_id, flight_no, payment_method, cabin, baggage: baggage_count }));
      return `Booking successful. Reservation ID: ${reservation_id}. Total cost: ${S(total)} yuan (including baggage fees).`;
    }
    modify_flight(user_id, reservation_id, new_flight_no = null, new_cabin = null, add_baggage = 0n, new_payment_method = null) {
      const reservation = next(this.reservations, (r) => P.eq(gi(r, "reservation_id"), reservation_id) && P.eq(gi(r, "user_id"), user_id));
      if (!P.truthy(reservation)) return "Reservation not found or user ID does not match.";
      const current = next(this.flights, (f) => P.eq(gi(f, "flight_no"), gi(reservation, "flight_no")));
      if (!P.truthy(current)) return "Flight information not found.";
      const payment_method = P.truthy(new_payment_method) ? new_payment_method : gi(reservation, "payment_method");
      const user = gi(this.users, user_id);
      if (!P.truthy(user)) return "User information not found.";
      const msgs = [];
      if (P.truthy(new_flight_no) && ne(new_flight_no, gi(reservation, "flight_no"))) {
        const nf = next(this.flights, (f) => P.eq(gi(f, "flight_no"), new_flight_no));
        if (P.truthy(nf) && P.eq(gi(nf, "origin"), gi(current, "origin")) && P.eq(gi(nf, "destination"), gi(current, "destination"))) {
          si(reservation, "flight_no", new_flight_no);
          msgs.push("Flight number has been changed.");
        } else return "Flight change failed: Invalid new flight number or destination does not match.";
      }
      if (P.truthy(new_cabin) && ne(new_cabin, reservation.get("cabin", null))) {
        const diff = this.calculate_price_difference(current, gi(reservation, "cabin"), new_cabin);
        si(reservation, "cabin", new_cabin);
        if (P.gt(diff, 0n)) {
          if (this.update_balance(user, payment_method, P.mul(diff, -1n))) msgs.push(`Cabin change successful. Price difference paid: ${S(diff)}.`);
          else msgs.push("Insufficient balance to pay the cabin price difference.");
        } else if (P.lt(diff, 0n)) {
          this.update_balance(user, payment_method, P.mul(diff, -1n));
          msgs.push(`Cabin change successful. Price difference refunded: ${S(P.mul(diff, -1n))}.`);
        }
      }
      if (P.gt(add_baggage, 0n)) {
        const allowance = this.get_baggage_allowance(gi(user, "membership_level"), gi(reservation, "cabin"));
        const total = P.add(reservation.get("baggage", 0n), add_baggage);
        const extra = max2(0n, P.sub(total, allowance));
        const cost = P.mul(extra, 50n);
        if (P.gt(cost, 0n)) {
          if (this.update_balance(user, payment_method, P.mul(cost, -1n))) msgs.push(`Baggage has been added. Additional fee to be paid: ${S(cost)}.`);
          else msgs.push("Insufficient balance to pay the additional baggage fees.");
        }
        si(reservation, "baggage", total);
      }
      if (!msgs.length) msgs.push("Modification completed with no additional fees.");
      return msgs.join(" ");
    }
    cancel_reservation(user_id, reservation_id, reason) {
      const user = this.users.get(user_id, null);
      if (!P.truthy(user)) return "Invalid user ID.";
      const reservation = next(this.reservations, (r) => P.eq(gi(r, "reservation_id"), reservation_id) && P.eq(gi(r, "user_id"), user_id));
      if (!P.truthy(reservation)) return "Invalid reservation ID or it does not belong to the user.";
      const flight = next(this.flights, (f) => P.eq(gi(f, "flight_no"), gi(reservation, "flight_no")));
      if (!P.truthy(flight)) return "Invalid flight information.";
      const depart = strptime(gi(flight, "depart_time"), "%Y-%m-%d %H:%M:%S");
      if (CANCEL_NOW > depart) return "The flight segment has been used and cannot be canceled.";
      const price = P.eq(gi(reservation, "cabin"), "Economy Class") ? gi(flight, "economy_price") : gi(flight, "business_price");
      if (P.eq(reason, "The airline has canceled the flight.")) {
        this.process_refund(user, price);
        return `The flight has been canceled. Your reservation will be canceled free of charge, and ${S(price)} yuan has been refunded.`;
      }
      if (depart - CANCEL_NOW > 86400) {
        this.process_refund(user, price);
        return `More than 24 hours before departure. Free cancellation successful, ${S(price)} yuan has been refunded.`;
      }
      const fee = P.mul(price, 0.1);
      const refund = P.sub(price, fee);
      this.process_refund(user, refund);
      return `Less than 24 hours before departure. A cancellation fee of ${S(fee)} yuan has been deducted, and ${S(refund)} yuan has been refunded.`;
    }
    process_refund(user, amount) {
      // `user["cash_balance"] += amount`: a TypeError names the augmented operator
      si(user, "cash_balance", P.add(gi(user, "cash_balance"), amount, "+="));
      // the original prints a line naming the user (its f-string reads user['user_name'])
      gi(user, "user_name");
      return null;
    }
    calculate_price_difference(flight, old_cabin, new_cabin) {
      const prices = D({ "Economy Class": gi(flight, "economy_price"), "Business Class": gi(flight, "business_price") });
      return P.sub(prices.get(new_cabin, 0n), prices.get(old_cabin, 0n));
    }
  }
  Travel.SIGNATURES = {
    get_flight_details: [["origin", null], ["destination", null]],
    get_user_details: [["user_id"], ["password"]],
    get_reservation_details: [["reservation_id", null], ["user_id", null]],
    authenticate_user: [["user_id"], ["password"]],
    get_baggage_allowance: [["membership_level"], ["cabin_class"]],
    find_transfer_flights: [["origin_city"], ["transfer_city"], ["destination_city"]],
    calculate_baggage_fee: [["membership_level"], ["cabin_class"], ["baggage_count"]],
    update_balance: [["user"], ["payment_method"], ["amount"]],
    reserve_flight: [["user_id"], ["password"], ["flight_no"], ["cabin"], ["payment_method"], ["baggage_count"]],
    modify_flight: [["user_id"], ["reservation_id"], ["new_flight_no", null], ["new_cabin", null], ["add_baggage", 0n], ["new_payment_method", null]],
    cancel_reservation: [["user_id"], ["reservation_id"], ["reason"]],
    process_refund: [["user"], ["amount"]],
    calculate_price_difference: [["flight"], ["old_cabin"], ["new_cabin"]],
  };

  return { BaseApi, MessageApi, ReminderApi, FoodPlatform, Travel };
})();
