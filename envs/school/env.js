/**
 * SchoolEnv: the registrar's office of a small college (student information system).
 *
 * State (collections keyed by id): terms, students, instructors, courses, sections, enrollments,
 * holds; counters: next_enrollment_number, next_hold_number.
 * Dates are YYYY-MM-DD strings read from the virtual clock; section times are "HH:MM" (24 h).
 */
class SchoolEnv {
  static POLICY = {
    gradePoints: { A: 4.0, "A-": 3.7, "B+": 3.3, B: 3.0, "B-": 2.7, "C+": 2.3, C: 2.0, "C-": 1.7, D: 1.0, F: 0.0 },
    passing: ["A", "A-", "B+", "B", "B-", "C+", "C"],
    maxSectionsPerTerm: 3,
    standardCreditLimit: 18,
    overloadMaxCredits: 21,
    overloadMinGpa: 3.3,
    releasableHoldTypes: ["advising"],
  };

  constructor(state) {
    for (const key of Object.keys(state)) this[key] = state[key];
  }

  // ------------------------------------------------------------------ helpers (not tools)

  _today() {
    return new Date().toISOString().slice(0, 10);
  }

  _fail(error) {
    return { success: false, error };
  }

  _nextId(prefix, counterKey, width) {
    const n = this[counterKey];
    this[counterKey] = n + 1;
    return `${prefix}${String(n).padStart(width, "0")}`;
  }

  _currentTerm() {
    return Object.values(this.terms).find((t) => t.status === "current") || null;
  }

  _minutes(hhmm) {
    const [h, m] = hhmm.split(":").map(Number);
    return h * 60 + m;
  }

  _overlap(a, b) {
    if (!a.days.some((d) => b.days.includes(d))) return false;
    return this._minutes(a.start) < this._minutes(b.end) && this._minutes(b.start) < this._minutes(a.end);
  }

  _scheduleText(s) {
    return `${s.days.join("/")} ${s.start}-${s.end}`;
  }

  _enrolledCount(section_id) {
    return Object.values(this.enrollments).filter((e) => e.section_id === section_id && e.status === "enrolled").length;
  }

  /** Waitlisted enrollments of a section, first in line first. */
  _waitlist(section_id) {
    return Object.values(this.enrollments)
      .filter((e) => e.section_id === section_id && e.status === "waitlisted")
      .sort((a, b) => (a.requested_date < b.requested_date ? -1 : a.requested_date > b.requested_date ? 1 : a.enrollment_id < b.enrollment_id ? -1 : 1));
  }

  _activeHolds(student_id) {
    return Object.values(this.holds).filter((h) => h.student_id === student_id && h.active);
  }

  /** Enrollments of a student in a term with the given statuses. */
  _studentEnrollments(student_id, term_id, statuses) {
    return Object.values(this.enrollments).filter((e) => e.student_id === student_id && e.term_id === term_id && statuses.includes(e.status));
  }

  _credits(student_id, term_id, exceptId) {
    return this._studentEnrollments(student_id, term_id, ["enrolled"])
      .filter((e) => e.enrollment_id !== exceptId)
      .reduce((s, e) => s + this.courses[this.sections[e.section_id].course_id].credits, 0);
  }

  /** Completed courses (past terms, letter grade) of a student: course_id -> best grade. */
  _completed(student_id) {
    const P = SchoolEnv.POLICY;
    const best = {};
    for (const e of Object.values(this.enrollments)) {
      if (e.student_id !== student_id || e.status !== "completed" || !(e.grade in P.gradePoints)) continue;
      const course = this.sections[e.section_id].course_id;
      if (!(course in best) || P.gradePoints[e.grade] > P.gradePoints[best[course]]) best[course] = e.grade;
    }
    return best;
  }

  _gpa(student_id) {
    const P = SchoolEnv.POLICY;
    let points = 0;
    let credits = 0;
    for (const e of Object.values(this.enrollments)) {
      if (e.student_id !== student_id || e.status !== "completed" || !(e.grade in P.gradePoints)) continue;
      const cr = this.courses[this.sections[e.section_id].course_id].credits;
      points += P.gradePoints[e.grade] * cr;
      credits += cr;
    }
    return { gpa: credits ? Math.round((points / credits) * 100) / 100 : null, credits };
  }

