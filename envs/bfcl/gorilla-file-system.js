// BFCL's GorillaFileSystem with its File and Directory (func_source_code/gorilla_file_system.py),
// ported. Object identity is kept as in Python: mv and cp hand the same child objects to the new
// directory (cp copies the dict, not the children), so later writes show through both.
class BfclFile {
  constructor(name, content = "") {
    this.name = name;
    this.content = content;
  }
  get pyTypeName() {
    return "File";
  }
  _write(c) {
    this.content = c;
  }
  _read() {
    return this.content;
  }
  __repr__() {
    return `<<File: ${PyText.str(this.name)}, Content: ${PyText.str(this.content)}>>`;
  }
  __eq__(o) {
    return o instanceof BfclFile && PyText.eq(this.name, o.name) && PyText.eq(this.content, o.content);
  }
  __tagged__() {
    return { file: this.name, content: this.content };
  }
}

class BfclDirectory {
  constructor(name, parent = null) {
    this.name = name;
    this.parent = parent;
    this.contents = new PyText.PyDict();
  }
  get pyTypeName() {
    return "Directory";
  }
  _add_file(file_name, content = "") {
    if (PyText.contains(this.contents, file_name)) throw PyText.ValueError(`File '${PyText.str(file_name)}' already exists in directory '${PyText.str(this.name)}'.`);
    this.contents.set(file_name, new BfclFile(file_name, content));
  }
  _add_directory(dir_name) {
    if (PyText.contains(this.contents, dir_name)) throw PyText.ValueError(`Directory '${PyText.str(dir_name)}' already exists in directory '${PyText.str(this.name)}'.`);
    this.contents.set(dir_name, new BfclDirectory(dir_name, this));
  }
  _get_item(item_name) {
    if (PyText.eq(item_name, ".")) return this;
    return this.contents.get(item_name, null);
  }
  _list_contents() {
    return this.contents.keys();
  }
  __repr__() {
    return `<Directory: ${PyText.str(this.name)}, Parent: ${PyText.str(this.parent ? this.parent.name : null)}, Contents: ${PyText.repr(this.contents)}>`;
  }
  __eq__(o) {
    return o instanceof BfclDirectory && PyText.eq(this.name, o.name) && PyText.eq(this.contents, o.contents);
  }
  __tagged__() {
    return { dir: this.name, c: PyText.tagged(this.contents) };
  }
  __json__() {
    const o = {};
    for (const [k, v] of this.contents.items()) o[PyText.str(k)] = v instanceof BfclDirectory ? { type: "directory", contents: v.__json__() } : { type: "file", content: v.content };
    return o;
  }
}

/** UTF-8 length of a str; a lone surrogate cannot be encoded, as in Python. */
function bfclUtf8Length(s) {
  let n = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (c >= 0xd800 && c <= 0xdfff) throw new PyText.PyError("UnicodeEncodeError", `'utf-8' codec can't encode character '\\u${c.toString(16)}': surrogates not allowed`);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return BigInt(n);
}

class GorillaFileSystem {
  _load_scenario(scenario, long_context = false) {
    this.long_context = long_context;
    this.root = new BfclDirectory("/", null);
    if (PyText.contains(scenario, "root")) {
      const rootMap = scenario.item("root");
      const first = rootMap.keys()[0];
      const rootDir = new BfclDirectory(first, null);
      this.root = this._load_directory(rootMap.item(first).item("contents"), rootDir);
    }
    this._current_dir = this.root;
  }

  _load_directory(current, parent) {
    let bottommost = true;
    for (const [name, data] of current.items()) {
      if (PyText.eq(data.item("type"), "directory")) {
        bottommost = false;
        const d = this._load_directory(data.item("contents"), new BfclDirectory(name, parent));
        parent.contents.set(name, d);
      } else if (PyText.eq(data.item("type"), "file")) {
        let content = data.item("content");
        if (PyText.truthy(this.long_context) && !PyText.contains(BfclLongContext("FILES_TAIL_USED"), name)) content = PyText.add(content, BfclLongContext("FILE_CONTENT_EXTENSION"));
        parent.contents.set(name, new BfclFile(name, content));
      }
    }
    if (bottommost && PyText.truthy(this.long_context)) this._populate_directory(parent);
    return parent;
  }

  _populate_directory(directory) {
    for (const name of BfclLongContext("POPULATE_FILE_EXTENSION")) directory._add_file(PyText.str(name));
  }

  _validate_name(name) {
    for (const c of '|/\\?%*:"><') if (PyText.contains(name, c)) return false;
    return true;
  }

  _err(text) {
    return new PyText.PyDict([["error", text]]);
  }

