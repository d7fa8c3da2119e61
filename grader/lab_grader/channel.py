"""The grader's channel: what a test's process says while it runs, kept where
that process cannot take it back (common/testing/harness.c, CHANNEL_FD).

One run (binary_run.BinaryRun) gets one connected pair of sequenced-packet
Unix sockets. The grader keeps one end; the other is the runner's standard
output, which Criterion's runner leaves open in every test process it
starts (it closes every other descriptor it did not open), and which the
harness moves to a fixed number that the seal keeps open and in place
($LAB_CHANNEL_FD says which). A test process sends two messages, each with
one write:

    BEGIN suite::test     when the test begins, before its body runs
    FAIL                  when a check fails, before anything else runs
    UNSEALED why          when the seal could not be installed (the
                          machine refused seccomp): said beside the score

The kernel stamps each message with the sending process (SO_PASSCRED), so a
process speaks for itself alone; and a message, once sent, is out of the
sender's reach: unlike the record file, a socket cannot be truncated,
seeked, renamed or read back by the writer (issue 25's fourth red-team pass
rewrote a FAIL line in the record through a duplicate descriptor). Anything
else that arrives (what the runner prints to its standard output) is kept
as output, up to OUTPUT_CAP bytes.

What it decides (overrule): a test that the runner reports passed has
failed when
  - no process of the run said BEGIN for it (the harness always does, so
    the test ran outside the harness's care);
  - a process that said BEGIN for it also said FAIL;
  - a process that never said BEGIN said FAIL (code under test that ran
    a test's body in a process of its own): every passed test of the run.
Code under test can only add messages, never remove one: what it adds can
only fail tests.
"""
import re
import socket
import struct
import threading

from .outcomes import Verdict

ENV = "LAB_CHANNEL_FD"
MESSAGE_MAX = 65536      # bytes read of one message
NAME_MAX = 512           # a BEGIN longer than this is not the harness's
OUTPUT_CAP = 64 * 1024   # bytes kept of everything else
FAIL = b"FAIL\n"
PROCESSES_MAX = 4096     # processes told apart; past that, one bucket for all
NAMES_MAX = 64           # BEGIN names kept per process
_UCRED = struct.Struct("iII")   # pid, uid, gid
REASON = re.compile(r"[A-Za-z][A-Za-z ,'-]{0,79}")   # what strerror says


class Said:
    """What one process said."""
    __slots__ = ("begun", "failed")

    def __init__(self):
        self.begun = set()     # test ids of its BEGIN messages
        self.failed = 0        # its FAIL messages


class Channel:
    """One run's channel: made before the runner starts, child_fd() handed
    down as its standard output, started() once the runner is forked,
    close() after every process of the run is gone."""

    def __init__(self):
        self.ours, self.theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.said = {}          # pid (in the grader's namespace) -> Said
        self.overflow = Said()  # every process past PROCESSES_MAX
        self.output = bytearray()
        self.unsealed = set()   # why the seal was not installed, as the harness said
        self._reader = threading.Thread(target=self._read, name="lab-channel", daemon=True)
        self._started = False

    def child_fd(self):
        return self.theirs.fileno()

    def started(self):
        """The runner holds its copy now: ours goes, so that the end of the
        last process of the run is the end of the channel."""
        self.theirs.close()
        self._started = True
        self._reader.start()

    def close(self, timeout=10.0):
        """Waits for the channel's end (every writer gone), then reads what
        is left; returns the Evidence."""
        if not self._started:   # the runner could not be started
            self.theirs.close()
        else:
            self._reader.join(timeout)
        self.ours.setblocking(False)
        try:
            while self._take():
                pass
        except (BlockingIOError, OSError):
            pass
        self.ours.close()
        return Evidence(self.said, self.overflow, bytes(self.output), self.unsealed)

    def _read(self):
        try:
            while self._take():
                pass
        except OSError:
            pass

    def _take(self):
        """One message; False at the channel's end."""
        data, anc, _, _ = self.ours.recvmsg(MESSAGE_MAX, socket.CMSG_SPACE(_UCRED.size))
        pid = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= _UCRED.size:
                pid = _UCRED.unpack_from(payload)[0]
        if pid is None:
            # no sender: the end (an empty message still carries its sender)
            return bool(data)
        said = self.said.get(pid)
        if said is None:
            if len(self.said) < PROCESSES_MAX:
                said = self.said[pid] = Said()
            else:
                said = self.overflow
        if data == FAIL:
            said.failed += 1
        elif data.startswith(b"BEGIN ") and len(data) <= NAME_MAX and b"\n" not in data:
            if len(said.begun) < NAMES_MAX:
                said.begun.add(data[6:].decode("utf-8", "replace"))
            else:
                said.failed += 1   # a process that began more tests than any does
        elif data.startswith(b"UNSEALED ") and len(self.unsealed) < 4:
            # the words of strerror, or nothing of the sender's: code under
            # test can send this too, and it is printed in the report's header
            why = data[9:].decode("ascii", "replace").strip()
            self.unsealed.add(why if REASON.fullmatch(why) else "a reason not shown")
        elif len(self.output) < OUTPUT_CAP:
            self.output += data[:OUTPUT_CAP - len(self.output)]
        return True


class Evidence:
    """What a run's processes said on the channel."""

    def __init__(self, said, overflow, output=b"", unsealed=()):
        self.said = list(said.values()) + ([overflow] if overflow.begun or overflow.failed else [])
        self.output = output            # what else reached the channel
        self.unsealed = set(unsealed)   # why a test process ran without the seal

    def why_failed(self, test):
        """None when the channel lets a reported pass stand; otherwise the
        report's words."""
        mine = [s for s in self.said if test in s.begun]
        if not mine:
            return ("the test's start never reached the grader: its process did not run under the "
                    "test harness's care")
        if any(s.failed for s in mine):
            return ("a check failed, yet the test went on and reported a pass: code under test kept the "
                    "failure from ending the test")
        if any(s.failed and not s.begun for s in self.said):
            return ("a check failed in a process that began no test (code under test ran a test's body "
                    "in a process of its own), so no test of this run can be believed")
        return None


def overrule(outcomes, evidence):
    """Turns every PASS in outcomes ({test: Outcome}) that the channel's
    evidence does not bear out into a FAIL, with the reason."""
    if evidence is None:
        return
    for test, o in outcomes.items():
        if o.verdict != Verdict.PASS:
            continue
        why = evidence.why_failed(test)
        if why:
            o.verdict = Verdict.FAIL
            o.message = why
