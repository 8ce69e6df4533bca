/**
 * WarehouseEnv: inventory control of a single distribution warehouse.
 *
 * State (collections keyed by id): products (by SKU), suppliers, locations (bins), stock (keyed
 * "<sku>@<location_id>"), purchase_orders, receipts, shipments, adjustments, staff;
 * counters: next_po_number, next_receipt_number, next_shipment_number, next_adjustment_number.
 * Dates are YYYY-MM-DD strings from the virtual clock. Stock records that reach 0 are removed.
 */
class WarehouseEnv {
  static ADJUST_REASONS = ["cycle_count", "damaged", "expired", "found", "theft", "other"];
  static APPROVAL_UNITS = 10;
  static APPROVAL_VALUE = 500;
  static OPEN_SHIPMENT = ["pending", "picking", "picked"];

  constructor(state) {
    for (const key of Object.keys(state)) this[key] = state[key];
  }

  // ------------------------------------------------------------------ helpers (not tools)

  _fail(error) {
    return { success: false, error };
  }

  _today() {
    return new Date().toISOString().slice(0, 10);
  }

  _addDays(date, days) {
    return new Date(Date.parse(`${date}T00:00:00Z`) + days * 864e5).toISOString().slice(0, 10);
  }

  _money(x) {
    return Math.round(x * 100) / 100;
  }

  _nextId(prefix, counterKey, width) {
    const n = this[counterKey];
    this[counterKey] = n + 1;
    return `${prefix}${width ? String(n).padStart(width, "0") : n}`;
  }

  _isInt(n) {
    return typeof n === "number" && Number.isInteger(n);
  }

  _key(sku, locationId) {
    return `${sku}@${locationId}`;
  }

  _qty(sku, locationId) {
    const s = this.stock[this._key(sku, locationId)];
    return s ? s.quantity : 0;
  }

  _binUsed(locationId) {
    return Object.values(this.stock)
      .filter((s) => s.location_id === locationId)
      .reduce((sum, s) => sum + s.quantity, 0);
  }

  _addStock(sku, locationId, delta) {
    const key = this._key(sku, locationId);
    const s = this.stock[key];
    const q = (s ? s.quantity : 0) + delta;
    if (q === 0) {
      if (s) delete this.stock[key];
    } else if (s) {
      s.quantity = q;
    } else {
      this.stock[key] = { sku, location_id: locationId, quantity: q };
    }
    return q;
  }

  /** Why `qty` units of `product` cannot be put into `loc` (null when they can). */
  _putawayProblem(product, loc, qty, alreadyPlanned = 0) {
    if (loc.status !== "active") return `Bin ${loc.location_id} is ${loc.status} and cannot receive stock`;
    if (loc.storage_class !== "any" && loc.storage_class !== product.storage) {
      return `Bin ${loc.location_id} has storage class ${loc.storage_class}; ${product.sku} (${product.name}) needs ${product.storage} storage`;
    }
    const free = loc.capacity_units - this._binUsed(loc.location_id) - alreadyPlanned;
    if (qty > free) return `Bin ${loc.location_id} has room for ${Math.max(0, free)} more units, not ${qty}`;
    return null;
  }

  _onHand(sku) {
    return Object.values(this.stock)
      .filter((s) => s.sku === sku && this.locations[s.location_id] && this.locations[s.location_id].zone !== "quarantine")
      .reduce((sum, s) => sum + s.quantity, 0);
  }

  _quarantined(sku) {
    return Object.values(this.stock)
      .filter((s) => s.sku === sku && this.locations[s.location_id] && this.locations[s.location_id].zone === "quarantine")
      .reduce((sum, s) => sum + s.quantity, 0);
  }

  _onOrder(sku) {
    let total = 0;
    for (const po of Object.values(this.purchase_orders)) {
      if (po.status !== "submitted" && po.status !== "partially_received") continue;
      for (const l of po.lines) if (l.sku === sku) total += l.quantity_ordered - l.quantity_received;
    }
    return total;
  }

