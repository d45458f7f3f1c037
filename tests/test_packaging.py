"""The folders map into one ``tidlx`` namespace in a built wheel, not only in the editable install."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_holds_every_package_and_the_grammar(tmp_path):
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path),
         str(ROOT)], capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    (wheel,) = tmp_path.glob("tidlx-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # every folder with an __init__.py under the mapped roots is a package in the wheel
    for root, package in (("ir", "tidlx/ir"), ("frontends", "tidlx/frontends"), ("backends", "tidlx/backends"),
                          ("emulator", "tidlx/emulator"), ("tidlx", "tidlx")):
        for init in (ROOT / root).rglob("__init__.py"):
            rel = init.relative_to(ROOT / root).as_posix()
            assert f"{package}/{rel}" in names, rel
    assert any(n.startswith("tidlx/frontends/relay/") and n.endswith(".lark") for n in names)
    # the deploy folders' fixed C files: every one of them
    for source in (ROOT / "backends/tvm/deploy/c").rglob("*"):
        if source.is_file():
            assert f"tidlx/backends/tvm/deploy/{source.relative_to(ROOT / 'backends/tvm/deploy').as_posix()}" in names, \
                source
    assert any(n.endswith("entry_points.txt") for n in names)
