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
    return `<<File: ${Py.str(this.name)}, Content: ${Py.str(this.content)}>>`;
  }
  __eq__(o) {
    return o instanceof BfclFile && Py.eq(this.name, o.name) && Py.eq(this.content, o.content);
  }
  __tagged__() {
    return { file: this.name, content: this.content };
  }
}

class BfclDirectory {
  constructor(name, parent = null) {
    this.name = name;
    this.parent = parent;
    this.contents = new Py.PyDict();
  }
  get pyTypeName() {
    return "Directory";
  }
  _add_file(file_name, content = "") {
    if (Py.contains(this.contents, file_name)) throw Py.ValueError(`File '${Py.str(file_name)}' already exists in directory '${Py.str(this.name)}'.`);
    this.contents.set(file_name, new BfclFile(file_name, content));
  }
  _add_directory(dir_name) {
    if (Py.contains(this.contents, dir_name)) throw Py.ValueError(`Directory '${Py.str(dir_name)}' already exists in directory '${Py.str(this.name)}'.`);
    this.contents.set(dir_name, new BfclDirectory(dir_name, this));
  }
  _get_item(item_name) {
    if (Py.eq(item_name, ".")) return this;
    return this.contents.get(item_name, null);
  }
  _list_contents() {
    return this.contents.keys();
  }
  __repr__() {
    return `<Directory: ${Py.str(this.name)}, Parent: ${Py.str(this.parent ? this.parent.name : null)}, Contents: ${Py.repr(this.contents)}>`;
  }
  __eq__(o) {
    return o instanceof BfclDirectory && Py.eq(this.name, o.name) && Py.eq(this.contents, o.contents);
  }
  __tagged__() {
    return { dir: this.name, c: Py.tagged(this.contents) };
  }
  __json__() {
    const o = {};
    for (const [k, v] of this.contents.items()) o[Py.str(k)] = v instanceof BfclDirectory ? { type: "directory", contents: v.__json__() } : { type: "file", content: v.content };
    return o;
  }
}

/** UTF-8 length of a str; a lone surrogate cannot be encoded, as in Python. */
function bfclUtf8Length(s) {
  let n = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (c >= 0xd800 && c <= 0xdfff) throw new Py.PyError("UnicodeEncodeError", `'utf-8' codec can't encode character '\\u${c.toString(16)}': surrogates not allowed`);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return BigInt(n);
}

class GorillaFileSystem {
  _load_scenario(scenario, long_context = false) {
    this.long_context = long_context;
    this.root = new BfclDirectory("/", null);
    if (Py.contains(scenario, "root")) {
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
      if (Py.eq(data.item("type"), "directory")) {
        bottommost = false;
        const d = this._load_directory(data.item("contents"), new BfclDirectory(name, parent));
        parent.contents.set(name, d);
      } else if (Py.eq(data.item("type"), "file")) {
        let content = data.item("content");
        if (Py.truthy(this.long_context) && !Py.contains(BfclLongContext("FILES_TAIL_USED"), name)) content = Py.add(content, BfclLongContext("FILE_CONTENT_EXTENSION"));
        parent.contents.set(name, new BfclFile(name, content));
      }
    }
    if (bottommost && Py.truthy(this.long_context)) this._populate_directory(parent);
    return parent;
  }

  _populate_directory(directory) {
    for (const name of BfclLongContext("POPULATE_FILE_EXTENSION")) directory._add_file(Py.str(name));
  }

  _validate_name(name) {
    for (const c of '|/\\?%*:"><') if (Py.contains(name, c)) return false;
    return true;
  }

  _err(text) {
    return new Py.PyDict([["error", text]]);
  }

  pwd() {
    const path = [];
    for (let d = this._current_dir; d !== null; d = d.parent) path.push(d.name); // `dir.name != self.root` compares a str with a Directory: always true
    for (const p of path) if (typeof p !== "string") throw Py.TypeError(`sequence item 0: expected str instance, ${Py.typeName(p)} found`);
    return new Py.PyDict([["current_working_directory", "/" + path.reverse().join("/")]]);
  }

