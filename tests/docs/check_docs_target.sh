#!/usr/bin/env bash
# Checks cmake/Docs.cmake on a scratch project that includes it: with a Doxygen (a stand-in
# that records its Doxyfile) the `docs` target runs it on a Doxyfile whose inputs exist; with
# no Doxygen, configuring still succeeds and there is no `docs` target.
# Usage: check_docs_target.sh SOURCE_DIR
set -euo pipefail
src=$(cd "${1:?usage: check_docs_target.sh SOURCE_DIR}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/litetx-docs-target.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/proj" "$work/bin"
cat > "$work/proj/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(litetx VERSION 0.1.0 DESCRIPTION "docs target check" LANGUAGES NONE)
include("$src/cmake/Docs.cmake")
CM
cat > "$work/bin/doxygen" <<'FAKE'
#!/bin/sh
case "$1" in
  --version) echo 1.9.4 ;;
  -s|-g) for last; do :; done; : > "$last" ;;   # FindDoxygen asks for a template
  *) cp "$1" "$(dirname "$1")/Doxyfile.used" ;;
esac
FAKE
chmod +x "$work/bin/doxygen"

cmake -S "$work/proj" -B "$work/with" -DDOXYGEN_EXECUTABLE="$work/bin/doxygen" > /dev/null
cmake --build "$work/with" --target docs > /dev/null
used="$work/with/docs/Doxyfile.used"
[ -f "$used" ] || { echo "the docs target did not run doxygen" >&2; exit 1; }
inputs=$(sed -n 's/^INPUT *= *//p' "$used")
[ -n "$inputs" ] || { echo "the Doxyfile has no INPUT" >&2; exit 1; }
for i in $inputs; do
  [ -e "$i" ] || { echo "Doxyfile INPUT $i does not exist" >&2; exit 1; }
done
case " $inputs " in *" $src/include/litetx "*) ;; *) echo "INPUT lacks the public headers: $inputs" >&2; exit 1 ;; esac
grep -q "^OUTPUT_DIRECTORY *= *$work/with/docs\$" "$used" || { echo "OUTPUT_DIRECTORY wrong" >&2; exit 1; }
if grep -q '@[A-Z_]*@' "$used"; then echo "unfilled @VAR@ in the Doxyfile" >&2; exit 1; fi
echo "with Doxygen: docs ran doxygen on $inputs"

# As if Doxygen were not installed, whatever this machine has.
cmake -S "$work/proj" -B "$work/without" -DCMAKE_DISABLE_FIND_PACKAGE_Doxygen=ON > /dev/null
if cmake --build "$work/without" --target docs > /dev/null 2>&1; then
  echo "a docs target exists without Doxygen" >&2; exit 1
fi
echo "without Doxygen: configured, no docs target"
