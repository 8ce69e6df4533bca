/**
 * TauRetailEnv: a JavaScript port of the tau-bench retail tools (sierra-research/tau-bench,
 * tau_bench/envs/retail/tools/*.py, MIT licence), for the EnvScaler sandbox (QuickJS, ES2020).
 *
 * State: { users, orders, products } (the three data files), mutated in place exactly as the
 * Python tools mutate `data`. Each method takes one object of named arguments and returns what
 * the Python Tool.invoke returned: the object for json.dumps(...) results (a deep copy, as the
 * JSON text is a snapshot), the string itself for "Error: ..." and plain-text results.
 *
 * Method -> original file (tau_bench/envs/retail/tools/):
 *   calculate                      calculate.py
 *   cancel_pending_order           cancel_pending_order.py
 *   exchange_delivered_order_items exchange_delivered_order_items.py
 *   find_user_id_by_email          find_user_id_by_email.py
 *   find_user_id_by_name_zip       find_user_id_by_name_zip.py
 *   get_order_details              get_order_details.py
 *   get_product_details            get_product_details.py
 *   get_user_details               get_user_details.py
 *   list_all_product_types         list_all_product_types.py
 *   modify_pending_order_address   modify_pending_order_address.py
 *   modify_pending_order_items     modify_pending_order_items.py
 *   modify_pending_order_payment   modify_pending_order_payment.py
 *   modify_user_address            modify_user_address.py
 *   return_delivered_order_items   return_delivered_order_items.py
 *   think                          think.py
 *   transfer_to_human_agents       transfer_to_human_agents.py
 *
 * Behaviour matched on purpose:
 * - Error strings are the originals, including the checks' order (e.g. "Error: order not found",
 *   "Error: non-pending order cannot be modified", "Error: {item_id} not found" in modify/exchange
 *   but "Error: some item not found" in return).
 * - round(x, 2) is Python's (correctly rounded from the exact binary value, ties to even; see
 *   round2), applied exactly where the original applies it: gift-card balances after a refund or
 *   a charge, the exchange price difference. modify_pending_order_items records abs(diff) UNROUNDED
 *   as the payment/refund amount (as the original does), and a zero difference is a "refund" of 0.
 * - Item lookups re-scan the order items on every step as the original does (so duplicated ids and
 *   ids swapped within one call behave the same); sorted() compares by code point.
 * - tau-bench's Env.step turns any exception raised inside a tool into "Error: <str(e)>": missing
 *   keys raise KeyError ("Error: 'balance'"), missing/unexpected arguments raise the TypeError
 *   Python would ("Error: CancelPendingOrder.invoke() missing 1 required positional argument:
 *   'reason'"); dict membership of a non-str key is False, of a list/dict key "unhashable type".
 * - calculate: str(round(float(eval(expression)), 2)) re-implemented without eval (see the
 *   helper block): Python int/float/complex arithmetic, ** and //, Python's error texts, Python's
 *   float repr ("1e+16", "1e-05", "0.1").
 * - The bundle runs with observation_format "python": the agent reads a string result as is and
 *   anything else as json.dumps text; the data's 46.0-style floats and its dict order (variant ids
 *   are integer-like keys) are kept, and arithmetic on prices and balances goes through
 *   TauPy.arith/abs/round2 so that a float result stays a float (a 0.0 refund, a 97.0 balance).
 * Not carried: tool arguments arrive as JSON values, so an argument 5.0 is the int 5 here.
 */
// Python semantics: TauPy, from tau-python.js (the importer writes it into the bundle's env.js
// ahead of this class).
class TauRetailEnv {
  constructor(state) {
    this.users = state.users;
    this.orders = state.orders;
    this.products = state.products;
  }

  // calculate.py
  calculate(args) {
    const P = TauPy;
    return P.run("Calculate", ["expression"], args, (expression) => P.calculate(expression));
  }

  // cancel_pending_order.py
  cancel_pending_order(args) {
    const P = TauPy;
    return P.run("CancelPendingOrder", ["order_id", "reason"], args, (order_id, reason) => {
      const orders = this.orders;
      if (!P.isIn(orders, order_id)) return "Error: order not found";
      const order = orders[order_id];
      if (P.get(order, "status") !== "pending") return "Error: non-pending order cannot be cancelled";
      if (!P.contains(["no longer needed", "ordered by mistake"], reason)) return "Error: invalid reason";
      const refunds = [];
      for (const payment of P.iter(P.get(order, "payment_history"))) {
        const payment_id = P.get(payment, "payment_method_id");
        const refund = { transaction_type: "refund", amount: P.get(payment, "amount"), payment_method_id: payment_id };
        refunds.push(refund);
        if (P.contains(payment_id, "gift_card")) {
          const payment_method = P.get(P.get(P.get(this.users, P.get(order, "user_id")), "payment_methods"), payment_id);
          payment_method.balance = P.arith("+", P.get(payment_method, "balance"), P.get(payment, "amount"));
          payment_method.balance = P.round2(payment_method.balance);
        }
      }
      order.status = "cancelled";
      order.cancel_reason = reason;
      const history = P.get(order, "payment_history");
      for (const r of refunds) history.push(r);
      return P.clone(order);
    });
  }

