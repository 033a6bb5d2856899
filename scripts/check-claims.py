#!/usr/bin/env python3
"""Checks the claims ledger docs/CLAIMS.md against the code.

Fails (exit 1) when:
- a claim row is malformed, has an unknown status, or a duplicate id;
- a claim names a test that does not exist (a file path, `path::function` or a Bazel label
  `//pkg:target` whose BUILD file defines it);
- a claim id is cited by no code file (tests cite ids as `EVIDENCE: C-ABI-001` or in a test name
  such as `c_abi_001_...`);
- a code file cites an id the ledger does not have.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEDGER = os.path.join(ROOT, "docs", "CLAIMS.md")
STATUSES = {"confirmed", "refuted", "not built", "awaiting a GPU"}
CODE_DIRS = ["c", "rust_tests", "benches", "ffi", "scripts", "serve"]
CODE_EXT = (".c", ".h", ".cu", ".cuh", ".rs", ".sh", ".py", ".bazel")
ID_RE = re.compile(r"\bC-([A-Z]+)-(\d{3})\b")
FN_ID_RE = re.compile(r"\bc_([a-z]+)_(\d{3})_")


def code_files():
    for top in CODE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = [d for d in dirnames if d not in ("target",)]
            for f in filenames:
                if f.endswith(CODE_EXT) or f == "BUILD.bazel":
                    yield os.path.join(dirpath, f)
    yield os.path.join(ROOT, "BUILD.bazel")


def test_exists(ref):
    """A test reference: //pkg:target, path/to/file, or path/to/file::function."""
    if ref.startswith("//"):
        pkg, _, target = ref[2:].partition(":")
        build = os.path.join(ROOT, pkg, "BUILD.bazel")
        if not os.path.isfile(build):
            return False
        text = open(build, encoding="utf-8").read()
        return re.search(r'["\']%s["\']' % re.escape(target), text) is not None
    path, _, func = ref.partition("::")
    full = os.path.join(ROOT, path)
    if not os.path.isfile(full):
        return False
    if not func:
        return True
    return re.search(r"\b%s\b" % re.escape(func), open(full, encoding="utf-8").read()) is not None


def main():
    errors = []
    claims = {}
    for n, line in enumerate(open(LEDGER, encoding="utf-8"), 1):
        if not line.startswith("| C-"):
            continue
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) != 4:
            errors.append(f"CLAIMS.md:{n}: expected 4 columns (id | status | claim | test), got {len(cols)}")
            continue
        cid, status, _text, tests = cols
        if not ID_RE.fullmatch(cid):
            errors.append(f"CLAIMS.md:{n}: malformed id {cid!r}")
        if status not in STATUSES:
            errors.append(f"CLAIMS.md:{n}: {cid}: status {status!r} is not one of {sorted(STATUSES)}")
        if cid in claims:
            errors.append(f"CLAIMS.md:{n}: duplicate id {cid}")
        refs = re.findall(r"`([^`]+)`", tests)
        if not refs:
            errors.append(f"CLAIMS.md:{n}: {cid} names no test")
        for ref in refs:
            if not test_exists(ref):
                errors.append(f"CLAIMS.md:{n}: {cid} names test `{ref}`, which does not exist")
        claims[cid] = n

    cited = {}
    for path in code_files():
        try:
            text = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        rel = os.path.relpath(path, ROOT)
        for m in ID_RE.finditer(text):
            cited.setdefault(m.group(0), rel)
        for m in FN_ID_RE.finditer(text):
            cited.setdefault(f"C-{m.group(1).upper()}-{m.group(2)}", rel)

    for cid in claims:
        if cid not in cited:
            errors.append(f"{cid}: no test cites it (add `EVIDENCE: {cid}` to the test, or name it c_..._NNN_...)")
    for cid, where in sorted(cited.items()):
        if cid not in claims:
            errors.append(f"{where}: cites {cid}, which docs/CLAIMS.md does not have")

    if errors:
        print("check-claims: FAILED", file=sys.stderr)
        for e in errors:
            print("  " + e, file=sys.stderr)
        return 1
    print(f"check-claims: {len(claims)} claims, each backed by a test that exists and cites it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
