"""The GPU when there is one (issue 29, part 3): EMBEDDING_BACKEND=auto picks torch on a CUDA
machine, and the split's nearest-neighbour search gives the same selection on the CPU and on
the GPU (mining/neighbour_search.py: one blocked algorithm, screened in float32 by NumPy or in
float16 by PyTorch, confirmed in float64).

No Django here, so the file also runs on a GPU machine without the web stack
(scripts/gpu_split_check.sh), where the torch test at the end runs for real."""

from __future__ import annotations

import numpy as np
import pytest

from bench.split_dedup import NEAR_TIE_OFFSETS, differences, planted_vectors, run_split
from mining.embeddings import EmbeddingModelUnavailable, backend_order
from mining.neighbour_search import ExactIndex, NeighbourIndex, NumpySearchOps, nearest_neighbours, search_ops
from mining.split_dedup import l2_normalise

TAU = 0.65

# --- which embedding backend auto picks -------------------------------------------------


def test_auto_picks_torch_first_where_a_cuda_device_and_the_torch_stack_are_present():
    assert backend_order("auto", cuda_present=True, torch_importable=True) == ("torch", "numpy")


@pytest.mark.parametrize("cuda, importable", [(False, True), (True, False), (False, False)])
def test_auto_picks_numpy_first_without_a_cuda_device_or_without_torch(cuda, importable):
    assert backend_order("auto", cuda_present=cuda, torch_importable=importable) == ("numpy", "torch")


@pytest.mark.parametrize("requested", ["numpy", "torch"])
def test_a_named_backend_is_the_only_one_tried_whatever_the_machine(requested):
    for cuda in (False, True):
        assert backend_order(requested, cuda_present=cuda, torch_importable=cuda) == (requested,)


def test_backend_order_refuses_an_unknown_backend():
    with pytest.raises(EmbeddingModelUnavailable, match="EMBEDDING_BACKEND=onnx: expected one of auto, numpy, torch"):
        backend_order("onnx", cuda_present=True, torch_importable=True)


# --- the screened search against the exact one -----------------------------------------

SIZE, DIM, PER_TOPIC = 4000, 384, 60


@pytest.fixture(scope="module")
def planted():
    vectors, topics, counts = planted_vectors(SIZE, dim=DIM, topics=8, tau=TAU, seed=7)
    return vectors, topics


def _half(corpus: np.ndarray) -> NeighbourIndex:
    # The GPU's arithmetic on the CPU, in small blocks so that rows and columns both span blocks.
    return NeighbourIndex(corpus, ops=NumpySearchOps(half=True, block_rows=97, block_columns=1000))


def _float32(corpus: np.ndarray) -> NeighbourIndex:
    return NeighbourIndex(corpus, ops=NumpySearchOps(block_rows=97, block_columns=1000))


def test_the_planted_near_ties_are_ones_that_float16_alone_gets_wrong(planted):
    # Without this the comparisons below could pass by luck: a plain float16 search (argmax
    # of the float16 scores) picks another neighbour or the other side of tau for some rows.
    vectors, _ = planted
    rows = np.arange(len(vectors))
    exact_index, exact_sim = nearest_neighbours(vectors, vectors, exclude=rows)
    half = vectors.astype(np.float16).astype(np.float32)
    scores = (half @ half.T).astype(np.float16)
    scores[rows, rows] = -np.inf
    naive_index = scores.argmax(axis=1)
    naive_sim = scores[rows, naive_index].astype(np.float64)
    assert (naive_index != exact_index).sum() > 0
    assert ((naive_sim > TAU) != (exact_sim > TAU)).sum() > 0
    close = np.abs(exact_sim - TAU) < max(abs(o) for o in NEAR_TIE_OFFSETS) + 1e-6
    assert close.sum() >= SIZE // 50  # the planted near-ties are there


