/**
 * ClinicEnv: the front desk and billing system of an outpatient clinic.
 *
 * State (collections keyed by id): patients, doctors, medications, slots, appointments,
 * prescriptions, invoices; counters: next_patient_number, next_appointment_number,
 * next_prescription_number, next_invoice_number.
 * Slot times are UTC ("date" YYYY-MM-DD plus "start_time" HH:MM). Recorded dates are YYYY-MM-DD
 * taken from the virtual clock.
 */
class ClinicEnv {
  static POLICY = {
    lateCancelHours: 24,
    lateCancelFee: 25,
    balanceBlock: 150,
    maxRefills: 5,
    maxQuantity: 120,
  };

  constructor(state) {
    for (const key of Object.keys(state)) this[key] = state[key];
  }

  // ------------------------------------------------------------------ helpers (not tools)

  _today() {
    return new Date().toISOString().slice(0, 10);
  }

  _slotMs(slot) {
    return Date.parse(`${slot.date}T${slot.start_time}:00Z`);
  }

  _money(x) {
    return Math.round(x * 100) / 100;
  }

  _nextId(prefix, counterKey, width) {
    const n = this[counterKey];
    this[counterKey] = n + 1;
    return `${prefix}${String(n).padStart(width, "0")}`;
  }

  _fail(error) {
    return { success: false, error };
  }

  _outstanding(invoice) {
    return invoice.status === "open" ? this._money(invoice.patient_due - invoice.amount_paid) : 0;
  }

  _balance(patientId) {
    const total = Object.values(this.invoices)
      .filter((i) => i.patient_id === patientId)
      .reduce((sum, i) => sum + this._outstanding(i), 0);
    return this._money(total);
  }

  _hasCompletedVisit(patientId, doctorId) {
    return Object.values(this.appointments).some((a) => a.patient_id === patientId && a.doctor_id === doctorId && a.status === "completed");
  }

  _slotView(slot) {
    const doctor = this.doctors[slot.doctor_id];
    return {
      slot_id: slot.slot_id,
      doctor_id: slot.doctor_id,
      doctor_name: doctor ? doctor.name : null,
      specialty: doctor ? doctor.specialty : null,
      date: slot.date,
      start_time: slot.start_time,
      duration_min: slot.duration_min,
      status: slot.status,
    };
  }

  _byTime(a, b) {
    const ka = `${a.date} ${a.start_time || a.time}`;
    const kb = `${b.date} ${b.start_time || b.time}`;
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  }

  /** Why `patient` may not take `slot` (null when they may). `ignoreId`: the appointment being moved. */
  _bookingProblem(patient, slot, ignoreId) {
    const P = ClinicEnv.POLICY;
    if (patient.status !== "active") return `Patient ${patient.patient_id} is ${patient.status}; only active patients can be booked`;
    if (slot.status !== "open") return `Slot ${slot.slot_id} is not open (status: ${slot.status})`;
    if (this._slotMs(slot) <= Date.now()) return `Slot ${slot.slot_id} (${slot.date} ${slot.start_time}) is in the past`;
    const doctor = this.doctors[slot.doctor_id];
    if (!doctor.accepts_new_patients && !this._hasCompletedVisit(patient.patient_id, doctor.doctor_id)) {
      return `${doctor.name} is not accepting new patients, and ${patient.patient_id} has no completed visit with ${doctor.name}`;
    }
    const mine = Object.values(this.appointments).filter(
      (a) => a.patient_id === patient.patient_id && a.appointment_id !== ignoreId && (a.status === "scheduled" || a.status === "checked_in"),
    );
    if (mine.some((a) => a.date === slot.date && a.time === slot.start_time)) {
      return `Patient ${patient.patient_id} already has an appointment on ${slot.date} at ${slot.start_time}`;
    }
    if (mine.some((a) => a.date === slot.date && a.doctor_id === slot.doctor_id)) {
      return `Patient ${patient.patient_id} already has an appointment with ${doctor.name} on ${slot.date}`;
    }
    const balance = this._balance(patient.patient_id);
    if (balance > P.balanceBlock) {
      return `Patient ${patient.patient_id} has an outstanding balance of $${balance.toFixed(2)} (over $${P.balanceBlock.toFixed(2)}); it must be paid down before booking`;
    }
    return null;
  }

