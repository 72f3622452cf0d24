"""Helpers the *_vs_torch.py benchmark drivers share."""
import inspect
import json
import resource
import socket


def last_json(out):
    """The last line of `out` that starts with '{', parsed."""
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON result in output:\n" + out)


def free_port():
    """A TCP port on 127.0.0.1 nobody listens on (for torch's rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss_mb():
    """This process's peak resident memory in MiB: VmHWM, the high-water mark of
    its own address space. Not ru_maxrss, which Linux carries across execve: a
    child started by a driver that imported torch would report at least the
    driver's size."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# peak_rss_mb as source, put in front of the peers' child scripts (python -c).
CHILD_PRELUDE = "import resource\n" + inspect.getsource(peak_rss_mb) + "\n"
