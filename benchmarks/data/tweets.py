"""The tweet corpus of RaRe Technologies' GPU-provider benchmark (2018): reader, its preprocessing, a stand-in.

The corpus is the "Twitter Sentiment Analysis Dataset" (thinknook.com, 1,578,627 labelled tweets). It cannot be
downloaded here, so it is read only where the user put it (`--data-dir` / `BENCH_DATA_DIR`, then Keras's cache
folder `$KERAS_HOME/datasets`), in either of two forms:

- `tw-data.pos` and `tw-data.neg`: one tweet per line, as in RaRe-Technologies/benchmark_GPU_platforms `data/`
  (written by danielegrattarola/twitter-sentiment-cnn `csv_parser.py`);
- `Sentiment Analysis Dataset.csv`: the original CSV (`ItemID,Sentiment,SentimentSource,SentimentText`), to which
  `csv_parser.py`'s word replacements are applied here.

Preprocessing follows RaRe's `data_helpers.py` (borrowed from twitter-sentiment-cnn): `clean_str`, split on
spaces, pad every tweet at the end with `<PAD/>` to the longest tweet, a vocabulary of every token ordered by
frequency (`vocab_builder.py`, so `<PAD/>` gets id 0), `np.random.seed(123)` then a permutation, the last 10%
held out. Two differences, neither of which changes the shapes: Python 2's `random.sample` reordering of each
class before the permutation is not reproducible in Python 3 (so the same seed holds out other tweets), and
tokens of equal frequency may be numbered in another order than Python 2's `Counter.most_common` gave.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np

from benchmarks.data import synthetic
from benchmarks.data.files import DatasetUnavailable, FileLocations, sha256_of
from benchmarks.data.loaders import SYNTHETIC_NAME, info_for
from benchmarks.data.types import REAL, Data, DataInfo, DataRequest, head

DATASET = "tweets"
POS_FILE = "tw-data.pos"
NEG_FILE = "tw-data.neg"
CSV_FILE = "Sentiment Analysis Dataset.csv"
PAD = "<PAD/>"
SPLIT_SEED = 123  # benchmark.py: np.random.seed(123) before data_helpers.load_data shuffles
VAL_FRACTION = 0.1
CORPUS_TWEETS = 1_578_627
CORPUS_VAL = int(CORPUS_TWEETS * VAL_FRACTION)
# `data/vocab_inv.csv` at RaRe's commit 6db9d12 (2018-02-07) has 274,562 lines: the vocabulary the study used.
CORPUS_VOCABULARY = 274_562
# The longest cleaned tweet (the padded length) was never published; real data uses the corpus's own. The
# stand-in pads to 140, the bound for a 140-character tweet: clean_str makes at most one token per character
# ("?!?!" gives four), and a corpus of 1.6 million tweets is padded to its single longest one.
SYNTHETIC_MAXLEN = 140
SYNTHETIC_TOKENS = (4, 36)  # tweet lengths in tokens after cleaning, drawn uniformly

# data_helpers.clean_str, in order. Its replacements "\?" "\(" "\)" keep the backslash (Python leaves unknown
# non-letter escapes in a replacement alone), so "?" becomes the token "\?" as in RaRe's vocabulary file.
_CLEANING = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"[^A-Za-z0-9(),!?\'\`]", " "),
        (r"(.)\1+", r"\1\1"),
        (r"\'s", " 's"),
        (r"\'ve", " 've"),
        (r"n\'t", " n't"),
        (r"\'re", " 're"),
        (r"\'d", " 'd"),
        (r"\'ll", " 'll"),
        (r",", " , "),
        (r"!", " ! "),
        (r"\(", r" \\( "),
        (r"\)", r" \\) "),
        (r"\?", r" \\? "),
        (r"\s{2,}", " "),
    )
)


def clean_str(text: str) -> str:
    for pattern, replacement in _CLEANING:
        text = pattern.sub(replacement, text)
    return text.strip().lower()


def mark_words(tweet: str) -> str:
    """csv_parser.py's word replacements: mentions, links, hashtags and HTML entities."""
    words = []
    for word in tweet.split():
        if "@" in word:
            word = "<NAME/>"
        if "http://" in word:
            word = "<LINK/>"
        word = word.replace("#", "<HASHTAG/> ").replace("&quot;", ' " ').replace("&amp;", " & ")
        words.append(word.replace("&gt;", " > ").replace("&lt;", " < "))
    return " ".join(words)


def _lines(path: Path) -> list[str]:
    # Latin-1 maps every byte to one character, as Python 2 read them; clean_str drops all non-ASCII anyway.
    # Split on "\n" only, as readlines() did: str.splitlines() would also split at bytes such as 0x85.
    text = path.read_text(encoding="latin-1")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line starts no tweet
    return [line.strip() for line in lines]


def read_pos_neg(pos: Path, neg: Path) -> tuple[list[str], list[str]]:
    return _lines(pos), _lines(neg)


