// BFCL's MessageAPI (func_source_code/message_api.py), ported.
const MESSAGE_API_DEFAULT_STATE = () =>
  new Py.PyDict([
    ["generated_ids", new Py.PySet()],
    ["user_count", 4n],
    ["user_map", new Py.PyDict([["Alice", "USR001"], ["Bob", "USR002"], ["Catherine", "USR003"], ["Daniel", "USR004"]])],
    ["inbox", [new Py.PyDict([["USR002", "My name is Alice. I want to connect."]]), new Py.PyDict([["USR003", "Could you upload the file?"]]), new Py.PyDict([["USR004", "Could you upload the file?"]])]],
    ["message_count", 3n],
    ["current_user", null],
  ]);

class MessageAPI {
  _load_scenario(scenario, long_context = false) {
    const d = MESSAGE_API_DEFAULT_STATE();
    this._random = new Py.Random(scenario.get("random_seed", 200191n));
    for (const k of ["generated_ids", "user_count", "user_map", "inbox", "message_count", "current_user"]) this[k] = scenario.get(k, d.get(k));
  }

  _generate_id() {
    const ids = this.generated_ids;
    let id = this._random.randint(10000n, 99999n);
    while (Py.contains(ids, id)) id = this._random.randint(10000n, 99999n);
    if (!(ids instanceof Py.PySet)) throw BfclRuntime.noAttr(ids, "add");
    ids.add(id);
    return new Py.PyDict([["new_id", id]]);
  }

  list_users() {
    return new Py.PyDict([["user_list", this.user_map.keys()]]);
  }

  get_user_id(user) {
    if (!Py.contains(this.user_map, user)) return new Py.PyDict([["error", `User '${Py.str(user)}' not found in the workspace.`]]);
    return new Py.PyDict([["user_id", this.user_map.get(user, null)]]);
  }

  message_login(user_id) {
    if (!this.user_map.values().some((v) => Py.eq(v, user_id))) return new Py.PyDict([["login_status", false], ["message", `User ID '${Py.str(user_id)}' not found.`]]);
    this.current_user = user_id;
    return new Py.PyDict([["login_status", true], ["message", `User '${Py.str(user_id)}' logged in successfully.`]]);
  }

  message_get_login_status() {
    return new Py.PyDict([["login_status", Py.truthy(this.current_user)]]);
  }

  send_message(receiver_id, message) {
    if (!Py.truthy(this.current_user)) return new Py.PyDict([["error", "No user is currently logged in."]]);
    if (!this.user_map.values().some((v) => Py.eq(v, receiver_id))) return new Py.PyDict([["error", `Receiver ID '${Py.str(receiver_id)}' not found.`]]);
    const message_id = this._generate_id();
    this.inbox.push(new Py.PyDict([[receiver_id, message]]));
    this.message_count = Py.add(this.message_count, 1n);
    return new Py.PyDict([["sent_status", true], ["message_id", message_id], ["message", `Message sent to '${Py.str(receiver_id)}' successfully.`]]);
  }

  delete_message(receiver_id) {
    if (!Py.truthy(this.current_user)) return new Py.PyDict([["error", "No user is currently logged in."]]);
    for (const message of [...this.inbox].reverse()) {
      const [receiver] = message.items()[0];
      if (Py.eq(receiver, receiver_id)) {
        // list.remove deletes the first EQUAL message, not necessarily this one
        this.inbox.splice(this.inbox.findIndex((m) => Py.eq(m, message)), 1);
        return new Py.PyDict([["deleted_status", true], ["receiver_id", receiver], ["message", `Receiver ${Py.str(receiver_id)}'s latest message deleted successfully.`]]);
      }
    }
    return new Py.PyDict([["error", `Receiver ID ${Py.str(receiver_id)} not found.`]]);
  }

  view_messages_sent() {
    if (!Py.truthy(this.current_user)) return new Py.PyDict([["error", "No user is currently logged in."]]);
    const sent = new Py.PyDict();
    for (const message of this.inbox) {
      const [receiver, content] = message.items()[0];
      if (!sent.has(receiver)) sent.set(receiver, [content]);
      else sent.get(receiver).push(content);
    }
    return new Py.PyDict([["messages", sent]]);
  }

  add_contact(user_name) {
    if (Py.contains(this.user_map, user_name)) return new Py.PyDict([["error", `User name '${Py.str(user_name)}' already exists.`]]);
    this.user_count = Py.add(this.user_count, 1n);
    const user_id = `USR${Py.str(this.user_count).padStart(3, "0")}`;
    if (this.user_map.values().some((v) => Py.eq(v, user_id))) return new Py.PyDict([["error", `User ID '${user_id}' already exists.`]]);
    this.user_map.set(user_name, user_id);
    return new Py.PyDict([["added_status", true], ["user_id", user_id], ["message", `Contact '${Py.str(user_name)}' added successfully.`]]);
  }

  search_messages(keyword) {
    if (!Py.truthy(this.current_user)) return new Py.PyDict([["error", "No user is currently logged in."]]);
    const kw = BfclRuntime.strOnly(keyword, "lower").toLowerCase();
    const results = [];
    for (const m of this.inbox) {
      const [receiver_id, content] = m.items()[0];
      if (BfclRuntime.strOnly(content, "lower").toLowerCase().includes(kw)) results.push(new Py.PyDict([["receiver_id", receiver_id], ["message", content]]));
    }
    return new Py.PyDict([["results", results]]);
  }

  get_message_stats() {
    if (!Py.truthy(this.current_user)) return new Py.PyDict([["error", "No user is currently logged in."]]);
    let received = 0n;
    const contacts = new Py.PySet();
    for (const m of this.inbox) {
      const [receiver_id] = m.items()[0];
      received += 1n;
      contacts.add(receiver_id);
    }
    return new Py.PyDict([["stats", new Py.PyDict([["received_count", received], ["total_contacts", BigInt(contacts.size)]])]]);
  }
}
MessageAPI.SIGNATURES = {
  list_users: [],
  get_user_id: [["user"]],
  message_login: [["user_id"]],
  message_get_login_status: [],
  send_message: [["receiver_id"], ["message"]],
  delete_message: [["receiver_id"]],
  view_messages_sent: [],
  add_contact: [["user_name"]],
  search_messages: [["keyword"]],
  get_message_stats: [],
};
