"""Stand-in for ansible-test's pip bootstrap script (get-pip.py), whose download host is unreachable here.

ansible-test runs this file in a fresh virtual environment with get-pip's arguments. It seeds pip from the
interpreter's own ensurepip wheel, then lets that pip install the requested packages (pip==X) from the
configured package index. The Makefile copies it to ~/.ansible/test/cache/get_pip_<version>.py.
"""

import subprocess
import sys

GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}


def main():
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
    subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)


if __name__ == "__main__":
    main()