@pytest.mark.parametrize("make", [_float32, _half], ids=["numpy-float32", "numpy-float16"])
def test_the_screened_search_finds_the_exact_search_s_neighbours(planted, make):
    vectors, _ = planted
    rows = np.arange(len(vectors))
    exact_index, exact_sim = nearest_neighbours(vectors, vectors, exclude=rows)
    index, sim = make(vectors).nearest(vectors, exclude=rows)
    full = vectors.astype(np.float64) @ vectors.T.astype(np.float64)
    full[rows, rows] = -np.inf
    best = full.max(axis=1)
    tied = (full >= best[:, None] - 1e-12).sum(axis=1) > 1  # copies of one row: float32 cannot order them
    assert tied.sum() > 0
    assert index[~tied].tolist() == exact_index[~tied].tolist()
    lowest = np.argmax(full >= best[:, None] - 1e-12, axis=1)
    assert index[tied].tolist() == lowest[tied].tolist()  # a tie goes to the lowest index
    assert np.abs(sim - exact_sim).max() < 1e-6
    assert ((sim > TAU) == (exact_sim > TAU)).all()
    # float64 cosines of the float32 rows, whichever library screened
    expected = (vectors[rows].astype(np.float64) * vectors[index].astype(np.float64)).sum(axis=1)
    assert np.abs(sim - expected).max() < 1e-12


def test_cpu_and_gpu_arithmetic_give_the_exact_search_s_selection(planted):
    vectors, topics = planted
    reference = run_split(vectors, topics, per_topic=PER_TOPIC, tau=TAU, device=ExactIndex)
    float32 = run_split(vectors, topics, per_topic=PER_TOPIC, tau=TAU, device=_float32)
    half = run_split(vectors, topics, per_topic=PER_TOPIC, tau=TAU, device=_half)
    assert len(reference[0].dropped) > 20  # the planted near-duplicates are dropped
    for other in (float32, half):
        diff = differences(vectors, reference[:2], other[:2])
        assert {k: v for k, v in diff.items() if k not in ("largest_cosine_difference", "tied_neighbours")} == {
            "bench_differs": 0,
            "dropped_differs": 0,
            "train_differs": 0,
            "candidate_neighbour_differs": 0,
            "nearest_train_differs": 0,
        }
        assert diff["largest_cosine_difference"] < 1e-6
    # the two screened paths agree to the last bit (the same float64 confirmation)
    same = differences(vectors, float32[:2], half[:2])
    assert same["largest_cosine_difference"] == 0.0 and same["tied_neighbours"] == 0