  /** Units of `sku` promised to open shipments but not picked yet. */
  _committed(sku, exceptShipmentId) {
    let total = 0;
    for (const sh of Object.values(this.shipments)) {
      if (!WarehouseEnv.OPEN_SHIPMENT.includes(sh.status) || sh.shipment_id === exceptShipmentId) continue;
      for (const l of sh.lines) if (l.sku === sku) total += l.quantity - l.quantity_picked;
    }
    return total;
  }

  _productView(p) {
    const onHand = this._onHand(p.sku);
    const onOrder = this._onOrder(p.sku);
    const committed = this._committed(p.sku);
    return {
      ...p,
      on_hand: onHand,
      quarantined: this._quarantined(p.sku),
      committed_to_shipments: committed,
      available: onHand - committed,
      on_order: onOrder,
      needs_reorder: p.active === true && onHand + onOrder < p.reorder_point,
    };
  }

  _locationView(loc) {
    const used = this._binUsed(loc.location_id);
    return { ...loc, used_units: used, free_units: loc.capacity_units - used };
  }

  _poView(po) {
    const supplier = this.suppliers[po.supplier_id];
    return {
      ...po,
      supplier_name: supplier ? supplier.name : null,
      lines: po.lines.map((l) => ({ ...l, quantity_outstanding: l.quantity_ordered - l.quantity_received })),
      total_value: this._money(po.lines.reduce((sum, l) => sum + l.quantity_ordered * l.unit_cost, 0)),
    };
  }

  _shipmentView(sh) {
    return {
      ...sh,
      lines: sh.lines.map((l) => ({
        ...l,
        picks: l.picks.map((p) => ({ ...p })),
        name: this.products[l.sku] ? this.products[l.sku].name : null,
        quantity_to_pick: l.quantity - l.quantity_picked,
      })),
    };
  }

  // ------------------------------------------------------------------ queries

  search_products({ query, category, supplier_id, needs_reorder }) {
    const q = query ? query.toLowerCase() : null;
    const hits = Object.values(this.products)
      .filter((p) => (!q || p.name.toLowerCase().includes(q) || p.sku.toLowerCase() === q) && (!category || p.category === category) && (!supplier_id || p.supplier_id === supplier_id))
      .map((p) => this._productView(p))
      .filter((v) => needs_reorder === undefined || v.needs_reorder === needs_reorder)
      .map((v) => ({
        sku: v.sku,
        name: v.name,
        category: v.category,
        storage: v.storage,
        supplier_id: v.supplier_id,
        active: v.active,
        on_hand: v.on_hand,
        available: v.available,
        on_order: v.on_order,
        reorder_point: v.reorder_point,
        reorder_quantity: v.reorder_quantity,
        needs_reorder: v.needs_reorder,
      }));
    return { success: true, data: hits };
  }

  get_product({ sku }) {
    const p = this.products[sku];
    if (!p) return this._fail(`Product ${sku} not found`);
    const bins = Object.values(this.stock)
      .filter((s) => s.sku === sku)
      .map((s) => {
        const loc = this.locations[s.location_id];
        return { location_id: s.location_id, zone: loc ? loc.zone : null, bin_status: loc ? loc.status : null, quantity: s.quantity };
      });
    const openPos = Object.values(this.purchase_orders)
      .filter((po) => (po.status === "submitted" || po.status === "partially_received") && po.lines.some((l) => l.sku === sku))
      .map((po) => ({ po_id: po.po_id, status: po.status, expected_date: po.expected_date }));
    const supplier = this.suppliers[p.supplier_id];
    return { success: true, data: { ...this._productView(p), supplier_name: supplier ? supplier.name : null, stock_by_location: bins, open_purchase_orders: openPos } };
  }

  list_locations({ zone, storage_class, min_free_units, sku }) {
    const hits = Object.values(this.locations)
      .filter((l) => (!zone || l.zone === zone) && (!storage_class || l.storage_class === storage_class))
      .filter((l) => !sku || this._qty(sku, l.location_id) > 0)
      .map((l) => this._locationView(l))
      .filter((v) => min_free_units === undefined || v.free_units >= min_free_units);
    return { success: true, data: hits };
  }

