"""Writes (or checks) the switch table of docs/torch-releases.md.

Contract: the table between the markers `<!-- switches:begin -->` and
`<!-- switches:end -->` is generated from the engine's one table of release
switches (remat.torch_releases(), src/ops/torch_release.cc), so the document
cannot drift from the code; the prose around it is hand-written.

  python tools/torch_releases_doc.py          rewrite the table in place
  python tools/torch_releases_doc.py --check  exit 1 when it differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import remat

DOC = Path(__file__).resolve().parents[1] / "docs" / "torch-releases.md"
BEGIN, END = "<!-- switches:begin -->", "<!-- switches:end -->"


def table() -> str:
    rows = ["| switch | since | in torch | what changed | parity test |",
            "|---|---|---|---|---|"]
    for name, since, where, what, test in remat.torch_releases()["switches"]:
        cells = [f"`{name}`", since, where, what, f"`{test}`"]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


def rendered(text: str) -> str:
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    text = DOC.read_text()
    new = rendered(text)
    if argv[1:] == ["--check"]:
        if new != text:
            print(f"{DOC} is out of date: run python tools/torch_releases_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
