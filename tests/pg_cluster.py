# A throwaway PostgreSQL cluster of Debian's server for the Python-driven suites (the team load
# run, the desktop app's end-to-end tests on a team store): initialised in a temporary directory,
# listening on a Unix socket only, as `nobody` when run as root (PostgreSQL refuses root).
# The Rust suites have their own (tw_store::testing).

import os
import pwd
import signal
import subprocess
import time


def pg_bin():
    base = "/usr/lib/postgresql"
    versions = sorted(
        (int(v), os.path.join(base, v, "bin"))
        for v in os.listdir(base)
        if v.isdigit() and os.path.exists(os.path.join(base, v, "bin", "postgres"))
    )
    if not versions:
        raise SystemExit("no PostgreSQL server under /usr/lib/postgresql; run ./scripts/setup")
    return versions[-1][1]


class Cluster:
    """A throwaway cluster on a Unix socket; as `nobody` when run as root."""

    def __init__(self, root):
        self.root = root
        self.sock = os.path.join(root, "sock")
        os.makedirs(self.sock)
        bin_dir = pg_bin()
        prefix = []
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            for p in (root, self.sock):
                os.chown(p, nobody.pw_uid, nobody.pw_gid)
            prefix = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                      "--clear-groups", "--"]
        data = os.path.join(root, "data")
        subprocess.run(prefix + [os.path.join(bin_dir, "initdb"), "-U", "toolwarden",
                                 "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C",
                                 "-D", data],
                       check=True, stdout=subprocess.DEVNULL)
        self.log = open(os.path.join(root, "server.log"), "w")
        self.server = subprocess.Popen(
            prefix + [os.path.join(bin_dir, "postgres"), "-D", data, "-k", self.sock,
                      "-c", "listen_addresses=", "-c", "max_connections=300"],
            stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 60
        pid_file = os.path.join(data, "postmaster.pid")
        while True:
            try:
                with open(pid_file) as f:
                    lines = f.read().splitlines()
                if len(lines) > 7 and lines[7].strip() == "ready":
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the PostgreSQL server did not start")
            time.sleep(0.05)
        self.url = f"postgres://toolwarden@localhost/postgres?host={self.sock}"

    def stop(self):
        self.server.send_signal(signal.SIGINT)
        self.server.wait(timeout=60)

    def create_database(self, name):
        """An empty database of its own; returns its URL."""
        subprocess.run([os.path.join(pg_bin(), "createdb"), "-h", self.sock, "-U", "toolwarden",
                        name], check=True)
        return f"postgres://toolwarden@localhost/{name}?host={self.sock}"