  get_location({ location_id }) {
    const loc = this.locations[location_id];
    if (!loc) return this._fail(`Location ${location_id} not found`);
    const contents = Object.values(this.stock)
      .filter((s) => s.location_id === location_id)
      .map((s) => ({ sku: s.sku, name: this.products[s.sku] ? this.products[s.sku].name : null, quantity: s.quantity }));
    return { success: true, data: { ...this._locationView(loc), contents } };
  }

  list_suppliers({ active_only }) {
    const hits = Object.values(this.suppliers)
      .filter((s) => !active_only || s.active)
      .map((s) => ({ ...s, products: Object.values(this.products).filter((p) => p.supplier_id === s.supplier_id).map((p) => p.sku) }));
    return { success: true, data: hits };
  }

  list_staff({ role }) {
    return { success: true, data: Object.values(this.staff).filter((s) => !role || s.role === role).map((s) => ({ ...s })) };
  }

  list_purchase_orders({ status, supplier_id, sku }) {
    const hits = Object.values(this.purchase_orders).filter(
      (po) => (!status || po.status === status) && (!supplier_id || po.supplier_id === supplier_id) && (!sku || po.lines.some((l) => l.sku === sku)),
    );
    return { success: true, data: hits.map((po) => this._poView(po)) };
  }

  get_purchase_order({ po_id }) {
    const po = this.purchase_orders[po_id];
    if (!po) return this._fail(`Purchase order ${po_id} not found`);
    const receipts = Object.values(this.receipts)
      .filter((r) => r.po_id === po_id)
      .map((r) => ({ ...r, lines: r.lines.map((l) => ({ ...l })) }));
    return { success: true, data: { ...this._poView(po), receipts } };
  }

  list_shipments({ status, customer }) {
    const c = customer ? customer.toLowerCase() : null;
    const hits = Object.values(this.shipments).filter((sh) => (!status || sh.status === status) && (!c || sh.customer.toLowerCase().includes(c)));
    return {
      success: true,
      data: hits.map((sh) => ({
        shipment_id: sh.shipment_id,
        customer: sh.customer,
        status: sh.status,
        created_date: sh.created_date,
        lines: sh.lines.map((l) => ({ sku: l.sku, quantity: l.quantity, quantity_picked: l.quantity_picked })),
      })),
    };
  }

  get_shipment({ shipment_id }) {
    const sh = this.shipments[shipment_id];
    if (!sh) return this._fail(`Shipment ${shipment_id} not found`);
    return { success: true, data: this._shipmentView(sh) };
  }

  // ------------------------------------------------------------------ state changes

  create_purchase_order({ supplier_id, lines }) {
    const supplier = this.suppliers[supplier_id];
    if (!supplier) return this._fail(`Supplier ${supplier_id} not found`);
    if (!supplier.active) return this._fail(`Supplier ${supplier.name} is inactive; purchase orders can only go to active suppliers`);
    if (!Array.isArray(lines) || lines.length === 0) return this._fail("A purchase order needs at least one line");
    const seen = [];
    for (const l of lines) {
      const p = this.products[l.sku];
      if (!p) return this._fail(`Product ${l.sku} not found`);
      if (!p.active) return this._fail(`Product ${l.sku} is discontinued and cannot be ordered`);
      if (p.supplier_id !== supplier_id) return this._fail(`Product ${l.sku} is sourced from ${p.supplier_id}, not ${supplier_id}`);
      if (!this._isInt(l.quantity) || l.quantity <= 0) return this._fail(`Quantity for ${l.sku} must be a positive whole number`);
      if (seen.includes(l.sku)) return this._fail(`Product ${l.sku} appears twice; use one line per product`);
      seen.push(l.sku);
    }
    const poId = this._nextId("PO-", "next_po_number");
    const today = this._today();
    this.purchase_orders[poId] = {
      po_id: poId,
      supplier_id,
      status: "submitted",
      created_date: today,
      expected_date: this._addDays(today, supplier.lead_time_days),
      lines: lines.map((l) => ({ sku: l.sku, quantity_ordered: l.quantity, quantity_received: 0, unit_cost: this.products[l.sku].unit_cost })),
      cancel_reason: null,
    };
    return { success: true, data: this._poView(this.purchase_orders[poId]) };
  }