  // exchange_delivered_order_items.py
  exchange_delivered_order_items(args) {
    const P = TauPy;
    const params = ["order_id", "item_ids", "new_item_ids", "payment_method_id"];
    return P.run("ExchangeDeliveredOrderItems", params, args, (order_id, item_ids, new_item_ids, payment_method_id) => {
      const products = this.products;
      const orders = this.orders;
      const users = this.users;
      if (!P.isIn(orders, order_id)) return "Error: order not found";
      const order = orders[order_id];
      if (P.get(order, "status") !== "delivered") return "Error: non-delivered order cannot be exchanged";

      const all_item_ids = P.iter(P.get(order, "items")).map((item) => P.get(item, "item_id"));
      for (const item_id of P.iter(item_ids)) {
        if (P.count(item_ids, item_id) > P.count(all_item_ids, item_id)) return "Error: " + P.str(item_id) + " not found";
      }
      if (P.len(item_ids) !== P.len(new_item_ids)) return "Error: the number of items to be exchanged should match";

      const olds = P.iter(item_ids);
      const news = P.iter(new_item_ids);
      let diff_price = 0;
      for (let i = 0; i < Math.min(olds.length, news.length); i++) {
        const item_id = olds[i];
        const new_item_id = news[i];
        const item = P.first(P.iter(P.get(order, "items")).filter((it) => P.eq(P.get(it, "item_id"), item_id)));
        const product_id = P.get(item, "product_id");
        const variants = P.get(P.get(products, product_id), "variants");
        if (!(P.isIn(variants, new_item_id) && P.truthy(P.get(P.get(variants, new_item_id), "available")))) {
          return "Error: new item " + P.str(new_item_id) + " not found or available";
        }
        const old_price = P.get(item, "price");
        const new_price = P.get(P.get(variants, new_item_id), "price");
        diff_price = P.arith("+", diff_price, P.arith("-", new_price, old_price));
      }
      diff_price = P.round2(diff_price);

      const payment_methods = P.get(P.get(users, P.get(order, "user_id")), "payment_methods");
      if (!P.isIn(payment_methods, payment_method_id)) return "Error: payment method not found";
      const payment_method = payment_methods[payment_method_id];
      if (P.get(payment_method, "source") === "gift_card" && P.lt(P.get(payment_method, "balance"), diff_price)) {
        return "Error: insufficient gift card balance to pay for the price difference";
      }

      order.status = "exchange requested";
      order.exchange_items = P.sorted(item_ids);
      order.exchange_new_items = P.sorted(new_item_ids);
      order.exchange_payment_method_id = payment_method_id;
      order.exchange_price_difference = diff_price;
      return P.clone(order);
    });
  }

  // find_user_id_by_email.py
  find_user_id_by_email(args) {
    const P = TauPy;
    return P.run("FindUserIdByEmail", ["email"], args, (email) => {
      const users = this.users;
      for (const user_id of Object.keys(users)) {
        const profile = users[user_id];
        if (P.lower(P.get(profile, "email")) === P.lower(email)) return user_id;
      }
      return "Error: user not found";
    });
  }

  // find_user_id_by_name_zip.py
  find_user_id_by_name_zip(args) {
    const P = TauPy;
    return P.run("FindUserIdByNameZip", ["first_name", "last_name", "zip"], args, (first_name, last_name, zip) => {
      const users = this.users;
      for (const user_id of Object.keys(users)) {
        const profile = users[user_id];
        const name = P.get(profile, "name");
        if (
          P.lower(P.get(name, "first_name")) === P.lower(first_name) &&
          P.lower(P.get(name, "last_name")) === P.lower(last_name) &&
          P.eq(P.get(P.get(profile, "address"), "zip"), zip)
        ) {
          return user_id;
        }
      }
      return "Error: user not found";
    });
  }

  // get_order_details.py
  get_order_details(args) {
    const P = TauPy;
    return P.run("GetOrderDetails", ["order_id"], args, (order_id) => {
      if (P.isIn(this.orders, order_id)) return P.clone(this.orders[order_id]);
      return "Error: order not found";
    });
  }

