"""Adds the licence texts of the libraries `auditwheel repair` copied into a
wheel (remat.libs/) to the wheel, as their Debian packages ship them.

Contract:

  python tools/wheel_licenses.py WHEEL

rewrites WHEEL in place. Each library in remat.libs/ is named by auditwheel
as its original file with a hash added (libCbc-738ec07e.so.3.10.8 for
libCbc.so.3.10.8); the Debian package that installed the original
(`dpkg-query -S`) ships its licence in /usr/share/doc/PACKAGE/copyright.
Each such file goes to the wheel's .dist-info/licenses/third_party/
PACKAGE.copyright, listed in METADATA as a License-File (PEP 639), and
third_party/LIBRARIES says which library came from which package. The wheel
is unpacked and packed again by the `wheel` package (it rewrites RECORD).
Fails, naming the library, when a library's package or licence is not
found: a wheel must not ship a binary without its licence.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# auditwheel's name for a copied library: the original, "-" and 8 hex digits
# before the first ".so".
HASHED = re.compile(r"^(?P<stem>.+?)-[0-9a-f]{8}(?P<ext>\.so.*)$")


def original_name(grafted: str) -> str:
    m = HASHED.match(grafted)
    if not m:
        raise SystemExit(f"wheel_licenses: {grafted}: not a library name auditwheel writes")
    return m.group("stem") + m.group("ext")


def debian_package(library: str) -> str:
    """The package that installed a file named `library` (dpkg-query -S)."""
    out = subprocess.run(["dpkg-query", "-S", f"*/{library}"], capture_output=True, text=True)
    # Lines "PACKAGE:ARCH: /path" ("PACKAGE:ARCH, OTHER:ARCH: /path" when
    # several architectures installed it).
    packages = sorted({line.split(":", 1)[0].strip() for line in out.stdout.splitlines()
                       if line.endswith(f"/{library}") and not line.startswith("diversion")})
    if out.returncode != 0 or not packages:
        raise SystemExit(f"wheel_licenses: {library}: no Debian package installed it (dpkg-query -S)")
    return packages[0]


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr if len(argv) != 1 else sys.stdout)
        return 2 if len(argv) != 1 else 0
    wheel = Path(argv[0]).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "wheel", "unpack", "-d", tmp, str(wheel)], check=True,
                       stdout=subprocess.DEVNULL)
        (root,) = Path(tmp).iterdir()
        (dist_info,) = root.glob("*.dist-info")
        libs = sorted(p.name for p in (root / "remat.libs").glob("*.so*"))
        if not libs:
            raise SystemExit(f"wheel_licenses: {wheel.name}: no remat.libs/ libraries (not repaired?)")
        third = dist_info / "licenses" / "third_party"
        third.mkdir(parents=True, exist_ok=True)
        listing, packages = [], []
        for lib in libs:
            package = debian_package(original_name(lib))
            copyright_file = Path("/usr/share/doc") / package / "copyright"
            if not copyright_file.is_file():
                raise SystemExit(f"wheel_licenses: {lib}: {copyright_file} does not exist")
            if package not in packages:
                packages.append(package)
                shutil.copyfile(copyright_file, third / f"{package}.copyright")
            listing.append(f"remat.libs/{lib}: Debian package {package}, licence {package}.copyright")
        (third / "LIBRARIES").write_text(
            "Libraries auditwheel copied into this wheel, and the Debian package each came from\n"
            "(its licence: the package's /usr/share/doc/PACKAGE/copyright, here as PACKAGE.copyright).\n\n"
            + "\n".join(listing) + "\n")
        metadata = dist_info / "METADATA"
        lines = metadata.read_text().split("\n")
        added = [f"License-File: third_party/{p}.copyright" for p in packages] + ["License-File: third_party/LIBRARIES"]
        added = [a for a in added if a not in lines]
        # After the last header line that names a licence file (or the last
        # header), before the blank line that starts the description.
        end = lines.index("") if "" in lines else len(lines)
        at = max((i + 1 for i, line in enumerate(lines[:end]) if line.startswith("License-File:")), default=end)
        metadata.write_text("\n".join(lines[:at] + added + lines[at:]))
        out = Path(tmp) / "out"
        out.mkdir()
        subprocess.run([sys.executable, "-m", "wheel", "pack", "-d", str(out), str(root)], check=True,
                       stdout=subprocess.DEVNULL)
        (packed,) = out.glob("*.whl")
        if packed.name != wheel.name:
            raise SystemExit(f"wheel_licenses: packing renamed {wheel.name} to {packed.name}")
        shutil.move(str(packed), str(wheel))
    print(f"wheel_licenses: {wheel.name}: {len(packages)} licences for {len(libs)} libraries")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
