"""Boundary times to per-module times, on made-up timelines (the ground truth is the arithmetic)."""
from sbprof.measuring.modules.timeline import (END_OF_BACKWARD, BackwardMark, Call, StepTimeline, backward_self, label_times,
                                     owner_of, top_level_time)


def nested_step():
    # forward: enc [0, 40] holds l0 [5, 15] and l1 [20, 35]; sequence numbers:
    # 0-1 enc's own, 2-4 l0, 5-6 enc's own, 7-9 l1, 10 enc's own, 11+ outside.
    calls = [Call("enc", None, 0, 40), Call("l", 0, 5, 15), Call("l", 0, 20, 35)]
    starts, owners = [0, 2, 5, 7, 10, 11], [0, 1, 0, 2, 0, None]
    # backward runs in decreasing sequence numbers: outside, enc, l1, enc, l0, enc, end.
    marks = [BackwardMark(50, 12), BackwardMark(52, 10), BackwardMark(55, 9), BackwardMark(65, 6),
             BackwardMark(67, 4), BackwardMark(80, 1), BackwardMark(81, END_OF_BACKWARD)]
    return StepTimeline("train", 0, 100, calls, starts, owners, marks, spans=[("optimizer", 85, 95)])


def test_owner_of_follows_the_sequence_segments():
    t = nested_step()
    assert [owner_of(s, t.seq_starts, t.seq_owners) for s in (0, 3, 6, 8, 10, 15)] == [0, 1, 0, 2, 0, None]


def test_backward_intervals_go_to_the_owner_of_the_node_that_opened_them():
    own, outside = backward_self(nested_step())
    assert own == [3 + 2 + 1, 13, 10] and outside == 2


def test_totals_nest_and_selfs_exclude_inner_calls():
    times = label_times(nested_step())
    enc, layer = times["enc"], times["l"]
    assert (enc.calls, enc.forward, enc.forward_self) == (1, 40, 40 - 10 - 15)
    assert (enc.backward, enc.backward_self) == (6 + 13 + 10, 6)
    assert (layer.calls, layer.forward, layer.forward_self, layer.backward) == (2, 25, 25, 23)


def test_top_level_plus_outside_makes_the_step():
    t = nested_step()
    inside = top_level_time(t)
    assert inside == 40 + 29 + 10  # enc forward + enc backward + optimizer
    # the rest of the 100-unit step: the outside backward interval and gaps
    assert t.end - t.start - inside == 21


def test_two_backward_passes_do_not_bridge_the_gap_between_them():
    t = StepTimeline("s", 0, 100, [Call("a", None, 0, 10)], [0, 1], [None, 0],
                     [BackwardMark(20, 3), BackwardMark(30, END_OF_BACKWARD),
                      BackwardMark(60, 3), BackwardMark(65, END_OF_BACKWARD)])
    assert backward_self(t) == ([15.0], 0.0)