  // get_product_details.py
  get_product_details(args) {
    const P = TauPy;
    return P.run("GetProductDetails", ["product_id"], args, (product_id) => {
      if (P.isIn(this.products, product_id)) return P.clone(this.products[product_id]);
      return "Error: product not found";
    });
  }

  // get_user_details.py
  get_user_details(args) {
    const P = TauPy;
    return P.run("GetUserDetails", ["user_id"], args, (user_id) => {
      if (P.isIn(this.users, user_id)) return P.clone(this.users[user_id]);
      return "Error: user not found";
    });
  }

  // list_all_product_types.py: {name: product_id}, sorted by name
  list_all_product_types(args) {
    const P = TauPy;
    return P.run("ListAllProductTypes", [], args, () => {
      const products = this.products;
      const byName = new Map();
      for (const key of Object.keys(products)) {
        const product = products[key];
        byName.set(P.get(product, "name"), P.get(product, "product_id"));
      }
      const names = Array.from(byName.keys());
      const out = {};
      for (const name of P.sorted(names)) out[name] = byName.get(name);
      return P.clone(out);
    });
  }

  // modify_pending_order_address.py
  modify_pending_order_address(args) {
    const P = TauPy;
    const params = ["order_id", "address1", "address2", "city", "state", "country", "zip"];
    return P.run("ModifyPendingOrderAddress", params, args, (order_id, address1, address2, city, state, country, zip) => {
      const orders = this.orders;
      if (!P.isIn(orders, order_id)) return "Error: order not found";
      const order = orders[order_id];
      if (P.get(order, "status") !== "pending") return "Error: non-pending order cannot be modified";
      order.address = P.clone({ address1, address2, city, state, country, zip });
      return P.clone(order);
    });
  }

  // modify_pending_order_items.py
  modify_pending_order_items(args) {
    const P = TauPy;
    const params = ["order_id", "item_ids", "new_item_ids", "payment_method_id"];
    return P.run("ModifyPendingOrderItems", params, args, (order_id, item_ids, new_item_ids, payment_method_id) => {
      const products = this.products;
      const orders = this.orders;
      const users = this.users;
      if (!P.isIn(orders, order_id)) return "Error: order not found";
      const order = orders[order_id];
      if (P.get(order, "status") !== "pending") return "Error: non-pending order cannot be modified";

      const all_item_ids = P.iter(P.get(order, "items")).map((item) => P.get(item, "item_id"));
      for (const item_id of P.iter(item_ids)) {
        if (P.count(item_ids, item_id) > P.count(all_item_ids, item_id)) return "Error: " + P.str(item_id) + " not found";
      }
      if (P.len(item_ids) !== P.len(new_item_ids)) return "Error: the number of items to be exchanged should match";

      const olds = P.iter(item_ids);
      const news = P.iter(new_item_ids);
      const pairs = Math.min(olds.length, news.length);
      let diff_price = 0;
      for (let i = 0; i < pairs; i++) {
        const item_id = olds[i];
        const new_item_id = news[i];
        const item = P.first(P.iter(P.get(order, "items")).filter((it) => P.eq(P.get(it, "item_id"), item_id)));
        const product_id = P.get(item, "product_id");
        const variants = P.get(P.get(products, product_id), "variants");
        if (!(P.isIn(variants, new_item_id) && P.truthy(P.get(P.get(variants, new_item_id), "available")))) {
          return "Error: new item " + P.str(new_item_id) + " not found or available";
        }
        const old_price = P.get(item, "price");
        const new_price = P.get(P.get(variants, new_item_id), "price");
        diff_price = P.arith("+", diff_price, P.arith("-", new_price, old_price));
      }

      const payment_methods = P.get(P.get(users, P.get(order, "user_id")), "payment_methods");
      if (!P.isIn(payment_methods, payment_method_id)) return "Error: payment method not found";
      const payment_method = payment_methods[payment_method_id];
      if (P.get(payment_method, "source") === "gift_card" && P.lt(P.get(payment_method, "balance"), diff_price)) {
        return "Error: insufficient gift card balance to pay for the new item";
      }

      P.get(order, "payment_history").push({
        transaction_type: P.lt(0, diff_price) ? "payment" : "refund",
        amount: P.abs(diff_price),
        payment_method_id: payment_method_id,
      });
      if (P.get(payment_method, "source") === "gift_card") {
        payment_method.balance = P.arith("-", P.get(payment_method, "balance"), diff_price);
        payment_method.balance = P.round2(payment_method.balance);
      }

      for (let i = 0; i < pairs; i++) {
        const item_id = olds[i];
        const new_item_id = news[i];
        const item = P.first(P.iter(P.get(order, "items")).filter((it) => P.eq(P.get(it, "item_id"), item_id)));
        item.item_id = new_item_id;
        const variant = P.get(P.get(P.get(products, P.get(item, "product_id")), "variants"), new_item_id);
        item.price = P.get(variant, "price");
        item.options = P.clone(P.get(variant, "options"));
      }
      order.status = "pending (item modified)";
      return P.clone(order);
    });
  }

