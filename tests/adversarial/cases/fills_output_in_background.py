# expect: integrity_violation thread_left_running
# Returns an empty output at once and lets a background thread fill it in a moment later (an
# asynchronous "kernel" the caller never waits for). The thread comes from the logging package's
# QueueListener (the static screen flags that since static_cases/queue_listener_thread.py; the
# corpus runs with the screen off, so this case tests the runtime thread census alone); the record
# it handles carries the work, and the sentinel after it ends the one thread within a fraction of a second.
import logging
import logging.handlers
import queue
import time

import torch
import torch.nn as nn


class _FillLater(logging.Handler):
    def __init__(self, linear):
        super().__init__()
        self.linear = linear

    def emit(self, record):
        x, out = record.work
        time.sleep(0.2)  # long after forward has returned
        with torch.no_grad():
            out.copy_(torch.relu(self.linear(x)))


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.fill = _FillLater(self.linear)

    def forward(self, x):
        out = torch.empty(x.shape[0], self.linear.out_features, device=x.device)
        work = queue.SimpleQueue()
        listener = logging.handlers.QueueListener(work, self.fill)
        listener.start()
        work.put(logging.makeLogRecord({"work": (x, out)}))
        work.put(None)  # QueueListener's sentinel: the thread ends after this one record
        return out
