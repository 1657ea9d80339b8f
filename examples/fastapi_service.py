"""A FastAPI service that publishes events, with the producer in the app's ``lifespan``.

    pip install 'aioproducer[fastapi]'
    KAFKA_BOOTSTRAP=localhost:9092 uvicorn examples.fastapi_service:app

The producer starts before the first request (a cluster that does not answer
within ``max_block_ms`` fails the start-up) and closes after the last one,
bounded by ``CLOSE_TIMEOUT`` so a stuck broker cannot hold up a deploy.
"""

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request

from aioproducer import Producer, errors

CLOSE_TIMEOUT = 10.0  # seconds that pending records get at shutdown


def get_producer(request: Request) -> Producer:
    return request.app.state.producer  # type: ignore[no-any-return]


# Handlers declare ``producer: ProducerDep`` and receive the app's started producer.
ProducerDep = Annotated[Producer, Depends(get_producer)]


def create_app(bootstrap_servers: str, **config: Any) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        producer = Producer(bootstrap_servers, **config)
        await producer.start()
        app.state.producer = producer
        try:
            yield
        finally:
            await producer.close(timeout=CLOSE_TIMEOUT)

    app = FastAPI(lifespan=lifespan)

    @app.post("/events/{topic}")
    async def publish(topic: str, event: dict[str, Any], producer: ProducerDep) -> dict[str, int]:
        key = event.get("id")
        try:
            md = await producer.send(
                topic, json.dumps(event).encode(), key=None if key is None else str(key).encode()
            )
        except errors.KafkaTimeoutError as exc:  # buffer full for max_block_ms: shed load
            raise HTTPException(503, str(exc), headers={"Retry-After": "1"}) from None
        except (errors.InvalidTopicError, errors.RecordTooLargeError) as exc:
            raise HTTPException(400, str(exc)) from None
        return {"partition": md.partition, "offset": md.offset}

    return app


app = create_app(
    os.environ.get("KAFKA_BOOTSTRAP", "localhost:9092"), linger_ms=5, max_block_ms=5_000
)
