"""K experiment of TD-CS (the paper's Figs. 2-3): classification accuracy against the number K of
features per class, for Disc (eqs. 1-2) against TF-IDF and chi-square feature selection.

Two sibling groups of the Wikispeedia subject tree: the children of Science and of Geography.
Documents are the full article texts (without the "Related subjects" line that names the label);
an article belongs to a child when all its categories under the group fall in that one child.
60/40 stratified train/test split, repeated 5 times (seeds 0-4). Every method selects the top K
features of each class on the training part and classifies with the TD-CS multinomial of eqs. 3-6
(Laplace, group reading of F(k)); ``disc-node`` is Disc with the literal per-sibling F(k).

    python -m bench.tdcs_k [--data-dir DIR | --data DIR/wikispeedia] [--out bench/results]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.feature_selection import chi2
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import MultinomialNB

from topiccrawl.scoring import text
from topiccrawl.scoring.dmoz import article_text, wikispeedia_layout
from topiccrawl.scoring.tdcs import count_matrix, disc_scores, group_space, laplace_log_probs, log_posterior, top_k

GROUPS = ["subject.Science", "subject.Geography"]
KS = [5, 10, 20, 40, 60, 100, 140, 175, 180, 250, 350, 500, 750, 1000]
METHODS = ["disc", "disc-len", "disc-node", "tfidf", "chi2"]


def group_docs(data: str, group: str) -> tuple[list[list[str]], np.ndarray, list[str]]:
    _, cats = wikispeedia_layout(data)
    depth = group.count(".") + 2
    docs, labels = [], []
    for name in sorted(cats):
        children = {".".join(c.split(".")[:depth]) for c in cats[name] if c.startswith(group + ".")}
        if len(children) == 1:
            docs.append(text.tokenize(article_text(data, name)))
            labels.append(children.pop())
    classes = sorted(set(labels))
    return docs, np.array([classes.index(c) for c in labels]), classes


def scores(method: str, X: sparse.csr_matrix, y: np.ndarray) -> np.ndarray:
    n_classes = int(y.max()) + 1
    if method.startswith("disc"):
        return disc_scores(X, y, normalise=method == "disc-len")
    if method == "tfidf":
        T = TfidfTransformer(sublinear_tf=False).fit_transform(X)
        return np.vstack([np.asarray(T[y == c].mean(axis=0)).ravel() for c in range(n_classes)])
    return np.vstack([np.nan_to_num(chi2(X, y == c)[0]) for c in range(n_classes)])


def run(data: str, out: Path, reps: int = 5) -> str:
    lines, curves = [], {}
    for group in GROUPS:
        t0 = time.time()
        docs, y, classes = group_docs(data, group)
        X, _ = count_matrix(docs)
        acc = {m: np.zeros((reps, len(KS))) for m in METHODS}
        ref = []
        for rep in range(reps):
            tr, te = train_test_split(np.arange(len(y)), train_size=0.6, stratify=y, random_state=rep)
            ref.append(MultinomialNB(alpha=1.0).fit(X[tr], y[tr]).score(X[te], y[te]))
            for m in METHODS:
                s = scores(m, X[tr], y[tr])
                for i, k in enumerate(KS):
                    feats = top_k(s, k)
                    space = feats if m == "disc-node" else group_space(feats)
                    logp, prior = laplace_log_probs(X[tr], y[tr], space)
                    pred = log_posterior(X[te], logp, prior).argmax(axis=1)
                    acc[m][rep, i] = (pred == y[te]).mean()
        curves[group] = acc
        short = group.split(".")[-1]
        lines += [f"### Children of {short}: {len(classes)} classes, {len(y)} articles "
                  f"({time.time() - t0:.0f} s)", "",
                  "| K | " + " | ".join(METHODS) + " |", "|---:|" + "---:|" * len(METHODS)]
        for i, k in enumerate(KS):
            lines.append(f"| {k} | " + " | ".join(
                f"{acc[m][:, i].mean():.3f} ± {acc[m][:, i].std():.3f}" for m in METHODS) + " |")
        best = [f"{m} K={KS[int(np.argmax(acc[m].mean(0)))]} ({acc[m].mean(0).max():.3f})" for m in METHODS]
        lines += ["", f"Best K: {'; '.join(best)}. Reference, sklearn MultinomialNB on all "
                  f"{X.shape[1]} features: {np.mean(ref):.3f} ± {np.std(ref):.3f}.", ""]
    table = "\n".join(lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tdcs_k.md").write_text(table + "\n", encoding="utf-8")
    plot(curves, out / "tdcs_k.png")
    return table


def plot(curves: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(6 * len(curves), 4.2), sharey=True)
    for ax, (group, acc) in zip(np.atleast_1d(axes), curves.items()):
        for m, a in acc.items():
            ax.errorbar(KS, a.mean(0), yerr=a.std(0), label=m, marker="o", ms=3, capsize=2)
        ax.set_xscale("log")
        ax.set_title(f"children of {group.split('.')[-1]}")
        ax.set_xlabel("K (features per class)")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("accuracy (5 × 60/40 splits)")
    np.atleast_1d(axes)[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="Wikispeedia directory (default: DATA_DIR/wikispeedia)")
    ap.add_argument("--data-dir", default=os.environ.get("TOPICCRAWL_DATA_DIR"),
                    help="folder of the third-party corpora (default: $TOPICCRAWL_DATA_DIR)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"),
                    help="directory for tdcs_k.md and tdcs_k.png")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    if args.data is None:
        if not args.data_dir:
            ap.error("give --data, or --data-dir or TOPICCRAWL_DATA_DIR (the folder holding wikispeedia/)")
        args.data = str(Path(args.data_dir) / "wikispeedia")
    print(run(args.data, Path(args.out), args.reps))


if __name__ == "__main__":
    main()
