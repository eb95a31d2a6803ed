#!/usr/bin/env bash
# Checks that every ```cpp block of docs/guide.md is a verbatim copy of lines in one of the
# compiled sources that hold the guide's snippets (examples/guide_snippets.cpp,
# examples/guide_store.h, tests/docs/guide_store_contract_test.cpp). Indentation and blank
# lines are ignored; everything else must match line for line, in order.
# Usage: check_guide_snippets.sh SOURCE_DIR [DOC SOURCE...]
#   With DOC (relative to SOURCE_DIR) and its compiled SOURCEs, checks that document instead.
set -euo pipefail
src=${1:?usage: check_guide_snippets.sh SOURCE_DIR [DOC SOURCE...]}
shift
exec python3 - "$src" "$@" <<'PY'
import re, sys, pathlib
src = pathlib.Path(sys.argv[1])
guide = src / "docs/guide.md"
sources = [src / p for p in ("examples/guide_snippets.cpp", "examples/guide_store.h",
                             "tests/docs/guide_store_contract_test.cpp")]
if len(sys.argv) > 2:
    guide = src / sys.argv[2]
    sources = [src / p for p in sys.argv[3:]]
docname = str(guide.relative_to(src))

def norm(lines):
    return [l.strip() for l in lines if l.strip()]

haystacks = {str(p.relative_to(src)): norm(p.read_text().splitlines()) for p in sources}
blocks, cur, start = [], None, 0
for n, line in enumerate(guide.read_text().splitlines(), 1):
    if cur is None and re.match(r"^```(cpp|c\+\+)\s*$", line):
        cur, start = [], n
    elif cur is not None and line.startswith("```"):
        blocks.append((start, cur))
        cur = None
    elif cur is not None:
        cur.append(line)
if not blocks:
    sys.exit(f"{docname} has no ```cpp blocks")

def found(block, hay):
    k = len(block)
    return any(hay[i:i + k] == block for i in range(len(hay) - k + 1))

bad = 0
for start, lines in blocks:
    block = norm(lines)
    where = [name for name, hay in haystacks.items() if found(block, hay)]
    if where:
        print(f"{docname}:{start}: {len(block)} lines, compiled in {where[0]}")
    else:
        bad += 1
        print(f"{docname}:{start}: NOT a copy of compiled code:\n  " + "\n  ".join(lines))
print(f"{len(blocks)} cpp blocks, {bad} not found in compiled sources")
sys.exit(1 if bad else 0)
PY
