// BFCL's VehicleControlAPI (func_source_code/vehicle_control.py), ported.
const VEHICLE_MAX_FUEL_LEVEL = 50n;
const VEHICLE_MIN_FUEL_LEVEL = 0.0;
const VEHICLE_MILE_PER_GALLON = 20.0;
const VEHICLE_DISTANCES = [
  ["83214", "74532", 750.0], ["56108", "62947", 320.0], ["71354", "83462", 450.0], ["47329", "52013", 290.0],
  ["69238", "51479", 630.0], ["94016", "83214", 980.0], ["94016", "94704", 600.0], ["94704", "08540", 2550.0],
  ["94016", "08540", 1950.0], ["62947", "47329", 1053.0], ["94016", "62947", 780.0], ["74532", "94016", 880.0],
];
const VEHICLE_ZIPCODES = {
  Rivermist: "83214", Stonebrook: "74532", Maplecrest: "56108", Silverpine: "62947", Shadowridge: "71354", "Sunset Valley": "83462",
  Oakendale: "47329", Willowbend: "52013", "Crescent Hollow": "69238", Autumnville: "51479", "San Francisco": "94016",
};

class VehicleControlAPI {
  _load_scenario(scenario, long_context = false) {
    const g = (k, d) => scenario.get(k, d);
    this._random = new PyText.Random(g("random_seed", 141053n));
    this.fuelLevel = g("fuelLevel", 0.0);
    this.batteryVoltage = g("batteryVoltage", 12.6);
    this.engine_state = g("engineState", "stopped");
    this.remainingUnlockedDoors = g("remainingUnlockedDoors", 4n);
    this.doorStatus = g("doorStatus", new PyText.PyDict([["driver", "unlocked"], ["passenger", "unlocked"], ["rear_left", "unlocked"], ["rear_right", "unlocked"]]));
    this.remainingUnlockedDoors = 4n - BigInt(PyText.iter(this.doorStatus).filter((d) => PyText.eq(this.doorStatus.item(d), "locked")).length);
    this.acTemperature = g("acTemperature", 25.0);
    this.fanSpeed = g("fanSpeed", 50n);
    this.acMode = g("acMode", "auto");
    this.humidityLevel = g("humidityLevel", 50.0);
    this.headLightStatus = g("headLightStatus", "off");
    this.parkingBrakeStatus = g("parkingBrakeStatus", "released");
    this._parkingBrakeForce = g("parkingBrakeForce", 0.0);
    this._slopeAngle = g("slopeAngle", 0.0);
    this.brakePedalStatus = g("brakePedalStatus", "released");
    this._brakePedalForce = g("brakePedalForce", 0.0);
    this.distanceToNextVehicle = g("distanceToNextVehicle", 50.0);
    this.cruiseStatus = g("cruiseStatus", "inactive");
    this.destination = g("destination", "None");
    this.frontLeftTirePressure = g("frontLeftTirePressure", 32.0);
    this.frontRightTirePressure = g("frontRightTirePressure", 32.0);
    this.rearLeftTirePressure = g("rearLeftTirePressure", 30.0);
    this.rearRightTirePressure = g("rearRightTirePressure", 30.0);
    this.long_context = long_context;
  }

  startEngine(ignitionMode) {
    if (PyText.eq(ignitionMode, "STOP")) this.engine_state = "stopped";
    if (PyText.gt(this.remainingUnlockedDoors, 0n)) {
      const unlocked = this.doorStatus.items().filter(([, s]) => PyText.eq(s, "unlocked")).map(([d]) => d);
      for (const d of unlocked) if (typeof d !== "string") throw PyText.TypeError(`sequence item 0: expected str instance, ${PyText.typeName(d)} found`);
      return new PyText.PyDict([["error", "All doors must be locked before starting the engine. Here are the unlocked doors: " + unlocked.join(", ")]]);
    }
    if (!PyText.eq(this.brakePedalStatus, "pressed")) return new PyText.PyDict([["error", "Brake pedal needs to be pressed when starting the engine."]]);
    if (!PyText.eq(this._brakePedalForce, 1000.0)) return new PyText.PyDict([["error", "Must press the brake fully before starting the engine."]]);
    if (PyText.lt(this.fuelLevel, VEHICLE_MIN_FUEL_LEVEL)) return new PyText.PyDict([["error", "Fuel tank is empty."]]);
    if (PyText.eq(ignitionMode, "START")) this.engine_state = "running";
    else return new PyText.PyDict([["error", "Invalid ignition mode."]]);
    return new PyText.PyDict([["engineState", this.engine_state], ["fuelLevel", this.fuelLevel], ["batteryVoltage", this.batteryVoltage]]);
  }

