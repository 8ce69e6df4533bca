/**
 * TauAirlineEnv: a JavaScript port of the tau-bench airline tools (sierra-research/tau-bench,
 * tau_bench/envs/airline/tools/*.py, MIT licence), for the EnvScaler sandbox (QuickJS, ES2020).
 *
 * State: { users, reservations, flights } (the three data files), mutated in place exactly as the
 * Python tools mutate `data`. Each method takes one object of named arguments and returns what
 * the Python Tool.invoke returned: the object for json.dumps(...) results (a deep copy, as the
 * JSON text is a snapshot), the string itself for "Error: ..." and plain-text results, and null
 * where the original returns None (send_certificate when the three certificate ids are taken).
 *
 * Method -> original file (tau_bench/envs/airline/tools/):
 *   book_reservation               book_reservation.py
 *   calculate                      calculate.py
 *   cancel_reservation             cancel_reservation.py
 *   get_reservation_details        get_reservation_details.py
 *   get_user_details               get_user_details.py
 *   list_all_airports              list_all_airports.py
 *   search_direct_flight           search_direct_flight.py
 *   search_onestop_flight          search_onestop_flight.py
 *   send_certificate               send_certificate.py
 *   think                          think.py
 *   transfer_to_human_agents       transfer_to_human_agents.py
 *   update_reservation_baggages    update_reservation_baggages.py
 *   update_reservation_flights     update_reservation_flights.py
 *   update_reservation_passengers  update_reservation_passengers.py
 *
 * Behaviour matched on purpose:
 * - Ids and times are deterministic in the original, and so here: a new reservation is "HATHAT",
 *   else "HATHAU", else "HATHAV" (the first not yet in reservations; a fourth booking overwrites
 *   HATHAV as the original does); created_at is always "2024-05-15T15:00:00"; certificates are
 *   certificate_3221322 / _3221323 / _3221324, the first free one (None after that).
 * - Error strings are the originals, including their quirks: get_reservation_details answers
 *   "Error: user not found" for an unknown reservation; book_reservation checks flights before
 *   payment methods and reports "payment amount does not add up, total price is X, but paid Y".
 * - book_reservation deducts gift cards and deletes used certificates only after every check
 *   passed (a certificate listed twice raises KeyError on the second deletion, after the first:
 *   as in the original). Prices are not rounded anywhere (the original does not round).
 * - update_reservation_flights keeps the price of a flight already in the reservation only when
 *   the cabin is unchanged; it does not touch the flights database (as the original).
 * - search_onestop_flight: the second leg's date is f"2024-05-{int(date[-2:])+1}" (no zero
 *   padding) when the first leg arrives "+1", and the second leg's result is updated with
 *   flight2["dates"][date] (the FIRST leg's date), both exactly as the original.
 * - cancel_reservation negates every payment (including earlier refunds) and appends the refunds.
 * - tau-bench's Env.step turns any exception raised inside a tool into "Error: <str(e)>": missing
 *   keys raise KeyError ("Error: 'date'"), missing/unexpected arguments raise the TypeError Python
 *   would ("Error: BookReservation.invoke() missing 1 required positional argument: 'insurance'").
 * - calculate: str(round(float(eval(expression)), 2)) re-implemented without eval (see the helper
 *   block): Python int/float/complex arithmetic, ** and //, Python's error texts and float repr.
 * - The bundle runs with observation_format "python": the agent reads a string result as is and
 *   anything else as json.dumps text, with the data files' dict order and floats (see TauPy).
 * Not carried: tool arguments arrive as JSON values, so an argument 150.0 is the int 150 here
 * ("with amount 150."); sum() adds left to right as CPython <= 3.11 does.
 */
// Python semantics: TauPy, from tau-python.js (the importer writes it into the bundle's env.js
// ahead of this class).
class TauAirlineEnv {
  constructor(state) {
    this.users = state.users;
    this.reservations = state.reservations;
    this.flights = state.flights;
  }

