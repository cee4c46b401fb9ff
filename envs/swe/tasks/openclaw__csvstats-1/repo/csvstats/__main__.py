import sys

from .summary import format_summary, summarize


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m csvstats FILE.csv", file=sys.stderr)
        return 2
    with open(argv[0], newline="") as f:
        print(format_summary(summarize(f.read())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
