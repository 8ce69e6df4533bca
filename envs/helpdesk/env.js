/**
 * HelpdeskEnv: the IT service desk of Northwind Analytics.
 *
 * State (collections keyed by id): employees, agents, queues, tickets, comments, assets, licenses;
 * counters: next_ticket_number, next_comment_number.
 * Timestamps are ISO strings truncated to the minute (taken from the virtual clock), so the state an
 * episode produces does not depend on how many look-ups were made along the way.
 */
class HelpdeskEnv {
  static SLA_HOURS = { P1: 4, P2: 8, P3: 24, P4: 72 };
  static PRIORITIES = ["P1", "P2", "P3", "P4"];
  static CATEGORY_QUEUE = { hardware: "hardware", software: "software", network: "network", access: "access", other: "service_desk" };
  static CLOSED = ["resolved", "closed"];

  constructor(state) {
    for (const key of Object.keys(state)) this[key] = state[key];
  }

  // ------------------------------------------------------------------ helpers (not tools)

  _fail(error) {
    return { success: false, error };
  }

  _now() {
    const ms = Math.floor(Date.now() / 60000) * 60000;
    return new Date(ms).toISOString().replace(".000Z", "Z");
  }

  _addHours(iso, hours) {
    return new Date(Date.parse(iso) + hours * 3600000).toISOString().replace(".000Z", "Z");
  }

  _isOpen(ticket) {
    return !HelpdeskEnv.CLOSED.includes(ticket.status);
  }

  _openTicketsOf(agentId) {
    return Object.values(this.tickets).filter((t) => t.assignee_id === agentId && this._isOpen(t));
  }

  _slaView(ticket) {
    const now = this._now();
    const open = this._isOpen(ticket);
    const breached = open ? now > ticket.due_at : ticket.resolved_at ? ticket.resolved_at > ticket.due_at : false;
    const hoursOverdue = open && breached ? Math.round(((Date.parse(now) - Date.parse(ticket.due_at)) / 3600000) * 10) / 10 : 0;
    return { sla_hours: HelpdeskEnv.SLA_HOURS[ticket.priority], sla_breached: breached, hours_overdue: hoursOverdue };
  }

  _ticketSummary(t) {
    const requester = this.employees[t.requester_id];
    return {
      ticket_id: t.ticket_id,
      title: t.title,
      requester_id: t.requester_id,
      requester_name: requester ? requester.name : null,
      requester_vip: requester ? requester.vip === true : false,
      category: t.category,
      priority: t.priority,
      status: t.status,
      queue_id: t.queue_id,
      assignee_id: t.assignee_id,
      created_at: t.created_at,
      due_at: t.due_at,
      ...this._slaView(t),
    };
  }

  _employeeSummary(e) {
    return { employee_id: e.employee_id, name: e.name, email: e.email, department: e.department, title: e.title, status: e.status, vip: e.vip === true };
  }

  _ticketFor(ticket_id) {
    const t = this.tickets[ticket_id];
    if (!t) return { error: `Ticket ${ticket_id} not found` };
    return { ticket: t };
  }

  _mutableTicket(ticket_id) {
    const r = this._ticketFor(ticket_id);
    if (r.error) return r;
    if (r.ticket.status === "closed") return { error: `Ticket ${ticket_id} is closed and can no longer be changed` };
    return r;
  }

  // ------------------------------------------------------------------ queries

  find_employees({ name, email, department, vip }) {
    const n = name ? name.toLowerCase() : null;
    const d = department ? department.toLowerCase() : null;
    const hits = Object.values(this.employees).filter(
      (e) =>
        (!n || e.name.toLowerCase().includes(n)) &&
        (!email || e.email.toLowerCase() === email.toLowerCase()) &&
        (!d || e.department.toLowerCase() === d) &&
        (vip === undefined || (e.vip === true) === vip),
    );
    return { success: true, data: hits.map((e) => this._employeeSummary(e)) };
  }

  get_employee({ employee_id }) {
    const e = this.employees[employee_id];
    if (!e) return this._fail(`Employee ${employee_id} not found`);
    const assets = Object.values(this.assets)
      .filter((a) => a.assigned_to === employee_id)
      .map((a) => ({ asset_id: a.asset_id, type: a.type, model: a.model, status: a.status }));
    const licenses = Object.values(this.licenses)
      .filter((l) => l.assigned_to.includes(employee_id))
      .map((l) => ({ license_id: l.license_id, product: l.product }));
    const openTickets = Object.values(this.tickets)
      .filter((t) => t.requester_id === employee_id && this._isOpen(t))
      .map((t) => t.ticket_id);
    return { success: true, data: { ...e, vip: e.vip === true, assets, licenses, open_tickets: openTickets } };
  }