  // book_reservation.py
  book_reservation(args) {
    const P = TauPy;
    const params = [
      "user_id",
      "origin",
      "destination",
      "flight_type",
      "cabin",
      "flights",
      "passengers",
      "payment_methods",
      "total_baggages",
      "nonfree_baggages",
      "insurance",
    ];
    return P.run(
      "BookReservation",
      params,
      args,
      (user_id, origin, destination, flight_type, cabin, flights, passengers, payment_methods, total_baggages, nonfree_baggages, insurance) => {
        const reservations = this.reservations;
        const users = this.users;
        if (!P.isIn(users, user_id)) return "Error: user not found";
        const user = users[user_id];

        // assume each task makes at most 3 reservations
        let reservation_id = "HATHAT";
        if (P.isIn(reservations, reservation_id)) {
          reservation_id = "HATHAU";
          if (P.isIn(reservations, reservation_id)) reservation_id = "HATHAV";
        }

        const reservation = {
          reservation_id: reservation_id,
          user_id: user_id,
          origin: origin,
          destination: destination,
          flight_type: flight_type,
          cabin: cabin,
          flights: P.clone(flights),
          passengers: P.clone(passengers),
          payment_history: P.clone(payment_methods),
          created_at: "2024-05-15T15:00:00",
          total_baggages: total_baggages,
          nonfree_baggages: nonfree_baggages,
          insurance: insurance,
        };

        // update flights and calculate price
        let total_price = 0;
        for (const flight of P.iter(reservation.flights)) {
          const flight_number = P.get(flight, "flight_number");
          if (!P.isIn(this.flights, flight_number)) return "Error: flight " + P.str(flight_number) + " not found";
          const flight_data = this.flights[flight_number];
          const dates = P.get(flight_data, "dates");
          if (!P.isIn(dates, P.get(flight, "date"))) {
            return "Error: flight " + P.str(flight_number) + " not found on date " + P.str(P.get(flight, "date"));
          }
          const flight_date_data = dates[flight.date];
          if (P.get(flight_date_data, "status") !== "available") {
            return "Error: flight " + P.str(flight_number) + " not available on date " + P.str(P.get(flight, "date"));
          }
          if (P.lt(P.get(P.get(flight_date_data, "available_seats"), cabin), P.len(passengers))) {
            return "Error: not enough seats on flight " + P.str(flight_number);
          }
          flight.price = P.get(P.get(flight_date_data, "prices"), cabin);
          flight.origin = P.get(flight_data, "origin");
          flight.destination = P.get(flight_data, "destination");
          total_price += flight.price * P.len(passengers);
        }

        if (insurance === "yes") total_price += 30 * P.len(passengers);

        if (typeof nonfree_baggages === "string" || Array.isArray(nonfree_baggages)) {
          // 50 * a str/list is a repetition in Python; adding it to the int total then fails
          throw P.err("unsupported operand type(s) for +=: '" + P.typeName(total_price) + "' and '" + P.typeName(nonfree_baggages) + "'");
        }
        total_price += P.arith("*", 50, nonfree_baggages);

        const user_methods = P.get(user, "payment_methods");
        for (const payment_method of P.iter(payment_methods)) {
          const payment_id = P.get(payment_method, "payment_id");
          const amount = P.get(payment_method, "amount");
          if (!P.isIn(user_methods, payment_id)) return "Error: payment method " + P.str(payment_id) + " not found";
          const source = P.get(user_methods[payment_id], "source");
          if (source === "gift_card" || source === "certificate") {
            if (P.lt(P.get(user_methods[payment_id], "amount"), amount)) {
              return "Error: not enough balance in payment method " + P.str(payment_id);
            }
          }
        }
        let paid = 0;
        for (const payment of P.iter(payment_methods)) paid = P.arith("+", paid, P.get(payment, "amount"));
        if (paid !== total_price) {
          return "Error: payment amount does not add up, total price is " + P.str(total_price) + ", but paid " + P.str(paid);
        }

        // if checks pass, deduct payment and update seats
        for (const payment_method of P.iter(payment_methods)) {
          const payment_id = P.get(payment_method, "payment_id");
          const amount = P.get(payment_method, "amount");
          const method = P.get(user_methods, payment_id);
          if (P.get(method, "source") === "gift_card") {
            method.amount = P.get(method, "amount") - amount;
          } else if (P.get(method, "source") === "certificate") {
            delete user_methods[payment_id];
          }
        }

        reservations[reservation_id] = reservation;
        P.get(user, "reservations").push(reservation_id);
        return P.clone(reservation);
      },
    );
  }

