"""The SIMULATED KV block pool and the prompt's block hashes (vLLM's automatic prefix caching)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from duckdb_sem.backends.sim.blocks import BlockPool, _lead, prompt_block_hashes
from duckdb_sem.backends.tokens import estimate_tokens

_KW = {"template_tokens": 12, "block_size": 16}


def test_block_hashes_cover_the_prompts_full_blocks_and_chain() -> None:
    prefix = "Answer yes or no. " * 20
    a = prompt_block_hashes(prefix, "the food was great " * 10, prompt_tokens=300, **_KW)
    b = prompt_block_hashes(prefix, "the service was slow " * 10, prompt_tokens=300, **_KW)
    assert len(a) == len(b) == 300 // 16
    shared = sum(1 for x, y in zip(a, b, strict=True) if x == y)
    lead = (6 + len(prefix.split()) * 1) // 16  # header + one pseudo-token per short word
    assert shared >= lead > 0
    # chained: once two prompts differ, no later block is equal again
    assert all(x != y for x, y in zip(a[shared:], b[shared:], strict=True))


def test_equal_leading_text_shares_blocks_whatever_follows() -> None:
    common = "Examples of inputs and the expected answers: " * 8
    a = prompt_block_hashes(common + "Is it about food?", "r", prompt_tokens=200, **_KW)
    b = prompt_block_hashes(common + "Is it about sport?", "r", prompt_tokens=200, **_KW)
    c = prompt_block_hashes("Something else entirely. " + common, "r", prompt_tokens=200, **_KW)
    assert a[:4] == b[:4] and a[-1] != b[-1]
    assert a[0] != c[0]


def test_a_long_prefix_that_counts_more_pseudo_tokens_still_leaves_the_row_its_blocks() -> None:
    # five-letter words are two pseudo-tokens each, charged 1.5 (about 4 characters a token):
    # the prefix's 600 pseudo-tokens outnumber its 450 charged ones by more than a row
    prefix = "abcde " * 300
    row_a, row_b = "first row " * 20, "other row " * 20
    charged = 6 + estimate_tokens(prefix)
    prompt = charged + estimate_tokens(row_a) + 6
    a = prompt_block_hashes(prefix, row_a, prompt_tokens=prompt, **_KW)
    b = prompt_block_hashes(prefix, row_b, prompt_tokens=prompt, **_KW)
    assert a[: charged // 16] == b[: charged // 16]
    assert a[charged // 16 + 1 :] and all(
        x != y for x, y in zip(a[charged // 16 + 1 :], b[charged // 16 + 1 :], strict=True)
    )


def test_a_short_prompt_has_no_full_block_and_a_long_one_is_padded_to_its_length() -> None:
    assert prompt_block_hashes("", "hi", prompt_tokens=15, **_KW) == ()
    long = prompt_block_hashes("x", "y", prompt_tokens=64, **_KW)
    assert len(long) == 4 and len(set(long)) == 4


def test_allocation_reuses_hits_and_evicts_least_recently_freed_first() -> None:
    pool = BlockPool(num_blocks=6)
    a = pool.allocate((), total=3)
    assert a is not None
    for i, block in enumerate(a):
        pool.cache(block, 100 + i)
    pool.free(a)  # tail first: a[2], a[1], a[0] join the queue after the 3 untouched blocks
    assert pool.hits((100, 101, 102, 999)) == 3 and pool.hits((101,)) == 1
    b = pool.allocate((100, 101), total=4)  # two hits, two fresh (untouched blocks first)
    assert b is not None and b[:2] == [a[0], a[1]] and pool.evictions == 0
    assert pool.free_blocks == 2  # one untouched, and a[2] (cached, unused)
    c = pool.allocate((), total=2)  # takes the untouched block, then evicts a[2]
    assert c is not None and pool.evictions == 1
    assert pool.hits((100, 101, 102)) == 2
    assert pool.allocate((), total=1) is None  # every block is in use: nothing evicted
    assert pool.evictions == 1


def test_shared_blocks_are_counted_once_and_freed_when_the_last_user_ends() -> None:
    pool = BlockPool(num_blocks=4)
    first = pool.allocate((), total=2)
    assert first is not None
    pool.cache(first[0], 7)
    second = pool.allocate((7,), total=3)  # shares block 7: needs two fresh blocks of 2 free
    assert second is not None and pool.free_blocks == 0
    pool.free(first)
    assert pool.free_blocks == 1  # block 7 is still used by ``second``
    pool.free(second)
    assert pool.free_blocks == 4 and pool.hits((7,)) == 1


def _reference(prefix: str, row: str, *, prompt_tokens: int, template_tokens: int,
               block_size: int) -> tuple[int, ...]:  # fmt: skip
    """The block hashes block by block, each from its parts (the definition the fast path of
    ``prompt_block_hashes``, one slice per block inside the row, must reproduce)."""
    header = template_tokens // 2
    lead, rest = _lead(prefix, header, block_size)
    full = prompt_tokens // block_size
    if full <= len(lead):
        return lead[:full]
    r, m = len(rest), (len(row) + 3) // 4
    t = r + m + template_tokens - header
    hashes, parent = list(lead), lead[-1] if lead else 0
    for j in range(full - len(lead)):
        lo, hi = j * block_size, (j + 1) * block_size
        if r <= lo and hi <= r + m:
            parent = hash((parent, row[(lo - r) * 4 : (hi - r) * 4]))
        else:
            row_lo, row_hi = min(max(lo - r, 0), m), min(max(hi - r, 0), m)
            pad = max(0, hi - max(lo, t))
            trailer = max(0, min(hi, t) - max(lo, r + m))
            parent = hash((parent, rest[lo:hi] if lo < r else (), row[row_lo * 4 : row_hi * 4],
                           trailer, (pad, row) if pad else None))  # fmt: skip
        hashes.append(parent)
    return tuple(hashes)


@settings(max_examples=300, deadline=None)
@given(
    prefix=st.text(alphabet="ab c", max_size=200),
    row=st.text(alphabet="xy z", max_size=900),
    extra=st.integers(-8, 40),
    template_tokens=st.integers(0, 40),
    block_size=st.sampled_from([1, 4, 16]),
)
def test_block_hashes_match_the_block_by_block_definition(
    prefix: str, row: str, extra: int, template_tokens: int, block_size: int
) -> None:
    prompt = max(1, estimate_tokens(prefix) + estimate_tokens(row) + template_tokens + extra)
    kw = {"prompt_tokens": prompt, "template_tokens": template_tokens, "block_size": block_size}
    assert prompt_block_hashes(prefix, row, **kw) == _reference(prefix, row, **kw)