  search_tickets({ status, queue_id, requester_id, assignee_id, priority, category, open_only }) {
    const hits = Object.values(this.tickets).filter(
      (t) =>
        (!status || t.status === status) &&
        (!queue_id || t.queue_id === queue_id) &&
        (!requester_id || t.requester_id === requester_id) &&
        (!assignee_id || t.assignee_id === assignee_id) &&
        (!priority || t.priority === priority) &&
        (!category || t.category === category) &&
        (!open_only || this._isOpen(t)),
    );
    return { success: true, data: hits.map((t) => this._ticketSummary(t)) };
  }

  get_ticket({ ticket_id }) {
    const r = this._ticketFor(ticket_id);
    if (r.error) return this._fail(r.error);
    const comments = Object.values(this.comments)
      .filter((c) => c.ticket_id === ticket_id)
      .map((c) => ({ ...c }));
    return { success: true, data: { ...this._ticketSummary(r.ticket), ...r.ticket, ...this._slaView(r.ticket), comments } };
  }

  list_sla_breaches({ queue_id }) {
    if (queue_id && !this.queues[queue_id]) return this._fail(`Queue ${queue_id} not found`);
    const hits = Object.values(this.tickets)
      .filter((t) => this._isOpen(t) && (!queue_id || t.queue_id === queue_id))
      .map((t) => this._ticketSummary(t))
      .filter((s) => s.sla_breached);
    return { success: true, data: { now: this._now(), breached: hits } };
  }

  list_agents({ queue_id }) {
    if (queue_id && !this.queues[queue_id]) return this._fail(`Queue ${queue_id} not found`);
    const hits = Object.values(this.agents)
      .filter((a) => !queue_id || a.queue_id === queue_id)
      .map((a) => {
        const open = this._openTicketsOf(a.agent_id).length;
        return { ...a, open_tickets: open, free_capacity: Math.max(0, a.max_open_tickets - open) };
      });
    return { success: true, data: { queues: Object.values(this.queues).filter((q) => !queue_id || q.queue_id === queue_id).map((q) => ({ ...q })), agents: hits } };
  }

  search_assets({ type, status, model, assigned_to }) {
    const m = model ? model.toLowerCase() : null;
    const hits = Object.values(this.assets).filter(
      (a) =>
        (!type || a.type === type) &&
        (!status || a.status === status) &&
        (!m || a.model.toLowerCase().includes(m)) &&
        (!assigned_to || a.assigned_to === assigned_to),
    );
    return { success: true, data: hits.map((a) => ({ ...a })) };
  }

  get_asset({ asset_id }) {
    const a = this.assets[asset_id];
    if (!a) return this._fail(`Asset ${asset_id} not found`);
    const holder = a.assigned_to ? this.employees[a.assigned_to] : null;
    const tickets = Object.values(this.tickets)
      .filter((t) => t.asset_id === asset_id)
      .map((t) => ({ ticket_id: t.ticket_id, title: t.title, status: t.status }));
    return { success: true, data: { ...a, assigned_to_name: holder ? holder.name : null, tickets } };
  }

  list_licenses({ product }) {
    const p = product ? product.toLowerCase() : null;
    const hits = Object.values(this.licenses)
      .filter((l) => !p || l.product.toLowerCase().includes(p))
      .map((l) => ({ ...l, assigned_to: [...l.assigned_to], seats_used: l.assigned_to.length, seats_available: l.total_seats - l.assigned_to.length }));
    return { success: true, data: hits };
  }

  // ------------------------------------------------------------------ state changes

  create_ticket({ requester_id, title, description, category, priority, asset_id }) {
    const e = this.employees[requester_id];
    if (!e) return this._fail(`Employee ${requester_id} not found`);
    if (e.status === "terminated") return this._fail(`Employee ${requester_id} has left the company and cannot request tickets`);
    if (!title || !title.trim()) return this._fail("A title is required");
    const queueId = HelpdeskEnv.CATEGORY_QUEUE[category];
    if (!queueId) return this._fail(`Unknown category ${category}`);
    if (!HelpdeskEnv.PRIORITIES.includes(priority)) return this._fail(`Unknown priority ${priority}`);
    if (e.vip === true && (priority === "P3" || priority === "P4")) {
      return this._fail(`${e.name} is a VIP; tickets requested by VIP employees must be priority P1 or P2`);
    }
    if (asset_id) {
      const a = this.assets[asset_id];
      if (!a) return this._fail(`Asset ${asset_id} not found`);
      if (a.assigned_to !== requester_id) return this._fail(`Asset ${asset_id} is not assigned to ${requester_id}; a ticket can only be linked to the requester's own asset`);
    }
    const ticketId = `T${this.next_ticket_number}`;
    this.next_ticket_number += 1;
    const now = this._now();
    this.tickets[ticketId] = {
      ticket_id: ticketId,
      title: title.trim(),
      description: description || "",
      requester_id,
      category,
      priority,
      status: "new",
      queue_id: queueId,
      assignee_id: null,
      asset_id: asset_id || null,
      created_at: now,
      due_at: this._addHours(now, HelpdeskEnv.SLA_HOURS[priority]),
      resolved_at: null,
      resolution: null,
    };
    return { success: true, data: this._ticketSummary(this.tickets[ticketId]) };
  }