  /**
   * Why a student may not take a seat (or a waitlist spot) in a section now: a list of reasons.
   * `ignoreId` is an enrollment to leave out (the one being swapped).
   * mode: "enroll" (full checks, seat needed) or "waitlist" (no seat, schedule or credit checks).
   */
  _problems(student, section, mode, ignoreId) {
    const P = SchoolEnv.POLICY;
    const reasons = [];
    const term = this._currentTerm();
    const course = this.courses[section.course_id];
    if (student.status !== "active") reasons.push(`student ${student.student_id} is ${student.status}, not active`);
    const holds = this._activeHolds(student.student_id);
    if (holds.length) reasons.push(`active hold(s) on the account: ${holds.map((h) => `${h.hold_id} (${h.hold_type})`).join(", ")}`);
    if (!term || section.term_id !== term.term_id) reasons.push(`section ${section.section_id} is not in the current term`);
    else if (this._today() > term.add_drop_deadline) reasons.push(`the add/drop deadline of ${term.name} (${term.add_drop_deadline}) has passed`);
    if (section.status !== "open") reasons.push(`section ${section.section_id} is ${section.status}`);
    const done = this._completed(student.student_id);
    const missing = course.prerequisites.filter((c) => !(c in done) || !P.passing.includes(done[c]));
    if (missing.length) reasons.push(`missing prerequisite(s) completed with C or better: ${missing.join(", ")}`);
    if (course.course_id in done && P.passing.includes(done[course.course_id])) reasons.push(`${course.course_id} was already passed with ${done[course.course_id]}`);
    const termId = section.term_id;
    const mine = this._studentEnrollments(student.student_id, termId, ["enrolled", "waitlisted"]).filter((e) => e.enrollment_id !== ignoreId);
    const same = mine.find((e) => this.sections[e.section_id].course_id === course.course_id);
    if (same) reasons.push(`already ${same.status} in ${same.section_id} (${course.course_id}) this term`);
    if (mode === "enroll") {
      for (const e of mine) {
        if (e.status !== "enrolled") continue;
        const other = this.sections[e.section_id];
        if (this._overlap(section.schedule, other.schedule)) reasons.push(`time conflict with ${other.section_id} (${this._scheduleText(other.schedule)})`);
      }
      const credits = this._credits(student.student_id, termId, ignoreId) + course.credits;
      if (credits > student.max_credits) reasons.push(`would bring the term load to ${credits} credits, over the limit of ${student.max_credits}`);
      const seats = section.capacity - this._enrolledCount(section.section_id);
      const queue = this._waitlist(section.section_id);
      if (seats <= 0) reasons.push(`section ${section.section_id} is full (${section.capacity} seats)`);
      else if (queue.length && queue[0].student_id !== student.student_id) {
        reasons.push(`freed seats go to the waitlist first; ${queue[0].student_id} is first in line`);
      }
    }
    return reasons;
  }

  _sectionSummary(s) {
    const enrolled = this._enrolledCount(s.section_id);
    return {
      section_id: s.section_id,
      course_id: s.course_id,
      title: this.courses[s.course_id].title,
      term_id: s.term_id,
      instructor_id: s.instructor_id,
      instructor_name: this.instructors[s.instructor_id]?.name ?? null,
      schedule: this._scheduleText(s.schedule),
      room: s.room,
      status: s.status,
      capacity: s.capacity,
      enrolled,
      open_seats: Math.max(0, s.capacity - enrolled),
      waitlisted: this._waitlist(s.section_id).length,
    };
  }

  // ------------------------------------------------------------------ queries

  get_academic_calendar({}) {
    return { success: true, data: Object.values(this.terms) };
  }

  find_students({ name, email, program }) {
    if (!name && !email && !program) return this._fail("Give at least one of name, email or program");
    const q = name ? name.toLowerCase() : null;
    const found = Object.values(this.students).filter(
      (s) => (!q || s.name.toLowerCase().includes(q)) && (!email || s.email.toLowerCase() === email.toLowerCase()) && (!program || s.program === program),
    );
    return { success: true, data: found.map((s) => ({ student_id: s.student_id, name: s.name, email: s.email, program: s.program, year: s.year, status: s.status })) };
  }

  get_student({ student_id }) {
    const s = this.students[student_id];
    if (!s) return this._fail(`Student ${student_id} not found`);
    const term = this._currentTerm();
    const { gpa, credits } = this._gpa(student_id);
    return {
      success: true,
      data: {
        ...s,
        advisor_name: this.instructors[s.advisor_id]?.name ?? null,
        cumulative_gpa: gpa,
        completed_credits: credits,
        current_term_credits: term ? this._credits(student_id, term.term_id) : 0,
        active_holds: this._activeHolds(student_id),
      },
    };
  }

