"""`python -m cute_gemm [--out DIR]`: the main job (DIR receives the layout pictures)."""

import argparse
import sys

import cute_gemm


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m cute_gemm")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="write the walkthrough's SVG and TikZ pictures to DIR")
    args = parser.parse_args(argv)
    print("cute_gemm %s" % cute_gemm.__version__)
    walkthrough = getattr(cute_gemm.layout, "walkthrough", None)
    if callable(walkthrough):
        walkthrough(out_dir=args.out)
    else:
        print("The layout API is not built yet (cute_gemm.layout has no walkthrough()).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
