#!/usr/bin/env bash
# Runs clang's thread-safety analysis (-Wthread-safety, syntax only) over
# every C++ source of the tree, so that the ABSL_GUARDED_BY and
# ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations are checked, not just written.
# Every thread-safety warning is an error (-Werror=thread-safety); the script
# fails on any, and on a file clang cannot parse.
#
#   scripts/thread_safety.sh [BUILD_DIR [FILE...]]
#
# FILEs (paths from the top of the tree) limit the check to those files.
#
# The flags of each file come from BUILD_DIR/compile_commands.json
# (CMAKE_EXPORT_COMPILE_COMMANDS is on in the top-level CMakeLists.txt);
# without BUILD_DIR, build/thread-safety is configured with every backend,
# the adapters and the tests (configuring, and writing the generated
# headers only). The build
# may have been configured for GCC: of its flags only what the analysis needs
# is kept (include directories, defines, -std), and clang++ checks the file
# with -fsyntax-only. A .cc of the tree that no target compiles (the install
# consumer, built against an installed dlock) is checked with the public
# include directories.
#
# Speed: files run in parallel, one clang per core, and the headers most
# files include (the standard library, Abseil, GoogleTest) are parsed once
# into a precompiled header that every file loads first; a file's own -D
# flags apply after it. If the precompiled header cannot be built, files are
# checked without it.
set -euo pipefail
cd "$(dirname "$0")/.."

clang=${CLANG:-clang++}
if ! command -v "$clang" >/dev/null; then
  echo "thread_safety.sh: $clang not found (scripts/install-deps.sh installs clang)" >&2
  exit 2
fi

build=${1:-}
[ $# -gt 0 ] && shift
if [ -z "$build" ]; then
  build=build/thread-safety
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDLOCK_BACKENDS= \
    -DDLOCK_BUILD_ADAPTERS=ON -DDLOCK_BUILD_TESTS=ON >/dev/null
fi
db="$build/compile_commands.json"
if [ ! -f "$db" ]; then
  echo "thread_safety.sh: no $db (configure $build first)" >&2
  exit 2
fi
# Sources include headers the build writes (protoc's, the commit's): write
# those first, or clang stops at the #include on a clean tree.
cmake --build "$build" --target dlock_generated >/dev/null

start=$(date +%s%N)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Writes $tmp/pch (the commands that build the precompiled headers), and
# $tmp/check and $tmp/check-plain (one command per file, with and without
# them): shell commands, NUL-terminated, for xargs.
python3 - "$db" "$clang" "$PWD" "$tmp" "$@" <<'PY'
import json, os, shlex, sys

db, clang, root, tmp = sys.argv[1:5]
only = set(os.path.normpath(f) for f in sys.argv[5:])
analysis = ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety",
            "-Wno-macro-redefined"]
# What the analysis needs of a compile command: header search and macros.
with_value = {"-D", "-U", "-I", "-isystem", "-iquote", "-idirafter"}
prefixes = tuple(with_value) + ("-std=",)
prefix_headers = [
    "algorithm", "atomic", "functional", "map", "memory", "optional",
    "string", "thread", "vector", "absl/status/status.h",
    "absl/status/statusor.h", "absl/strings/str_cat.h",
    "absl/synchronization/mutex.h", "absl/time/time.h", "gmock/gmock.h",
    "gtest/gtest.h"]


def needed(args):
    kept = []
    i = 1
    while i < len(args):
        if args[i] in with_value and i + 1 < len(args):
            kept += args[i:i + 2]
            i += 2
            continue
        if args[i].startswith(prefixes):
            kept.append(args[i])
        i += 1
    return kept


seen = set()
files = []  # (path, directory, flags)
for entry in json.load(open(db)):
    source = entry["file"]
    path = os.path.relpath(source, root)
    if path.startswith(("build/", "../")) or path in seen:
        continue
    seen.add(path)
    args = entry.get("arguments") or shlex.split(entry["command"])
    files.append((path, entry["directory"], needed(args)))

# Every .cc of the tree; those no target compiles get the public headers.
for top in ("core", "backends", "adapters", "integration", "tests", "examples"):
    for directory, _, names in os.walk(top):
        for name in names:
            path = os.path.join(directory, name)
            if name.endswith(".cc") and path not in seen:
                files.append((path, root, ["-std=c++20", "-Icore/include",
                                           "-Iadapters/include"]))

missing = only - set(path for path, _, _ in files)
if missing:
    sys.exit("thread_safety.sh: not a C++ source of the tree: " +
             " ".join(sorted(missing)))
files = sorted(f for f in files if not only or f[0] in only)

# One precompiled header per language standard and NDEBUG setting in use;
# the rest of a file's flags may differ from the header's.
with open(os.path.join(tmp, "prefix.h"), "w") as prefix:
    prefix.writelines("#include <%s>\n" % h for h in prefix_headers)
pchs = {}


def pch_for(flags):
    key = tuple(sorted(f for f in flags
                       if f.startswith("-std=") or f == "-DNDEBUG"))
    return pchs.setdefault(key, os.path.join(tmp, "prefix%d.pch" % len(pchs)))


def command(directory, args):
    return "cd %s && %s\0" % (shlex.quote(directory), shlex.join(args))


with open(os.path.join(tmp, "check"), "w") as check, \
        open(os.path.join(tmp, "check-plain"), "w") as plain:
    for path, directory, flags in files:
        source = os.path.join(root, path)
        check.write(command(directory, [clang] + flags + analysis +
                            ["-include-pch", pch_for(flags), source]))
        plain.write(command(directory, [clang] + flags + analysis + [source]))
with open(os.path.join(tmp, "pch"), "w") as out:
    for key, pch in pchs.items():
        out.write(command(tmp, [clang, "-x", "c++-header"] + list(key) +
                          [os.path.join(tmp, "prefix.h"), "-o", pch]))
PY

jobs=$(nproc)
checks="$tmp/check"
if ! xargs -0 -n1 -P"$jobs" sh -c <"$tmp/pch" >"$tmp/pch.out" 2>&1; then
  cat "$tmp/pch.out" >&2
  echo "thread_safety.sh: no precompiled header; checking every file in full" >&2
  checks="$tmp/check-plain"
fi
files=$(tr -cd '\0' <"$checks" | wc -c)
status=0
xargs -0 -n1 -P"$jobs" sh -c <"$checks" >"$tmp/out" 2>&1 || status=$?
ms=$((($(date +%s%N) - start) / 1000000))
elapsed=$((ms / 1000)).$((ms % 1000 / 100))
cat "$tmp/out"
if [ "$status" -ne 0 ]; then
  echo "thread-safety analysis: FAILED ($files files, ${elapsed}s)" >&2
  exit 1
fi
echo "thread-safety analysis: $files files clean (${elapsed}s)"
