"""The tweet and VoxCeleb loaders: real files in the documented formats, the missing-file error, the stand-ins."""

from __future__ import annotations

import hashlib
import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before Keras is first imported

from pathlib import Path

import keras
import numpy as np
import pytest

from benchmarks.data import tweets, voxceleb
from benchmarks.data.files import DatasetUnavailable, FileLocations
from benchmarks.data.types import DataRequest
from benchmarks.logs import read_epoch_log
from benchmarks.workloads import siamese_lstm, twitter_sentiment_bilstm
from tests.benchmarks.conftest import run_benchmarks

POSITIVE_WORDS = ("love", "great", "happy", "awesome", "thanks", "yay")
NEGATIVE_WORDS = ("hate", "sad", "awful", "sick", "miss", "ugh")
FILLER = ("i", "the", "day", "so", "work", "today", "my", "it's", "can't", "!", "?", "(lol)", "@bob", "#fun")


def _tweets(rng: np.random.Generator, words: tuple[str, ...], n: int) -> list[str]:
    texts = []
    for _ in range(n):
        length = int(rng.integers(2, 14))
        chosen = [rng.choice(words) if rng.random() < 0.4 else rng.choice(FILLER) for _ in range(length)]
        texts.append(" ".join(str(w) for w in chosen))
    return texts


def _where(data_dir: Path | None, cache: Path) -> FileLocations:
    return FileLocations(cache_dir=cache, data_dir=data_dir, offline=True)


@pytest.fixture
def tweet_dir(tmp_path: Path) -> Path:
    """120 positive and 180 negative tweets in RaRe's tw-data.pos / tw-data.neg layout."""
    folder = tmp_path / "data"
    folder.mkdir()
    rng = np.random.default_rng(0)
    (folder / tweets.POS_FILE).write_text("\n".join(_tweets(rng, POSITIVE_WORDS, 120)) + "\n", encoding="latin-1")
    (folder / tweets.NEG_FILE).write_text("\n".join(_tweets(rng, NEGATIVE_WORDS, 180)) + "\n", encoding="latin-1")
    return folder


def test_clean_str_tokenizes_as_rare_data_helpers() -> None:
    assert tweets.clean_str("I can't believe it's SOOOO good!!! (really?)") == (
        "i ca n't believe it 's soo good ! ! \\( really \\? \\)"
    )
    assert tweets.clean_str("caf\xe9  --  <NAME/> ok") == "caf name ok"


def test_csv_parser_word_replacements() -> None:
    marked = tweets.mark_words("@bob see http://x.co/y #win &quot;yes&quot; &amp; &lt;3")
    assert marked == '<NAME/> see <LINK/> <HASHTAG/> win  " yes "   &   < 3'
    assert tweets.clean_str(marked) == "name see link hashtag win yes 3"


def test_real_pos_neg_files_are_encoded_split_and_recorded(tweet_dir: Path, tmp_path: Path) -> None:
    data = tweets.load(DataRequest("tweets"), _where(tweet_dir, tmp_path / "cache"))
    assert (data.info.source, data.info.train_samples, data.info.val_samples) == ("real", 270, 30)
    assert data.x_train.dtype == np.int32 and data.x_train.shape[1] == data.extras["maxlen"]
    token_lists = [
        tweets.clean_str(line).split(" ")
        for name in (tweets.POS_FILE, tweets.NEG_FILE)
        for line in (tweet_dir / name).read_text(encoding="latin-1").splitlines()
    ]
    assert data.extras["maxlen"] == max(map(len, token_lists))
    assert data.extras["vocabulary_size"] == len({t for ts in token_lists for t in ts}) + 1  # + <PAD/>
    # <PAD/> is the most frequent token (id 0) and pads at the end, as data_helpers.pad_sentences did.
    lengths = (data.x_train != 0).sum(axis=1)
    assert all((row[:n] != 0).all() and (row[n:] == 0).all() for row, n in zip(data.x_train, lengths, strict=True))
    assert data.y_train.sum() + data.y_val.sum() == 120 and data.y_train.dtype == np.float32
    assert data.info.files == [
        {"name": name, "sha256": hashlib.sha256((tweet_dir / name).read_bytes()).hexdigest()}
        for name in (tweets.POS_FILE, tweets.NEG_FILE)
    ]
    again = tweets.load(DataRequest("tweets", train_limit=50, val_limit=7), _where(tweet_dir, tmp_path))
    np.testing.assert_array_equal(again.x_train, data.x_train[:50])  # the split is fixed; limits take the head
    np.testing.assert_array_equal(again.y_val, data.y_val[:7])


