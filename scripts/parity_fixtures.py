#!/usr/bin/env python3
"""Reference values for parity's goodness-of-fit statistics (src/parity/stats.rs).

Writes tests/fixtures/parity_stats.json, which the unit tests at the bottom of
src/parity/stats.rs read; neither CI nor users need Python. Contents:

  samples      a few explicit samples u (n = 1, 2, 5, 30, 500, 5000; uniform
               and skewed, rounded to 12 digits so the JSON stays small) with
               scipy's KS statistic (stats.kstest against U(0,1)), its exact
               p-value (stats.kstwo.sf), the Anderson-Darling statistic (the
               numpy formula, summed exactly with math.fsum) and, for n <= 500,
               a Monte-Carlo AD p-value from stats.goodness_of_fit.
  ks_grid      (n, d, p) with p = stats.kstwo.sf(d, n) for n in {1, 2, 5, 10,
               50, 100, 1000, 10^4, 10^5} on a grid of d reaching p ~ 1e-15
               (coarser for the extra n = 141, 300, 2*10^5, 10^6),
               plus the d's where the method changes (1/2n, 1/n, 1/2, 1 - 1/n,
               n d^2 = 2.2 and 4). Each d has at most 15 significant digits:
               serde_json (without float_roundtrip) reads those exactly, and
               near d = 1 one ulp of d moves p by up to 1e-3 relative.
  ad_mc_grid   (n, z, p, mc_samples): Monte-Carlo P(A^2_n >= z) for n = 5, 30,
               500 from the null distributions goodness_of_fit simulated for
               the samples, at z where the limiting p is 0.9 ... 0.003.
  ad_inf_tail  (z, p): P(A^2_inf > z) by adaptive quadrature (scipy.integrate.quad)
               of Smirnov's integral over the cuts of the Laplace transform,
               checked here against Marsaglia & Marsaglia's (2004) full ADinf
               series where that is accurate (z <= 8).

Deterministic: fixed seeds throughout. Regenerate (versions used for the
committed file are recorded in it):
  python3 -m venv /tmp/pyenv && /tmp/pyenv/bin/pip install scipy numpy
  /tmp/pyenv/bin/python scripts/parity_fixtures.py
It takes a minute or two (the Monte-Carlo runs and scipy's exact KS sums at
n = 10^6).
"""

import json
import math
from pathlib import Path

import numpy as np
import scipy
from scipy import integrate, special, stats

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "parity_stats.json"
MC_SAMPLES = 200_000


def rounded(u):
    """12 significant digits: exact in the JSON, small on disk."""
    return [float(f"{x:.12g}") for x in u]


def ad_statistic(u):
    """A^2 = -n - (1/n) sum (2i-1)[ln u_(i) + ln(1 - u_(n+1-i))], summed exactly."""
    u = np.sort(np.clip(np.asarray(u, dtype=float), 1e-300, 1 - 1e-16))
    n = len(u)
    terms = [(2 * i + 1) * (math.log(u[i]) + math.log1p(-u[n - 1 - i])) for i in range(n)]
    return -n - math.fsum(terms) / n


def ad_mc(u, seed):
    res = stats.goodness_of_fit(
        stats.uniform, u, known_params={"loc": 0, "scale": 1}, statistic="ad",
        n_mc_samples=MC_SAMPLES, rng=np.random.default_rng(seed))
    return res


def samples():
    rng = np.random.default_rng(20240611)
    specs = [
        ("uniform_n1", 1, 1.0), ("uniform_n2", 2, 1.0), ("uniform_n5", 5, 1.0),
        ("uniform_n30", 30, 1.0), ("power1.6_n30", 30, 1.6),
        ("uniform_n500", 500, 1.0), ("power1.15_n500", 500, 1.15),
        ("power1.04_n5000", 5000, 1.04),
    ]
    out, nulls = [], {}
    for k, (name, n, power) in enumerate(specs):
        u = rounded(rng.random(n) ** power)
        ks = stats.kstest(u, "uniform")
        row = {
            "name": name, "u": u,
            "ks_statistic": float(ks.statistic),
            "ks_p_value": float(stats.kstwo.sf(ks.statistic, n)),
            "ad_statistic": ad_statistic(u),
        }
        if n <= 500:
            res = ad_mc(u, 1000 + k)
            assert abs(res.statistic - row["ad_statistic"]) < 1e-9 * max(1, abs(res.statistic))
            row["ad_mc_p_value"] = float(res.pvalue)
            row["ad_mc_samples"] = MC_SAMPLES
            nulls[n] = res.null_distribution
        out.append(row)
    return out, nulls