  cancel_purchase_order({ po_id, reason }) {
    const po = this.purchase_orders[po_id];
    if (!po) return this._fail(`Purchase order ${po_id} not found`);
    if (po.status !== "submitted") return this._fail(`Purchase order ${po_id} is ${po.status}; only submitted orders with nothing received can be cancelled`);
    if (po.lines.some((l) => l.quantity_received > 0)) return this._fail(`Purchase order ${po_id} already has received goods and cannot be cancelled`);
    if (!reason || !reason.trim()) return this._fail("A reason is required to cancel a purchase order");
    po.status = "cancelled";
    po.cancel_reason = reason.trim();
    return { success: true, message: `Purchase order ${po_id} cancelled` };
  }

  receive_purchase_order({ po_id, lines }) {
    const po = this.purchase_orders[po_id];
    if (!po) return this._fail(`Purchase order ${po_id} not found`);
    if (po.status !== "submitted" && po.status !== "partially_received") return this._fail(`Purchase order ${po_id} is ${po.status}; goods can only be received against open orders`);
    if (!Array.isArray(lines) || lines.length === 0) return this._fail("Give at least one received line");
    const perSku = {};
    const perBin = {};
    for (const l of lines) {
      const poLine = po.lines.find((x) => x.sku === l.sku);
      if (!poLine) return this._fail(`Product ${l.sku} is not on purchase order ${po_id}`);
      if (!this._isInt(l.quantity) || l.quantity <= 0) return this._fail(`Quantity for ${l.sku} must be a positive whole number`);
      const loc = this.locations[l.location_id];
      if (!loc) return this._fail(`Location ${l.location_id} not found`);
      const problem = this._putawayProblem(this.products[l.sku], loc, l.quantity, perBin[l.location_id] || 0);
      if (problem) return this._fail(problem);
      perSku[l.sku] = (perSku[l.sku] || 0) + l.quantity;
      perBin[l.location_id] = (perBin[l.location_id] || 0) + l.quantity;
      const outstanding = poLine.quantity_ordered - poLine.quantity_received;
      if (perSku[l.sku] > outstanding) return this._fail(`Only ${outstanding} units of ${l.sku} are outstanding on ${po_id}; over-receipts are not accepted`);
    }
    for (const l of lines) {
      po.lines.find((x) => x.sku === l.sku).quantity_received += l.quantity;
      this._addStock(l.sku, l.location_id, l.quantity);
    }
    po.status = po.lines.every((x) => x.quantity_received >= x.quantity_ordered) ? "received" : "partially_received";
    const receiptId = this._nextId("RCV-", "next_receipt_number", 4);
    this.receipts[receiptId] = { receipt_id: receiptId, po_id, date: this._today(), lines: lines.map((l) => ({ sku: l.sku, quantity: l.quantity, location_id: l.location_id })) };
    return { success: true, data: { receipt_id: receiptId, po_id, po_status: po.status, lines: po.lines.map((x) => ({ sku: x.sku, quantity_ordered: x.quantity_ordered, quantity_received: x.quantity_received })) } };
  }

  transfer_stock({ sku, from_location_id, to_location_id, quantity }) {
    const p = this.products[sku];
    if (!p) return this._fail(`Product ${sku} not found`);
    const from = this.locations[from_location_id];
    if (!from) return this._fail(`Location ${from_location_id} not found`);
    const to = this.locations[to_location_id];
    if (!to) return this._fail(`Location ${to_location_id} not found`);
    if (from_location_id === to_location_id) return this._fail("Source and destination are the same bin");
    if (!this._isInt(quantity) || quantity <= 0) return this._fail("Quantity must be a positive whole number");
    const have = this._qty(sku, from_location_id);
    if (have < quantity) return this._fail(`Bin ${from_location_id} holds only ${have} unit(s) of ${sku}`);
    const problem = this._putawayProblem(p, to, quantity);
    if (problem) return this._fail(problem);
    this._addStock(sku, from_location_id, -quantity);
    this._addStock(sku, to_location_id, quantity);
    return { success: true, data: { sku, from_location_id, to_location_id, quantity, from_quantity: this._qty(sku, from_location_id), to_quantity: this._qty(sku, to_location_id) } };
  }