  assign_ticket({ ticket_id, agent_id }) {
    const r = this._mutableTicket(ticket_id);
    if (r.error) return this._fail(r.error);
    const t = r.ticket;
    if (!this._isOpen(t)) return this._fail(`Ticket ${ticket_id} is ${t.status}; reopen it before assigning`);
    const a = this.agents[agent_id];
    if (!a) return this._fail(`Agent ${agent_id} not found`);
    if (!a.active) return this._fail(`Agent ${a.name} (${agent_id}) is not active and cannot take tickets`);
    if (a.queue_id !== t.queue_id) return this._fail(`Agent ${a.name} works the ${a.queue_id} queue; ticket ${ticket_id} is in the ${t.queue_id} queue`);
    if (t.priority === "P1" && a.level < 2) return this._fail(`P1 tickets may only be assigned to level 2 or 3 agents; ${a.name} is level ${a.level}`);
    if (t.assignee_id === agent_id) return this._fail(`Ticket ${ticket_id} is already assigned to ${a.name}`);
    const open = this._openTicketsOf(agent_id).length;
    if (open >= a.max_open_tickets) return this._fail(`${a.name} already has ${open} open tickets (limit ${a.max_open_tickets})`);
    const previous = t.assignee_id;
    t.assignee_id = agent_id;
    if (t.status === "new") t.status = "open";
    return { success: true, data: { ticket_id, assignee_id: agent_id, previous_assignee_id: previous, status: t.status } };
  }

  transfer_ticket({ ticket_id, queue_id }) {
    const r = this._mutableTicket(ticket_id);
    if (r.error) return this._fail(r.error);
    const t = r.ticket;
    if (!this._isOpen(t)) return this._fail(`Ticket ${ticket_id} is ${t.status}; only unresolved tickets can be transferred`);
    if (!this.queues[queue_id]) return this._fail(`Queue ${queue_id} not found`);
    if (t.queue_id === queue_id) return this._fail(`Ticket ${ticket_id} is already in the ${queue_id} queue`);
    const from = t.queue_id;
    t.queue_id = queue_id;
    t.assignee_id = null;
    t.status = "new";
    return { success: true, message: `Ticket ${ticket_id} moved from ${from} to ${queue_id}; it is unassigned until an agent of that queue takes it` };
  }

  update_ticket_priority({ ticket_id, priority }) {
    const r = this._mutableTicket(ticket_id);
    if (r.error) return this._fail(r.error);
    const t = r.ticket;
    if (!this._isOpen(t)) return this._fail(`Ticket ${ticket_id} is ${t.status}; only unresolved tickets can be re-prioritised`);
    if (!HelpdeskEnv.PRIORITIES.includes(priority)) return this._fail(`Unknown priority ${priority}`);
    if (t.priority === priority) return this._fail(`Ticket ${ticket_id} already has priority ${priority}`);
    const e = this.employees[t.requester_id];
    if (e && e.vip === true && (priority === "P3" || priority === "P4")) {
      return this._fail(`${e.name} is a VIP; tickets requested by VIP employees must be priority P1 or P2`);
    }
    if (priority === "P1" && t.assignee_id) {
      const a = this.agents[t.assignee_id];
      if (a && a.level < 2) return this._fail(`Ticket ${ticket_id} is assigned to level ${a.level} agent ${a.name}; P1 tickets need a level 2 or 3 agent, reassign it first`);
    }
    const old = t.priority;
    t.priority = priority;
    t.due_at = this._addHours(t.created_at, HelpdeskEnv.SLA_HOURS[priority]);
    return { success: true, data: { ticket_id, old_priority: old, priority, due_at: t.due_at, ...this._slaView(t) } };
  }

  update_ticket_status({ ticket_id, status }) {
    const r = this._mutableTicket(ticket_id);
    if (r.error) return this._fail(r.error);
    const t = r.ticket;
    if (!["open", "in_progress", "pending"].includes(status)) return this._fail(`Status ${status} cannot be set here; use resolve_ticket to resolve a ticket`);
    if (t.status === status) return this._fail(`Ticket ${ticket_id} is already ${status}`);
    if (status === "in_progress" && !t.assignee_id) return this._fail(`Ticket ${ticket_id} has no assignee; assign it before starting work`);
    const old = t.status;
    t.status = status;
    if (old === "resolved") {
      t.resolved_at = null;
      t.resolution = null;
    }
    return { success: true, data: { ticket_id, old_status: old, status } };
  }

