"""The circulation desk of envs/library/env.js, ported to plain Python for the OpenEnv reference
rows of `npm run bench`: the same state (the bundle's default_state plus a scenario's
state_overrides), the same virtual clock (manifest `clock`: +1 ms per read, +tick_ms per tool
call) and the same results for the tools the rows call. peer.py checks that, call by call,
against our bridge before it times anything.

Only the tools the bench uses are ported; any other name answers an `unknown_tool` error."""
from __future__ import annotations

import copy
import json
import math
import os
from datetime import datetime, timedelta, timezone

LIBRARY = os.path.join(os.path.dirname(__file__), "..", "..", "envs", "library")

POLICY = {
    "loanDays": 21, "renewDays": 21, "maxRenewals": 2, "lateFeePerDay": 0.25, "lateFeeCap": 10, "fineBlockThreshold": 10,
    "holdDays": 7, "lostProcessingFee": 5, "waiveMax": 5, "maxActiveReservations": 3, "membershipDays": 365,
    "loanLimits": {"standard": 5, "premium": 10, "child": 3},
}


def _load():
    with open(os.path.join(LIBRARY, "manifest.json")) as f:
        manifest = json.load(f)
    with open(os.path.join(LIBRARY, "scenarios.json")) as f:
        scenarios = {s["id"]: s for s in json.load(f)}
    return manifest, scenarios


MANIFEST, SCENARIOS = _load()


def _iso_ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _money(x: float):
    # JavaScript's Math.round(x * 100) / 100 (half rounds up), kept an int when whole as JS prints it
    v = math.floor(x * 100 + 0.5) / 100
    return int(v) if v == int(v) else v


def _fixed2(x: float) -> str:
    return f"{x:.2f}"


def initial_state(scenario_id: str) -> dict:
    """A fresh copy of the scenario's initial state (record-level overrides on the default)."""
    state = copy.deepcopy(MANIFEST["default_state"])
    for coll, recs in (SCENARIOS[scenario_id].get("state_overrides") or {}).items():
        if not isinstance(recs, dict) or not isinstance(state.get(coll), dict):
            state[coll] = copy.deepcopy(recs)
            continue
        for rid, rec in recs.items():
            if rec is None:
                state[coll].pop(rid, None)
            else:
                state[coll][rid] = copy.deepcopy(rec)
    return state


