"""Automatic registration: a fresh SparkSession finds ``format("msgclient")`` with no
``register`` call, because installing msgclient installs the ``pyspark_msgclient`` module.

Spark 4 imports the top-level ``pyspark_*`` modules that ``pkgutil.iter_modules`` lists
and registers their ``DefaultSource`` (pyspark/sql/worker/lookup_data_sources.py), once
per JVM: the job runs in a process of its own. The test environment's msgclient is an
editable install, whose import hook ``iter_modules`` does not list: the test asks the
install where the module is, then puts a copy of it on ``PYTHONPATH``, where a regular
install would have put it. Neither process runs in the repository, whose
``pyspark_msgclient.py`` Spark would otherwise find in the working directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from msgclient.embedded import PulsarBroker
from tests.spark.helpers import produce

JOB = Path(__file__).with_name("discovery_job.py")
FIND = "import importlib.util; print(importlib.util.find_spec('pyspark_msgclient').origin)"


@pytest.mark.timeout(300)  # a JVM to start (about 20 s when idle)
def test_a_fresh_session_finds_the_source_without_register(
    pulsar_broker: PulsarBroker, topic: str, tmp_path: Path
) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run(
        [sys.executable, "-c", FIND],
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
        env=environment,
        check=True,
    )
    installed = Path(found.stdout.decode().strip())
    assert installed.name == "pyspark_msgclient.py"
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(installed, site)
    sent = produce(pulsar_broker.service_url, topic, 30)

    done = subprocess.run(
        [sys.executable, str(JOB), pulsar_broker.service_url, topic],
        capture_output=True,
        timeout=240,
        cwd=tmp_path,
        env={**environment, "PYTHONPATH": str(site)},
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert int(done.stdout.decode().split()[-1]) == len(sent)
