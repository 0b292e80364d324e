"""`python -m cute_gemm [options]`: the main job (cute_gemm/demo.py): quantize a Llama-3-8B-shaped
stack of linear layers, check its accuracy and time it against fp16 (on the CPU reference path
when there is no GPU). `python -m cute_gemm --help` lists the options.

`python -m cute_gemm layout [--out DIR]`: the layout walkthrough (DIR receives its pictures).
"""

import argparse
import sys

import cute_gemm


def layout_main(argv):
    parser = argparse.ArgumentParser(
        prog="python -m cute_gemm layout",
        description="A tour of the layout algebra on the seed examples.")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="write the walkthrough's SVG and TikZ pictures to DIR")
    args = parser.parse_args(argv)
    print("cute_gemm %s" % cute_gemm.__version__)
    cute_gemm.layout.walkthrough(out_dir=args.out)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["layout"]:
        return layout_main(argv[1:])
    if "--out" in argv or any(a.startswith("--out=") for a in argv):
        # The walkthrough used to be the main job; point its old spelling at its new place.
        print("python -m cute_gemm: --out belongs to the layout walkthrough, which is now "
              "`python -m cute_gemm layout --out DIR`", file=sys.stderr)
        return 2
    from cute_gemm import demo

    print("cute_gemm %s" % cute_gemm.__version__)
    return demo.main(argv)


if __name__ == "__main__":
    sys.exit(main())