  pwd() {
    const path = [];
    for (let d = this._current_dir; d !== null; d = d.parent) path.push(d.name); // `dir.name != self.root` compares a str with a Directory: always true
    for (const p of path) if (typeof p !== "string") throw PyText.TypeError(`sequence item 0: expected str instance, ${PyText.typeName(p)} found`);
    return new PyText.PyDict([["current_working_directory", "/" + path.reverse().join("/")]]);
  }

  ls(a) {
    let contents = this._current_dir._list_contents();
    if (!PyText.truthy(a)) contents = contents.filter((item) => !BfclRuntime.strOnly(item, "startswith").startsWith("."));
    return new PyText.PyDict([["current_directory_content", contents]]);
  }

  cd(folder) {
    folder = PyText.rstrip(BfclRuntime.strOnly(folder, "rstrip"), "/");
    if (folder === "") folder = "/";
    if (![".", "..", "/"].includes(folder) && folder.includes("/")) return this._err(`cd: ${folder}: Unsupported path. Only one folder level at a time is supported.`);
    if (folder === "..") {
      if (this._current_dir.parent) this._current_dir = this._current_dir.parent;
      else if (PyText.eq(this.root, this._current_dir)) return this._err("Current directory is already the root. Cannot go back.");
      else return this._err("cd: ..: No such directory");
      return new PyText.PyDict();
    }
    const target = this._navigate_to_directory(folder);
    if (target instanceof PyText.PyDict) return target;
    this._current_dir = target;
    return new PyText.PyDict([["current_working_directory", target.name]]);
  }

  mkdir(dir_name) {
    if (!this._validate_name(dir_name)) return this._err(`mkdir: cannot create directory '${PyText.str(dir_name)}': Invalid character`);
    if (PyText.contains(this._current_dir.contents, dir_name)) return this._err(`mkdir: cannot create directory '${PyText.str(dir_name)}': File exists`);
    this._current_dir._add_directory(dir_name);
    return null;
  }

  touch(file_name) {
    if (!this._validate_name(file_name)) return this._err(`touch: cannot touch '${PyText.str(file_name)}': Invalid character`);
    if (PyText.contains(this._current_dir.contents, file_name)) return this._err(`touch: cannot touch '${PyText.str(file_name)}': File exists`);
    this._current_dir._add_file(file_name);
    return null;
  }

  echo(content, file_name) {
    if (file_name === null) return new PyText.PyDict([["terminal_output", content]]);
    if (!this._validate_name(file_name)) return this._err(`echo: cannot write to '${PyText.str(file_name)}': Invalid character`);
    if (PyText.truthy(file_name)) {
      if (PyText.contains(this._current_dir.contents, file_name)) {
        const item = this._current_dir._get_item(file_name);
        if (!(item instanceof BfclFile)) throw BfclRuntime.noAttr(item, "_write");
        item._write(content);
        return null;
      }
      return this._err(`echo: cannot write to '${PyText.str(file_name)}': No such file`);
    }
    return new PyText.PyDict([["terminal_output", content]]);
  }

  cat(file_name) {
    if (!this._validate_name(file_name)) return this._err(`cat: '${PyText.str(file_name)}': Invalid character`);
    if (PyText.contains(this._current_dir.contents, file_name)) {
      const item = this._current_dir._get_item(file_name);
      if (item instanceof BfclFile) return new PyText.PyDict([["file_content", item._read()]]);
      return this._err(`cat: '${PyText.str(file_name)}': Is a directory`);
    }
    return this._err(`cat: '${PyText.str(file_name)}': No such file or directory`);
  }

  find(path, name) {
    const matches = [];
    const target = this._navigate_to_directory(path);
    if (target instanceof PyText.PyDict) {
      const msg = target.get("error", "");
      if (BfclRuntime.strOnly(msg, "startswith").startsWith("cd:")) return this._err(msg.replace("cd:", "find:"));
      return target;
    }
    const search = (dir, base) => {
      for (const [itemName, item] of dir.contents.items()) {
        const itemPath = `${PyText.str(base)}/${PyText.str(itemName)}`;
        if (name === null || PyText.contains(itemName, name)) matches.push(itemPath);
        if (item instanceof BfclDirectory) search(item, itemPath);
      }
    };
    search(target, PyText.rstrip(BfclRuntime.strOnly(path, "rstrip"), "/"));
    return new PyText.PyDict([["matches", matches]]);
  }

