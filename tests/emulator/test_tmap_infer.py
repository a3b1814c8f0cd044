"""Tensor maps inferred from a kernel's mbarrier byte counts and coordinates
(``emulator.tmap_infer``): the solver on probe logs written by hand, and the marks."""

from collections import Counter

from emulator import tmap_infer as ti
from emulator.async_copy import decode_tensor_map

A, B, C = 0, 5, 10
NAMES = {A: "a_desc", B: "b_desc", C: "c_desc"}


def _log(copies, equations):
    log = ti.ProbeLog()
    for p, coords, cta, smem, load in copies:
        log.copies.append(ti._Copy(p, coords, cta, smem, load))
        log.ranks.setdefault(p, len(coords))
    for cnt, t in equations:
        spans = [(p, 0, 0x10000 * i) for i, p in enumerate(Counter(cnt).elements())]
        log.equations.append((Counter(cnt), t, spans))
    return log


def _ring(stages=2, a_bytes=4096, b_bytes=8192, k_steps=4):
    """copies of a 2-stage GEMM ring in 2 CTAs: A at 0 + s * a_bytes, B after the A stages."""
    cp = []
    for cta in range(2):
        for k in range(k_steps):
            s = k % stages
            cp.append((A, (64 * k, 32 * cta), cta, s * a_bytes, True))
            cp.append((B, (64 * k, 0), cta, stages * a_bytes + s * b_bytes, True))
    return cp


def test_one_map_per_phase_reads_its_bytes_off_expect_tx():
    log = _log(_ring(), [({A: 1}, 4096), ({B: 1}, 8192)] * 3)
    maps, why = ti.infer_maps(log, {A: "a_desc", B: "b_desc"})
    assert why == "" and maps[A].box_bytes == 4096 and maps[B].box_bytes == 8192
    # A's coordinates step by 64 (k) and 32 (CTA): a 64 x 32 box of 2-byte elements
    assert (maps[A].esize, maps[A].box) == (2, (64, 32))


def test_two_maps_in_one_phase_are_split_by_their_stage_distance():
    # A + B = 12288 in every phase: B's coordinates do not move in dim 1, so the steps cannot
    # split it; the distance between B's two stage buffers (8192) does
    log = _log(_ring(), [({A: 1, B: 1}, 12288)] * 6)
    maps, why = ti.infer_maps(log, {A: "a_desc", B: "b_desc"})
    assert why == "", why
    assert (maps[A].box_bytes, maps[B].box_bytes) == (4096, 8192)


def test_a_wrong_split_that_overlaps_the_next_stage_is_not_taken():
    # with one stage buffer per map there is no distance; the steps give A = 64 x 32 x es
    # and B's bytes follow from the equation
    cp = [(A, (64 * k, 32 * c), c, 0, True) for c in range(2) for k in range(2)] + \
         [(B, (64 * k, 0), c, 4096, True) for c in range(2) for k in range(2)]
    maps, why = ti.infer_maps(_log(cp, [({A: 1, B: 1}, 12288)] * 4), {A: "a", B: "b"})
    assert why == "" and maps[A].box_bytes == 4096 and maps[B].box_bytes == 8192


def test_the_most_common_byte_count_of_a_phase_shape_wins():
    # one phase expects 16 bytes more (one wrong expect_tx site): the other phases decide the
    # box, the checked run then reports the odd phase
    log = _log(_ring(), [({A: 1}, 4096)] * 3 + [({A: 1}, 4112)] + [({B: 1}, 8192)] * 4)
    maps, why = ti.infer_maps(log, {A: "a", B: "b"})
    assert why == "" and maps[A].box_bytes == 4096


def test_disagreeing_counts_with_no_majority_take_the_earliest_phase():
    cp = [(A, (64 * k, 0), 0, 0, True) for k in range(2)]
    log = _log(cp, [({A: 1}, 4096), ({A: 1}, 8192)])
    maps, why = ti.infer_maps(log, {A: "a_desc"})
    # a tie: the first phase's count; the checked run then reports the other phase's
    assert why == "" and maps[A].box_bytes == 4096


def test_counts_beyond_the_stage_distance_take_the_distance():
    # 4096 B stage buffers but every phase expects 4608: the copies would overrun the next
    # stage, so the map gets the distance and the checked run reports the byte count
    log = _log(_ring(), [({A: 1}, 4608)] * 4 + [({B: 1}, 8192)] * 4)
    maps, why = ti.infer_maps(log, {A: "a", B: "b"})
    assert why == "" and maps[A].box_bytes == 4096
    assert "imply more" in maps[A].how


def test_a_map_only_stored_through_gets_an_under_estimate():
    cp = _ring() + [(C, (0, 128 * c), c, 0x8000, False) for c in range(2)]
    log = _log(cp, [({A: 1}, 4096), ({B: 1}, 8192)])
    maps, why = ti.infer_maps(log, NAMES)
    assert why == ""
    # 1-byte elements, dim 1 at most its step (128), dim 0 did not move: one 16-byte row
    assert (maps[C].esize, maps[C].box) == (1, (16, 128))


def test_loads_whose_phases_never_completed_are_not_guessed():
    maps, why = ti.infer_maps(_log(_ring(), []), {A: "a_desc", B: "b_desc"})
    assert maps == {} and "'a_desc'" in why and "never completed" in why


def test_a_rank_conflict_is_reported():
    log = _log(_ring(), [({A: 1}, 4096)])
    log._note(A, [0, 0, 0])
    maps, why = ti.infer_maps(log, {A: "a_desc", B: "b_desc"})
    assert maps == {} and "2 and with 3 coordinates" in why


def test_marks_round_trip_and_inferred_maps_decode():
    raw = ti.probe_map(3)
    assert ti.map_tag(raw) == ti.TagInfo("P", 3) and ti.map_tag(raw).probe
    m = ti.InferredMap(7, 2, (64, 32), "test")
    enc = m.encode(0x10000)
    assert ti.map_tag(enc) == ti.TagInfo("I", 7)
    tm = decode_tensor_map(enc, "t")
    assert tm.box == (64, 32) and tm.esize == 2 and tm.box_bytes == 4096
    assert m.tensor_bytes() == 4096
    assert ti.map_tag(bytes(128)) is None
