"""The Brain stages and how each one counts its steps against the user's schedule.

With a schedule, each Brain stage (``train``, ``valid``, ``test``) counts
its own steps against its own copy of the schedule: ``fit`` records its
training steps 4-8 (counting from 1, with the defaults) and ``evaluate``
its test steps 4-8, whatever ran before. One torch recording serves them
all: it runs while any stage is inside a cycle, and each step's label says
whether its stage's schedule reports it. Other step names (functions,
pretrained interfaces) share one count.

With a schedule, torch records nothing during a cycle's warm-up, so the first
recorded step would free blocks of unknown size (gradients freed by
``opt.zero_grad()`` at the top of a step were allocated in the step before):
torch drops those frees and the step reads as if it kept that memory. So the
warm-up steps are recorded here, labelled as warm-up and left out of every
figure (:class:`LeadInSchedule`).
"""
from __future__ import annotations

from typing import Any

from torch import profiler as tprof

BRAIN_STAGES = ("train", "valid", "test")
# A Brain profiled through fit() is profiled for training, through evaluate() for
# evaluation: fit's validation batches are left out unless asked for.
DEFAULT_BRAIN_STAGES = ("train", "test")
REPORTED_ACTIONS = (tprof.ProfilerAction.RECORD, tprof.ProfilerAction.RECORD_AND_SAVE)
SHARED_KEY = "*"  # the schedule count of every step that is not a Brain stage


def schedule_key(step: str) -> str:
    """Which schedule count a step advances: its own for a Brain stage, one shared count otherwise.

    Example
    -------
    >>> schedule_key("test"), schedule_key("transcribe_batch")
    ('test', '*')
    """
    return step if step in BRAIN_STAGES else SHARED_KEY


class LeadInSchedule:
    """The schedule torch runs: the user's, with the steps before each cycle's first reported step recorded.

    Warm-up steps are recorded instead of only prepared; a cycle without
    warm-up records the one step before its first reported step. Blocks
    allocated there have known sizes when a reported step frees them. Which
    steps are reported is still the user's schedule (:meth:`reports`).

    Example
    -------
    >>> from torch.profiler import ProfilerAction, schedule
    >>> lead_in = LeadInSchedule(schedule(wait=1, warmup=1, active=1))
    >>> [lead_in(i).name for i in range(3)], [lead_in.reports(i) for i in range(3)]
    (['NONE', 'RECORD', 'RECORD_AND_SAVE'], [False, False, True])
    >>> no_warmup = LeadInSchedule(lambda i: ProfilerAction.RECORD_AND_SAVE if i == 2 else ProfilerAction.NONE)
    >>> [no_warmup(i).name for i in range(3)], [no_warmup.reports(i) for i in range(3)]
    (['NONE', 'RECORD', 'RECORD_AND_SAVE'], [False, False, True])
    """

    def __init__(self, user: Any):
        self.user = user.user if isinstance(user, LeadInSchedule) else user

    def reports(self, step_num: int) -> bool:
        """Whether the user's schedule records step ``step_num`` (so its figures count)."""
        return self.user(step_num) in REPORTED_ACTIONS

    def __call__(self, step_num: int) -> tprof.ProfilerAction:
        action = self.user(step_num)
        if action == tprof.ProfilerAction.WARMUP or (action == tprof.ProfilerAction.NONE
                                                     and self.reports(step_num + 1)):
            return tprof.ProfilerAction.RECORD
        return action

    def __repr__(self) -> str:
        return repr(self.user)