  get_transcript({ student_id }) {
    const s = this.students[student_id];
    if (!s) return this._fail(`Student ${student_id} not found`);
    const rows = Object.values(this.enrollments)
      .filter((e) => e.student_id === student_id && (e.status === "completed" || e.status === "withdrawn"))
      .map((e) => {
        const sec = this.sections[e.section_id];
        const c = this.courses[sec.course_id];
        return { enrollment_id: e.enrollment_id, term_id: e.term_id, section_id: e.section_id, course_id: c.course_id, title: c.title, credits: c.credits, grade: e.grade, instructor_id: sec.instructor_id };
      })
      .sort((a, b) => (this.terms[a.term_id].start_date < this.terms[b.term_id].start_date ? -1 : this.terms[a.term_id].start_date > this.terms[b.term_id].start_date ? 1 : a.course_id < b.course_id ? -1 : 1));
    const { gpa, credits } = this._gpa(student_id);
    return { success: true, data: { student_id, name: s.name, courses: rows, cumulative_gpa: gpa, gpa_credits: credits } };
  }

  get_student_schedule({ student_id, term_id }) {
    const s = this.students[student_id];
    if (!s) return this._fail(`Student ${student_id} not found`);
    const term = term_id ? this.terms[term_id] : this._currentTerm();
    if (!term) return this._fail(`Term ${term_id} not found`);
    const rows = this._studentEnrollments(student_id, term.term_id, ["enrolled", "waitlisted"]).map((e) => {
      const sec = this.sections[e.section_id];
      const out = { enrollment_id: e.enrollment_id, status: e.status, ...this._sectionSummary(sec), credits: this.courses[sec.course_id].credits };
      if (e.status === "waitlisted") out.waitlist_position = this._waitlist(sec.section_id).findIndex((w) => w.enrollment_id === e.enrollment_id) + 1;
      return out;
    });
    return { success: true, data: { student_id, term_id: term.term_id, sections: rows, enrolled_credits: this._credits(student_id, term.term_id), max_credits: s.max_credits } };
  }

  search_courses({ query, department }) {
    const q = query ? query.toLowerCase() : null;
    const found = Object.values(this.courses).filter(
      (c) => (!q || c.title.toLowerCase().includes(q) || c.course_id.toLowerCase() === q) && (!department || c.department === department),
    );
    return { success: true, data: found };
  }

  get_course({ course_id }) {
    const c = this.courses[course_id];
    if (!c) return this._fail(`Course ${course_id} not found`);
    const term = this._currentTerm();
    const sections = Object.values(this.sections)
      .filter((s) => s.course_id === course_id && term && s.term_id === term.term_id)
      .map((s) => this._sectionSummary(s));
    return { success: true, data: { ...c, current_term_sections: sections } };
  }

  list_sections({ course_id, term_id, instructor_id, department, open_seats_only }) {
    const term = term_id ?? this._currentTerm()?.term_id;
    const found = Object.values(this.sections)
      .filter(
        (s) =>
          s.term_id === term &&
          (!course_id || s.course_id === course_id) &&
          (!instructor_id || s.instructor_id === instructor_id) &&
          (!department || this.courses[s.course_id].department === department),
      )
      .map((s) => this._sectionSummary(s))
      .filter((s) => !open_seats_only || s.open_seats > 0);
    return { success: true, data: found };
  }

  get_section({ section_id }) {
    const s = this.sections[section_id];
    if (!s) return this._fail(`Section ${section_id} not found`);
    const roster = Object.values(this.enrollments)
      .filter((e) => e.section_id === section_id && (e.status === "enrolled" || e.status === "completed" || e.status === "withdrawn"))
      .map((e) => ({ enrollment_id: e.enrollment_id, student_id: e.student_id, name: this.students[e.student_id].name, status: e.status, grade: e.grade }));
    const waitlist = this._waitlist(section_id).map((e, i) => ({ position: i + 1, enrollment_id: e.enrollment_id, student_id: e.student_id, name: this.students[e.student_id].name, requested_date: e.requested_date }));
    return { success: true, data: { ...this._sectionSummary(s), schedule_detail: s.schedule, room_capacity: s.room_capacity, roster, waitlist } };
  }

