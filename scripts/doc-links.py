#!/usr/bin/env python3
"""Moves each [`item` ...](path#Lnn) link of a Markdown file to the line of
the code that names `item` (its definition if it has one, else the nearest
mention): what tests/architecture.rs (line_links_in_the_docs_land_where_they_say)
asks for after code moved.    python3 scripts/doc-links.py docs/integrating.md"""
import os
import re
import sys

doc = sys.argv[1]
base = os.path.dirname(doc)
s = open(doc).read()
def fix(m):
    label, path, line = m.group(1), m.group(2), int(m.group(3))
    item = label.split('`')[1]
    src = open(os.path.join(base, path)).read().split('\n')
    if item in src[line-1]: return m.group(0)
    defs = [i+1 for i,l in enumerate(src) if re.search(r'\b(fn|struct|enum|impl|const)\s+' + re.escape(item) + r'\b', l)]
    cands = defs or [i+1 for i,l in enumerate(src) if item in l]
    new = min(cands, key=lambda n: abs(n-line))
    print(f"{path}: `{item}` {line} -> {new}")
    return f"[{label}]({path}#L{new})"
s = re.sub(r'\[([^\]]*`[^\]]*)\]\(([^)#]+)#L(\d+)\)', fix, s)
open(doc, 'w').write(s)
