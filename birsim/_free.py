"""Freeing what an interrupted load leaves behind without making the caller wait.

A Ctrl-C during the load of a large program unwinds frames holding millions of objects
(the JSON tree, the tables begun). Freed where the exception passes, they cost seconds
before ``KeyboardInterrupt`` reaches the caller. :func:`defer` takes them from the
frames instead and a daemon thread frees them in slices of :data:`SLICE` elements, so
the interpreter switches back to the caller between slices (the GIL's switch interval)
and the interrupt arrives at once.

The loader pauses the cyclic collector, so every object it made sits in the youngest
generation; a collection in the caller would scan the whole tree while it is being
freed. The objects are moved to the permanent generation (``gc.freeze``, which takes
no time) until the thread is done, and moved back unless the process had frozen
objects of its own.
"""

import gc
import threading
import traceback

#: Elements one slice frees (a slice of instruction records frees ~20 objects each).
SLICE = 512
#: Containers nearer the root than this are walked whatever their size (a module or a
#: block is a small dict holding one huge list).
SPINE = 6


def defer(exc):
    """Hand the locals of ``exc``'s frames to a freeing thread and clear the frames;
    returns the thread."""
    held = []
    tb = exc.__traceback__
    while tb is not None:
        try:
            held.append(dict(tb.tb_frame.f_locals))
        except Exception:           # a frame that cannot show its locals keeps them
            pass
        tb = tb.tb_next
    traceback.clear_frames(exc.__traceback__)
    unfreeze = gc.get_freeze_count() == 0
    gc.freeze()
    worker = threading.Thread(target=_free, args=(held, unfreeze), name="birsim-free",
                              daemon=True)
    worker.start()
    return worker


def _free(held, unfreeze):
    try:
        _dismantle(held)
    finally:
        del held
        if unfreeze:
            gc.unfreeze()


def _dismantle(root):
    """Empty ``root`` and every container it holds, big ones first, a slice at a time."""
    stack = [(root, 0)]
    while stack:
        obj, depth = stack.pop()
        if isinstance(obj, dict):
            obj = list(obj.values()) if depth < SPINE or len(obj) > SLICE else None
        if not isinstance(obj, list):
            continue
        for x in obj:
            if isinstance(x, (list, dict)) and (depth < SPINE or len(x) > SLICE):
                stack.append((x, depth + 1))
        while obj:
            del obj[-SLICE:]       # frees up to SLICE small subtrees natively