  ls(a) {
    let contents = this._current_dir._list_contents();
    if (!Py.truthy(a)) contents = contents.filter((item) => !BfclRuntime.strOnly(item, "startswith").startsWith("."));
    return new Py.PyDict([["current_directory_content", contents]]);
  }

  cd(folder) {
    folder = Py.rstrip(BfclRuntime.strOnly(folder, "rstrip"), "/");
    if (folder === "") folder = "/";
    if (![".", "..", "/"].includes(folder) && folder.includes("/")) return this._err(`cd: ${folder}: Unsupported path. Only one folder level at a time is supported.`);
    if (folder === "..") {
      if (this._current_dir.parent) this._current_dir = this._current_dir.parent;
      else if (Py.eq(this.root, this._current_dir)) return this._err("Current directory is already the root. Cannot go back.");
      else return this._err("cd: ..: No such directory");
      return new Py.PyDict();
    }
    const target = this._navigate_to_directory(folder);
    if (target instanceof Py.PyDict) return target;
    this._current_dir = target;
    return new Py.PyDict([["current_working_directory", target.name]]);
  }

  mkdir(dir_name) {
    if (!this._validate_name(dir_name)) return this._err(`mkdir: cannot create directory '${Py.str(dir_name)}': Invalid character`);
    if (Py.contains(this._current_dir.contents, dir_name)) return this._err(`mkdir: cannot create directory '${Py.str(dir_name)}': File exists`);
    this._current_dir._add_directory(dir_name);
    return null;
  }

  touch(file_name) {
    if (!this._validate_name(file_name)) return this._err(`touch: cannot touch '${Py.str(file_name)}': Invalid character`);
    if (Py.contains(this._current_dir.contents, file_name)) return this._err(`touch: cannot touch '${Py.str(file_name)}': File exists`);
    this._current_dir._add_file(file_name);
    return null;
  }

  echo(content, file_name) {
    if (file_name === null) return new Py.PyDict([["terminal_output", content]]);
    if (!this._validate_name(file_name)) return this._err(`echo: cannot write to '${Py.str(file_name)}': Invalid character`);
    if (Py.truthy(file_name)) {
      if (Py.contains(this._current_dir.contents, file_name)) {
        const item = this._current_dir._get_item(file_name);
        if (!(item instanceof BfclFile)) throw BfclRuntime.noAttr(item, "_write");
        item._write(content);
        return null;
      }
      return this._err(`echo: cannot write to '${Py.str(file_name)}': No such file`);
    }
    return new Py.PyDict([["terminal_output", content]]);
  }

  cat(file_name) {
    if (!this._validate_name(file_name)) return this._err(`cat: '${Py.str(file_name)}': Invalid character`);
    if (Py.contains(this._current_dir.contents, file_name)) {
      const item = this._current_dir._get_item(file_name);
      if (item instanceof BfclFile) return new Py.PyDict([["file_content", item._read()]]);
      return this._err(`cat: '${Py.str(file_name)}': Is a directory`);
    }
    return this._err(`cat: '${Py.str(file_name)}': No such file or directory`);
  }

  find(path, name) {
    const matches = [];
    const target = this._navigate_to_directory(path);
    if (target instanceof Py.PyDict) {
      const msg = target.get("error", "");
      if (BfclRuntime.strOnly(msg, "startswith").startsWith("cd:")) return this._err(msg.replace("cd:", "find:"));
      return target;
    }
    const search = (dir, base) => {
      for (const [itemName, item] of dir.contents.items()) {
        const itemPath = `${Py.str(base)}/${Py.str(itemName)}`;
        if (name === null || Py.contains(itemName, name)) matches.push(itemPath);
        if (item instanceof BfclDirectory) search(item, itemPath);
      }
    };
    search(target, Py.rstrip(BfclRuntime.strOnly(path, "rstrip"), "/"));
    return new Py.PyDict([["matches", matches]]);
  }

