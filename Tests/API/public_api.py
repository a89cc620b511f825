#!/usr/bin/env python3
"""The public declarations of DocStore and DocSync, one a line, from the compiler's symbol graphs, compared
with the lists checked in beside this script (Tests/API/<Module>.public.txt), so that every change to
the public surface shows in review; and each of them documented with a `///` comment (but for the
members of standard conformances, which their protocols document).

Usage: public_api.py [--update]
  Runs `swift package dump-symbol-graph --minimum-access-level public` (the package must build), then
  prints what differs from the checked-in lists and exits 1 if anything does; --update rewrites them.
"""
import json
import pathlib
import subprocess
import sys

MODULES = ["DocStore", "DocSync"]
HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def symbol_graph_folder():
    out = subprocess.run(["swift", "package", "dump-symbol-graph", "--minimum-access-level", "public"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("Files written to "):
            return pathlib.Path(line[len("Files written to "):].strip())
    raise SystemExit("dump-symbol-graph did not say where it wrote the graphs:\n" + out)


# Members that implement a standard protocol's requirement, documented by the protocol.
CONFORMANCES = {"hash(into:)", "hashValue", "==(_:_:)", "!=(_:_:)", "<(_:_:)", "description", "debugDescription",
                "makeIterator()", "makeAsyncIterator()", "next()", "init(from:)", "encode(to:)", "id",
                "startIndex", "endIndex", "subscript(_:)", "index(after:)", "init(stringLiteral:)",
                "init(unicodeScalarLiteral:)", "init(extendedGraphemeClusterLiteral:)", "init(integerLiteral:)",
                "init(floatLiteral:)", "init(booleanLiteral:)", "init(nilLiteral:)", "init(arrayLiteral:)",
                "init(dictionaryLiteral:)"}


def undocumented(graph_file):
    """The public declarations of the module's own source without a `///` comment."""
    graph = json.loads(graph_file.read_text())
    return sorted(".".join(symbol["pathComponents"]) for symbol in graph["symbols"]
                  if "docComment" not in symbol and "location" in symbol
                  and symbol["pathComponents"][-1] not in CONFORMANCES)


def declarations(graph_file):
    graph = json.loads(graph_file.read_text())
    lines = set()
    for symbol in graph["symbols"]:
        if symbol["accessLevel"] not in ("public", "open"):
            continue
        path = ".".join(symbol["pathComponents"])
        text = "".join(fragment["spelling"] for fragment in symbol.get("declarationFragments", []))
        lines.add(f"{path}  {' '.join(text.split())}")
    return sorted(lines)


def main():
    update = "--update" in sys.argv[1:]
    folder = symbol_graph_folder()
    differs = False
    for module in MODULES:
        missing = undocumented(folder / f"{module}.symbols.json")
        if missing:
            differs = True
            print(f"{module}: public declarations without a /// comment:")
            for name in missing:
                print(f"  {name}")
        current = declarations(folder / f"{module}.symbols.json")
        listed_file = HERE / f"{module}.public.txt"
        if update:
            listed_file.write_text("\n".join(current) + "\n")
            print(f"{listed_file.relative_to(ROOT)}: {len(current)} declarations")
            continue
        listed = listed_file.read_text().splitlines() if listed_file.exists() else []
        added = sorted(set(current) - set(listed))
        removed = sorted(set(listed) - set(current))
        if added or removed:
            differs = True
            print(f"{module}'s public declarations differ from {listed_file.relative_to(ROOT)}:")
            for line in removed:
                print(f"  - {line}")
            for line in added:
                print(f"  + {line}")
        else:
            print(f"{module}: {len(current)} public declarations, as listed")
    if differs:
        print("If the change is meant, run Tests/API/public_api.py --update and commit the lists.")
        sys.exit(1)


if __name__ == "__main__":
    main()