def read_csv(path: Path) -> tuple[list[str], list[str]]:
    """Positive and negative tweets of the original CSV, split on the first three commas as csv_parser.py did."""
    positive: list[str] = []
    negative: list[str] = []
    for number, line in enumerate(_lines(path), start=1):
        if not line or line.startswith("ItemID,"):
            continue
        fields = line.split(",", 3)
        if len(fields) != 4:
            raise ValueError(f"{path}:{number}: expected ItemID,Sentiment,SentimentSource,SentimentText")
        (positive if fields[1].strip() == "1" else negative).append(mark_words(fields[3].strip()))
    return positive, negative


@dataclass(frozen=True)
class Encoded:
    x: np.ndarray  # (tweets, longest) int32 token ids, padded at the end with the id of <PAD/>
    vocabulary: list[str]  # id -> token, most frequent first


def encode(tweets: list[str]) -> Encoded:
    """Clean, split, pad to the longest and number tokens by frequency, as data_helpers + vocab_builder did."""
    tokens = [clean_str(tweet).split(" ") for tweet in tweets]
    longest = max(map(len, tokens))
    counts = Counter(token for tweet in tokens for token in tweet)
    counts[PAD] += sum(longest - len(tweet) for tweet in tokens)  # the padding is counted like any token
    vocabulary = [token for token, _ in counts.most_common()]
    ids = {token: i for i, token in enumerate(vocabulary)}
    x = np.full((len(tokens), longest), ids[PAD], dtype=np.int32)
    for row, tweet in zip(x, tokens, strict=True):
        row[: len(tweet)] = [ids[token] for token in tweet]
    return Encoded(x, vocabulary)


def split(
    x: np.ndarray, y: np.ndarray, seed: int = SPLIT_SEED
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """data_helpers.load_data's shuffle and split: a seeded permutation, the last 10% held out."""
    held_out = int(len(x) * VAL_FRACTION)
    if held_out == 0:
        raise ValueError(f"{DATASET}: {len(x)} tweets are too few to hold out 10%")
    order = np.random.RandomState(seed).permutation(len(x))
    x, y = x[order], y[order]
    return (x[:-held_out], y[:-held_out]), (x[-held_out:], y[-held_out:])


def find(where: FileLocations) -> list[Path]:
    """The corpus files the user supplied: the .pos/.neg pair, else the CSV; data folder first, then the cache."""
    folders = where.folders
    for folder in folders:
        pair = [folder / POS_FILE, folder / NEG_FILE]
        if all(p.is_file() for p in pair):
            return pair
        if (folder / CSV_FILE).is_file():
            return [folder / CSV_FILE]
    raise DatasetUnavailable(
        f"{DATASET}: neither {POS_FILE} + {NEG_FILE} (one tweet per line) nor '{CSV_FILE}' "
        f"(ItemID,Sentiment,SentimentSource,SentimentText) found in {', '.join(map(str, folders))}; "
        f"put them into --data-dir (BENCH_DATA_DIR) or {where.cache_dir} (see docs/datasets.md)"
    )


def load(request: DataRequest, where: FileLocations) -> Data:
    """Padded token ids and 0/1 labels (1 = positive), cut to the request's limits."""
    if request.dataset == SYNTHETIC_NAME:
        return _synthetic(request)
    paths = find(where)
    positive, negative = read_pos_neg(*paths) if len(paths) == 2 else read_csv(paths[0])
    encoded = encode(positive + negative)
    labels = np.concatenate([np.ones(len(positive)), np.zeros(len(negative))]).astype("float32")
    (x_train, y_train), (x_val, y_val) = split(encoded.x, labels)
    x_train, y_train = head(x_train, request.train_limit), head(y_train, request.train_limit)
    x_val, y_val = head(x_val, request.val_limit), head(y_val, request.val_limit)
    files = [{"name": p.name, "sha256": sha256_of(p)} for p in paths]
    info = DataInfo(request.dataset, REAL, len(x_train), len(x_val), files=files)
    extras = {"vocabulary_size": len(encoded.vocabulary), "maxlen": encoded.x.shape[1]}
    return Data(x_train, y_train, x_val, y_val, info, extras=extras)


def _synthetic(request: DataRequest) -> Data:
    """Tweet-shaped id sequences over the study's vocabulary size, with words that mark each sentiment."""
    n_train = min(request.train_limit or CORPUS_TWEETS - CORPUS_VAL, CORPUS_TWEETS - CORPUS_VAL)
    n_val = min(request.val_limit or CORPUS_VAL, CORPUS_VAL)
    # One draw for both splits, so both share the same sentiment-marking words.
    drawn, labels = synthetic.token_sequences(n_train + n_val, CORPUS_VOCABULARY, *SYNTHETIC_TOKENS, request.seed)
    texts = [text[1:] for text in drawn]  # drop the IMDB-style start token: tweets have none
    x = keras.utils.pad_sequences(texts, maxlen=SYNTHETIC_MAXLEN, padding="post", truncating="post", value=0)
    y = labels.astype("float32")
    x_train, y_train, x_val, y_val = x[:n_train], y[:n_train], x[n_train:], y[n_train:]
    info = info_for(request, DATASET, x_train, x_val)
    extras = {"vocabulary_size": CORPUS_VOCABULARY, "maxlen": SYNTHETIC_MAXLEN}
    return Data(x_train, y_train, x_val, y_val, info, extras=extras)
