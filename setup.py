"""Maps the top-level folders into the single ``tidlx`` import namespace.

ir/ -> tidlx.ir, frontends/ -> tidlx.frontends, backends/ -> tidlx.backends,
emulator/ -> tidlx.emulator; tidlx/ holds the public API and the CLI.
"""
import os

from setuptools import setup

PACKAGE_DIRS = {
    "tidlx": "tidlx",
    "tidlx.ir": "ir",
    "tidlx.frontends": "frontends",
    "tidlx.backends": "backends",
    "tidlx.emulator": "emulator",
}


def _packages():
    found = []
    for package, folder in PACKAGE_DIRS.items():
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")))
            if "__init__.py" in filenames:
                rel = os.path.relpath(dirpath, folder)
                found.append(package if rel == "." else package + "." + rel.replace(os.sep, "."))
    return sorted(found)


setup(packages=_packages(), package_dir=PACKAGE_DIRS)
