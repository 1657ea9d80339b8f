"""A FastAPI service that publishes events, with the producer in the app's ``lifespan``.

    pip install 'aioproducer[fastapi]'
    KAFKA_BOOTSTRAP=localhost:9092 uvicorn examples.fastapi_service:app

The producer starts before the first request (a cluster that does not answer
within ``max_block_ms`` fails the start-up) and closes after the last one,
bounded by ``close_timeout`` so a stuck broker cannot hold up a deploy. Each
request waits at most ``PRODUCE_TIMEOUT`` seconds for its event to be
acknowledged: then it is a 503 with ``Retry-After``, and the body says whether
the client may resend it without a duplicate (``safe_to_retry``).
"""

import json
import os
from typing import Any

from fastapi import FastAPI

from aioproducer import Producer
from aioproducer.integrations.fastapi import ProducerDep, producer_lifespan, send_within

PRODUCE_TIMEOUT = 2.0  # seconds a request waits for its event's acknowledgement


def create_app(bootstrap_servers: str, **config: Any) -> FastAPI:
    app = FastAPI(lifespan=producer_lifespan(lambda: Producer(bootstrap_servers, **config)))

    @app.post("/events/{topic}")
    async def publish(topic: str, event: dict[str, Any], producer: ProducerDep) -> dict[str, int]:
        key = event.get("id")
        md = await send_within(
            producer,
            topic,
            json.dumps(event).encode(),
            key=None if key is None else str(key).encode(),
            timeout=PRODUCE_TIMEOUT,
        )
        return {"partition": md.partition, "offset": md.offset}

    return app


app = create_app(
    os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092"), linger_ms=5, max_block_ms=5_000
)
