"""ProducerBatch on either batch core, whichever the package chose.

The differential tests compare the compiled ``BatchCore``'s appends with
``BatchCorePy``'s on batches that are otherwise ProducerBatch: the same class
body over each core (the package builds only the one it chose).
"""

from __future__ import annotations

import functools
from typing import Any

from aioproducer.engine import batch as batch_module
from aioproducer.engine.batch import BatchCorePy, ProducerBatch


@functools.cache
def batch_class(core: type[Any]) -> type[Any]:
    """ProducerBatch's body over ``core`` (ProducerBatch itself when it is the chosen core)."""
    if ProducerBatch.__base__ is core:
        return ProducerBatch
    if core is not BatchCorePy:  # the compiled core compares a batch's state with OPEN
        import aioproducer._speedups._kernels as kernels

        kernels.register_open_state(batch_module.OPEN)
    own = set(ProducerBatch.__slots__)
    body = {name: value for name, value in vars(ProducerBatch).items() if name not in own}
    return type("ProducerBatch", (core,), body)