  wc(file_name, mode) {
    if (!PyText.contains(["l", "w", "c"], mode)) return this._err(`wc: invalid mode '${PyText.str(mode)}'`);
    if (PyText.contains(this._current_dir.contents, file_name)) {
      const file = this._current_dir._get_item(file_name);
      if (file instanceof BfclFile) {
        const content = file._read();
        if (mode === "l") return new PyText.PyDict([["count", BigInt(PyText.splitlines(BfclRuntime.strOnly(content, "splitlines")).length)], ["type", "lines"]]);
        if (mode === "w") return new PyText.PyDict([["count", BigInt(PyText.splitWs(BfclRuntime.strOnly(content, "split")).length)], ["type", "words"]]);
        return new PyText.PyDict([["count", PyText.len(content)], ["type", "characters"]]);
      }
    }
    return this._err(`wc: ${PyText.str(file_name)}: No such file or directory`);
  }

  sort(file_name) {
    if (PyText.contains(this._current_dir.contents, file_name)) {
      const file = this._current_dir._get_item(file_name);
      if (file instanceof BfclFile) return new PyText.PyDict([["sorted_content", PyText.sortedStrs(PyText.splitlines(BfclRuntime.strOnly(file._read(), "splitlines"))).join("\n")]]);
    }
    return this._err(`sort: ${PyText.str(file_name)}: No such file or directory`);
  }

  grep(file_name, pattern) {
    if (PyText.contains(this._current_dir.contents, file_name)) {
      const file = this._current_dir._get_item(file_name);
      if (file instanceof BfclFile) return new PyText.PyDict([["matching_lines", PyText.splitlines(BfclRuntime.strOnly(file._read(), "splitlines")).filter((line) => PyText.contains(line, pattern))]]);
    }
    return this._err(`grep: ${PyText.str(file_name)}: No such file or directory`);
  }

  du(human_readable) {
    const size = (item) => {
      if (item instanceof BfclFile) return bfclUtf8Length(BfclRuntime.strOnly(item._read(), "encode"));
      if (item instanceof BfclDirectory) return item.contents.values().reduce((s, c) => s + size(c), 0n);
      return 0n;
    };
    let total = size(this._current_dir);
    let text;
    if (PyText.truthy(human_readable)) {
      for (const unit of ["B", "KB", "MB", "GB", "TB"]) {
        if (PyText.lt(total, 1024n)) {
          text = `${PyText.formatFixed(PyText.toF(total), 2)} ${unit}`;
          break;
        }
        total = PyText.div(total, 1024n);
      }
      if (text === undefined) text = `${PyText.formatFixed(PyText.toF(total), 2)} PB`;
    } else text = `${total} bytes`;
    return new PyText.PyDict([["disk_usage", text]]);
  }

  tail(file_name, lines) {
    if (PyText.contains(this._current_dir.contents, file_name)) {
      const file = this._current_dir._get_item(file_name);
      if (file instanceof BfclFile) {
        const content = PyText.splitlines(BfclRuntime.strOnly(file._read(), "splitlines"));
        if (PyText.gt(lines, PyText.len(content))) lines = PyText.len(content);
        if (typeof lines !== "bigint" && typeof lines !== "boolean") throw PyText.TypeError("bad operand type for unary -: '" + PyText.typeName(lines) + "'");
        const start = -Number(PyText.toI(lines));
        const from = start < 0 ? Math.max(0, content.length + start) : Math.min(start, content.length);
        return new PyText.PyDict([["last_lines", content.slice(from).join("\n")]]);
      }
    }
    return this._err(`tail: ${PyText.str(file_name)}: No such file or directory`);
  }