  add_comment({ ticket_id, body, internal }) {
    const r = this._mutableTicket(ticket_id);
    if (r.error) return this._fail(r.error);
    if (!body || !body.trim()) return this._fail("A comment needs a body");
    const id = `C${String(this.next_comment_number).padStart(4, "0")}`;
    this.next_comment_number += 1;
    this.comments[id] = { comment_id: id, ticket_id, author: "service_desk", body: body.trim(), internal: internal === true, created_at: this._now() };
    return { success: true, data: { comment_id: id, ticket_id, internal: internal === true } };
  }

  resolve_ticket({ ticket_id, resolution }) {
    const r = this._mutableTicket(ticket_id);
    if (r.error) return this._fail(r.error);
    const t = r.ticket;
    if (t.status === "resolved") return this._fail(`Ticket ${ticket_id} is already resolved`);
    if (!t.assignee_id) return this._fail(`Ticket ${ticket_id} has no assignee; a ticket must be assigned to an agent before it can be resolved`);
    if (!resolution || !resolution.trim()) return this._fail("A resolution note is required");
    t.status = "resolved";
    t.resolved_at = this._now();
    t.resolution = resolution.trim();
    return { success: true, data: { ticket_id, status: "resolved", resolved_at: t.resolved_at, sla_met: t.resolved_at <= t.due_at } };
  }

  assign_asset({ asset_id, employee_id }) {
    const a = this.assets[asset_id];
    if (!a) return this._fail(`Asset ${asset_id} not found`);
    const e = this.employees[employee_id];
    if (!e) return this._fail(`Employee ${employee_id} not found`);
    if (e.status !== "active") return this._fail(`Employee ${employee_id} is ${e.status}; assets can only be issued to active employees`);
    if (a.status !== "in_stock") return this._fail(`Asset ${asset_id} is ${a.status}${a.assigned_to ? ` (assigned to ${a.assigned_to})` : ""}; only in-stock assets can be issued`);
    if (a.type === "laptop") {
      const held = Object.values(this.assets).find((x) => x.type === "laptop" && x.assigned_to === employee_id);
      if (held) return this._fail(`${e.name} already holds laptop ${held.asset_id}; an employee may hold only one laptop, take the old one back first`);
    }
    a.status = "in_use";
    a.assigned_to = employee_id;
    a.assigned_date = this._now().slice(0, 10);
    return { success: true, data: { asset_id, model: a.model, assigned_to: employee_id } };
  }

  return_asset({ asset_id, condition }) {
    const a = this.assets[asset_id];
    if (!a) return this._fail(`Asset ${asset_id} not found`);
    if (a.status !== "in_use" || !a.assigned_to) return this._fail(`Asset ${asset_id} is not issued to anyone (status ${a.status})`);
    const next = { good: "in_stock", damaged: "in_repair", lost: "lost" }[condition];
    if (!next) return this._fail(`Unknown condition ${condition}`);
    const from = a.assigned_to;
    a.status = next;
    a.assigned_to = null;
    a.assigned_date = null;
    return { success: true, data: { asset_id, returned_by: from, status: next } };
  }

  assign_license({ license_id, employee_id }) {
    const l = this.licenses[license_id];
    if (!l) return this._fail(`License ${license_id} not found`);
    const e = this.employees[employee_id];
    if (!e) return this._fail(`Employee ${employee_id} not found`);
    if (e.status !== "active") return this._fail(`Employee ${employee_id} is ${e.status}; licenses can only be assigned to active employees`);
    if (l.allowed_departments && !l.allowed_departments.includes(e.department)) {
      return this._fail(`${l.product} is restricted to the ${l.allowed_departments.join(", ")} department(s); ${e.name} is in ${e.department}`);
    }
    if (l.assigned_to.includes(employee_id)) return this._fail(`${e.name} already has a ${l.product} seat`);
    if (l.assigned_to.length >= l.total_seats) return this._fail(`All ${l.total_seats} seats of ${l.product} are in use`);
    l.assigned_to.push(employee_id);
    return { success: true, data: { license_id, employee_id, seats_used: l.assigned_to.length, seats_available: l.total_seats - l.assigned_to.length } };
  }

  revoke_license({ license_id, employee_id }) {
    const l = this.licenses[license_id];
    if (!l) return this._fail(`License ${license_id} not found`);
    const i = l.assigned_to.indexOf(employee_id);
    if (i < 0) return this._fail(`${employee_id} has no ${l.product} seat`);
    l.assigned_to.splice(i, 1);
    return { success: true, data: { license_id, employee_id, seats_used: l.assigned_to.length, seats_available: l.total_seats - l.assigned_to.length } };
  }
}