  find_instructors({ name, department }) {
    const q = name ? name.toLowerCase() : null;
    const found = Object.values(this.instructors).filter((i) => (!q || i.name.toLowerCase().includes(q)) && (!department || i.department === department));
    return { success: true, data: found };
  }

  get_instructor({ instructor_id, term_id }) {
    const i = this.instructors[instructor_id];
    if (!i) return this._fail(`Instructor ${instructor_id} not found`);
    const term = term_id ?? this._currentTerm()?.term_id;
    const sections = Object.values(this.sections)
      .filter((s) => s.instructor_id === instructor_id && s.term_id === term)
      .map((s) => this._sectionSummary(s));
    return { success: true, data: { ...i, term_id: term, sections, max_sections_per_term: SchoolEnv.POLICY.maxSectionsPerTerm } };
  }

  list_holds({ student_id, include_released }) {
    if (!this.students[student_id]) return this._fail(`Student ${student_id} not found`);
    const holds = Object.values(this.holds).filter((h) => h.student_id === student_id && (include_released || h.active));
    return { success: true, data: holds };
  }

  check_eligibility({ student_id, section_id }) {
    const student = this.students[student_id];
    if (!student) return this._fail(`Student ${student_id} not found`);
    const section = this.sections[section_id];
    if (!section) return this._fail(`Section ${section_id} not found`);
    const reasons = this._problems(student, section, "enroll");
    return { success: true, data: { student_id, section_id, eligible: reasons.length === 0, reasons } };
  }

  // ------------------------------------------------------------------ changes

  enroll_student({ student_id, section_id }) {
    const student = this.students[student_id];
    if (!student) return this._fail(`Student ${student_id} not found`);
    const section = this.sections[section_id];
    if (!section) return this._fail(`Section ${section_id} not found`);
    // a student who is on this section's waitlist takes the seat with their waitlist record
    const waiting = this._waitlist(section_id).find((e) => e.student_id === student_id);
    const reasons = this._problems(student, section, "enroll", waiting ? waiting.enrollment_id : undefined);
    if (reasons.length) return this._fail(`Cannot enroll ${student_id} in ${section_id}: ${reasons.join("; ")}`);
    const today = this._today();
    let e;
    if (waiting) {
      e = waiting;
      e.status = "enrolled";
      e.enrolled_date = today;
    } else {
      const enrollment_id = this._nextId("E", "next_enrollment_number", 4);
      e = { enrollment_id, student_id, section_id, term_id: section.term_id, status: "enrolled", grade: null, requested_date: today, enrolled_date: today, dropped_date: null, grade_history: [] };
      this.enrollments[enrollment_id] = e;
    }
    return {
      success: true,
      message: `${student.name} enrolled in ${section_id} (${this.courses[section.course_id].title}) as ${e.enrollment_id}${waiting ? " from the waitlist" : ""}; ${this._credits(student_id, section.term_id)} credits this term`,
    };
  }

  join_waitlist({ student_id, section_id }) {
    const student = this.students[student_id];
    if (!student) return this._fail(`Student ${student_id} not found`);
    const section = this.sections[section_id];
    if (!section) return this._fail(`Section ${section_id} not found`);
    const reasons = this._problems(student, section, "waitlist");
    if (reasons.length) return this._fail(`Cannot waitlist ${student_id} for ${section_id}: ${reasons.join("; ")}`);
    if (this._enrolledCount(section_id) < section.capacity && this._waitlist(section_id).length === 0) {
      return this._fail(`Section ${section_id} has open seats; enroll the student instead`);
    }
    const today = this._today();
    const enrollment_id = this._nextId("E", "next_enrollment_number", 4);
    this.enrollments[enrollment_id] = { enrollment_id, student_id, section_id, term_id: section.term_id, status: "waitlisted", grade: null, requested_date: today, enrolled_date: null, dropped_date: null, grade_history: [] };
    return { success: true, message: `${student.name} is waitlisted for ${section_id} at position ${this._waitlist(section_id).length} (${enrollment_id})` };
  }