  fillFuelTank(fuelAmount) {
    if (PyText.lt(fuelAmount, 0n)) return new PyText.PyDict([["error", "Fuel amount cannot be negative."]]);
    if (PyText.gt(PyText.add(this.fuelLevel, fuelAmount), VEHICLE_MAX_FUEL_LEVEL)) return new PyText.PyDict([["error", "Cannot fill gas above the tank capacity."]]);
    if (PyText.lt(PyText.add(this.fuelLevel, fuelAmount), VEHICLE_MIN_FUEL_LEVEL)) return new PyText.PyDict([["error", "Fuel tank is empty. Min fuel level is 0 gallons."]]);
    this.fuelLevel = PyText.add(this.fuelLevel, fuelAmount);
    return new PyText.PyDict([["fuelLevel", this.fuelLevel]]);
  }

  lockDoors(unlock, door) {
    const [from, to, delta, status] = PyText.truthy(unlock) ? ["locked", "unlocked", 1n, "unlocked"] : ["unlocked", "locked", -1n, "locked"];
    for (const d of PyText.iter(door)) {
      if (PyText.eq(this.doorStatus.item(d), to)) continue;
      this.doorStatus.set(d, to);
      this.remainingUnlockedDoors = PyText.add(this.remainingUnlockedDoors, delta);
    }
    void from;
    return new PyText.PyDict([["lockStatus", status], ["remainingUnlockedDoors", this.remainingUnlockedDoors]]);
  }

  adjustClimateControl(temperature, unit, fanSpeed, mode) {
    if (!(PyText.le(0n, fanSpeed) && PyText.le(fanSpeed, 100n))) return new PyText.PyDict([["error", "Fan speed must be between 0 and 100."]]);
    this.acTemperature = temperature;
    if (PyText.eq(unit, "fahrenheit")) this.acTemperature = PyText.div(PyText.mul(PyText.sub(temperature, 32n), 5n), 9n);
    this.fanSpeed = fanSpeed;
    this.acMode = mode;
    return new PyText.PyDict([["currentACTemperature", temperature], ["climateMode", mode], ["humidityLevel", this.humidityLevel]]);
  }

  get_outside_temperature_from_google() {
    if (PyText.truthy(this.long_context)) {
      const weather = BfclLongContext("LONG_WEATHER_EXTENSION");
      weather.set("outsideTemperature", this._random.uniform(-10.0, 40.0));
      return weather;
    }
    return new PyText.PyDict([["outsideTemperature", this._random.uniform(-10.0, 40.0)]]);
  }

  get_outside_temperature_from_weather_com() {
    return new PyText.PyDict([["error", 404n]]);
  }

  setHeadlights(mode) {
    if (!PyText.contains(["on", "off", "auto"], mode)) return new PyText.PyDict([["error", "Invalid headlight mode."]]);
    this.headLightStatus = PyText.eq(mode, "on") ? "on" : "off";
    return new PyText.PyDict([["headlightStatus", this.headLightStatus]]);
  }