def test_original_csv_gives_the_same_data_as_the_parsed_files(tmp_path: Path) -> None:
    rows = [("1", "@amy I love it &amp; you http://t.co/x"), ("0", "so sad #mondays"), ("1", "great, thanks!")]
    rows += [("0", f"ugh day {i}") for i in range(17)]
    csv_dir, parsed_dir = tmp_path / "csv", tmp_path / "parsed"
    csv_dir.mkdir()
    parsed_dir.mkdir()
    lines = ["ItemID,Sentiment,SentimentSource,SentimentText"]
    lines += [f"{i},{label},Sentiment140,{text}" for i, (label, text) in enumerate(rows, start=1)]
    (csv_dir / tweets.CSV_FILE).write_text("\n".join(lines) + "\n", encoding="latin-1")
    for name, label in ((tweets.POS_FILE, "1"), (tweets.NEG_FILE, "0")):
        marked = [tweets.mark_words(text) for lab, text in rows if lab == label]
        (parsed_dir / name).write_text("\n".join(marked) + "\n", encoding="latin-1")

    from_csv = tweets.load(DataRequest("tweets"), _where(csv_dir, tmp_path))
    from_parsed = tweets.load(DataRequest("tweets"), _where(parsed_dir, tmp_path))
    np.testing.assert_array_equal(from_csv.x_train, from_parsed.x_train)
    np.testing.assert_array_equal(from_csv.y_val, from_parsed.y_val)
    assert [f["name"] for f in from_csv.info.files] == [tweets.CSV_FILE]


def test_tweets_are_found_in_the_keras_cache(tweet_dir: Path) -> None:
    data = tweets.load(DataRequest("tweets", train_limit=10), _where(None, tweet_dir))
    assert data.info.train_samples == 10


def test_missing_tweets_name_the_files_and_where_to_put_them(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailable) as caught:
        tweets.load(DataRequest("tweets"), _where(tmp_path / "data", tmp_path / "cache"))
    message = str(caught.value)
    assert "\n" not in message
    for expected in (tweets.POS_FILE, tweets.NEG_FILE, tweets.CSV_FILE, str(tmp_path / "cache"), "--data-dir"):
        assert expected in message


def test_synthetic_tweets_have_the_study_shapes_and_a_learnable_sentiment() -> None:
    data = tweets.load(DataRequest("synthetic", train_limit=2000, val_limit=500, seed=5), None)
    assert data.x_train.shape == (2000, tweets.SYNTHETIC_MAXLEN) and data.x_val.shape == (500, 140)
    assert data.extras == {"vocabulary_size": tweets.CORPUS_VOCABULARY, "maxlen": tweets.SYNTHETIC_MAXLEN}
    assert (data.info.dataset, data.info.source) == ("synthetic:tweets", "synthetic")
    assert data.x_train.min() >= 0 and data.x_train.max() < tweets.CORPUS_VOCABULARY
    assert (data.x_train[:, -1] == 0).all()  # padded at the end
    # A bag-of-words log-odds score fitted on the training tweets classifies the validation tweets.
    counts = np.ones((2, tweets.CORPUS_VOCABULARY))
    for row, label in zip(data.x_train, data.y_train.astype(int), strict=True):
        np.add.at(counts[label], row[row != 0], 1)
    log_odds = np.log(counts[1] / counts[1].sum()) - np.log(counts[0] / counts[0].sum())
    scores = np.array([log_odds[row[row != 0]].sum() for row in data.x_val])
    assert ((scores > 0) == (data.y_val == 1)).mean() > 0.75