  _createInvoice(patientId, appointmentId, items, insuranceCovered) {
    const invoiceId = this._nextId("INV", "next_invoice_number", 4);
    const total = this._money(items.reduce((s, i) => s + i.amount, 0));
    const covered = this._money(insuranceCovered);
    const due = this._money(total - covered);
    this.invoices[invoiceId] = {
      invoice_id: invoiceId,
      patient_id: patientId,
      appointment_id: appointmentId,
      items,
      total,
      insurance_covered: covered,
      patient_due: due,
      amount_paid: 0,
      payments: [],
      status: due === 0 ? "paid" : "open",
      created_date: this._today(),
    };
    return this.invoices[invoiceId];
  }

  // ------------------------------------------------------------------ queries

  find_patients({ name, dob, phone }) {
    if (!name && !dob && !phone) return this._fail("Give at least one of name, dob or phone");
    const n = name ? name.toLowerCase() : null;
    const hits = Object.values(this.patients).filter(
      (p) => (!n || p.name.toLowerCase().includes(n)) && (!dob || p.dob === dob) && (!phone || p.phone === phone),
    );
    return { success: true, data: hits.map((p) => ({ patient_id: p.patient_id, name: p.name, dob: p.dob, phone: p.phone, status: p.status })) };
  }

  get_patient({ patient_id }) {
    const p = this.patients[patient_id];
    if (!p) return this._fail(`Patient ${patient_id} not found`);
    const upcoming = Object.values(this.appointments)
      .filter((a) => a.patient_id === patient_id && (a.status === "scheduled" || a.status === "checked_in"))
      .sort((a, b) => this._byTime(a, b))
      .map((a) => ({ appointment_id: a.appointment_id, doctor_id: a.doctor_id, date: a.date, time: a.time, status: a.status }));
    return { success: true, data: { ...p, outstanding_balance: this._balance(patient_id), upcoming_appointments: upcoming } };
  }

  list_doctors({ specialty }) {
    const s = specialty ? specialty.toLowerCase() : null;
    const hits = Object.values(this.doctors).filter((d) => !s || d.specialty.toLowerCase() === s);
    return { success: true, data: hits.map((d) => ({ ...d })) };
  }

  search_slots({ doctor_id, specialty, date, from_date }) {
    if (doctor_id && !this.doctors[doctor_id]) return this._fail(`Doctor ${doctor_id} not found`);
    const s = specialty ? specialty.toLowerCase() : null;
    const now = Date.now();
    const hits = Object.values(this.slots)
      .filter((slot) => {
        if (slot.status !== "open" || this._slotMs(slot) <= now) return false;
        if (doctor_id && slot.doctor_id !== doctor_id) return false;
        if (s && this.doctors[slot.doctor_id].specialty.toLowerCase() !== s) return false;
        if (date && slot.date !== date) return false;
        if (from_date && slot.date < from_date) return false;
        return true;
      })
      .sort((a, b) => this._byTime(a, b));
    return { success: true, data: hits.map((slot) => this._slotView(slot)) };
  }

  list_patient_appointments({ patient_id, status }) {
    if (!this.patients[patient_id]) return this._fail(`Patient ${patient_id} not found`);
    const hits = Object.values(this.appointments)
      .filter((a) => a.patient_id === patient_id && (!status || a.status === status))
      .sort((a, b) => this._byTime(a, b));
    return {
      success: true,
      data: hits.map((a) => ({ ...a, doctor_name: this.doctors[a.doctor_id] ? this.doctors[a.doctor_id].name : null })),
    };
  }

  get_appointment({ appointment_id }) {
    const a = this.appointments[appointment_id];
    if (!a) return this._fail(`Appointment ${appointment_id} not found`);
    const d = this.doctors[a.doctor_id];
    return { success: true, data: { ...a, doctor_name: d ? d.name : null, specialty: d ? d.specialty : null } };
  }

  search_medications({ query }) {
    const q = query.toLowerCase();
    const hits = Object.values(this.medications).filter((m) => m.name.toLowerCase().includes(q) || m.drug_class.toLowerCase().includes(q));
    return { success: true, data: hits.map((m) => ({ ...m })) };
  }

  list_prescriptions({ patient_id, status }) {
    if (!this.patients[patient_id]) return this._fail(`Patient ${patient_id} not found`);
    const hits = Object.values(this.prescriptions).filter((r) => r.patient_id === patient_id && (!status || r.status === status));
    return {
      success: true,
      data: hits.map((r) => ({ ...r, medication_name: this.medications[r.medication_id] ? this.medications[r.medication_id].name : null })),
    };
  }