  // calculate.py
  calculate(args) {
    const P = TauPy;
    return P.run("Calculate", ["expression"], args, (expression) => P.calculate(expression));
  }

  // cancel_reservation.py
  cancel_reservation(args) {
    const P = TauPy;
    return P.run("CancelReservation", ["reservation_id"], args, (reservation_id) => {
      const reservations = this.reservations;
      if (!P.isIn(reservations, reservation_id)) return "Error: reservation not found";
      const reservation = reservations[reservation_id];

      // reverse the payment
      const refunds = [];
      const history = P.get(reservation, "payment_history");
      for (const payment of P.iter(history)) {
        const amount = P.get(payment, "amount");
        if (typeof amount !== "number" && typeof amount !== "boolean") throw P.err("bad operand type for unary -: '" + P.typeName(amount) + "'");
        refunds.push({ payment_id: P.get(payment, "payment_id"), amount: amount == 0 ? 0 : -amount });
      }
      for (const r of refunds) history.push(r);
      reservation.status = "cancelled";
      return P.clone(reservation);
    });
  }

  // get_reservation_details.py
  get_reservation_details(args) {
    const P = TauPy;
    return P.run("GetReservationDetails", ["reservation_id"], args, (reservation_id) => {
      if (P.isIn(this.reservations, reservation_id)) return P.clone(this.reservations[reservation_id]);
      return "Error: user not found";
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

  // list_all_airports.py
  list_all_airports(args) {
    const P = TauPy;
    return P.run("ListAllAirports", [], args, () => {
      const airports = ["SFO", "JFK", "LAX", "ORD", "DFW", "DEN", "SEA", "ATL", "MIA", "BOS", "PHX", "IAH", "LAS", "MCO", "EWR", "CLT", "MSP", "DTW", "PHL", "LGA"];
      const cities = [
        "San Francisco",
        "New York",
        "Los Angeles",
        "Chicago",
        "Dallas",
        "Denver",
        "Seattle",
        "Atlanta",
        "Miami",
        "Boston",
        "Phoenix",
        "Houston",
        "Las Vegas",
        "Orlando",
        "Newark",
        "Charlotte",
        "Minneapolis",
        "Detroit",
        "Philadelphia",
        "LaGuardia",
      ];
      const out = {};
      for (let i = 0; i < airports.length; i++) out[airports[i]] = cities[i];
      return out;
    });
  }

  // search_direct_flight.py
  search_direct_flight(args) {
    const P = TauPy;
    return P.run("SearchDirectFlight", ["origin", "destination", "date"], args, (origin, destination, date) => {
      const flights = this.flights;
      const results = [];
      for (const key of Object.keys(flights)) {
        const flight = flights[key];
        if (P.eq(P.get(flight, "origin"), origin) && P.eq(P.get(flight, "destination"), destination)) {
          const dates = P.get(flight, "dates");
          if (P.isIn(dates, date) && P.get(dates[date], "status") === "available") {
            // results add flight except dates, but add flight["dates"][date]
            const result = {};
            for (const k of Object.keys(flight)) if (k !== "dates") result[k] = flight[k];
            const day = dates[date];
            for (const k of Object.keys(day)) result[k] = day[k];
            results.push(P.clone(result));
          }
        }
      }
      return results;
    });
  }

  // search_onestop_flight.py
  search_onestop_flight(args) {
    const P = TauPy;
    return P.run("SearchOnestopFlight", ["origin", "destination", "date"], args, (origin, destination, date) => {
      const flights = this.flights;
      const all = Object.keys(flights).map((k) => flights[k]);
      const results = [];
      const except = (flight) => {
        const out = {};
        for (const k of Object.keys(flight)) if (k !== "dates") out[k] = flight[k];
        return out;
      };
      for (const flight1 of all) {
        if (!P.eq(P.get(flight1, "origin"), origin)) continue;
        for (const flight2 of all) {
          if (!(P.eq(P.get(flight2, "destination"), destination) && P.eq(P.get(flight1, "destination"), P.get(flight2, "origin")))) continue;
          const date2 = P.contains(P.get(flight1, "scheduled_arrival_time_est"), "+1") ? "2024-05-" + P.str(pyInt(lastTwo(date)) + 1) : date;
          if (P.lt(P.get(flight2, "scheduled_departure_time_est"), P.get(flight1, "scheduled_arrival_time_est"))) continue;
          const dates1 = P.get(flight1, "dates");
          const dates2 = P.get(flight2, "dates");
          if (P.isIn(dates1, date) && P.isIn(dates2, date2)) {
            if (P.get(dates1[date], "status") === "available" && P.get(dates2[date2], "status") === "available") {
              const result1 = except(flight1);
              Object.assign(result1, dates1[date]);
              result1.date = date;
              const result2 = except(flight2);
              Object.assign(result2, P.get(dates2, date));
              result2.date = date2;
              results.push(P.clone([result1, result2]));
            }
          }
        }
      }
      return results;

      // date[-2:]
      function lastTwo(s) {
        if (typeof s !== "string") throw P.err("'" + P.typeName(s) + "' object is not subscriptable");
        return Array.from(s).slice(-2).join("");
      }
      // int(s) for a str
      function pyInt(s) {
        const m = /^[\s]*([+-]?)(\d+)[\s]*$/.exec(s);
        if (!m) throw P.err("invalid literal for int() with base 10: " + P.repr(s));
        const v = parseInt(m[2], 10);
        return m[1] === "-" ? -v : v;
      }
    });
  }

  // send_certificate.py
  send_certificate(args) {
    const P = TauPy;
    return P.run("SendCertificate", ["user_id", "amount"], args, (user_id, amount) => {
      const users = this.users;
      if (!P.isIn(users, user_id)) return "Error: user not found";
      const user = users[user_id];
      const methods = P.get(user, "payment_methods");
      // add a certificate, assume at most 3 cases per task
      for (const id of [3221322, 3221323, 3221324]) {
        const payment_id = "certificate_" + id;
        if (!P.isIn(methods, payment_id)) {
          methods[payment_id] = { source: "certificate", amount: amount, id: payment_id };
          return "Certificate " + payment_id + " added to user " + P.str(user_id) + " with amount " + P.str(amount) + ".";
        }
      }
      return null;
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

  // update_reservation_baggages.py
  update_reservation_baggages(args) {
    const P = TauPy;
    const params = ["reservation_id", "total_baggages", "nonfree_baggages", "payment_id"];
    return P.run("UpdateReservationBaggages", params, args, (reservation_id, total_baggages, nonfree_baggages, payment_id) => {
      const users = this.users;
      const reservations = this.reservations;
      if (!P.isIn(reservations, reservation_id)) return "Error: reservation not found";
      const reservation = reservations[reservation_id];

      const extra = P.arith("-", nonfree_baggages, P.get(reservation, "nonfree_baggages"));
      const total_price = 50 * (extra > 0 ? extra : 0);
      const methods = P.get(P.get(users, P.get(reservation, "user_id")), "payment_methods");
      if (!P.isIn(methods, payment_id)) return "Error: payment method not found";
      const payment_method = methods[payment_id];
      if (P.get(payment_method, "source") === "certificate") return "Error: certificate cannot be used to update reservation";
      else if (P.get(payment_method, "source") === "gift_card" && P.lt(P.get(payment_method, "amount"), total_price)) {
        return "Error: gift card balance is not enough";
      }

      reservation.total_baggages = total_baggages;
      reservation.nonfree_baggages = nonfree_baggages;
      if (P.get(payment_method, "source") === "gift_card") payment_method.amount = P.get(payment_method, "amount") - total_price;

      if (total_price !== 0) P.get(reservation, "payment_history").push({ payment_id: payment_id, amount: total_price });
      return P.clone(reservation);
    });
  }

  // update_reservation_flights.py
  update_reservation_flights(args) {
    const P = TauPy;
    const params = ["reservation_id", "cabin", "flights", "payment_id"];
    return P.run("UpdateReservationFlights", params, args, (reservation_id, cabin, flights, payment_id) => {
      const users = this.users;
      const reservations = this.reservations;
      if (!P.isIn(reservations, reservation_id)) return "Error: reservation not found";
      const reservation = reservations[reservation_id];
      const passengers = () => P.len(P.get(reservation, "passengers"));

      // update flights and calculate price
      let total_price = 0;
      flights = P.clone(flights);
      for (const flight of P.iter(flights)) {
        // if existing flight, ignore
        const existing = P.iter(P.get(reservation, "flights")).filter(
          (f) =>
            P.eq(P.get(f, "flight_number"), P.get(flight, "flight_number")) &&
            P.eq(P.get(f, "date"), P.get(flight, "date")) &&
            P.eq(cabin, P.get(reservation, "cabin")),
        );
        if (existing.length) {
          total_price += P.get(existing[0], "price") * passengers();
          flight.price = P.get(existing[0], "price");
          flight.origin = P.get(existing[0], "origin");
          flight.destination = P.get(existing[0], "destination");
          continue;
        }
        const flight_number = P.get(flight, "flight_number");
        if (!P.isIn(this.flights, flight_number)) return "Error: flight " + P.str(flight_number) + " not found";
        const flight_data = this.flights[flight_number];
        const dates = P.get(flight_data, "dates");
        if (!P.isIn(dates, P.get(flight, "date"))) {
          return "Error: flight " + P.str(flight_number) + " not found on date " + P.str(P.get(flight, "date"));
        }
        const flight_date_data = dates[flight.date];
        if (P.get(flight_date_data, "status") !== "available") {
          return "Error: flight " + P.str(flight_number) + " not available on date " + P.str(P.get(flight, "date"));
        }
        if (P.lt(P.get(P.get(flight_date_data, "available_seats"), cabin), passengers())) {
          return "Error: not enough seats on flight " + P.str(flight_number);
        }
        flight.price = P.get(P.get(flight_date_data, "prices"), cabin);
        flight.origin = P.get(flight_data, "origin");
        flight.destination = P.get(flight_data, "destination");
        total_price += flight.price * passengers();
      }

      let old_total = 0;
      for (const f of P.iter(P.get(reservation, "flights"))) old_total += P.get(f, "price");
      total_price -= old_total * passengers();

      // check payment
      const methods = P.get(P.get(users, P.get(reservation, "user_id")), "payment_methods");
      if (!P.isIn(methods, payment_id)) return "Error: payment method not found";
      const payment_method = methods[payment_id];
      if (P.get(payment_method, "source") === "certificate") return "Error: certificate cannot be used to update reservation";
      else if (P.get(payment_method, "source") === "gift_card" && P.lt(P.get(payment_method, "amount"), total_price)) {
        return "Error: gift card balance is not enough";
      }

      // if checks pass, deduct payment and update seats
      if (P.get(payment_method, "source") === "gift_card") payment_method.amount = P.get(payment_method, "amount") - total_price;
      reservation.flights = flights;
      if (total_price !== 0) P.get(reservation, "payment_history").push({ payment_id: payment_id, amount: total_price });
      // do not make flight database update here, assume it takes time to be updated
      return P.clone(reservation);
    });
  }

  // update_reservation_passengers.py
  update_reservation_passengers(args) {
    const P = TauPy;
    return P.run("UpdateReservationPassengers", ["reservation_id", "passengers"], args, (reservation_id, passengers) => {
      const reservations = this.reservations;
      if (!P.isIn(reservations, reservation_id)) return "Error: reservation not found";
      const reservation = reservations[reservation_id];
      if (P.len(passengers) !== P.len(P.get(reservation, "passengers"))) return "Error: number of passengers does not match";
      reservation.passengers = P.clone(passengers);
      return P.clone(reservation);
    });
  }
}
