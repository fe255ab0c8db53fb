"""A worker that misbehaves on request, for the supervisor's tests: ``python -m misbehaving_worker FD``.

Each item is ``{"do": ...}``: ``ok`` answers at once, ``hang`` never answers, ``exit`` ends the process after
answering (so it dies *between* items), ``crash`` ends it inside the item.
"""
import os
import sys
import time

from sbprof.workers.protocol import serve


def run(job, channel):
    channel.loaded()
    for index in job["indices"]:
        do = job["items"][index]["do"]
        channel.start(index)
        if do == "hang":
            time.sleep(3600)
        if do == "crash":
            os._exit(7)
        channel.result(index, {"index": index})
        if do == "exit":
            os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(serve(run))