  list_invoices({ patient_id, status }) {
    if (!this.patients[patient_id]) return this._fail(`Patient ${patient_id} not found`);
    const hits = Object.values(this.invoices).filter((i) => i.patient_id === patient_id && (!status || i.status === status));
    return {
      success: true,
      data: { invoices: hits.map((i) => ({ ...i, outstanding: this._outstanding(i) })), outstanding_balance: this._balance(patient_id) },
    };
  }

  // ------------------------------------------------------------------ state changes

  register_patient({ name, dob, phone, email, insurance_provider, insurance_member_number, copay, allergies }) {
    if (!name.trim()) return this._fail("A name is required");
    if (!/^\d{4}-\d{2}-\d{2}$/.test(dob) || Number.isNaN(Date.parse(`${dob}T00:00:00Z`))) return this._fail(`'${dob}' is not a date (YYYY-MM-DD)`);
    if (dob > this._today()) return this._fail("The date of birth is in the future");
    if (!/^[0-9+()\- ]{7,20}$/.test(phone)) return this._fail(`'${phone}' is not a valid phone number`);
    if (email !== undefined && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(email)) return this._fail(`'${email}' is not a valid email address`);
    const dup = Object.values(this.patients).find((p) => p.name.toLowerCase() === name.trim().toLowerCase() && p.dob === dob);
    if (dup) return this._fail(`A patient with this name and date of birth is already registered (${dup.patient_id})`);
    let insurance = null;
    if (insurance_provider !== undefined || insurance_member_number !== undefined || copay !== undefined) {
      if (!insurance_provider || !insurance_member_number || copay === undefined) {
        return this._fail("Insurance needs insurance_provider, insurance_member_number and copay together");
      }
      if (copay < 0) return this._fail("The copay cannot be negative");
      insurance = { provider: insurance_provider, member_number: insurance_member_number, copay: this._money(copay) };
    }
    const patientId = this._nextId("P", "next_patient_number", 3);
    this.patients[patientId] = {
      patient_id: patientId,
      name: name.trim(),
      dob,
      phone,
      email: email === undefined ? null : email,
      insurance,
      allergies: (allergies || []).map((a) => a.trim().toLowerCase()).filter((a) => a),
      status: "active",
      registered_date: this._today(),
    };
    return { success: true, data: { ...this.patients[patientId] } };
  }

  update_patient({ patient_id, phone, email, add_allergies }) {
    const p = this.patients[patient_id];
    if (!p) return this._fail(`Patient ${patient_id} not found`);
    if (phone === undefined && email === undefined && add_allergies === undefined) return this._fail("Nothing to update");
    if (email !== undefined && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(email)) return this._fail(`'${email}' is not a valid email address`);
    if (phone !== undefined && !/^[0-9+()\- ]{7,20}$/.test(phone)) return this._fail(`'${phone}' is not a valid phone number`);
    if (phone !== undefined) p.phone = phone;
    if (email !== undefined) p.email = email;
    if (add_allergies !== undefined) {
      for (const raw of add_allergies) {
        const a = raw.trim().toLowerCase();
        if (a && !p.allergies.includes(a)) p.allergies.push(a);
      }
    }
    return { success: true, data: { patient_id, phone: p.phone, email: p.email, allergies: [...p.allergies] } };
  }

  book_appointment({ patient_id, slot_id, reason }) {
    const patient = this.patients[patient_id];
    if (!patient) return this._fail(`Patient ${patient_id} not found`);
    const slot = this.slots[slot_id];
    if (!slot) return this._fail(`Slot ${slot_id} not found`);
    if (!reason.trim()) return this._fail("A reason for the visit is required");
    const problem = this._bookingProblem(patient, slot, null);
    if (problem) return this._fail(problem);
    const appointmentId = this._nextId("A", "next_appointment_number", 4);
    slot.status = "booked";
    this.appointments[appointmentId] = {
      appointment_id: appointmentId,
      patient_id,
      doctor_id: slot.doctor_id,
      slot_id,
      date: slot.date,
      time: slot.start_time,
      reason: reason.trim(),
      visit_type: this._hasCompletedVisit(patient_id, slot.doctor_id) ? "follow_up" : "new",
      status: "scheduled",
      booked_date: this._today(),
    };
    const doctor = this.doctors[slot.doctor_id];
    return {
      success: true,
      data: { appointment_id: appointmentId, doctor: doctor.name, date: slot.date, time: slot.start_time, visit_type: this.appointments[appointmentId].visit_type },
    };
  }