  wc(file_name, mode) {
    if (!Py.contains(["l", "w", "c"], mode)) return this._err(`wc: invalid mode '${Py.str(mode)}'`);
    if (Py.contains(this._current_dir.contents, file_name)) {
      const file = this._current_dir._get_item(file_name);
      if (file instanceof BfclFile) {
        const content = file._read();
        if (mode === "l") return new Py.PyDict([["count", BigInt(Py.splitlines(BfclRuntime.strOnly(content, "splitlines")).length)], ["type", "lines"]]);
        if (mode === "w") return new Py.PyDict([["count", BigInt(Py.splitWs(BfclRuntime.strOnly(content, "split")).length)], ["type", "words"]]);
        return new Py.PyDict([["count", Py.len(content)], ["type", "characters"]]);
      }
    }
    return this._err(`wc: ${Py.str(file_name)}: No such file or directory`);
  }

  sort(file_name) {
    if (Py.contains(this._current_dir.contents, file_name)) {
      const file = this._current_dir._get_item(file_name);
      if (file instanceof BfclFile) return new Py.PyDict([["sorted_content", Py.sortedStrs(Py.splitlines(BfclRuntime.strOnly(file._read(), "splitlines"))).join("\n")]]);
    }
    return this._err(`sort: ${Py.str(file_name)}: No such file or directory`);
  }

  grep(file_name, pattern) {
    if (Py.contains(this._current_dir.contents, file_name)) {
      const file = this._current_dir._get_item(file_name);
      if (file instanceof BfclFile) return new Py.PyDict([["matching_lines", Py.splitlines(BfclRuntime.strOnly(file._read(), "splitlines")).filter((line) => Py.contains(line, pattern))]]);
    }
    return this._err(`grep: ${Py.str(file_name)}: No such file or directory`);
  }

  du(human_readable) {
    const size = (item) => {
      if (item instanceof BfclFile) return bfclUtf8Length(BfclRuntime.strOnly(item._read(), "encode"));
      if (item instanceof BfclDirectory) return item.contents.values().reduce((s, c) => s + size(c), 0n);
      return 0n;
    };
    let total = size(this._current_dir);
    let text;
    if (Py.truthy(human_readable)) {
      for (const unit of ["B", "KB", "MB", "GB", "TB"]) {
        if (Py.lt(total, 1024n)) {
          text = `${Py.formatFixed(Py.toF(total), 2)} ${unit}`;
          break;
        }
        total = Py.div(total, 1024n);
      }
      if (text === undefined) text = `${Py.formatFixed(Py.toF(total), 2)} PB`;
    } else text = `${total} bytes`;
    return new Py.PyDict([["disk_usage", text]]);
  }

  tail(file_name, lines) {
    if (Py.contains(this._current_dir.contents, file_name)) {
      const file = this._current_dir._get_item(file_name);
      if (file instanceof BfclFile) {
        const content = Py.splitlines(BfclRuntime.strOnly(file._read(), "splitlines"));
        if (Py.gt(lines, Py.len(content))) lines = Py.len(content);
        if (typeof lines !== "bigint" && typeof lines !== "boolean") throw Py.TypeError("bad operand type for unary -: '" + Py.typeName(lines) + "'");
        const start = -Number(Py.toI(lines));
        const from = start < 0 ? Math.max(0, content.length + start) : Math.min(start, content.length);
        return new Py.PyDict([["last_lines", content.slice(from).join("\n")]]);
      }
    }
    return this._err(`tail: ${Py.str(file_name)}: No such file or directory`);
  }