  displayCarStatus(option) {
    const status = new PyText.PyDict();
    if (PyText.truthy(this.long_context)) status.set("metadata", BfclLongContext("CAR_STATUS_METADATA_EXTENSION"));
    const o = typeof option === "string" ? option : null;
    if (o === "fuel") status.set("fuelLevel", this.fuelLevel);
    else if (o === "battery") status.set("batteryVoltage", this.batteryVoltage);
    else if (o === "doors") status.set("doorStatus", this.doorStatus);
    else if (o === "climate") {
      status.set("currentACTemperature", this.acTemperature);
      status.set("fanSpeed", this.fanSpeed);
      status.set("climateMode", this.acMode);
      status.set("humidityLevel", this.humidityLevel);
    } else if (o === "headlights") status.set("headlightStatus", this.headLightStatus);
    else if (o === "parkingBrake") {
      status.set("parkingBrakeStatus", this.parkingBrakeStatus);
      status.set("parkingBrakeForce", this._parkingBrakeForce);
      status.set("slopeAngle", this._slopeAngle);
    } else if (o === "brakePedal") {
      status.set("brakePedalStatus", this.brakePedalStatus);
      status.set("brakePedalForce", this._brakePedalForce);
    } else if (o === "engine") status.set("engineState", this.engine_state);
    else status.set("error", "Invalid option");
    return status;
  }

  activateParkingBrake(mode) {
    if (!PyText.contains(["engage", "release"], mode)) return new PyText.PyDict([["error", "Invalid mode"]]);
    const engage = PyText.eq(mode, "engage");
    this.parkingBrakeStatus = engage ? "engaged" : "released";
    this._parkingBrakeForce = engage ? 500.0 : 0.0;
    this._slopeAngle = 10.0;
    const out = [["parkingBrakeStatus", this.parkingBrakeStatus], ["_parkingBrakeForce", this._parkingBrakeForce], ["_slopeAngle", 10.0]];
    if (PyText.truthy(this.long_context)) out.unshift(["parkingBrakeInstruction", BfclLongContext("PARKING_BRAKE_INSTRUCTION")]);
    return new PyText.PyDict(out);
  }

  pressBrakePedal(pedalPosition) {
    if (!(PyText.le(0n, pedalPosition) && PyText.le(pedalPosition, 1n))) return new PyText.PyDict([["error", "Pedal position must be between 0 and 1."]]);
    if (PyText.eq(pedalPosition, 0n)) {
      this.brakePedalStatus = "released";
      this._brakePedalForce = 0.0;
      return new PyText.PyDict([["brakePedalStatus", "released"], ["brakePedalForce", 0.0]]);
    }
    const force = PyText.mul(pedalPosition, 1000n);
    this.brakePedalStatus = "pressed";
    this._brakePedalForce = force;
    return new PyText.PyDict([["brakePedalStatus", "pressed"], ["brakePedalForce", PyText.float(force)]]);
  }

  releaseBrakePedal() {
    this.brakePedalStatus = "released";
    this._brakePedalForce = 0.0;
    return new PyText.PyDict([["brakePedalStatus", "released"], ["brakePedalForce", 0.0]]);
  }

  setCruiseControl(speed, activate, distanceToNextVehicle) {
    distanceToNextVehicle = PyText.float(distanceToNextVehicle);
    speed = PyText.float(speed);
    if (PyText.eq(this.engine_state, "stopped")) return new PyText.PyDict([["error", "Start the engine before activating the cruise control."]]);
    if (PyText.truthy(activate)) {
      this.distanceToNextVehicle = distanceToNextVehicle;
      if (speed < 0 || speed > 120 || !PyText.eq(PyText.mod(speed, 5n), 0n)) return new PyText.PyDict([["error", "Invalid speed"]]);
      this.cruiseStatus = "active";
      return new PyText.PyDict([["cruiseStatus", "active"], ["currentSpeed", speed], ["distanceToNextVehicle", distanceToNextVehicle]]);
    }
    this.cruiseStatus = "inactive";
    this.distanceToNextVehicle = distanceToNextVehicle;
    return new PyText.PyDict([["cruiseStatus", "inactive"], ["currentSpeed", speed], ["distanceToNextVehicle", distanceToNextVehicle]]);
  }

  get_current_speed() {
    return new PyText.PyDict([["currentSpeed", this._random.uniform(0.0, 120.0)]]);
  }

