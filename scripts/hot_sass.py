"""Hottest SASS instructions of one kernel profile, from ncu's source page as CSV:

    ncu ... --section WarpStateStats --section SourceCounters --page source --print-source sass \
        --csv python3 script.py > source.csv
    python3 scripts/hot_sass.py source.csv [top]

Prints the instructions with the most warp-stall samples (all samples, then not-issued ones),
their share of the kernel's samples, and the stall-reason columns that ncu reports for each, so
a latency-bound loop shows which instruction its warps wait at and why.
"""
import csv
import sys


def main(path, top=40):
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"Address"') or
                  l.startswith('"#"')), None)
    if start is None:
        print("no source table in", path)
        print("\n".join(lines[:20]))
        return
    rows = list(csv.DictReader(lines[start:]))
    cols = list(rows[0].keys()) if rows else []
    sample_col = next((c for c in cols if "Stall Sampling (All" in c), None)
    if sample_col is None:
        print("columns:", cols)
        return

    def num(row, col):
        try:
            return float(str(row.get(col, "0")).replace(",", ""))
        except ValueError:
            return 0.0

    total = sum(num(r, sample_col) for r in rows) or 1.0
    reason_cols = [c for c in cols if c.startswith("stall_") and "Not Issued" not in c]
    executed = sum(num(r, "Instructions Executed") for r in rows)
    print(f"{len(rows)} instructions, {executed:.0f} executed (warp level), {total:.0f} samples")
    reason_totals = sorted(((sum(num(r, c) for r in rows), c) for c in reason_cols), reverse=True)
    reason_sum = sum(v for v, _ in reason_totals) or 1.0
    print("stall reasons: " + ", ".join(f"{c[6:]} {v / reason_sum * 100:.1f}%"
                                         for v, c in reason_totals[:8]))
    for r in sorted(rows, key=lambda r: -num(r, sample_col))[:top]:
        reasons = sorted(((num(r, c), c) for c in reason_cols), reverse=True)[:3]
        why = ", ".join(f"{c[6:]} {v:.0f}" for v, c in reasons if v > 0)
        print(f"{num(r, sample_col) / total * 100:5.1f}%  {r.get('Address', r.get('#', '')):>6}  "
              f"{r.get('Source', '')[:70]:70}  {why}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