def _write_voxceleb(path: Path, speakers: int = 30, per_speaker: int = 6) -> voxceleb.Utterances:
    rng = np.random.default_rng(3)
    ids = np.repeat(np.arange(100, 100 + speakers), per_speaker)  # ids need not start at 0
    features = rng.normal(size=(len(ids), 8, 5)).astype(np.float32)
    np.savez(path, features=features, speakers=ids)
    return voxceleb.Utterances(features, ids)


def test_real_voxceleb_pairs_are_balanced_disjoint_and_fed_by_index(tmp_path: Path) -> None:
    utterances = _write_voxceleb(tmp_path / voxceleb.FILE)
    data = voxceleb.load(DataRequest("voxceleb", seed=11), _where(tmp_path, tmp_path / "cache"), batch_size=7)
    train, val = data.x_train, data.x_val
    assert data.y_train is None and data.y_val is None and isinstance(train, keras.utils.PyDataset)
    assert (data.info.source, data.info.train_samples, data.info.val_samples) == ("real", 300_000, 120_000)
    assert data.info.files == [
        {"name": voxceleb.FILE, "sha256": hashlib.sha256((tmp_path / voxceleb.FILE).read_bytes()).hexdigest()}
    ]
    assert data.extras == {"utterance_shape": (8, 5), "speakers": 30}
    for batches in (train, val):
        assert batches.labels.mean() == 0.5
        first, second = (utterances.speakers[batches.pairs[:, i]] for i in (0, 1))
        np.testing.assert_array_equal(first == second, batches.labels == 1)
        same = batches.labels == 1
        assert (batches.pairs[same, 0] != batches.pairs[same, 1]).all()  # two different utterances
    train_voices, val_voices = (set(utterances.speakers[b.pairs.ravel()]) for b in (train, val))
    assert not train_voices & val_voices and len(val_voices) == 6  # 20% of 30 speakers, never seen in training
    assert len(train) == 42_858  # 300,000 pairs in batches of 7: the last batch holds one pair
    (a, b), y = train[len(train) - 1]
    assert a.shape == b.shape == (1, 8, 5) and y.shape == (1,)
    np.testing.assert_array_equal(b, utterances.features[train.pairs[-1:, 1]])


def test_voxceleb_pairs_are_deterministic_per_seed_and_cut_as_a_prefix(tmp_path: Path) -> None:
    _write_voxceleb(tmp_path / voxceleb.FILE)
    where = _where(tmp_path, tmp_path)

    def pairs(seed: int, limit: int | None = None) -> np.ndarray:
        return voxceleb.load(DataRequest("voxceleb", train_limit=limit, seed=seed), where, 32).x_train.pairs

    full = pairs(1)
    np.testing.assert_array_equal(full, pairs(1))
    np.testing.assert_array_equal(pairs(1, limit=100), full[:100])
    assert not np.array_equal(pairs(2)[:100], full[:100])


def test_training_batches_are_reshuffled_each_epoch(tmp_path: Path) -> None:
    _write_voxceleb(tmp_path / voxceleb.FILE)
    data = voxceleb.load(DataRequest("voxceleb", train_limit=64, val_limit=64), _where(tmp_path, tmp_path), 16)
    (train_before, _), _ = data.x_train[0]
    (val_before, _), _ = data.x_val[0]
    for batches in (data.x_train, data.x_val):
        batches.on_epoch_end()
    (train_after, _), _ = data.x_train[0]
    (val_after, _), _ = data.x_val[0]
    assert not np.array_equal(train_after, train_before)
    np.testing.assert_array_equal(val_after, val_before)  # validation keeps its order
    labels = np.concatenate([data.x_train[i][1] for i in range(len(data.x_train))])
    assert labels.sum() == data.x_train.labels.sum()  # every pair once per epoch, in a new order


def test_missing_voxceleb_names_the_file_format_and_place(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailable) as caught:
        voxceleb.load(DataRequest("voxceleb"), _where(None, tmp_path / "cache"), 32)
    message = str(caught.value)
    assert "\n" not in message
    for expected in (voxceleb.FILE, "features", "speakers", str(tmp_path / "cache"), "docs/datasets.md"):
        assert expected in message


