#!/usr/bin/env python3
"""proxy/ in layers: no circle of includes, no lower layer naming a higher one.

Reads every `#include "proxy/..."` of proxy/ (its .c and .h files, cli/
included) and checks, module by module (a module is foo.c with foo.h):

  * each include goes down or stays in its layer (LAYERS below);
  * the module graph has no cycle.

Edges that break a rule today and are not fixed yet are listed in KNOWN,
each with what is left to do.  An edge not in KNOWN that breaks a rule
fails; so does an edge in KNOWN that is gone (take it off the list: the
list only shrinks).  Usage: layers_check.py [SOURCE_ROOT]
"""
import os
import re
import sys

# Lowest first.  A module may include its own layer or a lower one.
LAYERS = [
    ("base", {"addr", "log", "udp", "delay", "conf", "ctx", "counters", "notify", "ban", "hist"}),
    ("session", {"session", "master"}),
    ("route", {"route", "door", "spectate"}),
    ("stats", {"stats", "metrics", "demos"}),
    ("http", {"http", "web_assets", "admin"}),
    ("app", {"app", "preflight"}),
    ("cli", {"cli/main", "cli/commands", "cli/cmd_demo", "cli/cmd_doctor", "cli/cmd_pcap",
             "cli/cmd_play", "cli/cmd_sign"}),
]

# (from module, to module): what is left before the edge can go.
KNOWN = {
    ("session", "route"): "session.c still reaches into its route (table, outbox, delay line, "
                          "counters, warnings; sg_route_clients_before for the arrival order "
                          "of a decoding session's two sockets, sg_route__make_room for the "
                          "EMFILE eviction): admission and the table to split out of route.c",
}

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
    seen_known = set()
    kept = {}
    for m, tos in edges.items():
        for t, where in tos.items():
            lm, lt = layer_of(m), layer_of(t)
            up = lm is not None and lt is not None and lt > lm
            if (m, t) in KNOWN:
                seen_known.add((m, t))
                print(f"known, left to do: {m} -> {t} ({', '.join(where)}): {KNOWN[(m, t)]}")
                continue
            if up:
                bad.append(f"{', '.join(where)}: {m} ({LAYERS[lm][0]}) includes {t} "
                           f"({LAYERS[lt][0]}), a higher layer")
            kept.setdefault(m, {})[t] = where
    for k in sorted(set(KNOWN) - seen_known):
        bad.append(f"{k[0]} -> {k[1]} is gone: take it off KNOWN in tests/layers_check.py")
    for c in cycles(kept):
        bad.append("include cycle: " + " -> ".join(c))
    for b in bad:
        print("FAIL:", b)
    print(f"{len(mods)} modules, {sum(len(t) for t in edges.values())} include edges, "
          f"{len(KNOWN)} known left, {len(bad)} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