  adjust_stock({ sku, location_id, quantity_change, reason, approved_by }) {
    const P = WarehouseEnv;
    const p = this.products[sku];
    if (!p) return this._fail(`Product ${sku} not found`);
    const loc = this.locations[location_id];
    if (!loc) return this._fail(`Location ${location_id} not found`);
    if (!this._isInt(quantity_change) || quantity_change === 0) return this._fail("quantity_change must be a non-zero whole number");
    if (!P.ADJUST_REASONS.includes(reason)) return this._fail(`Unknown reason ${reason}; use one of ${P.ADJUST_REASONS.join(", ")}`);
    const have = this._qty(sku, location_id);
    if (have + quantity_change < 0) return this._fail(`Bin ${location_id} holds ${have} unit(s) of ${sku}; stock cannot go below zero`);
    if (quantity_change > 0) {
      const problem = this._putawayProblem(p, loc, quantity_change);
      if (problem) return this._fail(problem);
    }
    const value = this._money(Math.abs(quantity_change) * p.unit_cost);
    const needsApproval = Math.abs(quantity_change) > P.APPROVAL_UNITS || value > P.APPROVAL_VALUE;
    if (approved_by) {
      const s = this.staff[approved_by];
      if (!s) return this._fail(`Staff member ${approved_by} not found`);
      if (s.role !== "supervisor") return this._fail(`${s.name} is a ${s.role}; only supervisors can approve adjustments`);
    } else if (needsApproval) {
      return this._fail(`Adjustments of more than ${P.APPROVAL_UNITS} units or more than $${P.APPROVAL_VALUE} in value need approved_by (a supervisor); this one is ${Math.abs(quantity_change)} units worth $${value.toFixed(2)}`);
    }
    this._addStock(sku, location_id, quantity_change);
    const adjId = this._nextId("ADJ-", "next_adjustment_number", 4);
    this.adjustments[adjId] = { adjustment_id: adjId, sku, location_id, quantity_change, reason, value, approved_by: approved_by || null, date: this._today() };
    return { success: true, data: { adjustment_id: adjId, sku, location_id, new_quantity: this._qty(sku, location_id), value } };
  }

  create_shipment({ customer, lines }) {
    if (!customer || !customer.trim()) return this._fail("A customer name is required");
    if (!Array.isArray(lines) || lines.length === 0) return this._fail("A shipment needs at least one line");
    const seen = [];
    for (const l of lines) {
      const p = this.products[l.sku];
      if (!p) return this._fail(`Product ${l.sku} not found`);
      if (!p.active) return this._fail(`Product ${l.sku} is discontinued`);
      if (!this._isInt(l.quantity) || l.quantity <= 0) return this._fail(`Quantity for ${l.sku} must be a positive whole number`);
      if (seen.includes(l.sku)) return this._fail(`Product ${l.sku} appears twice; use one line per product`);
      seen.push(l.sku);
      const available = this._onHand(l.sku) - this._committed(l.sku);
      if (l.quantity > available) return this._fail(`Only ${Math.max(0, available)} units of ${l.sku} (${p.name}) are available to promise, not ${l.quantity}`);
    }
    const id = this._nextId("SHP-", "next_shipment_number");
    this.shipments[id] = {
      shipment_id: id,
      customer: customer.trim(),
      status: "pending",
      created_date: this._today(),
      lines: lines.map((l) => ({ sku: l.sku, quantity: l.quantity, quantity_picked: 0, picks: [] })),
      shipped_date: null,
      carrier: null,
      tracking_number: null,
      cancel_reason: null,
    };
    return { success: true, data: this._shipmentView(this.shipments[id]) };
  }