  diff(file_name1, file_name2) {
    const cur = this._current_dir.contents;
    if (PyText.contains(cur, file_name1) && PyText.contains(cur, file_name2)) {
      const f1 = this._current_dir._get_item(file_name1);
      const f2 = this._current_dir._get_item(file_name2);
      if (f1 instanceof BfclFile && f2 instanceof BfclFile) {
        const a = PyText.splitlines(BfclRuntime.strOnly(f1._read(), "splitlines"));
        const b = PyText.splitlines(BfclRuntime.strOnly(f2._read(), "splitlines"));
        const out = [];
        for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) out.push(`- ${a[i]}\n+ ${b[i]}`);
        return new PyText.PyDict([["diff_lines", out.join("\n")]]);
      }
    }
    return this._err(`diff: ${PyText.str(file_name1)} or ${PyText.str(file_name2)}: No such file or directory`);
  }

  mv(source, destination) {
    const cur = this._current_dir;
    if (!PyText.contains(cur.contents, source)) return this._err(`mv: cannot move '${PyText.str(source)}': No such file or directory`);
    const item = cur._get_item(source);
    if (PyText.contains(destination, "/")) return this._err("mv: path not allowed in destination. Provide only a file or directory name.");
    if (PyText.contains(cur.contents, destination)) {
      const dest = cur._get_item(destination);
      if (dest instanceof BfclDirectory) {
        if (PyText.contains(dest.contents, PyText.str(source))) return this._err(`mv: cannot move '${PyText.str(source)}' to '${PyText.str(destination)}/${PyText.str(source)}': File exists`);
        cur.contents.pop(source);
        if (item instanceof BfclFile) dest._add_file(source, item.content);
        else {
          dest._add_directory(source);
          dest.contents.item(source).contents = item.contents;
        }
        return new PyText.PyDict([["result", `'${PyText.str(source)}' moved to '${PyText.str(destination)}/${PyText.str(source)}'`]]);
      }
      return this._err(`mv: cannot move '${PyText.str(source)}' to '${PyText.str(destination)}': Not a directory`);
    }
    cur.contents.pop(source);
    if (item instanceof BfclFile) cur._add_file(destination, item.content);
    else {
      cur._add_directory(destination);
      cur.contents.item(destination).contents = item.contents;
    }
    return new PyText.PyDict([["result", `'${PyText.str(source)}' moved to '${PyText.str(destination)}'`]]);
  }

  rm(file_name) {
    if (PyText.contains(this._current_dir.contents, file_name)) {
      this._current_dir.contents.pop(file_name);
      return new PyText.PyDict([["result", `'${PyText.str(file_name)}' removed`]]);
    }
    return this._err(`rm: cannot remove '${PyText.str(file_name)}': No such file or directory`);
  }

  rmdir(dir_name) {
    if (PyText.contains(this._current_dir.contents, dir_name)) {
      const item = this._current_dir._get_item(dir_name);
      if (item instanceof BfclDirectory) {
        if (item.contents.size) return this._err(`rmdir: cannot remove '${PyText.str(dir_name)}': Directory not empty`);
        this._current_dir.contents.pop(dir_name);
        return new PyText.PyDict([["result", `'${PyText.str(dir_name)}' removed`]]);
      }
      return this._err(`rmdir: cannot remove '${PyText.str(dir_name)}': Not a directory`);
    }
    return this._err(`rmdir: cannot remove '${PyText.str(dir_name)}': No such file or directory`);
  }

  cp(source, destination) {
    const cur = this._current_dir;
    if (!PyText.contains(cur.contents, source)) return this._err(`cp: cannot copy '${PyText.str(source)}': No such file or directory`);
    const item = cur._get_item(source);
    if (PyText.contains(destination, "/")) return this._err("cp: path not allowed in destination. Provide only a file or directory name.");
    if (PyText.contains(cur.contents, destination)) {
      const dest = cur._get_item(destination);
      if (dest instanceof BfclDirectory) {
        if (PyText.contains(dest.contents, `${PyText.str(destination)}/${PyText.str(source)}`)) return this._err(`cp: cannot copy '${PyText.str(source)}' to '${PyText.str(destination)}/${PyText.str(source)}': File exists`);
        if (item instanceof BfclFile) dest._add_file(source, item.content);
        else {
          dest._add_directory(source);
          dest.contents.item(source).contents = item.contents.copy();
        }
        return new PyText.PyDict([["result", `'${PyText.str(source)}' copied to '${PyText.str(destination)}/${PyText.str(source)}'`]]);
      }
      return this._err(`cp: cannot copy '${PyText.str(source)}' to '${PyText.str(destination)}': Not a directory`);
    }
    if (item instanceof BfclFile) cur._add_file(destination, item.content);
    else {
      cur._add_directory(destination);
      cur.contents.item(destination).contents = item.contents.copy();
    }
    return new PyText.PyDict([["result", `'${PyText.str(source)}' copied to '${PyText.str(destination)}'`]]);
  }

  _navigate_to_directory(path) {
    if (path === null || PyText.eq(path, ".")) return this._current_dir;
    if (PyText.eq(path, "/")) return this.root;
    const dirs = PyText.strip(BfclRuntime.strOnly(path, "strip"), "/").split("/");
    let temp = path.startsWith("/") ? this.root : this._current_dir;
    for (const name of dirs) {
      const next = temp._get_item(name);
      if (next instanceof BfclDirectory) temp = next;
      else return this._err(`cd: '${path}': No such file or directory`);
    }
    return temp;
  }
}
GorillaFileSystem.SIGNATURES = {
  pwd: [],
  ls: [["a", false]],
  cd: [["folder"]],
  mkdir: [["dir_name"]],
  touch: [["file_name"]],
  echo: [["content"], ["file_name", null]],
  cat: [["file_name"]],
  find: [["path", "."], ["name", null]],
  wc: [["file_name"], ["mode", "l"]],
  sort: [["file_name"]],
  grep: [["file_name"], ["pattern"]],
  du: [["human_readable", false]],
  tail: [["file_name"], ["lines", 10n]],
  diff: [["file_name1"], ["file_name2"]],
  mv: [["source"], ["destination"]],
  rm: [["file_name"]],
  rmdir: [["dir_name"]],
  cp: [["source"], ["destination"]],
};
