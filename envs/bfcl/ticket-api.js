// BFCL's TicketAPI (bfcl_eval/eval_checker/multi_turn_eval/func_source_code/ticket_api.py), ported.
class TicketAPI {
  _load_scenario(scenario, long_context = false) {
    this.ticket_queue = scenario.get("ticket_queue", []);
    this.ticket_counter = scenario.get("ticket_counter", 1n);
    this.current_user = scenario.get("current_user", null);
  }

  create_ticket(title, description, priority) {
    if (!PyText.truthy(this.current_user)) return new PyText.PyDict([["error", "User not authenticated. Please log in to create a ticket."]]);
    if (PyText.lt(priority, 1n) || PyText.gt(priority, 5n)) return new PyText.PyDict([["error", "Invalid priority. Priority must be between 1 and 5."]]);
    const ticket = new PyText.PyDict([["id", this.ticket_counter], ["title", title], ["description", description], ["status", "Open"], ["priority", priority], ["created_by", this.current_user]]);
    this.ticket_queue.push(ticket);
    this.ticket_counter = PyText.add(this.ticket_counter, 1n);
    return ticket;
  }

  get_ticket(ticket_id) {
    const ticket = this._find_ticket(ticket_id);
    if (!PyText.truthy(ticket)) return new PyText.PyDict([["error", `Ticket with ID ${PyText.str(ticket_id)} not found.`]]);
    return ticket;
  }

  close_ticket(ticket_id) {
    const ticket = this._find_ticket(ticket_id);
    if (!PyText.truthy(ticket)) return new PyText.PyDict([["error", `Ticket with ID ${PyText.str(ticket_id)} not found.`]]);
    if (PyText.eq(ticket.item("status"), "Closed")) return new PyText.PyDict([["error", `Ticket with ID ${PyText.str(ticket_id)} is already closed.`]]);
    ticket.set("status", "Closed");
    return new PyText.PyDict([["status", `Ticket ${PyText.str(ticket_id)} has been closed successfully.`]]);
  }

  resolve_ticket(ticket_id, resolution) {
    const ticket = this._find_ticket(ticket_id);
    if (!PyText.truthy(ticket)) return new PyText.PyDict([["error", `Ticket with ID ${PyText.str(ticket_id)} not found.`]]);
    if (PyText.eq(ticket.item("status"), "Resolved")) return new PyText.PyDict([["error", `Ticket with ID ${PyText.str(ticket_id)} is already resolved.`]]);
    ticket.set("status", "Resolved");
    ticket.set("resolution", resolution);
    return new PyText.PyDict([["status", `Ticket ${PyText.str(ticket_id)} has been resolved successfully.`]]);
  }

  edit_ticket(ticket_id, updates) {
    const ticket = this._find_ticket(ticket_id);
    if (!PyText.truthy(ticket)) return new PyText.PyDict([["error", `Ticket with ID ${PyText.str(ticket_id)} not found.`]]);
    if (!(updates instanceof PyText.PyDict)) throw BfclRuntime.noAttr(updates, "keys");
    const valid = ["title", "description", "status", "priority"];
    // a set difference: with several invalid fields Python's order follows str hashing (random per process)
    const invalid = updates.keys().filter((k) => !valid.some((v) => PyText.eq(v, k)));
    if (invalid.length) {
      for (const k of invalid) if (typeof k !== "string") throw new PyText.PyError("TypeError", `sequence item 0: expected str instance, ${PyText.typeName(k)} found`);
      return new PyText.PyDict([["error", `Invalid fields for update: ${invalid.join(", ")}`]]);
    }
    for (const [k, v] of updates.items()) if (v !== null) ticket.set(k, v);
    return new PyText.PyDict([["status", `Ticket ${PyText.str(ticket_id)} has been updated successfully.`]]);
  }

  _find_ticket(ticket_id) {
    for (const ticket of this.ticket_queue) if (PyText.eq(ticket.item("id"), ticket_id)) return ticket;
    return null;
  }

  ticket_login(username, password) {
    if (PyText.truthy(username) && PyText.truthy(password)) {
      this.current_user = username;
      return new PyText.PyDict([["success", true]]);
    }
    return new PyText.PyDict([["success", false]]);
  }

  ticket_get_login_status() {
    return new PyText.PyDict([["login_status", PyText.truthy(this.current_user)]]);
  }

  logout() {
    if (PyText.truthy(this.current_user)) {
      this.current_user = null;
      return new PyText.PyDict([["success", true]]);
    }
    return new PyText.PyDict([["success", false]]);
  }

  get_user_tickets(status) {
    if (!PyText.truthy(this.current_user)) return [new PyText.PyDict([["error", "User not authenticated. Please log in to view tickets."]])];
    let tickets = this.ticket_queue.filter((t) => PyText.eq(t.item("created_by"), this.current_user));
    if (PyText.truthy(status)) {
      // both .lower() calls run per ticket in the original's comprehension
      tickets = tickets.filter((t) => BfclRuntime.strOnly(t.item("status"), "lower").toLowerCase() === BfclRuntime.strOnly(status, "lower").toLowerCase());
    }
    return tickets;
  }
}
TicketAPI.SIGNATURES = {
  create_ticket: [["title"], ["description", ""], ["priority", 1n]],
  get_ticket: [["ticket_id"]],
  close_ticket: [["ticket_id"]],
  resolve_ticket: [["ticket_id"], ["resolution"]],
  edit_ticket: [["ticket_id"], ["updates"]],
  ticket_login: [["username"], ["password"]],
  ticket_get_login_status: [],
  logout: [],
  get_user_tickets: [["status", null]],
};
