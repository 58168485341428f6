"""Several daphne processes behind one address: ``python -m chatapp.serve``.

    python -m chatapp.serve --bind 0.0.0.0:8000 --processes 2 -- --verbosity 0

A daphne process runs one event loop on one core, so a machine with N cores
serves best with N of them. This opens the listening socket once and starts
the processes on it (daphne's ``--fd``): the kernel hands each new connection
to whichever process accepts it first, so a busy process takes fewer, with no
balancer in front and one port to publish. A process that dies is started
again; SIGTERM or SIGINT stops them all (each finishes what it is sending).
Arguments after ``--`` go to every daphne.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

logger = logging.getLogger("chatapp.serve")

APPLICATION = "chatapp.asgi:application"
BACKLOG = 2048
RESTART_DELAY_SECONDS = 1.0
STOP_TIMEOUT_SECONDS = 30.0


def arguments_parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bind", default="127.0.0.1:8000", help="host:port to listen on")
    parser.add_argument(
        "--processes",
        type=int,
        default=int(os.environ.get("WEB_PROCESSES") or os.cpu_count() or 1),
        help="daphne processes (default: WEB_PROCESSES, else one per core)",
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    args = parser.parse_args(argv)
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    host, _, port = args.bind.rpartition(":")
    if not host or not port.isdigit():
        parser.error(f"--bind is host:port, not {args.bind!r}")
    args.host, args.port, args.daphne_arguments = host.strip("[]"), int(port), extra
    return args


def listening_socket(host: str, port: int) -> socket.socket:
    """The socket every process accepts on, inheritable by the processes."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family, backlog=BACKLOG)
    listener.set_inheritable(True)
    return listener


class Processes:
    """The daphne processes on one listening socket: started, kept running, stopped."""

    def __init__(self, *, listener: socket.socket, count: int, arguments: list[str]) -> None:
        self.command = [
            sys.executable,
            "-m",
            "chatapp.webserver",
            "--fd",
            str(listener.fileno()),
            *arguments,
            APPLICATION,
        ]
        self.fd = listener.fileno()
        self.running: list[subprocess.Popen] = []
        self.count = count
        self.stopping = False

    def start_one(self) -> None:
        process = subprocess.Popen(self.command, pass_fds=(self.fd,))
        logger.info("daphne process %s started", process.pid)
        self.running.append(process)

    def keep_running(self) -> None:
        """Start the processes, then replace any that exits until ``stop`` is called."""
        for _ in range(self.count):
            self.start_one()
        while not self.stopping:
            for process in list(self.running):
                if process.poll() is not None and not self.stopping:
                    logger.error(
                        "daphne process %s exited with %s; starting another",
                        process.pid,
                        process.returncode,
                    )
                    self.running.remove(process)
                    time.sleep(RESTART_DELAY_SECONDS)
                    if not self.stopping:
                        self.start_one()
            time.sleep(0.2)

    def stop(self, *_: object) -> None:
        self.stopping = True

    def terminate(self) -> None:
        for process in self.running:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        for process in self.running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    args = arguments_parse(argv)
    listener = listening_socket(args.host, args.port)
    processes = Processes(listener=listener, count=args.processes, arguments=args.daphne_arguments)
    signal.signal(signal.SIGTERM, processes.stop)
    signal.signal(signal.SIGINT, processes.stop)
    logger.info(
        "serving %s on %s:%s with %s daphne processes",
        APPLICATION,
        args.host,
        args.port,
        args.processes,
    )
    try:
        processes.keep_running()
    finally:
        processes.terminate()
        listener.close()


if __name__ == "__main__":
    main()
