"""Where the ``llama:`` backend cuts a prompt into the segments it evaluates one after another.

A decision's prompt is evaluated in segments so that later prompts reuse the KV cache of the
leading ones: the instruction and template lead (every row of a template shares it), then for a
join's pair its first side (every pair of that left value shares it), then the rest. The first
cut (the end of the lead) is where it always was; every later cut is moved back to a whole
number of :data:`ROW_GROUP` tokens after it, and dropped where it would leave a segment of
fewer than :data:`MIN_SEGMENT` tokens, because of how llama.cpp computes.

The floats llama.cpp's CPU kernels give a token depend on where the token falls in its batch:
with repacked weights (``ggml-cpu/repack.cpp``: gemma-3-270m's Q4_K, Q6_K and Q8_0 matrices
on an AVX2 CPU) a matrix product takes a batch's rows four at a time and its last ``n % 4``
rows one by one, in another float order. A cut anywhere would regroup the tokens after it, so
a pair would score differently evaluated in segments than in one piece (by up to 0.29 in
margin on the review-to-plot pairs of ``benchmarks/bench_join_prefix.py``), and decisions near
the threshold flipped. Cut on whole groups after the lead, each token falls in the group it
falls in without the cut: the segments change what is reused, not a score, whether the cache
held a segment or not and whatever was evaluated before (``tests/backends/
test_llama_segments.py``; measured on gemma, segments of 8 to 130 tokens).

Example:
    >>> segment_bounds(340, [359], 482)  # the lead ends at 340, a review at 359
    [0, 340, 356, 482]
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from duckdb_sem.backends.llama_model import LoadedModel

__all__ = ["MIN_SEGMENT", "ROW_GROUP", "eval_segments", "segment_bounds"]

#: how many rows llama.cpp's repacked CPU matrix kernels take at once (its ``gemm`` tiles)
ROW_GROUP = 4
#: the fewest tokens of a segment after the lead: a 4-token one still moved a pair's score
#: (by 0.03 on gemma, reason not found); 8 or more gave the same floats in every case measured
MIN_SEGMENT = 8


def segment_bounds(lead: int, cuts: Sequence[int], n_tokens: int) -> list[int]:
    """Where the segments of an ``n_tokens`` prompt start and end: 0, ``lead`` (the end of the
    instruction and template lead; 0 for none), each of ``cuts`` moved back to a whole number
    of :data:`ROW_GROUP` tokens after ``lead``, then ``n_tokens``. A cut outside the prompt, or
    that would leave a segment shorter than :data:`MIN_SEGMENT`, is dropped.

    Example:
        >>> segment_bounds(5, [9, 15], 20)  # 9 is four tokens past the lead: too short a segment
        [0, 5, 13, 20]
    """
    if n_tokens <= 0:
        return [0]
    lead = lead if 0 < lead < n_tokens else 0
    bounds = sorted({0, lead})
    for cut in sorted(
        lead + (c - lead) // ROW_GROUP * ROW_GROUP for c in cuts if lead < c < n_tokens
    ):
        if cut - bounds[-1] >= MIN_SEGMENT:
            bounds.append(cut)
    return [*bounds, n_tokens]


def eval_segments(model: LoadedModel, tokens: Sequence[int], lead: int, cuts: Sequence[int]) -> int:
    """Evaluate ``tokens`` on ``model`` in the segments of :func:`segment_bounds`, reusing the
    KV cache of every leading segment it already holds; how many tokens it reused.

    Segment boundaries are fixed by the template, never by what was evaluated before: the
    prefix from position 0, each later segment from the end of the one before. The cache is
    reused only where it was cut at the same lead (``LoadedModel.kv_lead``): a cache reused
    from an arbitrary common point, or cut at another lead, would hold other floats for the
    same tokens, so scores would depend on history; after one lead, cuts on whole groups give
    the same floats whatever they are.
    """
    import numpy as np

    llama = model.llama
    bounds = segment_bounds(lead, cuts, len(tokens))
    first = lead if bounds[1:2] == [lead] else 0  # no lead: groups from the prompt's start
    have = 0  # segments already in the cache
    if model.kv_lead[0] == first:
        held = llama.input_ids[: llama.n_tokens]
        for i, end in enumerate(bounds[1:-1], start=1):
            if len(held) >= end and np.array_equal(held[:end], tokens[:end]):
                have = i
    llama.n_tokens = bounds[have]  # eval() drops the KV cache after n_tokens
    model.kv_lead[0] = -1  # until the evaluation is done
    for start, end in itertools.pairwise(bounds[have:]):
        llama.eval(tokens[start:end])
    model.kv_lead[0] = first
    return bounds[have]