  drop_enrollment({ enrollment_id }) {
    const e = this.enrollments[enrollment_id];
    if (!e) return this._fail(`Enrollment ${enrollment_id} not found`);
    const term = this._currentTerm();
    if (!term || e.term_id !== term.term_id) return this._fail(`Enrollment ${enrollment_id} is not in the current term`);
    const today = this._today();
    if (e.status === "waitlisted") {
      e.status = "dropped";
      e.dropped_date = today;
      return { success: true, message: `${e.student_id} removed from the waitlist of ${e.section_id}` };
    }
    if (e.status !== "enrolled") return this._fail(`Enrollment ${enrollment_id} is ${e.status}; only enrolled or waitlisted enrollments can be dropped`);
    if (today <= term.add_drop_deadline) {
      e.status = "dropped";
      e.dropped_date = today;
      return { success: true, message: `${e.student_id} dropped ${e.section_id} (before the add/drop deadline: no transcript record)` };
    }
    if (today <= term.withdraw_deadline) {
      e.status = "withdrawn";
      e.grade = "W";
      e.dropped_date = today;
      return { success: true, message: `${e.student_id} withdrew from ${e.section_id}; a W is recorded on the transcript` };
    }
    return this._fail(`The withdrawal deadline of ${term.name} (${term.withdraw_deadline}) has passed; the enrollment can no longer be dropped`);
  }

  swap_section({ enrollment_id, new_section_id }) {
    const e = this.enrollments[enrollment_id];
    if (!e) return this._fail(`Enrollment ${enrollment_id} not found`);
    if (e.status !== "enrolled") return this._fail(`Enrollment ${enrollment_id} is ${e.status}; only enrolled students can switch sections`);
    const section = this.sections[new_section_id];
    if (!section) return this._fail(`Section ${new_section_id} not found`);
    const old = this.sections[e.section_id];
    if (section.section_id === old.section_id) return this._fail(`Enrollment ${enrollment_id} is already in ${new_section_id}`);
    if (section.course_id !== old.course_id || section.term_id !== old.term_id) return this._fail("A swap must be to another section of the same course in the same term");
    const reasons = this._problems(this.students[e.student_id], section, "enroll", enrollment_id);
    if (reasons.length) return this._fail(`Cannot move ${e.student_id} to ${new_section_id}: ${reasons.join("; ")}`);
    e.swapped_from = old.section_id;
    e.section_id = new_section_id;
    e.enrolled_date = this._today();
    return { success: true, message: `${enrollment_id} moved from ${old.section_id} to ${new_section_id} (${this._scheduleText(section.schedule)})` };
  }

  submit_grade({ enrollment_id, instructor_id, grade, reason }) {
    const e = this.enrollments[enrollment_id];
    if (!e) return this._fail(`Enrollment ${enrollment_id} not found`);
    const section = this.sections[e.section_id];
    if (section.instructor_id !== instructor_id) return this._fail(`Only the section's instructor (${section.instructor_id}) may grade ${enrollment_id}`);
    const term = this.terms[e.term_id];
    if (term.status !== "completed") return this._fail(`${term.name} has not ended; grades are submitted after the term`);
    if (e.status !== "completed") return this._fail(`Enrollment ${enrollment_id} is ${e.status}; only completed enrollments receive grades`);
    if (e.grade === grade) return this._fail(`The grade of ${enrollment_id} is already ${grade}`);
    const isChange = e.grade !== null && e.grade !== "I";
    if (isChange && !(reason && reason.trim())) return this._fail(`${enrollment_id} already has the final grade ${e.grade}; changing it requires a reason`);
    e.grade_history = [...(e.grade_history || []), { from: e.grade, to: grade, date: this._today(), instructor_id, reason: reason ? reason.trim() : null }];
    const from = e.grade;
    e.grade = grade;
    return { success: true, message: `Grade of ${enrollment_id} (${e.student_id}, ${section.course_id}) changed from ${from ?? "none"} to ${grade}` };
  }

  place_hold({ student_id, hold_type, reason }) {
    const s = this.students[student_id];
    if (!s) return this._fail(`Student ${student_id} not found`);
    if (!reason || !reason.trim()) return this._fail("A hold needs a reason");
    if (this._activeHolds(student_id).some((h) => h.hold_type === hold_type)) return this._fail(`${student_id} already has an active ${hold_type} hold`);
    const hold_id = this._nextId("H", "next_hold_number", 3);
    this.holds[hold_id] = { hold_id, student_id, hold_type, reason: reason.trim(), placed_by: "Registrar", placed_date: this._today(), active: true, released_date: null, release_note: null };
    return { success: true, message: `${hold_type} hold ${hold_id} placed on ${student_id}` };
  }