  cancel_appointment({ appointment_id, reason }) {
    const P = ClinicEnv.POLICY;
    const appt = this.appointments[appointment_id];
    if (!appt) return this._fail(`Appointment ${appointment_id} not found`);
    if (appt.status !== "scheduled") return this._fail(`Appointment ${appointment_id} is ${appt.status}; only scheduled appointments can be cancelled`);
    const slot = this.slots[appt.slot_id];
    const startMs = this._slotMs(slot);
    const now = Date.now();
    if (startMs <= now) return this._fail(`Appointment ${appointment_id} has already started or passed`);
    appt.status = "cancelled";
    appt.cancellation_reason = reason;
    appt.cancelled_date = this._today();
    slot.status = "open";
    let fee = null;
    const hoursBefore = (startMs - now) / 3.6e6;
    if (reason !== "doctor_unavailable" && hoursBefore < P.lateCancelHours) {
      fee = this._createInvoice(appt.patient_id, appointment_id, [{ description: `Late cancellation fee (appointment ${appointment_id})`, amount: P.lateCancelFee }], 0);
    }
    return {
      success: true,
      data: {
        appointment_id,
        status: "cancelled",
        hours_notice: Math.floor(hoursBefore),
        late_cancellation_fee: fee ? { invoice_id: fee.invoice_id, amount: fee.total } : null,
      },
    };
  }

  reschedule_appointment({ appointment_id, new_slot_id }) {
    const appt = this.appointments[appointment_id];
    if (!appt) return this._fail(`Appointment ${appointment_id} not found`);
    if (appt.status !== "scheduled") return this._fail(`Appointment ${appointment_id} is ${appt.status}; only scheduled appointments can be rescheduled`);
    const slot = this.slots[new_slot_id];
    if (!slot) return this._fail(`Slot ${new_slot_id} not found`);
    if (slot.doctor_id !== appt.doctor_id) return this._fail(`Slot ${new_slot_id} belongs to another doctor; an appointment can only be moved to a slot of the same doctor (cancel and book instead)`);
    const oldSlot = this.slots[appt.slot_id];
    if (this._slotMs(oldSlot) <= Date.now()) return this._fail(`Appointment ${appointment_id} has already started or passed`);
    const problem = this._bookingProblem(this.patients[appt.patient_id], slot, appointment_id);
    if (problem) return this._fail(problem);
    oldSlot.status = "open";
    slot.status = "booked";
    appt.rescheduled_from = appt.slot_id;
    appt.slot_id = new_slot_id;
    appt.date = slot.date;
    appt.time = slot.start_time;
    return { success: true, data: { appointment_id, slot_id: new_slot_id, date: slot.date, time: slot.start_time } };
  }

  check_in_patient({ appointment_id }) {
    const appt = this.appointments[appointment_id];
    if (!appt) return this._fail(`Appointment ${appointment_id} not found`);
    if (appt.status !== "scheduled") return this._fail(`Appointment ${appointment_id} is ${appt.status}; only scheduled appointments can be checked in`);
    const today = this._today();
    if (appt.date !== today) return this._fail(`Appointment ${appointment_id} is on ${appt.date}; patients can only be checked in on the day of their appointment (today is ${today})`);
    appt.status = "checked_in";
    appt.checked_in_date = today;
    return { success: true, data: { appointment_id, status: "checked_in" } };
  }

  complete_appointment({ appointment_id, notes }) {
    const appt = this.appointments[appointment_id];
    if (!appt) return this._fail(`Appointment ${appointment_id} not found`);
    if (appt.status !== "checked_in") return this._fail(`Appointment ${appointment_id} is ${appt.status}; only checked-in appointments can be completed`);
    if (!notes.trim()) return this._fail("Visit notes are required");
    const doctor = this.doctors[appt.doctor_id];
    const patient = this.patients[appt.patient_id];
    appt.status = "completed";
    appt.notes = notes;
    appt.completed_date = this._today();
    const fee = doctor.consultation_fee;
    const covered = patient.insurance ? fee - Math.min(patient.insurance.copay, fee) : 0;
    const invoice = this._createInvoice(patient.patient_id, appointment_id, [{ description: `Consultation: ${doctor.name} (${doctor.specialty})`, amount: fee }], covered);
    return {
      success: true,
      data: { appointment_id, status: "completed", invoice_id: invoice.invoice_id, total: invoice.total, insurance_covered: invoice.insurance_covered, patient_due: invoice.patient_due, invoice_status: invoice.status },
    };
  }