def _rounding_trap(dim: int = 384, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A query q and two rows p, r with q.p > q.r exactly, but which float16 screening ranks
    the other way round: p's components sit just below a float16 midpoint (each rounds
    down), r's just above one (each rounds up), and r's rounded row is p's with components
    bumped one float16 step until its float16 score is the higher one."""
    rng = np.random.default_rng(seed)
    q = np.abs(rng.normal(size=dim))
    q = (q / np.linalg.norm(q)).astype(np.float16).astype(np.float64)  # no rounding on q's side
    base = np.abs(rng.normal(size=dim))
    p16 = (base / np.linalg.norm(base)).astype(np.float16)
    up = np.nextafter(p16, np.float16(np.inf)).astype(np.float64)
    p = (p16.astype(np.float64) + 0.49 * (up - p16)).astype(np.float32)  # rounds down to p16

    def screen(row16: np.ndarray) -> np.float16:
        return np.float16(np.float32(q.astype(np.float32) @ row16.astype(np.float32)))

    r16 = p16.copy()
    for j in np.argsort(-q):  # bump where q weighs most
        r16[j] = np.nextafter(r16[j], np.float16(np.inf))
        if screen(r16) > screen(p16):
            break
    down = np.nextafter(r16, np.float16(-np.inf)).astype(np.float64)
    r = (r16.astype(np.float64) - 0.49 * (r16 - down)).astype(np.float32)  # rounds up to r16
    assert (p.astype(np.float16) == p16).all() and (r.astype(np.float16) == r16).all()
    assert screen(r16) > screen(p16)  # float16 ranks r first ...
    assert q @ p.astype(np.float64) > q @ r.astype(np.float64)  # ... but p is the nearer
    return q.astype(np.float32), p, r


def test_a_row_that_float16_ranks_second_is_still_found_as_the_nearest():
    q, p, r = _rounding_trap()
    exact_p, exact_r = (q.astype(np.float64) @ row.astype(np.float64) for row in (p, r))
    for make in (_float32, _half):
        index, sim = make(np.vstack([r, p])).nearest(q[None, :])
        assert index.tolist() == [1] and sim[0] == exact_p
    # With tau between the two, the split drops the query as the exact search does (r and p,
    # near copies of each other, drop each other).
    tau = float((exact_p + exact_r) / 2)
    vectors = np.vstack([q, r, p])
    for device in (ExactIndex, _float32, _half):
        selection = run_split(vectors, ["a", "b", "b"], per_topic=1, tau=tau, device=device)[0]
        assert selection.dropped == [0, 1, 2] and selection.candidate_neighbour[0][0] == 2


def test_ties_go_to_the_lowest_index_and_excluded_rows_are_never_matched():
    base = l2_normalise(np.random.default_rng(3).normal(size=(6, 32)))
    corpus = np.vstack([base, base[2:3], base[2:3]])  # rows 6 and 7 copy row 2
    for make in (_float32, _half):
        index, sim = make(corpus).nearest(corpus[[2, 6, 7]], exclude=np.array([2, 6, -1]))
        assert index.tolist() == [6, 2, 2]
        assert np.allclose(sim, 1.0)


def test_a_query_without_an_eligible_row_gets_minus_one_on_every_path():
    vectors = l2_normalise(np.array([[1.0, 0.0]]))
    for make in (_float32, _half, ExactIndex):
        index, sim = make(vectors).nearest(vectors, exclude=np.array([0]))
        assert index.tolist() == [-1] and np.isneginf(sim[0])
        index, _ = make(np.zeros((0, 2), dtype=np.float32)).nearest(vectors)
        assert index.tolist() == [-1]


def test_rows_of_any_length_are_screened_without_overflow():
    # float16 ends at 65,504: rows are scaled by a power of two before the screen.
    rng = np.random.default_rng(11)
    corpus = rng.normal(size=(300, 48)).astype(np.float32) * 1000.0
    queries = rng.normal(size=(40, 48)).astype(np.float32) * 1e-3
    exact_index, _ = nearest_neighbours(queries, corpus)
    index, sim = _half(corpus).nearest(queries)
    assert index.tolist() == exact_index.tolist()
    assert np.isfinite(sim).all()


def test_the_search_refuses_nan_and_a_device_it_does_not_know():
    with pytest.raises(ValueError, match="NaN or an infinity"):
        NeighbourIndex(np.array([[np.nan, 1.0]], dtype=np.float32))
    with pytest.raises(ValueError, match="unknown search device 'tpu'"):
        search_ops("tpu")


def test_asking_for_the_gpu_search_without_pytorch_says_what_to_install():
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="needs PyTorch"):
            search_ops("cuda")
    else:
        pytest.skip("torch is installed here")


# --- on a GPU machine (scripts/gpu_split_check.sh) ---------------------------------------


def test_the_torch_search_on_a_gpu_gives_the_numpy_search_s_selection(planted):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from mining.neighbour_search import TorchSearchOps

    def gpu(corpus):  # small blocks: both dimensions span several
        return NeighbourIndex(corpus, ops=TorchSearchOps(block_rows=97, block_columns=1000))

    q, p, r = _rounding_trap()
    assert gpu(np.vstack([r, p])).nearest(q[None, :])[0].tolist() == [1]
    vectors, topics = planted
    cpu = run_split(vectors, topics, per_topic=PER_TOPIC, tau=TAU, device="cpu")
    for device in (gpu, "cuda"):
        on_gpu = run_split(vectors, topics, per_topic=PER_TOPIC, tau=TAU, device=device)
        assert differences(vectors, cpu[:2], on_gpu[:2]) == {
            "bench_differs": 0,
            "dropped_differs": 0,
            "train_differs": 0,
            "candidate_neighbour_differs": 0,
            "nearest_train_differs": 0,
            "tied_neighbours": 0,
            "largest_cosine_difference": 0.0,
        }
