#!/usr/bin/env bash
# Runs the `litetx` command lines that README.md and docs/*.md show in ```sh blocks, and fails
# if any of them is refused as a bad command line: exit code 2 (usage), or a message about an
# unknown command or option.
#
# Usage: check_doc_commands.sh LITETX_BINARY SOURCE_DIR [MARKDOWN_FILE...]
#   (default files: SOURCE_DIR/README.md and SOURCE_DIR/docs/*.md)
#
# How the lines are run:
#   * A block that starts with "#!" is a whole script: it runs as written (with sh).
#   * In any other block, each line whose command is `litetx` or `build/tools/litetx` (after
#     optional VAR=value assignments; a trailing "\" joins the next line) runs on its own, in
#     document order, with stdin from /dev/null unless the line pipes into it. Here-documents
#     (`cat > FILE <<'EOF'`) in the block run too, so a file a later line reads exists. Other
#     lines (build scripts, comments, output) are not run.
#   * Everything runs in a scratch directory: the default store `lmdb:./litetx-data` there is
#     seeded with two accounts first, and every "/tmp/" in a line is moved under the scratch
#     directory.
#   * `litetx` is a wrapper on PATH that runs LITETX_BINARY and records each call. A call naming
#     a redis:// or redis-cluster:// store is skipped with a message (no server is started).
#     Each call is stopped with SIGTERM after LITETX_DOC_TIMEOUT seconds (default 2): a
#     command line is parsed at once, so a long run (demo, bench, gc without --once) has shown
#     whether its line is accepted by then. Exit codes other than 2 are not failures: the
#     documents show conflicts, crashes (86) and missing documents on purpose.
set -euo pipefail
bin=${1:?usage: check_doc_commands.sh LITETX_BINARY SOURCE_DIR [MARKDOWN_FILE...]}
src=${2:?usage: check_doc_commands.sh LITETX_BINARY SOURCE_DIR [MARKDOWN_FILE...]}
shift 2
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -x "$bin" ] || { echo "check_doc_commands: $bin is not executable" >&2; exit 1; }
if [ $# -eq 0 ]; then set -- "$src/README.md" "$src"/docs/*.md; fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/litetx-doc-commands.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/bin" "$scratch/tmp" "$scratch/work"
: > "$scratch/calls"
: > "$scratch/failures"

cat > "$scratch/bin/litetx" <<'WRAPPER'
#!/usr/bin/env bash
# Runs the real litetx, records the call, and flags command lines refused as bad usage.
where=${LITETX_DOC_WHERE:-?}
for a in "$@"; do
  case $a in
    *redis://*|*redis-cluster://*)
      echo "$where: skipped (needs a Redis server): litetx $*" | tee -a "$LITETX_DOC_SCRATCH/calls"
      exit 0 ;;
  esac
done
err=$(mktemp "$LITETX_DOC_SCRATCH/err.XXXXXX")
rc=0
timeout -k 5 -s TERM --preserve-status "${LITETX_DOC_TIMEOUT:-2}" \
  "$LITETX_DOC_BINARY" "$@" 2> "$err" || rc=$?
cat "$err" >&2
echo "$where: exit $rc: litetx $*" >> "$LITETX_DOC_SCRATCH/calls"
if [ "$rc" -eq 2 ] ||
   grep -qiE 'unknown (command|subcommand|option|flag)|argument was not expected|subcommand is required' "$err"; then
  echo "$where: litetx $*: exit $rc: $(head -n 1 "$err")" >> "$LITETX_DOC_SCRATCH/failures"
fi
rm -f "$err"
exit "$rc"
WRAPPER
chmod +x "$scratch/bin/litetx"

export LITETX_DOC_SCRATCH=$scratch LITETX_DOC_BINARY=$bin
export PATH="$scratch/bin:$PATH"
unset LITETX_STORE LITETX_FAULTS

# Extract the runnable units of every file: one shell snippet per unit, with where it came from.
python3 - "$scratch" "$src" "$@" <<'PY'
import os, re, sys
scratch, src, files = sys.argv[1], sys.argv[2], sys.argv[3:]
cmd = re.compile(r"^\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:build/tools/)?litetx(?:\s|$)")
heredoc = re.compile(r"<<-?\s*'?\"?([A-Za-z_][A-Za-z0-9_]*)")
n = 0
for path in files:
    rel = os.path.relpath(path, src)
    lines = open(path, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        if not re.match(r"^```(sh|bash|shell)\s*$", lines[i]):
            i += 1
            continue
        start, i = i + 1, i + 1
        block = []
        while i < len(lines) and not lines[i].startswith("```"):
            block.append((i + 1, lines[i]))
            i += 1
        units = []
        if block and block[0][1].startswith("#!"):
            units.append((block[0][0], "script", "\n".join(l for _, l in block)))
        else:
            j = 0
            while j < len(block):
                no, line = block[j]
                while line.endswith("\\") and j + 1 < len(block):
                    j += 1
                    line = line[:-1] + " " + block[j][1].strip()
                m = heredoc.search(line)
                if m and not cmd.match(line):
                    body = [line]
                    while j + 1 < len(block):
                        j += 1
                        body.append(block[j][1])
                        if block[j][1].strip() == m.group(1):
                            break
                    units.append((no, "setup", "\n".join(body)))
                elif cmd.match(line):
                    line = re.sub(r"^(\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*)build/tools/litetx",
                                  r"\1litetx", line)
                    units.append((no, "command", line))
                j += 1
        for no, kind, text in units:
            text = text.replace("/tmp/", scratch + "/tmp/")
            n += 1
            with open(os.path.join(scratch, "work", "%04d" % n), "w") as f:
                f.write("%s\n%s:%d\n%s\n" % (kind, rel, no, text))
PY

units=$(ls "$scratch/work" | wc -l)
echo "check_doc_commands: $units units from $# files"
last_file=
for unit in "$scratch"/work/*; do
  kind=$(sed -n 1p "$unit")
  where=$(sed -n 2p "$unit")
  text=$(sed -n '3,$p' "$unit")
  file=${where%:*}
  dir="$scratch/run/$(echo "$file" | tr '/.' '__')"
  if [ "$file" != "$last_file" ]; then
    # A fresh directory per document, with the default store seeded.
    mkdir -p "$dir"
    (cd "$dir" && echo '{"actions":[{"op":"insert","collection":"accounts","id":"alice","doc":{"balance":100}},{"op":"insert","collection":"accounts","id":"bob","doc":{"balance":50}}]}' |
       "$bin" apply - > /dev/null)
    last_file=$file
  fi
  echo "--- $where ($kind)"
  case $kind in
    script) (cd "$dir" && LITETX_DOC_WHERE=$where sh -c "$text") || true ;;
    setup) (cd "$dir" && sh -c "$text") || true ;;
    command)
      if printf '%s' "$text" | grep -q '|'; then
        (cd "$dir" && LITETX_DOC_WHERE=$where bash -c "$text") || true
      else
        (cd "$dir" && LITETX_DOC_WHERE=$where bash -c "$text" < /dev/null) || true
      fi ;;
  esac
done

calls=$(grep -c '' "$scratch/calls" || true)
skipped=$(grep -c 'skipped (needs a Redis server)' "$scratch/calls" || true)
bad=$(grep -c '' "$scratch/failures" || true)
echo
echo "check_doc_commands: $calls litetx calls ($skipped skipped for Redis), $bad refused as bad usage"
if [ "$calls" -eq 0 ]; then
  echo "check_doc_commands: no litetx command line found: the extraction is broken" >&2
  exit 1
fi
if [ "$bad" -ne 0 ]; then
  echo "check_doc_commands: documented command lines that litetx refuses:" >&2
  cat "$scratch/failures" >&2
  exit 1
fi
