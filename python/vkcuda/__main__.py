"""``python -m vkcuda doctor``: what this machine gives vkcuda, from the
module itself; ``python -m vkcuda ARGS``: the ``vkcuda`` command with ARGS."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["doctor"]:
        from . import doctor

        report = doctor()
        print(report, end="")
        sys.exit(report.exit_code)
    from . import _cli

    _cli.main()


if __name__ == "__main__":
    main()