  issue_prescription({ appointment_id, medication_id, dosage, quantity, refills }) {
    const P = ClinicEnv.POLICY;
    const appt = this.appointments[appointment_id];
    if (!appt) return this._fail(`Appointment ${appointment_id} not found`);
    if (appt.status !== "checked_in" && appt.status !== "completed") {
      return this._fail(`Appointment ${appointment_id} is ${appt.status}; prescriptions are issued only during or after a visit (checked in or completed)`);
    }
    const med = this.medications[medication_id];
    if (!med) return this._fail(`Medication ${medication_id} not found`);
    const patient = this.patients[appt.patient_id];
    const doctor = this.doctors[appt.doctor_id];
    const generic = med.name.split(" ")[0].toLowerCase();
    const allergy = patient.allergies.find((a) => a === med.drug_class.toLowerCase() || a === generic);
    if (allergy) return this._fail(`Patient ${patient.patient_id} is allergic to ${allergy}; ${med.name} (${med.drug_class}) cannot be prescribed`);
    if (med.controlled && !doctor.can_prescribe_controlled) return this._fail(`${doctor.name} is not authorised to prescribe controlled substances such as ${med.name}`);
    if (!Number.isInteger(quantity) || quantity < 1 || quantity > P.maxQuantity) return this._fail(`The quantity must be a whole number from 1 to ${P.maxQuantity}`);
    if (!Number.isInteger(refills) || refills < 0 || refills > P.maxRefills) return this._fail(`Refills must be a whole number from 0 to ${P.maxRefills}`);
    if (med.controlled && refills > 0) return this._fail(`${med.name} is a controlled substance; it cannot be prescribed with refills`);
    if (!dosage.trim()) return this._fail("Dosage instructions are required");
    const dup = Object.values(this.prescriptions).find((r) => r.patient_id === patient.patient_id && r.medication_id === medication_id && r.status === "active");
    if (dup) return this._fail(`Patient ${patient.patient_id} already has an active prescription for ${med.name} (${dup.prescription_id})`);
    const rxId = this._nextId("RX", "next_prescription_number", 4);
    this.prescriptions[rxId] = {
      prescription_id: rxId,
      patient_id: patient.patient_id,
      doctor_id: doctor.doctor_id,
      appointment_id,
      medication_id,
      dosage: dosage.trim(),
      quantity,
      refills_remaining: refills,
      status: "active",
      issued_date: this._today(),
      last_refill_date: null,
    };
    return { success: true, data: { prescription_id: rxId, medication: med.name, dosage: dosage.trim(), quantity, refills } };
  }

  refill_prescription({ prescription_id }) {
    const rx = this.prescriptions[prescription_id];
    if (!rx) return this._fail(`Prescription ${prescription_id} not found`);
    if (rx.status !== "active") return this._fail(`Prescription ${prescription_id} is ${rx.status}`);
    if (rx.refills_remaining <= 0) return this._fail(`Prescription ${prescription_id} has no refills left; the patient needs a new prescription from a doctor`);
    rx.refills_remaining -= 1;
    rx.last_refill_date = this._today();
    return { success: true, data: { prescription_id, refills_remaining: rx.refills_remaining } };
  }

  discontinue_prescription({ prescription_id, reason }) {
    const rx = this.prescriptions[prescription_id];
    if (!rx) return this._fail(`Prescription ${prescription_id} not found`);
    if (rx.status !== "active") return this._fail(`Prescription ${prescription_id} is already ${rx.status}`);
    if (!reason.trim()) return this._fail("A reason is required");
    rx.status = "discontinued";
    rx.discontinued_reason = reason.trim();
    rx.discontinued_date = this._today();
    return { success: true, message: `Prescription ${prescription_id} discontinued` };
  }

  pay_invoice({ invoice_id, amount, method }) {
    const inv = this.invoices[invoice_id];
    if (!inv) return this._fail(`Invoice ${invoice_id} not found`);
    if (inv.status !== "open") return this._fail(`Invoice ${invoice_id} is ${inv.status}; nothing is owed on it`);
    const outstanding = this._outstanding(inv);
    const amt = this._money(amount);
    if (!(amt > 0)) return this._fail("The amount must be positive");
    if (amt > outstanding) return this._fail(`The amount $${amt.toFixed(2)} is more than the $${outstanding.toFixed(2)} outstanding on ${invoice_id}`);
    inv.amount_paid = this._money(inv.amount_paid + amt);
    inv.payments.push({ amount: amt, method, date: this._today() });
    if (inv.amount_paid >= inv.patient_due) inv.status = "paid";
    return { success: true, data: { invoice_id, amount_paid: inv.amount_paid, outstanding: this._outstanding(inv), status: inv.status, patient_balance: this._balance(inv.patient_id) } };
  }
}
