// BFCL's MessageAPI (func_source_code/message_api.py), ported.
const MESSAGE_API_DEFAULT_STATE = () =>
  new PyText.PyDict([
    ["generated_ids", new PyText.PySet()],
    ["user_count", 4n],
    ["user_map", new PyText.PyDict([["Alice", "USR001"], ["Bob", "USR002"], ["Catherine", "USR003"], ["Daniel", "USR004"]])],
    ["inbox", [new PyText.PyDict([["USR002", "My name is Alice. I want to connect."]]), new PyText.PyDict([["USR003", "Could you upload the file?"]]), new PyText.PyDict([["USR004", "Could you upload the file?"]])]],
    ["message_count", 3n],
    ["current_user", null],
  ]);

class MessageAPI {
  _load_scenario(scenario, long_context = false) {
    const d = MESSAGE_API_DEFAULT_STATE();
    this._random = new PyText.Random(scenario.get("random_seed", 200191n));
    for (const k of ["generated_ids", "user_count", "user_map", "inbox", "message_count", "current_user"]) this[k] = scenario.get(k, d.get(k));
  }

  _generate_id() {
    const ids = this.generated_ids;
    let id = this._random.randint(10000n, 99999n);
    while (PyText.contains(ids, id)) id = this._random.randint(10000n, 99999n);
    if (!(ids instanceof PyText.PySet)) throw BfclRuntime.noAttr(ids, "add");
    ids.add(id);
    return new PyText.PyDict([["new_id", id]]);
  }

  list_users() {
    return new PyText.PyDict([["user_list", this.user_map.keys()]]);
  }

  get_user_id(user) {
    if (!PyText.contains(this.user_map, user)) return new PyText.PyDict([["error", `User '${PyText.str(user)}' not found in the workspace.`]]);
    return new PyText.PyDict([["user_id", this.user_map.get(user, null)]]);
  }

  message_login(user_id) {
    if (!this.user_map.values().some((v) => PyText.eq(v, user_id))) return new PyText.PyDict([["login_status", false], ["message", `User ID '${PyText.str(user_id)}' not found.`]]);
    this.current_user = user_id;
    return new PyText.PyDict([["login_status", true], ["message", `User '${PyText.str(user_id)}' logged in successfully.`]]);
  }

  message_get_login_status() {
    return new PyText.PyDict([["login_status", PyText.truthy(this.current_user)]]);
  }

  send_message(receiver_id, message) {
    if (!PyText.truthy(this.current_user)) return new PyText.PyDict([["error", "No user is currently logged in."]]);
    if (!this.user_map.values().some((v) => PyText.eq(v, receiver_id))) return new PyText.PyDict([["error", `Receiver ID '${PyText.str(receiver_id)}' not found.`]]);
    const message_id = this._generate_id();
    this.inbox.push(new PyText.PyDict([[receiver_id, message]]));
    this.message_count = PyText.add(this.message_count, 1n);
    return new PyText.PyDict([["sent_status", true], ["message_id", message_id], ["message", `Message sent to '${PyText.str(receiver_id)}' successfully.`]]);
  }

  delete_message(receiver_id) {
    if (!PyText.truthy(this.current_user)) return new PyText.PyDict([["error", "No user is currently logged in."]]);
    for (const message of [...this.inbox].reverse()) {
      const [receiver] = message.items()[0];
      if (PyText.eq(receiver, receiver_id)) {
        // list.remove deletes the first EQUAL message, not necessarily this one
        this.inbox.splice(this.inbox.findIndex((m) => PyText.eq(m, message)), 1);
        return new PyText.PyDict([["deleted_status", true], ["receiver_id", receiver], ["message", `Receiver ${PyText.str(receiver_id)}'s latest message deleted successfully.`]]);
      }
    }
    return new PyText.PyDict([["error", `Receiver ID ${PyText.str(receiver_id)} not found.`]]);
  }

  view_messages_sent() {
    if (!PyText.truthy(this.current_user)) return new PyText.PyDict([["error", "No user is currently logged in."]]);
    const sent = new PyText.PyDict();
    for (const message of this.inbox) {
      const [receiver, content] = message.items()[0];
      if (!sent.has(receiver)) sent.set(receiver, [content]);
      else sent.get(receiver).push(content);
    }
    return new PyText.PyDict([["messages", sent]]);
  }

  add_contact(user_name) {
    if (PyText.contains(this.user_map, user_name)) return new PyText.PyDict([["error", `User name '${PyText.str(user_name)}' already exists.`]]);
    this.user_count = PyText.add(this.user_count, 1n);
    const user_id = `USR${PyText.str(this.user_count).padStart(3, "0")}`;
    if (this.user_map.values().some((v) => PyText.eq(v, user_id))) return new PyText.PyDict([["error", `User ID '${user_id}' already exists.`]]);
    this.user_map.set(user_name, user_id);
    return new PyText.PyDict([["added_status", true], ["user_id", user_id], ["message", `Contact '${PyText.str(user_name)}' added successfully.`]]);
  }

  search_messages(keyword) {
    if (!PyText.truthy(this.current_user)) return new PyText.PyDict([["error", "No user is currently logged in."]]);
    const kw = BfclRuntime.strOnly(keyword, "lower").toLowerCase();
    const results = [];
    for (const m of this.inbox) {
      const [receiver_id, content] = m.items()[0];
      if (BfclRuntime.strOnly(content, "lower").toLowerCase().includes(kw)) results.push(new PyText.PyDict([["receiver_id", receiver_id], ["message", content]]));
    }
    return new PyText.PyDict([["results", results]]);
  }

  get_message_stats() {
    if (!PyText.truthy(this.current_user)) return new PyText.PyDict([["error", "No user is currently logged in."]]);
    let received = 0n;
    const contacts = new PyText.PySet();
    for (const m of this.inbox) {
      const [receiver_id] = m.items()[0];
      received += 1n;
      contacts.add(receiver_id);
    }
    return new PyText.PyDict([["stats", new PyText.PyDict([["received_count", received], ["total_contacts", BigInt(contacts.size)]])]]);
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
