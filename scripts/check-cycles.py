#!/usr/bin/env python3
"""Fails when the library's modules import each other in a cycle.

Each file under src/ is a module (src/a/mod.rs and src/a.rs are `a`). A file depends on
another when it names an item defined there: through `use`, or a `crate::`, `super::`,
`self::` or child-module path in its code (test modules left out). Re-exports (`pub use`)
are followed to the file that defines the item. A module contains its children, so a
dependency between a module and its own descendants is no edge; every other dependency is
an edge between the two sibling modules under their nearest common ancestor (`a::b::x`
using `a::c::y` is `a::b` → `a::c`). Prints every cycle among siblings found (strongly
connected components) with the file dependencies behind each edge, and exits 1; or prints
nothing and exits 0.

    scripts/check-cycles.py [SRC_DIR]    (default: src)
"""

import os
import re
import sys

ITEM = re.compile(
    r"^(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?"
    r"(struct|enum|trait|fn|type|const|static|mod|union)\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)
MACRO = re.compile(r"^macro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)", re.M)
USE = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M)
PATH = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
CHILD_PATH = re.compile(r"(?<![:A-Za-z0-9_])([a-z_][a-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
MOD_DECL = re.compile(r"^\s*(?:#\[path\s*=\s*\"([^\"]+)\"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;", re.M)


def strip(text):
    """Source without comments, strings and test modules (tests may use anything)."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    out, depth, skipping = [], 0, None
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if skipping is None and re.match(r"\s*#\[cfg\(test\)\]", line):
            # Skip the next item (a test module or function) entirely.
            j = i + 1
            depth = 0
            started = False
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                if "{" in lines[j]:
                    started = True
                if (started and depth <= 0) or (not started and lines[j].rstrip().endswith(";")):
                    break
                j += 1
            i = j + 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def expand(tree):
    """`a::{b, c::{d, e}}` → [a::b, a::c::d, a::c::e] (aliases and globs kept as names)."""
    tree = re.sub(r"\s+", " ", tree).strip()
    if "{" not in tree:
        return [tree.split(" as ")[0].replace(" ", "")]
    head, rest = tree.split("{", 1)
    head = head.replace(" ", "")
    body = rest[: rest.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    if cur:
        parts.append(cur)
    out = []
    for part in parts:
        for sub in expand(part):
            out.append(head + sub if sub != "self" else head.rstrip(":"))
    return out


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "src"
    files = {}  # module path (tuple) -> file
    texts = {}
    for root, _, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib"):
                rel = rel[:-1]
            files[tuple(rel)] = path
            texts[tuple(rel)] = strip(open(path, encoding="utf-8").read())
    # Modules declared with #[path] are named by their declaration.
    for module, text in list(texts.items()):
        for target, name in MOD_DECL.findall(text):
            if target:
                base = os.path.dirname(files[module])
                path = os.path.normpath(os.path.join(base, target))
                for key, value in list(files.items()):
                    if os.path.normpath(value) == path and key != module + (name,):
                        files[module + (name,)] = value
                        texts[module + (name,)] = texts.pop(key)
                        del files[key]
    items = {m: set(n for _, n in ITEM.findall(t)) | set(MACRO.findall(t)) for m, t in texts.items()}
    reexports = {}  # (module, name) -> absolute path tuple
    uses = {}  # module -> list of absolute path tuples

    def absolute(module, path):
        segs = path.split("::")
        if segs[0] == "crate":
            return tuple(segs[1:])
        base = list(module)
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
        if path.startswith(("super", "self")):
            return tuple(base + segs)
        # A relative path names a child module of this one, else an extern crate.
        if tuple(base + segs[:1]) in files:
            return tuple(base + segs)
        return None

    for module, text in texts.items():
        found = []
        for vis, tree in USE.findall(text):
            for path in expand(tree):
                name = path.split("::")[-1]
                full = absolute(module, path) if name != "*" else None
                if full is None:
                    continue
                found.append(full)
                if vis:
                    reexports[(module, full[-1])] = full
        for path in PATH.findall(text):
            full = absolute(module, path)
            if full is not None:
                found.append(full)
        for path in CHILD_PATH.findall(text):
            if module + (path.split("::")[0],) in files:
                found.append(module + tuple(path.split("::")))
        uses[module] = found

    def resolve(full, seen=()):
        """The module whose file defines the item `full` names (following re-exports)."""
        for cut in range(len(full), 0, -1):
            module = full[:cut]
            if module in files:
                if cut == len(full):
                    return module  # the module itself
                name = full[cut]
                if (module, name) in reexports and (module, name) not in seen:
                    return resolve(reexports[(module, name)], seen + ((module, name),))
                if name in items.get(module, ()):
                    return module
                if module + (name,) in files:
                    return module + (name,)
                return module
        return None

    graph = {}  # sibling module -> sibling modules it depends on
    why = {}  # (sibling, sibling) -> file dependencies behind the edge
    for module, found in uses.items():
        for full in found:
            target = resolve(full)
            if target is None or target == module or target not in files:
                continue
            common = 0
            while common < min(len(module), len(target)) and module[common] == target[common]:
                common += 1
            if common == len(module) or common == len(target):
                continue  # one contains the other
            a, b = module[: common + 1], target[: common + 1]
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())
            why.setdefault((a, b), set()).add((files[module], files[target]))

    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(scc)

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    if not sccs:
        return 0
    for scc in sccs:
        print("import cycle among: " + ", ".join("::".join(m) for m in sorted(scc)))
        for a in sorted(scc):
            for b in sorted(t for t in graph[a] if t in scc):
                for user, used in sorted(why[(a, b)]):
                    print(f"  {user} uses {used}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
