"""python -m tensor.viz RECORDING.pkl [--port N]: serve a saved VIZ recording (VIZ=1 saves one at exit) on 127.0.0.1."""
from __future__ import annotations
import argparse, sys
from runtime.trace import load
from tensor.viz.server import serve

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tensor.viz", description="Serve a VIZ recording: the graph-rewrite explorer, on 127.0.0.1.")
  ap.add_argument("recording", help="a .pkl file VIZ=1 wrote (its path is printed at exit; VIZ_PATH chooses it)")
  ap.add_argument("--port", type=int, default=None, help="the port (default: VIZ_PORT, else 8000, else any free one)")
  ap.add_argument("--until-stdin-closes", action="store_true", help="also stop when standard input ends (VIZ=1 serves so: the server "
                  "stops when the script that made the recording ends, even when it is killed)")
  args = ap.parse_args(argv)
  try: rec = load(args.recording)
  except (OSError, ValueError, EOFError) as e:
    print(f"python -m tensor.viz: can't read {args.recording}: {e}", file=sys.stderr)
    return 1
  serve(rec, args.port, sys.stdin.buffer if args.until_stdin_closes else None)
  return 0

if __name__ == "__main__": sys.exit(main())