class Library:
    def __init__(self, state: dict):
        self.s = state
        self.now_ms = _iso_ms(MANIFEST["clock"]["start"])
        self.tick_ms = MANIFEST["clock"]["tick_ms"]

    # -------------------------------------------------------------- helpers (not tools)
    def _today(self) -> str:
        t = self.now_ms
        self.now_ms += 1
        return datetime.fromtimestamp(t / 1000, tz=timezone.utc).strftime("%Y-%m-%d")

    @staticmethod
    def _add_days(date: str, days: int) -> str:
        return (datetime.strptime(date, "%Y-%m-%d") + timedelta(days=days)).strftime("%Y-%m-%d")

    @staticmethod
    def _days_between(a: str, b: str) -> int:
        return (datetime.strptime(b, "%Y-%m-%d") - datetime.strptime(a, "%Y-%m-%d")).days

    def _next_id(self, prefix: str, key: str) -> str:
        n = self.s[key]
        self.s[key] = n + 1
        return f"{prefix}{n:04d}"

    @staticmethod
    def _fail(error: str) -> dict:
        return {"success": False, "error": error}

    def _active_loans(self, member_id):
        return [l for l in self.s["loans"].values() if l["member_id"] == member_id and l["status"] == "active"]

    def _unpaid_total(self, member_id):
        return _money(sum(f["amount"] for f in self.s["fines"].values() if f["member_id"] == member_id and f["status"] == "unpaid"))

    def _active_reservations(self, member_id):
        return [r for r in self.s["reservations"].values() if r["member_id"] == member_id and r["status"] in ("waiting", "ready")]

    def _block_reason(self, m):
        if m["status"] == "suspended":
            return f"Member {m['member_id']} is suspended and may not borrow, renew or reserve"
        if m["status"] != "active" or m["expiry_date"] < self._today():
            return f"The membership of {m['member_id']} expired on {m['expiry_date']}; it must be renewed first"
        unpaid = self._unpaid_total(m["member_id"])
        if unpaid > POLICY["fineBlockThreshold"]:
            return f"Member {m['member_id']} owes ${_fixed2(unpaid)} in unpaid fines (more than ${_fixed2(POLICY['fineBlockThreshold'])}); fines must be paid first"
        return None

    def _queue(self, book_id):
        q = [r for r in self.s["reservations"].values() if r["book_id"] == book_id and r["status"] == "waiting"]
        return sorted(q, key=lambda r: (r["created_date"], r["reservation_id"]))

    def _release_copy(self, book):
        q = self._queue(book["book_id"])
        if q:
            nxt = q[0]
            today = self._today()
            nxt["status"] = "ready"
            nxt["ready_date"] = today
            nxt["hold_until"] = self._add_days(today, POLICY["holdDays"])
            return nxt
        book["available_copies"] += 1
        return None

    def _create_fine(self, member_id, loan_id, amount, reason, note):
        fid = self._next_id("F", "next_fine_number")
        self.s["fines"][fid] = {
            "fine_id": fid, "member_id": member_id, "loan_id": loan_id, "amount": _money(amount), "reason": reason, "note": note,
            "status": "unpaid", "created_date": self._today(), "paid_date": None, "payment_method": None,
        }
        return self.s["fines"][fid]

    def _loan_view(self, loan):
        today = self._today()
        book = self.s["books"].get(loan["book_id"])
        overdue = max(0, self._days_between(loan["due_date"], today)) if loan["status"] == "active" else 0
        return {**loan, "title": book["title"] if book else None, "overdue": overdue > 0, "days_overdue": overdue}

    @staticmethod
    def _book_summary(b):
        return {k: b[k] for k in ("book_id", "title", "author", "genre", "year", "loanable", "total_copies", "available_copies")}

    # -------------------------------------------------------------- tools
    def search_books(self, query=None, author=None, genre=None, available_only=None):
        q = query.lower() if query else None
        a = author.lower() if author else None
        g = genre.lower() if genre else None
        hits = [
            b for b in self.s["books"].values()
            if (not q or q in b["title"].lower() or b["isbn"] == query) and (not a or a in b["author"].lower())
            and (not g or b["genre"].lower() == g) and (not available_only or b["available_copies"] > 0)
        ]
        return {"success": True, "data": [self._book_summary(b) for b in hits]}

    def get_book(self, book_id=None):
        book = self.s["books"].get(book_id)
        if not book:
            return self._fail(f"Book {book_id} not found")
        return {"success": True, "data": {**book, "waiting_reservations": len(self._queue(book_id))}}

    def get_member(self, member_id=None):
        m = self.s["members"].get(member_id)
        if not m:
            return self._fail(f"Member {member_id} not found")
        block = self._block_reason(m)
        return {"success": True, "data": {
            **m, "active_loans": len(self._active_loans(member_id)), "loan_limit": POLICY["loanLimits"].get(m["membership_type"]),
            "active_reservations": len(self._active_reservations(member_id)), "unpaid_fines_total": self._unpaid_total(member_id),
            "can_borrow": block is None, "restriction": block,
        }}

    def list_member_loans(self, member_id=None, status=None):
        if member_id not in self.s["members"]:
            return self._fail(f"Member {member_id} not found")
        want = status or "active"
        loans = [l for l in self.s["loans"].values() if l["member_id"] == member_id and (want == "all" or l["status"] == want)]
        return {"success": True, "data": [self._loan_view(l) for l in loans]}

    def list_reservations(self, book_id=None, member_id=None, status=None):
        if not book_id and not member_id:
            return self._fail("Give a book_id or a member_id")
        if book_id and book_id not in self.s["books"]:
            return self._fail(f"Book {book_id} not found")
        if member_id and member_id not in self.s["members"]:
            return self._fail(f"Member {member_id} not found")
        out = []
        for r in self.s["reservations"].values():
            if (book_id and r["book_id"] != book_id) or (member_id and r["member_id"] != member_id) or (status and r["status"] != status):
                continue
            position = None
            if r["status"] == "waiting":
                ids = [x["reservation_id"] for x in self._queue(r["book_id"])]
                position = ids.index(r["reservation_id"]) + 1
            book = self.s["books"].get(r["book_id"])
            out.append({**r, "title": book["title"] if book else None, "queue_position": position})
        return {"success": True, "data": out}

    def list_fines(self, member_id=None, status=None):
        if member_id not in self.s["members"]:
            return self._fail(f"Member {member_id} not found")
        hits = [dict(f) for f in self.s["fines"].values() if f["member_id"] == member_id and (not status or f["status"] == status)]
        return {"success": True, "data": {"fines": hits, "unpaid_total": self._unpaid_total(member_id)}}

    def checkout_book(self, member_id=None, book_id=None):
        m = self.s["members"].get(member_id)
        if not m:
            return self._fail(f"Member {member_id} not found")
        book = self.s["books"].get(book_id)
        if not book:
            return self._fail(f"Book {book_id} not found")
        if not book["loanable"]:
            return self._fail(f"'{book['title']}' is a reference item and cannot be borrowed")
        block = self._block_reason(m)
        if block:
            return self._fail(block)
        active = self._active_loans(member_id)
        limit = POLICY["loanLimits"].get(m["membership_type"])
        if len(active) >= limit:
            return self._fail(f"Member {member_id} already has {len(active)} loans, the limit for a {m['membership_type']} membership")
        if any(l["book_id"] == book_id for l in active):
            return self._fail(f"Member {member_id} already has '{book['title']}' on loan")
        today = self._today()
        held = next((r for r in self.s["reservations"].values() if r["book_id"] == book_id and r["member_id"] == member_id and r["status"] == "ready"), None)
        if held:
            held["status"] = "fulfilled"
            held["fulfilled_date"] = today
        else:
            if book["available_copies"] <= 0:
                return self._fail(f"No copy of '{book['title']}' is available for {member_id}; copies on hold belong to the members who reserved them. A reservation can be placed instead")
            book["available_copies"] -= 1
        lid = self._next_id("L", "next_loan_number")
        self.s["loans"][lid] = {
            "loan_id": lid, "book_id": book_id, "member_id": member_id, "checkout_date": today, "due_date": self._add_days(today, POLICY["loanDays"]),
            "returned_date": None, "status": "active", "renewals": 0,
        }
        return {"success": True, "data": {"loan_id": lid, "title": book["title"], "due_date": self.s["loans"][lid]["due_date"], "fulfilled_reservation": held["reservation_id"] if held else None}}

    def return_book(self, loan_id=None):
        loan = self.s["loans"].get(loan_id)
        if not loan:
            return self._fail(f"Loan {loan_id} not found")
        if loan["status"] != "active":
            return self._fail(f"Loan {loan_id} is not active (status: {loan['status']})")
        book = self.s["books"][loan["book_id"]]
        today = self._today()
        loan["status"] = "returned"
        loan["returned_date"] = today
        late = max(0, self._days_between(loan["due_date"], today))
        fine = None
        if late > 0:
            fine = self._create_fine(loan["member_id"], loan_id, min(late * POLICY["lateFeePerDay"], POLICY["lateFeeCap"]), "late_return", f"{late} day(s) late")
        held = self._release_copy(book)
        return {"success": True, "data": {
            "loan_id": loan_id, "title": book["title"], "returned_date": today, "days_late": late,
            "fine": {"fine_id": fine["fine_id"], "amount": fine["amount"]} if fine else None,
            "copy_held_for_reservation": {"reservation_id": held["reservation_id"], "member_id": held["member_id"], "hold_until": held["hold_until"]} if held else None,
        }}

    def pay_fine(self, fine_id=None, payment_method=None):
        fine = self.s["fines"].get(fine_id)
        if not fine:
            return self._fail(f"Fine {fine_id} not found")
        if fine["status"] != "unpaid":
            return self._fail(f"Fine {fine_id} is already {fine['status']}")
        fine["status"] = "paid"
        fine["paid_date"] = self._today()
        fine["payment_method"] = payment_method
        return {"success": True, "data": {"fine_id": fine_id, "amount_paid": fine["amount"], "payment_method": payment_method, "member_unpaid_total": self._unpaid_total(fine["member_id"])}}

    TOOLS = ("search_books", "get_book", "get_member", "list_member_loans", "list_reservations", "list_fines", "checkout_book", "return_book", "pay_fine")

    def call(self, name: str, arguments: dict):
        """One tool call, as the bridge makes it: the clock ticks, then the tool runs."""
        self.now_ms += self.tick_ms
        if name not in self.TOOLS:
            return {"error": {"type": "unknown_tool", "message": f"no tool {name} in this port"}}
        try:
            return getattr(self, name)(**arguments)
        except TypeError as e:
            return {"error": {"type": "invalid_arguments", "message": str(e)}}