  diff(file_name1, file_name2) {
    const cur = this._current_dir.contents;
    if (Py.contains(cur, file_name1) && Py.contains(cur, file_name2)) {
      const f1 = this._current_dir._get_item(file_name1);
      const f2 = this._current_dir._get_item(file_name2);
      if (f1 instanceof BfclFile && f2 instanceof BfclFile) {
        const a = Py.splitlines(BfclRuntime.strOnly(f1._read(), "splitlines"));
        const b = Py.splitlines(BfclRuntime.strOnly(f2._read(), "splitlines"));
        const out = [];
        for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) out.push(`- ${a[i]}\n+ ${b[i]}`);
        return new Py.PyDict([["diff_lines", out.join("\n")]]);
      }
    }
    return this._err(`diff: ${Py.str(file_name1)} or ${Py.str(file_name2)}: No such file or directory`);
  }

  mv(source, destination) {
    const cur = this._current_dir;
    if (!Py.contains(cur.contents, source)) return this._err(`mv: cannot move '${Py.str(source)}': No such file or directory`);
    const item = cur._get_item(source);
    if (Py.contains(destination, "/")) return this._err("mv: path not allowed in destination. Provide only a file or directory name.");
    if (Py.contains(cur.contents, destination)) {
      const dest = cur._get_item(destination);
      if (dest instanceof BfclDirectory) {
        if (Py.contains(dest.contents, Py.str(source))) return this._err(`mv: cannot move '${Py.str(source)}' to '${Py.str(destination)}/${Py.str(source)}': File exists`);
        cur.contents.pop(source);
        if (item instanceof BfclFile) dest._add_file(source, item.content);
        else {
          dest._add_directory(source);
          dest.contents.item(source).contents = item.contents;
        }
        return new Py.PyDict([["result", `'${Py.str(source)}' moved to '${Py.str(destination)}/${Py.str(source)}'`]]);
      }
      return this._err(`mv: cannot move '${Py.str(source)}' to '${Py.str(destination)}': Not a directory`);
    }
    cur.contents.pop(source);
    if (item instanceof BfclFile) cur._add_file(destination, item.content);
    else {
      cur._add_directory(destination);
      cur.contents.item(destination).contents = item.contents;
    }
    return new Py.PyDict([["result", `'${Py.str(source)}' moved to '${Py.str(destination)}'`]]);
  }

  rm(file_name) {
    if (Py.contains(this._current_dir.contents, file_name)) {
      this._current_dir.contents.pop(file_name);
      return new Py.PyDict([["result", `'${Py.str(file_name)}' removed`]]);
    }
    return this._err(`rm: cannot remove '${Py.str(file_name)}': No such file or directory`);
  }

  rmdir(dir_name) {
    if (Py.contains(this._current_dir.contents, dir_name)) {
      const item = this._current_dir._get_item(dir_name);
      if (item instanceof BfclDirectory) {
        if (item.contents.size) return this._err(`rmdir: cannot remove '${Py.str(dir_name)}': Directory not empty`);
        this._current_dir.contents.pop(dir_name);
        return new Py.PyDict([["result", `'${Py.str(dir_name)}' removed`]]);
      }
      return this._err(`rmdir: cannot remove '${Py.str(dir_name)}': Not a directory`);
    }
    return this._err(`rmdir: cannot remove '${Py.str(dir_name)}': No such file or directory`);
  }

  cp(source, destination) {
    const cur = this._current_dir;
    if (!Py.contains(cur.contents, source)) return this._err(`cp: cannot copy '${Py.str(source)}': No such file or directory`);
    const item = cur._get_item(source);
    if (Py.contains(destination, "/")) return this._err("cp: path not allowed in destination. Provide only a file or directory name.");
    if (Py.contains(cur.contents, destination)) {
      const dest = cur._get_item(destination);
      if (dest instanceof BfclDirectory) {
        if (Py.contains(dest.contents, `${Py.str(destination)}/${Py.str(source)}`)) return this._err(`cp: cannot copy '${Py.str(source)}' to '${Py.str(destination)}/${Py.str(source)}': File exists`);
        if (item instanceof BfclFile) dest._add_file(source, item.content);
        else {
          dest._add_directory(source);
          dest.contents.item(source).contents = item.contents.copy();
        }
        return new Py.PyDict([["result", `'${Py.str(source)}' copied to '${Py.str(destination)}/${Py.str(source)}'`]]);
      }
      return this._err(`cp: cannot copy '${Py.str(source)}' to '${Py.str(destination)}': Not a directory`);
    }
    if (item instanceof BfclFile) cur._add_file(destination, item.content);
    else {
      cur._add_directory(destination);
      cur.contents.item(destination).contents = item.contents.copy();
    }
    return new Py.PyDict([["result", `'${Py.str(source)}' copied to '${Py.str(destination)}'`]]);
  }

  _navigate_to_directory(path) {
    if (path === null || Py.eq(path, ".")) return this._current_dir;
    if (Py.eq(path, "/")) return this.root;
    const dirs = Py.strip(BfclRuntime.strOnly(path, "strip"), "/").split("/");
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
