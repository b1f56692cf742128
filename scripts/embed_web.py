#!/usr/bin/env python3
"""Compile the web page's files into C: embed_web.py OUT.c FILE...

Each FILE (doc/web/NAME) is served at /NAME, index.html at /."""
import os
import sys

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


def main():
    out, files = sys.argv[1], sys.argv[2:]
    lines = ['#include "proxy/web_assets.h"', ""]
    table = []
    for i, path in enumerate(files):
        name = os.path.basename(path)
        data = open(path, "rb").read()
        ext = os.path.splitext(name)[1]
        url = "/" if name == "index.html" else "/" + name
        lines.append("static const unsigned char asset%d[] = {" % i)
        for at in range(0, len(data), 16):
            lines.append("    " + ", ".join("0x%02x" % b for b in data[at:at + 16]) + ",")
        lines.append("    0x00};")
        table.append('    {"%s", "%s", asset%d, %d},' % (url, TYPES[ext], i, len(data)))
    lines.append("")
    lines.append("const struct sg_web_asset sg_web_assets[] = {")
    lines += table
    lines.append("};")
    lines.append("const size_t sg_web_assets_count = %d;" % len(files))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


main()