  display_log(messages) {
    return new PyText.PyDict([["log", messages]]);
  }

  estimate_drive_feasibility_by_mileage(distance) {
    return new PyText.PyDict([["canDrive", !PyText.lt(PyText.mul(this.fuelLevel, VEHICLE_MILE_PER_GALLON), distance)]]);
  }

  liter_to_gallon(liter) {
    return new PyText.PyDict([["gallon", PyText.mul(liter, 0.264172)]]);
  }

  gallon_to_liter(gallon) {
    return new PyText.PyDict([["liter", PyText.mul(gallon, 3.78541)]]);
  }

  estimate_distance(cityA, cityB) {
    const hit = VEHICLE_DISTANCES.find(([a, b]) => (PyText.eq(cityA, a) && PyText.eq(cityB, b)) || (PyText.eq(cityA, b) && PyText.eq(cityB, a)));
    const distance = hit ? new PyText.PyDict([["distance", hit[2]]]) : new PyText.PyDict([["error", "distance not found in database."]]);
    if (PyText.truthy(this.long_context)) distance.set("intermediaryCities", BfclLongContext("INTERMEDIARY_CITIES"));
    return distance;
  }

  get_zipcode_based_on_city(city) {
    const z = typeof city === "string" && Object.prototype.hasOwnProperty.call(VEHICLE_ZIPCODES, city) ? VEHICLE_ZIPCODES[city] : "00000";
    return new PyText.PyDict([["zipcode", z]]);
  }

  set_navigation(destination) {
    this.destination = destination;
    if (typeof destination !== "string") throw PyText.TypeError(`can only concatenate str (not "${PyText.typeName(destination)}") to str`);
    return new PyText.PyDict([["status", "Navigating to " + destination]]);
  }

  check_tire_pressure() {
    const total = PyText.add(PyText.add(PyText.add(this.frontLeftTirePressure, this.frontRightTirePressure), this.rearLeftTirePressure), this.rearRightTirePressure);
    const avg = PyText.div(total, 4n);
    const healthy = PyText.le(30n, avg) && PyText.le(avg, 35n);
    const status = new PyText.PyDict([
      ["frontLeftTirePressure", this.frontLeftTirePressure],
      ["frontRightTirePressure", this.frontRightTirePressure],
      ["rearLeftTirePressure", this.rearLeftTirePressure],
      ["rearRightTirePressure", this.rearRightTirePressure],
      ["healthy_tire_pressure", healthy],
      ["car_info", new PyText.PyDict()],
    ]);
    if (PyText.truthy(this.long_context)) status.set("car_info", BfclLongContext("CAR_STATUS_METADATA_EXTENSION"));
    return status;
  }

  find_nearest_tire_shop() {
    return new PyText.PyDict([["shopLocation", "456 Oakwood Avenue, Rivermist, 83214"]]);
  }
}
VehicleControlAPI.SIGNATURES = {
  startEngine: [["ignitionMode"]],
  fillFuelTank: [["fuelAmount"]],
  lockDoors: [["unlock"], ["door"]],
  adjustClimateControl: [["temperature"], ["unit", "celsius"], ["fanSpeed", 50n], ["mode", "auto"]],
  get_outside_temperature_from_google: [],
  get_outside_temperature_from_weather_com: [],
  setHeadlights: [["mode"]],
  displayCarStatus: [["option"]],
  activateParkingBrake: [["mode"]],
  pressBrakePedal: [["pedalPosition"]],
  releaseBrakePedal: [],
  setCruiseControl: [["speed"], ["activate"], ["distanceToNextVehicle"]],
  get_current_speed: [],
  display_log: [["messages"]],
  estimate_drive_feasibility_by_mileage: [["distance"]],
  liter_to_gallon: [["liter"]],
  gallon_to_liter: [["gallon"]],
  estimate_distance: [["cityA"], ["cityB"]],
  get_zipcode_based_on_city: [["city"]],
  set_navigation: [["destination"]],
  check_tire_pressure: [],
  find_nearest_tire_shop: [],
};