def ks_grid():
    rows = []
    targets = np.logspace(0, -15, 31)
    for n in [1, 2, 5, 10, 50, 100, 141, 300, 1000, 10_000, 100_000, 200_000, 1_000_000]:
        ds = set()
        # Fewer points for the extra n's (scipy's exact sum is slow at 10^6).
        for p in targets[1:] if n not in (141, 300, 200_000, 1_000_000) else targets[1::3]:
            if n <= 100:
                d = float(stats.kstwo.isf(p, n))
            else:
                # kstwo.isf is slow for large n; Kolmogorov's limit is close enough
                # to place the grid, and the reference p is computed exactly below.
                d = float(special.kolmogi(p) / math.sqrt(n))
            ds.add(d)
        for d in [0.5 / n, 0.75 / n, 1.0 / n, 1.5 / n, 0.5, 1 - 1.0 / n, 1 - 0.5 / n,
                  math.sqrt(2.2 / n), math.sqrt(4.0 / n), 0.4 / math.sqrt(n), 0.8 / math.sqrt(n),
                  1.1 / math.sqrt(n)]:
            for e in (1 - 1e-9, 1 + 1e-9):
                if 0 < d * e < 1:
                    ds.add(d * e)
        for d in sorted({float(f"{d:.15g}") for d in ds}):
            p = float(stats.kstwo.sf(d, n))
            if 0 < p <= 1 and p >= 1e-16:
                rows.append([n, d, p])
    return rows


def smirnov_integral(z, cuts=10):
    """P(A^2_inf > z) by Smirnov's formula (see ad_inf_sf in stats.rs)."""
    total = 0.0
    for k in range(1, cuts + 1):
        def f(x, k=k):
            a = 2 * k - 0.5 + x
            t = (a * a - 0.25) / 2
            return math.exp(-(t - 1) * z) * math.sqrt(2 * math.pi / t) * a
        # weight (x(1-x))^(-1/2) handled by quad's 'alg' weight; the rest is
        # sqrt(x(1-x)/sin(pi x)), smooth on [0, 1].
        g = lambda x, f=f: f(x) * math.sqrt(x * (1 - x) / math.sin(math.pi * min(x, 1 - x))) \
            if 0 < x < 1 else f(x) / math.sqrt(math.pi)
        v, _ = integrate.quad(g, 0, 1, weight="alg", wvar=(-0.5, -0.5),
                              epsabs=0, epsrel=2e-14, limit=200)
        total += v if k % 2 else -v
    return total / math.pi * math.exp(-z)


def adinf_series(z):
    """Marsaglia & Marsaglia's full ADinf(z) = P(A^2_inf <= z)."""
    def adf(z, j):
        t = (4 * j + 1) ** 2 * 1.23370055013617 / z
        if t > 150:
            return 0.0
        a = 2.22144146907918 * math.exp(-t) / math.sqrt(t)
        b = 3.93740248643060 * math.erfc(math.sqrt(t))
        r = z * 0.125
        f = a + b * r
        for i in range(1, 200):
            c = ((i - 0.5 - t) * b + t * a) / i
            a, b = b, c
            r *= z / (8 * i + 8)
            if abs(r) < 1e-40 or abs(c) < 1e-40:
                return f
            fnew = f + c * r
            if f == fnew:
                return f
            f = fnew
        return f
    r = 1 / z
    ad = r * adf(z, 0)
    for j in range(1, 100):
        r *= (0.5 - j) / j
        adnew = ad + (4 * j + 1) * r * adf(z, j)
        if ad == adnew:
            break
        ad = adnew
    return ad


def ad_inf_tail():
    rows = []
    for z in [0.5, 0.75, 1.0, 1.5, 2.0, 2.492, 3.0, 3.857, 5.0, 7.0, 10.0, 15.0, 20.0,
              30.0, 50.0, 100.0, 200.0, 400.0, 700.0]:
        p = smirnov_integral(z)
        if z <= 8:
            assert abs(p - (1 - adinf_series(z))) < 1e-12, z
        rows.append([z, p])
    return rows


def ad_mc_grid(nulls):
    rows = []
    for n, null in sorted(nulls.items()):
        if n < 5:
            continue
        for target in [0.9, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.003]:
            z = bisect(lambda z: smirnov_integral(z) - target, 0.2, 10.0)
            rows.append([n, z, float(np.mean(null >= z)), len(null)])
    return rows


def bisect(f, lo, hi):
    for _ in range(60):
        mid = (lo + hi) / 2
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def main():
    sample_rows, nulls = samples()
    fixture = {
        "generated_by": "scripts/parity_fixtures.py",
        "versions": {"scipy": scipy.__version__, "numpy": np.__version__},
        "samples": sample_rows,
        "ks_grid": ks_grid(),
        "ad_mc_grid": ad_mc_grid(nulls),
        "ad_inf_tail": ad_inf_tail(),
    }
    OUT.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
