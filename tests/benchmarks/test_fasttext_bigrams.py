"""The vectorised bigram features of imdb_fasttext against the Keras example's own loops (`create_ngram_set` and
`add_ngram` of keras/examples/imdb_fasttext.py), on IMDB-shaped token lists."""

import numpy as np

from benchmarks.data import synthetic
from benchmarks.workloads import imdb_fasttext as fasttext


def example_features(train: list[list[int]], val: list[list[int]]) -> tuple[list[list[int]], list[list[int]], int]:
    grams = set()
    for tokens in train:
        grams |= set(zip(*[tokens[i:] for i in range(2)], strict=False))
    index = {gram: fasttext.MAX_FEATURES + 1 + i for i, gram in enumerate(sorted(grams))}

    def add(texts: list[list[int]]) -> list[list[int]]:
        out = []
        for tokens in texts:
            extended = list(tokens)
            for i in range(len(tokens) - 1):
                gram = tuple(tokens[i : i + 2])
                if gram in index:
                    extended.append(index[gram])
            out.append(extended)
        return out

    return add(train), add(val), fasttext.MAX_FEATURES + 1 + len(index)


def test_bigram_features_equal_the_examples() -> None:
    texts, _ = synthetic.token_sequences(600, fasttext.MAX_FEATURES, min_len=1, max_len=120, seed=3)
    train, val = [list(t) for t in texts[:400]], [list(t) for t in texts[400:]]
    val.append([7])  # a one-token review has no bigram
    want_train, want_val, want_vocabulary = example_features(train, val)

    index = fasttext.bigram_index(train)
    assert fasttext.MAX_FEATURES + 1 + len(index) == want_vocabulary
    for got, want in ((fasttext.add_bigrams(train, index), want_train), (fasttext.add_bigrams(val, index), want_val)):
        assert [g.tolist() for g in got] == want
    # Validation texts hold bigrams the training texts lack: those are not appended.
    assert sum(len(w) for w in want_val) < sum(2 * len(t) - 1 for t in val)


def test_largest_token_ids_keep_their_order() -> None:
    top = fasttext.MAX_FEATURES - 1
    train = [[top, 0, top, top], [0, top]]
    assert example_features(train, [])[0] == [
        g.tolist() for g in fasttext.add_bigrams(train, fasttext.bigram_index(train))
    ]
    assert np.all(np.diff(fasttext.bigram_index(train)) > 0)