  pick_shipment_line({ shipment_id, sku, location_id, quantity }) {
    const sh = this.shipments[shipment_id];
    if (!sh) return this._fail(`Shipment ${shipment_id} not found`);
    if (sh.status !== "pending" && sh.status !== "picking") return this._fail(`Shipment ${shipment_id} is ${sh.status}; nothing more can be picked`);
    const line = sh.lines.find((l) => l.sku === sku);
    if (!line) return this._fail(`Product ${sku} is not on shipment ${shipment_id}`);
    const loc = this.locations[location_id];
    if (!loc) return this._fail(`Location ${location_id} not found`);
    if (loc.zone === "quarantine") return this._fail(`Bin ${location_id} is a quarantine bin; quarantined stock cannot be shipped`);
    if (!this._isInt(quantity) || quantity <= 0) return this._fail("Quantity must be a positive whole number");
    const remaining = line.quantity - line.quantity_picked;
    if (quantity > remaining) return this._fail(`Only ${remaining} units of ${sku} remain to be picked for ${shipment_id}`);
    const have = this._qty(sku, location_id);
    if (have < quantity) return this._fail(`Bin ${location_id} holds only ${have} unit(s) of ${sku}`);
    this._addStock(sku, location_id, -quantity);
    line.quantity_picked += quantity;
    const existing = line.picks.find((p) => p.location_id === location_id);
    if (existing) existing.quantity += quantity;
    else line.picks.push({ location_id, quantity });
    sh.status = sh.lines.every((l) => l.quantity_picked >= l.quantity) ? "picked" : "picking";
    return { success: true, data: { shipment_id, sku, location_id, quantity, line_remaining: line.quantity - line.quantity_picked, shipment_status: sh.status } };
  }

  ship_shipment({ shipment_id, carrier, tracking_number }) {
    const sh = this.shipments[shipment_id];
    if (!sh) return this._fail(`Shipment ${shipment_id} not found`);
    if (sh.status !== "picked") return this._fail(`Shipment ${shipment_id} is ${sh.status}; only fully picked shipments can be shipped`);
    if (!carrier || !carrier.trim()) return this._fail("A carrier is required");
    if (!tracking_number || !tracking_number.trim()) return this._fail("A tracking number is required");
    sh.status = "shipped";
    sh.shipped_date = this._today();
    sh.carrier = carrier.trim();
    sh.tracking_number = tracking_number.trim();
    return { success: true, message: `Shipment ${shipment_id} shipped with ${sh.carrier} (${sh.tracking_number})` };
  }

  cancel_shipment({ shipment_id, reason }) {
    const sh = this.shipments[shipment_id];
    if (!sh) return this._fail(`Shipment ${shipment_id} not found`);
    if (sh.status !== "pending") return this._fail(`Shipment ${shipment_id} is ${sh.status}; only pending shipments with nothing picked can be cancelled`);
    if (!reason || !reason.trim()) return this._fail("A reason is required to cancel a shipment");
    sh.status = "cancelled";
    sh.cancel_reason = reason.trim();
    return { success: true, message: `Shipment ${shipment_id} cancelled` };
  }

  set_location_status({ location_id, status }) {
    const loc = this.locations[location_id];
    if (!loc) return this._fail(`Location ${location_id} not found`);
    if (status !== "active" && status !== "blocked") return this._fail(`Unknown status ${status}`);
    if (loc.status === status) return this._fail(`Bin ${location_id} is already ${status}`);
    if (status === "blocked") {
      const used = this._binUsed(location_id);
      if (used > 0) return this._fail(`Bin ${location_id} still holds ${used} units; move them out before blocking it`);
    }
    loc.status = status;
    return { success: true, message: `Bin ${location_id} is now ${status}` };
  }

  set_product_supplier({ sku, supplier_id }) {
    const p = this.products[sku];
    if (!p) return this._fail(`Product ${sku} not found`);
    const s = this.suppliers[supplier_id];
    if (!s) return this._fail(`Supplier ${supplier_id} not found`);
    if (!s.active) return this._fail(`Supplier ${s.name} is inactive`);
    if (p.supplier_id === supplier_id) return this._fail(`${sku} is already sourced from ${supplier_id}`);
    const old = p.supplier_id;
    p.supplier_id = supplier_id;
    return { success: true, data: { sku, old_supplier_id: old, supplier_id } };
  }
}
