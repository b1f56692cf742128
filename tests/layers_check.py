#!/usr/bin/env python3
"""proxy/ in layers: no circle of includes, no lower layer naming a higher one.

Reads every `#include "proxy/..."` of proxy/ (its .c and .h files, cli/
included) and checks, module by module (a module is foo.c with foo.h):

  * each include goes down or stays in its layer (LAYERS below);
  * the module graph has no cycle.

With the static library proxy/ builds (LIB), the same two rules hold
for calls: which module's object uses a symbol another module's object
defines (nm).  A call through a hook (a function pointer the owner
registers) is not an edge: that is how a lower layer reports up.

Edges that break a rule today and are not fixed yet are listed in KNOWN,
each with what is left to do.  An edge not in KNOWN that breaks a rule
fails; so does an edge in KNOWN that is gone (take it off the list: the
list only shrinks).  Usage: layers_check.py [SOURCE_ROOT [LIB]]
"""
import os
import re
import subprocess
import sys

# Lowest first.  A module may include its own layer or a lower one.
LAYERS = [
    ("base", {"addr", "log", "udp", "delay", "conf", "ctx", "counters", "notify", "ban", "hist"}),
    ("session", {"session", "master", "table"}),
    ("route", {"route", "door", "admit", "spectate"}),
    ("stats", {"stats", "metrics", "demos"}),
    ("http", {"http", "web_assets", "admin"}),
    ("app", {"app", "preflight"}),
    ("cli", {"cli/main", "cli/commands", "cli/cmd_demo", "cli/cmd_doctor", "cli/cmd_pcap",
             "cli/cmd_play", "cli/cmd_sign"}),
]

# (from module, to module): what is left before the edge can go.
KNOWN = {}

INCLUDE = re.compile(r'^\s*#\s*include\s+"proxy/([A-Za-z0-9_/]+)\.h"', re.M)


def layer_of(mod):
    for i, (_, mods) in enumerate(LAYERS):
        if mod in mods:
            return i
    return None


def graph(root):
    proxy = os.path.join(root, "proxy")
    edges = {}
    for dirpath, _, files in os.walk(proxy):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, f)
            mod = os.path.relpath(path, proxy)[:-2]
            with open(path, encoding="utf-8") as fh:
                for to in INCLUDE.findall(fh.read()):
                    if to != mod:
                        edges.setdefault(mod, {}).setdefault(to, []).append(os.path.relpath(path, root))
    return edges


NM_LINE = re.compile(r"\.a\.p/(.+?)\.c\.o:\s*(?:[0-9a-f]+)?\s+([A-Za-z])\s+(\S+)$")


def call_graph(lib):
    """Module -> module -> [symbols], from the objects of the static library."""
    out = subprocess.run(["nm", "-A", lib], capture_output=True, text=True, check=True).stdout
    defs, uses = {}, {}
    for line in out.splitlines():
        m = NM_LINE.search(line)
        if not m:
            continue
        mod, kind, sym = m.groups()
        mod = mod.rsplit("_.._", 1)[-1]  # a generated source (web_assets.c)
        if kind == "U":
            uses.setdefault(mod, set()).add(sym)
        elif kind.isupper():
            defs[sym] = mod
    if not defs:
        raise SystemExit(f"FAIL: no proxy/ objects found in {lib}")
    edges = {}
    for mod, syms in uses.items():
        for sym in sorted(syms):
            to = defs.get(sym)
            if to and to != mod:
                edges.setdefault(mod, {}).setdefault(to, []).append(sym)
    return edges


def check(edges, what, bad, known):
    seen_known = set()
    kept = {}
    for m, tos in edges.items():
        for t, where in tos.items():
            lm, lt = layer_of(m), layer_of(t)
            up = lm is not None and lt is not None and lt > lm
            if (m, t) in known:
                seen_known.add((m, t))
                print(f"known, left to do: {m} -> {t} ({', '.join(where)}): {known[(m, t)]}")
                continue
            if up:
                bad.append(f"{', '.join(where[:4])}: {m} ({LAYERS[lm][0]}) {what} {t} "
                           f"({LAYERS[lt][0]}), a higher layer")
            kept.setdefault(m, {})[t] = where
    for c in cycles(kept):
        bad.append(f"{what} cycle: " + " -> ".join(c))
    return seen_known


def cycles(edges):
    """Every elementary cycle's first appearance in a DFS (enough to report)."""
    found, state, stack = [], {}, []

    def dfs(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(edges.get(m, {})):
            if state.get(n) == 1:
                found.append(stack[stack.index(n):] + [n])
            elif n not in state:
                dfs(n)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            dfs(m)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    edges = graph(root)
    bad = []
    mods = set(edges) | {t for e in edges.values() for t in e}
    for m in sorted(mods):
        if layer_of(m) is None:
            bad.append(f"proxy/{m}: in no layer (add it to LAYERS in tests/layers_check.py)")
    seen_known = check(edges, "includes", bad, KNOWN)
    for k in sorted(set(KNOWN) - seen_known):
        bad.append(f"{k[0]} -> {k[1]} is gone: take it off KNOWN in tests/layers_check.py")
    ncalls = 0
    if len(sys.argv) > 2:
        calls = call_graph(sys.argv[2])
        ncalls = sum(len(t) for t in calls.values())
        for m in sorted(set(calls) | {t for e in calls.values() for t in e}):
            if layer_of(m) is None:
                bad.append(f"proxy/{m}.c: in no layer (add it to LAYERS in tests/layers_check.py)")
        check(calls, "calls", bad, {})
    for b in bad:
        print("FAIL:", b)
    print(f"{len(mods)} modules, {sum(len(t) for t in edges.values())} include edges, "
          f"{ncalls} call edges, {len(KNOWN)} known left, {len(bad)} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
