/**
 * LibraryEnv: the circulation desk of a public library.
 *
 * State (collections keyed by id): books, members, loans, reservations, fines;
 * counters: next_loan_number, next_reservation_number, next_fine_number.
 * Dates are stored as YYYY-MM-DD strings taken from the virtual clock, so an episode's state does
 * not depend on how many calls were made on the same day.
 */
class LibraryEnv {
  static POLICY = {
    loanDays: 21,
    renewDays: 21,
    maxRenewals: 2,
    lateFeePerDay: 0.25,
    lateFeeCap: 10,
    fineBlockThreshold: 10,
    holdDays: 7,
    lostProcessingFee: 5,
    waiveMax: 5,
    maxActiveReservations: 3,
    membershipDays: 365,
    loanLimits: { standard: 5, premium: 10, child: 3 },
  };

  constructor(state) {
    for (const key of Object.keys(state)) this[key] = state[key];
  }

  // ------------------------------------------------------------------ helpers (not tools)

  _today() {
    return new Date().toISOString().slice(0, 10);
  }

  _addDays(date, days) {
    return new Date(Date.parse(`${date}T00:00:00Z`) + days * 864e5).toISOString().slice(0, 10);
  }

  _daysBetween(from, to) {
    return Math.round((Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / 864e5);
  }

  _money(x) {
    return Math.round(x * 100) / 100;
  }

  _nextId(prefix, counterKey) {
    const n = this[counterKey];
    this[counterKey] = n + 1;
    return `${prefix}${String(n).padStart(4, "0")}`;
  }

  _fail(error) {
    return { success: false, error };
  }

  _activeLoans(memberId) {
    return Object.values(this.loans).filter((l) => l.member_id === memberId && l.status === "active");
  }

  _unpaidTotal(memberId) {
    const total = Object.values(this.fines)
      .filter((f) => f.member_id === memberId && f.status === "unpaid")
      .reduce((sum, f) => sum + f.amount, 0);
    return this._money(total);
  }

  _activeReservations(memberId) {
    return Object.values(this.reservations).filter((r) => r.member_id === memberId && (r.status === "waiting" || r.status === "ready"));
  }

  /** Why a member may not borrow, renew or reserve right now (null when they may). */
  _blockReason(member) {
    const P = LibraryEnv.POLICY;
    if (member.status === "suspended") return `Member ${member.member_id} is suspended and may not borrow, renew or reserve`;
    if (member.status !== "active" || member.expiry_date < this._today()) {
      return `The membership of ${member.member_id} expired on ${member.expiry_date}; it must be renewed first`;
    }
    const unpaid = this._unpaidTotal(member.member_id);
    if (unpaid > P.fineBlockThreshold) {
      return `Member ${member.member_id} owes $${unpaid.toFixed(2)} in unpaid fines (more than $${P.fineBlockThreshold.toFixed(2)}); fines must be paid first`;
    }
    return null;
  }

  /** Waiting reservations of a book, first in line first. */
  _queue(bookId) {
    return Object.values(this.reservations)
      .filter((r) => r.book_id === bookId && r.status === "waiting")
      .sort((a, b) => (a.created_date < b.created_date ? -1 : a.created_date > b.created_date ? 1 : a.reservation_id < b.reservation_id ? -1 : 1));
  }

  /** A copy came back to the desk: hold it for the next waiting reservation, or shelve it. */
  _releaseCopy(book) {
    const next = this._queue(book.book_id)[0];
    if (next) {
      const today = this._today();
      next.status = "ready";
      next.ready_date = today;
      next.hold_until = this._addDays(today, LibraryEnv.POLICY.holdDays);
      return next;
    }
    book.available_copies += 1;
    return null;
  }

  _createFine(memberId, loanId, amount, reason, note) {
    const fineId = this._nextId("F", "next_fine_number");
    this.fines[fineId] = {
      fine_id: fineId,
      member_id: memberId,
      loan_id: loanId,
      amount: this._money(amount),
      reason,
      note,
      status: "unpaid",
      created_date: this._today(),
      paid_date: null,
      payment_method: null,
    };
    return this.fines[fineId];
  }

  _loanView(loan) {
    const today = this._today();
    const book = this.books[loan.book_id];
    const daysOverdue = loan.status === "active" ? Math.max(0, this._daysBetween(loan.due_date, today)) : 0;
    return { ...loan, title: book ? book.title : null, overdue: daysOverdue > 0, days_overdue: daysOverdue };
  }

  _bookSummary(book) {
    return {
      book_id: book.book_id,
      title: book.title,
      author: book.author,
      genre: book.genre,
      year: book.year,
      loanable: book.loanable,
      total_copies: book.total_copies,
      available_copies: book.available_copies,
    };
  }

  // ------------------------------------------------------------------ queries

  search_books({ query, author, genre, available_only }) {
    const q = query ? query.toLowerCase() : null;
    const a = author ? author.toLowerCase() : null;
    const g = genre ? genre.toLowerCase() : null;
    const hits = Object.values(this.books).filter(
      (b) =>
        (!q || b.title.toLowerCase().includes(q) || b.isbn === query) &&
        (!a || b.author.toLowerCase().includes(a)) &&
        (!g || b.genre.toLowerCase() === g) &&
        (!available_only || b.available_copies > 0),
    );
    return { success: true, data: hits.map((b) => this._bookSummary(b)) };
  }

  get_book({ book_id }) {
    const book = this.books[book_id];
    if (!book) return this._fail(`Book ${book_id} not found`);
    return { success: true, data: { ...book, waiting_reservations: this._queue(book_id).length } };
  }

  find_members({ name, email, phone }) {
    if (!name && !email && !phone) return this._fail("Give at least one of name, email or phone");
    const n = name ? name.toLowerCase() : null;
    const hits = Object.values(this.members).filter(
      (m) =>
        (!n || m.name.toLowerCase().includes(n)) &&
        (!email || m.email.toLowerCase() === email.toLowerCase()) &&
        (!phone || m.phone === phone),
    );
    return {
      success: true,
      data: hits.map((m) => ({ member_id: m.member_id, name: m.name, email: m.email, phone: m.phone, membership_type: m.membership_type, status: m.status })),
    };
  }

  get_member({ member_id }) {
    const member = this.members[member_id];
    if (!member) return this._fail(`Member ${member_id} not found`);
    const block = this._blockReason(member);
    return {
      success: true,
      data: {
        ...member,
        active_loans: this._activeLoans(member_id).length,
        loan_limit: LibraryEnv.POLICY.loanLimits[member.membership_type],
        active_reservations: this._activeReservations(member_id).length,
        unpaid_fines_total: this._unpaidTotal(member_id),
        can_borrow: block === null,
        restriction: block,
      },
    };
  }

  list_member_loans({ member_id, status }) {
    if (!this.members[member_id]) return this._fail(`Member ${member_id} not found`);
    const want = status || "active";
    const loans = Object.values(this.loans).filter((l) => l.member_id === member_id && (want === "all" || l.status === want));
    return { success: true, data: loans.map((l) => this._loanView(l)) };
  }

  get_loan({ loan_id }) {
    const loan = this.loans[loan_id];
    if (!loan) return this._fail(`Loan ${loan_id} not found`);
    return { success: true, data: this._loanView(loan) };
  }

  list_reservations({ book_id, member_id, status }) {
    if (!book_id && !member_id) return this._fail("Give a book_id or a member_id");
    if (book_id && !this.books[book_id]) return this._fail(`Book ${book_id} not found`);
    if (member_id && !this.members[member_id]) return this._fail(`Member ${member_id} not found`);
    const hits = Object.values(this.reservations).filter(
      (r) => (!book_id || r.book_id === book_id) && (!member_id || r.member_id === member_id) && (!status || r.status === status),
    );
    return {
      success: true,
      data: hits.map((r) => {
        const queue = r.status === "waiting" ? this._queue(r.book_id) : [];
        const position = r.status === "waiting" ? queue.findIndex((x) => x.reservation_id === r.reservation_id) + 1 : null;
        return { ...r, title: this.books[r.book_id] ? this.books[r.book_id].title : null, queue_position: position };
      }),
    };
  }

  list_fines({ member_id, status }) {
    if (!this.members[member_id]) return this._fail(`Member ${member_id} not found`);
    const hits = Object.values(this.fines).filter((f) => f.member_id === member_id && (!status || f.status === status));
    return { success: true, data: { fines: hits.map((f) => ({ ...f })), unpaid_total: this._unpaidTotal(member_id) } };
  }

  // ------------------------------------------------------------------ state changes

  checkout_book({ member_id, book_id }) {
    const P = LibraryEnv.POLICY;
    const member = this.members[member_id];
    if (!member) return this._fail(`Member ${member_id} not found`);
    const book = this.books[book_id];
    if (!book) return this._fail(`Book ${book_id} not found`);
    if (!book.loanable) return this._fail(`'${book.title}' is a reference item and cannot be borrowed`);
    const block = this._blockReason(member);
    if (block) return this._fail(block);
    const active = this._activeLoans(member_id);
    const limit = P.loanLimits[member.membership_type];
    if (active.length >= limit) return this._fail(`Member ${member_id} already has ${active.length} loans, the limit for a ${member.membership_type} membership`);
    if (active.some((l) => l.book_id === book_id)) return this._fail(`Member ${member_id} already has '${book.title}' on loan`);

    const today = this._today();
    const held = Object.values(this.reservations).find((r) => r.book_id === book_id && r.member_id === member_id && r.status === "ready");
    if (held) {
      held.status = "fulfilled";
      held.fulfilled_date = today;
    } else {
      if (book.available_copies <= 0) {
        return this._fail(`No copy of '${book.title}' is available for ${member_id}; copies on hold belong to the members who reserved them. A reservation can be placed instead`);
      }
      book.available_copies -= 1;
    }
    const loanId = this._nextId("L", "next_loan_number");
    this.loans[loanId] = {
      loan_id: loanId,
      book_id,
      member_id,
      checkout_date: today,
      due_date: this._addDays(today, P.loanDays),
      returned_date: null,
      status: "active",
      renewals: 0,
    };
    return {
      success: true,
      data: { loan_id: loanId, title: book.title, due_date: this.loans[loanId].due_date, fulfilled_reservation: held ? held.reservation_id : null },
    };
  }

  return_book({ loan_id }) {
    const P = LibraryEnv.POLICY;
    const loan = this.loans[loan_id];
    if (!loan) return this._fail(`Loan ${loan_id} not found`);
    if (loan.status !== "active") return this._fail(`Loan ${loan_id} is not active (status: ${loan.status})`);
    const book = this.books[loan.book_id];
    const today = this._today();
    loan.status = "returned";
    loan.returned_date = today;
    const daysLate = Math.max(0, this._daysBetween(loan.due_date, today));
    let fine = null;
    if (daysLate > 0) {
      const amount = Math.min(daysLate * P.lateFeePerDay, P.lateFeeCap);
      fine = this._createFine(loan.member_id, loan_id, amount, "late_return", `${daysLate} day(s) late`);
    }
    const heldFor = this._releaseCopy(book);
    return {
      success: true,
      data: {
        loan_id,
        title: book.title,
        returned_date: today,
        days_late: daysLate,
        fine: fine ? { fine_id: fine.fine_id, amount: fine.amount } : null,
        copy_held_for_reservation: heldFor ? { reservation_id: heldFor.reservation_id, member_id: heldFor.member_id, hold_until: heldFor.hold_until } : null,
      },
    };
  }

  renew_loan({ loan_id }) {
    const P = LibraryEnv.POLICY;
    const loan = this.loans[loan_id];
    if (!loan) return this._fail(`Loan ${loan_id} not found`);
    if (loan.status !== "active") return this._fail(`Loan ${loan_id} is not active (status: ${loan.status})`);
    const member = this.members[loan.member_id];
    const block = this._blockReason(member);
    if (block) return this._fail(block);
    if (loan.due_date < this._today()) return this._fail(`Loan ${loan_id} is overdue (due ${loan.due_date}) and cannot be renewed; the book must be returned`);
    if (loan.renewals >= P.maxRenewals) return this._fail(`Loan ${loan_id} has already been renewed ${loan.renewals} times (the maximum)`);
    const waiting = this._queue(loan.book_id).filter((r) => r.member_id !== loan.member_id);
    if (waiting.length) return this._fail(`Loan ${loan_id} cannot be renewed: ${waiting.length} other member(s) are waiting for this book`);
    loan.due_date = this._addDays(loan.due_date, P.renewDays);
    loan.renewals += 1;
    return { success: true, data: { loan_id, due_date: loan.due_date, renewals: loan.renewals } };
  }

  place_reservation({ member_id, book_id }) {
    const P = LibraryEnv.POLICY;
    const member = this.members[member_id];
    if (!member) return this._fail(`Member ${member_id} not found`);
    const book = this.books[book_id];
    if (!book) return this._fail(`Book ${book_id} not found`);
    if (!book.loanable) return this._fail(`'${book.title}' is a reference item and cannot be reserved`);
    const block = this._blockReason(member);
    if (block) return this._fail(block);
    if (book.available_copies > 0) return this._fail(`'${book.title}' has ${book.available_copies} ${book.available_copies === 1 ? "copy" : "copies"} on the shelf; check it out instead of reserving`);
    if (this._activeLoans(member_id).some((l) => l.book_id === book_id)) return this._fail(`Member ${member_id} already has '${book.title}' on loan`);
    const mine = this._activeReservations(member_id);
    if (mine.some((r) => r.book_id === book_id)) return this._fail(`Member ${member_id} already has an active reservation for '${book.title}'`);
    if (mine.length >= P.maxActiveReservations) return this._fail(`Member ${member_id} already has ${mine.length} active reservations (the maximum)`);
    const reservationId = this._nextId("R", "next_reservation_number");
    this.reservations[reservationId] = {
      reservation_id: reservationId,
      book_id,
      member_id,
      created_date: this._today(),
      status: "waiting",
    };
    return { success: true, data: { reservation_id: reservationId, title: book.title, queue_position: this._queue(book_id).length } };
  }

  cancel_reservation({ reservation_id }) {
    const r = this.reservations[reservation_id];
    if (!r) return this._fail(`Reservation ${reservation_id} not found`);
    if (r.status !== "waiting" && r.status !== "ready") return this._fail(`Reservation ${reservation_id} is already ${r.status}`);
    const wasReady = r.status === "ready";
    r.status = "cancelled";
    r.cancelled_date = this._today();
    let passedTo = null;
    if (wasReady) passedTo = this._releaseCopy(this.books[r.book_id]);
    return {
      success: true,
      message: `Reservation ${reservation_id} cancelled${wasReady ? (passedTo ? `; the held copy now waits for reservation ${passedTo.reservation_id}` : "; the held copy was returned to the shelf") : ""}`,
    };
  }

  pay_fine({ fine_id, payment_method }) {
    const fine = this.fines[fine_id];
    if (!fine) return this._fail(`Fine ${fine_id} not found`);
    if (fine.status !== "unpaid") return this._fail(`Fine ${fine_id} is already ${fine.status}`);
    fine.status = "paid";
    fine.paid_date = this._today();
    fine.payment_method = payment_method;
    return { success: true, data: { fine_id, amount_paid: fine.amount, payment_method, member_unpaid_total: this._unpaidTotal(fine.member_id) } };
  }

  waive_fine({ fine_id, reason }) {
    const P = LibraryEnv.POLICY;
    const fine = this.fines[fine_id];
    if (!fine) return this._fail(`Fine ${fine_id} not found`);
    if (fine.status !== "unpaid") return this._fail(`Fine ${fine_id} is already ${fine.status}`);
    if (!reason || !reason.trim()) return this._fail("A reason is required to waive a fine");
    if (fine.reason === "lost_item") return this._fail(`Fine ${fine_id} is a lost-item charge; lost-item charges cannot be waived`);
    if (fine.amount > P.waiveMax) return this._fail(`Fine ${fine_id} is $${fine.amount.toFixed(2)}; only fines of $${P.waiveMax.toFixed(2)} or less may be waived`);
    fine.status = "waived";
    fine.waive_reason = reason;
    fine.paid_date = this._today();
    return { success: true, data: { fine_id, amount_waived: fine.amount, member_unpaid_total: this._unpaidTotal(fine.member_id) } };
  }

  report_lost({ loan_id }) {
    const P = LibraryEnv.POLICY;
    const loan = this.loans[loan_id];
    if (!loan) return this._fail(`Loan ${loan_id} not found`);
    if (loan.status !== "active") return this._fail(`Loan ${loan_id} is not active (status: ${loan.status})`);
    const book = this.books[loan.book_id];
    loan.status = "lost";
    loan.lost_date = this._today();
    book.total_copies -= 1;
    const fine = this._createFine(loan.member_id, loan_id, book.replacement_cost + P.lostProcessingFee, "lost_item", `replacement of '${book.title}' plus processing fee`);
    return { success: true, data: { loan_id, title: book.title, fine_id: fine.fine_id, amount: fine.amount } };
  }

  renew_membership({ member_id }) {
    const P = LibraryEnv.POLICY;
    const member = this.members[member_id];
    if (!member) return this._fail(`Member ${member_id} not found`);
    if (member.status === "suspended") return this._fail(`Member ${member_id} is suspended; a suspended membership cannot be renewed at the desk`);
    const unpaid = this._unpaidTotal(member_id);
    if (unpaid > 0) return this._fail(`Member ${member_id} has $${unpaid.toFixed(2)} in unpaid fines; all fines must be settled before a membership renewal`);
    const today = this._today();
    const from = member.expiry_date > today ? member.expiry_date : today;
    member.expiry_date = this._addDays(from, P.membershipDays);
    member.status = "active";
    return { success: true, data: { member_id, status: member.status, expiry_date: member.expiry_date } };
  }

  update_member_contact({ member_id, email, phone }) {
    const member = this.members[member_id];
    if (!member) return this._fail(`Member ${member_id} not found`);
    if (email === undefined && phone === undefined) return this._fail("Give a new email and/or phone");
    if (email !== undefined && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(email)) return this._fail(`'${email}' is not a valid email address`);
    if (phone !== undefined && !/^[0-9+()\- ]{7,20}$/.test(phone)) return this._fail(`'${phone}' is not a valid phone number`);
    if (email !== undefined) member.email = email;
    if (phone !== undefined) member.phone = phone;
    return { success: true, data: { member_id, email: member.email, phone: member.phone } };
  }
}
