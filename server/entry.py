"""The `corrigenda` command: through the store's shared engine when it can (forward.py: standard library
only, so a command served by a warm engine imports nothing heavy; `serve` and `ui`, which stay as long
as their client, go on in a lean interpreter of their own), else in this process (cli.py)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from . import forward

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        done = forward.dispatch(args)
    except KeyboardInterrupt:
        sys.stderr.write("corrigenda: stopped\n")
        return 130
    except BrokenPipeError:  # `corrigenda export | head`: the reader had enough
        from .cli import _quiet_stdout

        _quiet_stdout()
        return 141
    if done is not None:
        return done
    from .cli import main as in_process

    return in_process(args)


if __name__ == "__main__":
    sys.exit(main())
