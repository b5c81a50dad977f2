r"""Which of the job's packages install from wheels on each node architecture (needs the package index).

    python tools/check_wheels.py [--python-version 3.13] [--arch aarch64 x86_64] [--packages NAME==VER ...]

For every package the cluster image adds to the NeMo-RL release image (``slurm/image-requirements.txt``:
the simulators and what they pull in) it asks pip for a binary-only download for each platform,
``pip download --only-binary :all: --no-deps --platform manylinux_2_28_<arch> --platform manylinux2014_<arch>
--python-version <v>``, and prints a table: ``wheel`` (a binary for that platform or a pure-Python wheel),
or ``sdist only`` (pip would have to build it on the node: a compiler, and for ``textworld`` an Inform7
download at build time). Not run in CI: it needs the index. Its output on 2026-11-30 is in slurm/README.md.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REQUIREMENTS = Path(__file__).resolve().parents[1] / "slurm" / "image-requirements.txt"
# what the simulators pull in beyond the release image (pip show on an install of them)
# textworld 1.7.0 asks for jericho>=3.3.0 (its Requires-Dist): unpinned, pip picked 3.2.0, the newest with a wheel
TRANSITIVE = ["textworld==1.7.0", "fast-downward-textworld", "jericho>=3.3.0", "py4j", "tatsu", "mementos", "hashids"]
PLATFORMS = {
    "x86_64": ["manylinux_2_28_x86_64", "manylinux2014_x86_64", "manylinux_2_17_x86_64", "linux_x86_64"],
    "aarch64": ["manylinux_2_28_aarch64", "manylinux2014_aarch64", "manylinux_2_17_aarch64", "linux_aarch64"],
}


def requirements() -> list[str]:
    """The packages of ``slurm/image-requirements.txt`` plus their non-pure dependencies."""
    lines = [line.split("#")[0].strip() for line in REQUIREMENTS.read_text().splitlines()]
    return [*[x for x in lines if x], *TRANSITIVE]


def has_wheel(package: str, arch: str, python_version: str) -> tuple[bool, str]:
    """(binary available, the file pip chose or pip's last error line)."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:"]
        for plat in PLATFORMS[arch]:
            cmd += ["--platform", plat]
        cmd += ["--python-version", python_version, "--implementation", "cp", "-d", tmp, package]
        res = subprocess.run(cmd, capture_output=True, text=True)
        files = [p.name for p in Path(tmp).iterdir()]
        if res.returncode == 0 and files:
            return True, files[0]
        last = (res.stderr.strip().splitlines() or ["no file"])[-1]
        return False, re.sub(r"\s+", " ", last)[:90]


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit 1 when some package has no wheel for some architecture."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python-version", default="3.13", help="the release image's Python (NeMo-RL v0.7.0: 3.13)")
    p.add_argument("--arch", nargs="+", default=["x86_64", "aarch64"], choices=sorted(PLATFORMS))
    p.add_argument("--packages", nargs="+", default=None, help="default: slurm/image-requirements.txt + deps")
    a = p.parse_args(argv)
    packages = a.packages or requirements()
    print(f"| package | {' | '.join(a.arch)} |")
    print(f"|---|{'---|' * len(a.arch)}")
    missing = 0
    for pkg in packages:
        cells = []
        for arch in a.arch:
            ok, what = has_wheel(pkg, arch, a.python_version)
            missing += not ok
            cells.append(f"wheel ({what})" if ok else "sdist only")
        print(f"| {pkg} | {' | '.join(cells)} |", flush=True)
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
