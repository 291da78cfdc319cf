"""``produce`` in a real terminal (tmux): the progress bar, and Ctrl-C.

Lines are typed into a pane with ``tmux send-keys``; ``capture-pane`` shows what a person
would see. Each command in the pane ends by showing ``EXIT=<its exit code>``.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from msgclient.embedded import PulsarBroker
from tests.cli.helpers import CLI, run, wait_until

SHOW_EXIT = '; echo "EXIT""=$?"'  # shows EXIT=<code>; the command line itself shows no EXIT=


class Pane:
    """A tmux server of its own (a unique socket) with one 200x50 pane running bash."""

    def __init__(self) -> None:
        tmux = shutil.which("tmux")
        if tmux is None:
            pytest.fail("tmux is needed for the terminal tests (apt-get install tmux)")
        self._tmux = [tmux, "-L", f"msgclient-cli-{uuid.uuid4().hex[:12]}"]
        self._tmux_run("new-session", "-d", "-x", "200", "-y", "50", "bash --norc --noprofile")

    def _tmux_run(self, *args: str) -> str:
        done = subprocess.run(
            [*self._tmux, *args], capture_output=True, text=True, timeout=10, check=True
        )
        return done.stdout

    def type(self, *keys: str) -> None:
        self._tmux_run("send-keys", *keys)

    def run(self, command: list[str]) -> None:
        """Start ``command`` at the prompt; its exit code shows as EXIT=<code>."""
        self.type(f"{shlex.join(command)}{SHOW_EXIT}", "Enter")

    def screen(self) -> str:
        return self._tmux_run("capture-pane", "-p")

    def wait_for(self, text: str, seconds: float = 10.0) -> str:
        wait_until(lambda: text in self.screen(), f"{text!r} on screen", seconds)
        return self.screen()

    def close(self) -> None:
        subprocess.run([*self._tmux, "kill-server"], capture_output=True, timeout=10)


@pytest.fixture
def pane() -> Iterator[Pane]:
    pane = Pane()
    try:
        yield pane
    finally:
        pane.close()


def test_ctrl_c_confirms_every_line_typed(
    pane: Pane, pulsar_broker: PulsarBroker, topic: str
) -> None:
    url = pulsar_broker.service_url
    pane.run([*CLI, "produce", url, topic])  # stdin and stderr: the terminal
    pane.wait_for(f"{topic}: 0msg")  # the bar, once the producer is ready
    typed = ["first line", "second line", "third line"]
    for line in typed:
        pane.type(line, "Enter")
    # Ctrl-C flushes what the terminal holds unread: wait until the three were read (and
    # sent: the bar counts confirmations).
    pane.wait_for(f"{topic}: 3msg")
    pane.type("C-c")
    screen = pane.wait_for("EXIT=")
    assert "EXIT=130" in screen, screen
    assert f"msgclient: interrupted: 3 messages sent to {topic}, every one confirmed" in screen
    assert "Traceback" not in screen
    read = run("consume", url, topic, "--end")
    assert read.lines() == [line.encode() for line in typed]


def test_a_long_produce_shows_its_progress(
    pane: Pane, pulsar_broker: PulsarBroker, topic: str
) -> None:
    """stdin is a pipe, stderr the terminal: the bar shows, rate-limited to 30 msg/s."""
    url = pulsar_broker.service_url
    command = f"seq 1 30 | {shlex.join([*CLI, 'produce', url, topic, '--rate', '30'])}"
    pane.type(f"{command}{SHOW_EXIT}", "Enter")

    def counts() -> list[int]:
        """The message counts the bar shows (``<topic>: <count>msg [...]``)."""
        return [
            int(line.split(": ", 1)[1].split("msg", 1)[0])
            for line in pane.screen().splitlines()
            if line.startswith(f"{topic}: ") and "msg [" in line
        ]

    wait_until(lambda: any(0 < count < 30 for count in counts()), "the bar, mid-way")
    screen = pane.wait_for("EXIT=")
    assert "EXIT=0" in screen, screen
    assert f"{topic}: 30msg [" in screen
    rate = float(screen.split(f"{topic}: 30msg [", 1)[1].split(",", 1)[1].split("msg/s")[0])
    assert 15 < rate < 45, screen  # unlimited, the 30 would go out in one batch
