"""The public :class:`Producer` (:mod:`.facade`) and the parts it is made of.

``Producer`` is a thin class over parts it holds or inherits: its settings
(:mod:`.settings`), its event loop (:mod:`.loop_binding`), its serializers
(:mod:`.serializer_prepare`), start and close (:mod:`.lifecycle`), the
transaction API (:mod:`.transactions_api`) and the bulk API
(:mod:`.bulk_api`). What exists only while it runs (client, sender,
transaction manager, admission, lanes) is one object, :class:`.running.Running`,
built by ``start()``.
"""

from .facade import Producer

__all__ = ["Producer"]