  release_hold({ hold_id, note }) {
    const h = this.holds[hold_id];
    if (!h) return this._fail(`Hold ${hold_id} not found`);
    if (!h.active) return this._fail(`Hold ${hold_id} was already released on ${h.released_date}`);
    if (!SchoolEnv.POLICY.releasableHoldTypes.includes(h.hold_type)) {
      return this._fail(`${h.hold_type} holds can only be released by the office that placed them (${h.placed_by}), not by the registrar`);
    }
    if (!note || !note.trim()) return this._fail("Releasing a hold requires a note saying who cleared it");
    h.active = false;
    h.released_date = this._today();
    h.release_note = note.trim();
    return { success: true, message: `Hold ${hold_id} released` };
  }

  update_section_capacity({ section_id, capacity }) {
    const s = this.sections[section_id];
    if (!s) return this._fail(`Section ${section_id} not found`);
    const term = this._currentTerm();
    if (!term || s.term_id !== term.term_id) return this._fail("Only sections of the current term can change capacity");
    if (!Number.isInteger(capacity) || capacity < 1) return this._fail("Capacity must be a positive whole number");
    if (capacity > s.room_capacity) return this._fail(`Room ${s.room} holds at most ${s.room_capacity} students`);
    const enrolled = this._enrolledCount(section_id);
    if (capacity < enrolled) return this._fail(`${enrolled} students are enrolled; capacity cannot go below that`);
    const from = s.capacity;
    s.capacity = capacity;
    return { success: true, message: `Capacity of ${section_id} changed from ${from} to ${capacity}${this._waitlist(section_id).length ? "; waitlisted students can now be enrolled in order" : ""}` };
  }

  assign_instructor({ section_id, instructor_id }) {
    const s = this.sections[section_id];
    if (!s) return this._fail(`Section ${section_id} not found`);
    const term = this._currentTerm();
    if (!term || s.term_id !== term.term_id) return this._fail("Only sections of the current term can be reassigned");
    const i = this.instructors[instructor_id];
    if (!i) return this._fail(`Instructor ${instructor_id} not found`);
    if (s.instructor_id === instructor_id) return this._fail(`${i.name} already teaches ${section_id}`);
    if (i.status !== "active") return this._fail(`${i.name} is not active (status: ${i.status}) and cannot be assigned sections`);
    const course = this.courses[s.course_id];
    if (i.department !== course.department) return this._fail(`${i.name} is in ${i.department}; ${course.course_id} is a ${course.department} course`);
    const theirs = Object.values(this.sections).filter((x) => x.instructor_id === instructor_id && x.term_id === s.term_id && x.status === "open");
    if (theirs.length >= SchoolEnv.POLICY.maxSectionsPerTerm) return this._fail(`${i.name} already teaches ${theirs.length} sections this term (the maximum)`);
    const clash = theirs.find((x) => this._overlap(x.schedule, s.schedule));
    if (clash) return this._fail(`${i.name} teaches ${clash.section_id} at ${this._scheduleText(clash.schedule)}, which overlaps ${section_id}`);
    const from = s.instructor_id;
    s.instructor_id = instructor_id;
    return { success: true, message: `${section_id} is now taught by ${i.name} (was ${from})` };
  }

  approve_credit_overload({ student_id, max_credits }) {
    const P = SchoolEnv.POLICY;
    const s = this.students[student_id];
    if (!s) return this._fail(`Student ${student_id} not found`);
    if (s.status !== "active") return this._fail(`Student ${student_id} is ${s.status}`);
    if (!Number.isInteger(max_credits) || max_credits <= P.standardCreditLimit || max_credits > P.overloadMaxCredits) {
      return this._fail(`An overload raises the limit above ${P.standardCreditLimit} to at most ${P.overloadMaxCredits} credits`);
    }
    if (max_credits === s.max_credits) return this._fail(`${student_id}'s limit is already ${max_credits}`);
    const { gpa } = this._gpa(student_id);
    if (gpa === null || gpa < P.overloadMinGpa) return this._fail(`A credit overload needs a cumulative GPA of at least ${P.overloadMinGpa}; ${student_id} has ${gpa ?? "none"}`);
    const from = s.max_credits;
    s.max_credits = max_credits;
    return { success: true, message: `Credit limit of ${s.name} raised from ${from} to ${max_credits}` };
  }
}