  // modify_pending_order_payment.py
  modify_pending_order_payment(args) {
    const P = TauPy;
    return P.run("ModifyPendingOrderPayment", ["order_id", "payment_method_id"], args, (order_id, payment_method_id) => {
      const orders = this.orders;
      if (!P.isIn(orders, order_id)) return "Error: order not found";
      const order = orders[order_id];
      if (P.get(order, "status") !== "pending") return "Error: non-pending order cannot be modified";

      const payment_methods = P.get(P.get(this.users, P.get(order, "user_id")), "payment_methods");
      if (!P.isIn(payment_methods, payment_method_id)) return "Error: payment method not found";

      const history = P.get(order, "payment_history");
      if (P.len(history) > 1 || P.get(P.get(history, 0), "transaction_type") !== "payment") {
        return "Error: there should be exactly one payment for a pending order";
      }
      if (P.eq(P.get(P.get(history, 0), "payment_method_id"), payment_method_id)) {
        return "Error: the new payment method should be different from the current one";
      }

      const amount = P.get(P.get(history, 0), "amount");
      const payment_method = payment_methods[payment_method_id];
      if (P.get(payment_method, "source") === "gift_card" && P.lt(P.get(payment_method, "balance"), amount)) {
        return "Error: insufficient gift card balance to pay for the order";
      }

      const old_id = P.get(P.get(history, 0), "payment_method_id");
      history.push(
        { transaction_type: "payment", amount: amount, payment_method_id: payment_method_id },
        { transaction_type: "refund", amount: amount, payment_method_id: old_id },
      );

      if (P.get(payment_method, "source") === "gift_card") {
        payment_method.balance = P.arith("-", P.get(payment_method, "balance"), amount);
        payment_method.balance = P.round2(payment_method.balance);
      }

      const first_id = P.get(P.get(history, 0), "payment_method_id");
      if (P.contains(first_id, "gift_card")) {
        const old_payment_method = P.get(payment_methods, first_id);
        old_payment_method.balance = P.arith("+", P.get(old_payment_method, "balance"), amount);
        old_payment_method.balance = P.round2(old_payment_method.balance);
      }
      return P.clone(order);
    });
  }

  // modify_user_address.py
  modify_user_address(args) {
    const P = TauPy;
    const params = ["user_id", "address1", "address2", "city", "state", "country", "zip"];
    return P.run("ModifyUserAddress", params, args, (user_id, address1, address2, city, state, country, zip) => {
      const users = this.users;
      if (!P.isIn(users, user_id)) return "Error: user not found";
      const user = users[user_id];
      user.address = P.clone({ address1, address2, city, state, country, zip });
      return P.clone(user);
    });
  }

  // return_delivered_order_items.py
  return_delivered_order_items(args) {
    const P = TauPy;
    return P.run("ReturnDeliveredOrderItems", ["order_id", "item_ids", "payment_method_id"], args, (order_id, item_ids, payment_method_id) => {
      const orders = this.orders;
      if (!P.isIn(orders, order_id)) return "Error: order not found";
      const order = orders[order_id];
      if (P.get(order, "status") !== "delivered") return "Error: non-delivered order cannot be returned";

      const payment_methods = P.get(P.get(this.users, P.get(order, "user_id")), "payment_methods");
      if (!P.isIn(payment_methods, payment_method_id)) return "Error: payment method not found";
      if (
        !P.contains(payment_method_id, "gift_card") &&
        !P.eq(payment_method_id, P.get(P.get(P.get(order, "payment_history"), 0), "payment_method_id"))
      ) {
        return "Error: payment method should be either the original payment method or a gift card";
      }

      const all_item_ids = P.iter(P.get(order, "items")).map((item) => P.get(item, "item_id"));
      for (const item_id of P.iter(item_ids)) {
        if (P.count(item_ids, item_id) > P.count(all_item_ids, item_id)) return "Error: some item not found";
      }

      order.status = "return requested";
      order.return_items = P.sorted(item_ids);
      order.return_payment_method_id = payment_method_id;
      return P.clone(order);
    });
  }

  // think.py
  think(args) {
    return TauPy.run("Think", ["thought"], args, () => "");
  }

  // transfer_to_human_agents.py
  transfer_to_human_agents(args) {
    return TauPy.run("TransferToHumanAgents", ["summary"], args, () => "Transfer successful");
  }
}