def test_malformed_voxceleb_file_is_rejected_by_field(tmp_path: Path) -> None:
    np.savez(tmp_path / voxceleb.FILE, features=np.zeros((4, 3, 2)), speakers=np.arange(4))  # float64
    with pytest.raises(ValueError, match="'features' must be float32"):
        voxceleb.load(DataRequest("voxceleb"), _where(tmp_path, tmp_path), 32)
    np.savez(tmp_path / voxceleb.FILE, features=np.zeros((4, 3, 2), np.float32))
    with pytest.raises(ValueError, match=r"missing array.*speakers"):
        voxceleb.load(DataRequest("voxceleb"), _where(tmp_path, tmp_path), 32)


def test_synthetic_voxceleb_has_1000_speakers_and_a_learnable_voice() -> None:
    data = voxceleb.load(DataRequest("synthetic", train_limit=640, val_limit=2000, seed=4), None, 32)
    assert (data.info.dataset, data.info.source, data.info.train_samples) == ("synthetic:voxceleb", "synthetic", 640)
    assert data.extras == {"utterance_shape": (voxceleb.FRAMES, voxceleb.N_FEATURES), "speakers": 1000}
    val = data.x_val
    # Speakers are learnable: the distance of time-averaged features separates same from different voices.
    means = val.features.mean(axis=1)
    distance = np.linalg.norm(means[val.pairs[:, 0]] - means[val.pairs[:, 1]], axis=1)
    assert ((distance < np.median(distance)) == (val.labels == 1)).mean() > 0.9


def test_both_models_train_on_their_data_as_the_harness_feeds_it(tweet_dir: Path, tmp_path: Path) -> None:
    where = _where(tweet_dir, tmp_path)
    tweet_data = twitter_sentiment_bilstm.load_data(DataRequest("tweets", train_limit=64, val_limit=16), where)
    model = twitter_sentiment_bilstm.build_model(tweet_data)
    model.compile(**twitter_sentiment_bilstm.compile_args())
    history = model.fit(
        tweet_data.x_train, tweet_data.y_train, batch_size=32, epochs=1, verbose=0,
        validation_data=(tweet_data.x_val, tweet_data.y_val),
    )  # fmt: skip
    assert np.isfinite(history.history["val_loss"][0])

    _write_voxceleb(tweet_dir / voxceleb.FILE)
    pairs = siamese_lstm.load_data(DataRequest("voxceleb", train_limit=64, val_limit=32), where)
    model = siamese_lstm.build_model(pairs)
    model.compile(**siamese_lstm.compile_args())
    history = model.fit(pairs.x_train, epochs=1, verbose=0, validation_data=pairs.x_val)
    assert set(history.history) >= {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert [layer.name for layer in model.layers if isinstance(layer, keras.layers.LSTM)] == ["encoder"]


@pytest.mark.slow
def test_cli_runs_both_workloads_on_real_format_files(tweet_dir: Path, keras_home: Path, tmp_path: Path) -> None:
    _write_voxceleb(tweet_dir / voxceleb.FILE)
    args = ["run", "--workload", "twitter_sentiment_bilstm,siamese_lstm", "--backend", "jax", "--platform", "t"]
    args += ["--epochs", "1", "--train-limit", "64", "--val-limit", "16", "--data-dir", str(tweet_dir)]
    result = run_benchmarks([*args, "--out", str(tmp_path), "--run-id", "r"], keras_home)
    assert result.returncode == 0, result.stderr[-3000:]
    for workload, dataset in (("twitter_sentiment_bilstm", "tweets"), ("siamese_lstm", "voxceleb")):
        log = read_epoch_log(tmp_path / "t" / "r" / f"{workload}_jax.csv")
        assert log.metadata is not None
        data = log.metadata.data
        assert (data.dataset, data.source, data.train_samples, data.val_samples) == (dataset, "real", 64, 16)
        assert data.files and all(len(f["sha256"]) == 64 for f in data.files)
        assert len(log.epochs) == 1 and log.final.val_acc is not None
