"""Helpers the *_vs_torch.py benchmark drivers share."""
import json
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
