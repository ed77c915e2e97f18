"""Wiring only: config → log store → partition runtimes → service → listeners.

Only this module knows the concrete classes (STYLE B2).
"""

from __future__ import annotations

import logging
import time
import uuid

from coordinator.config import ServerConfig
from coordinator.net.dispatch import Dispatcher
from coordinator.net.local_answers import CoordinatorNode, LocalAnswers
from coordinator.net.server import Listener
from coordinator.runtime.runtime import CoordinatorRuntime
from coordinator.service import GroupCoordinatorService
from storage.file_store import FileLogStore
from storage.memory_store import MemoryLogStore

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def new_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


class KgcApp:
    def __init__(self, config: ServerConfig, *, clock=wall_clock_ms):
        self.config = config
        self._clock = clock
        self.store = None
        self.runtime = None
        self.service = None
        self.listeners: list[Listener] = []

    def _make_store(self):
        cfg = self.config
        if cfg.data_dir is None:
            log.warning("no data dir: group state lives in memory and is lost on exit")
            return MemoryLogStore(num_partitions=cfg.group.num_partitions)
        return FileLogStore(cfg.data_dir, num_partitions=cfg.group.num_partitions, fsync=cfg.fsync,
                            segment_bytes=cfg.segment_bytes, clock=self._clock)

    async def start(self) -> None:
        cfg = self.config
        self.store = self._make_store()
        await self.store.open()
        self.runtime = CoordinatorRuntime(self.store, cfg.group, clock=self._clock,
                                          new_member_id=new_member_id)
        await self.runtime.start()
        bootstrap = Listener(cfg.host, cfg.port, listener_node_id=None,
                             max_frame_bytes=cfg.max_frame_bytes, max_in_flight=cfg.max_in_flight)
        self.listeners.append(bootstrap)
        node = CoordinatorNode(cfg.node_id, cfg.advertised, bootstrap.bind())
        self.service = GroupCoordinatorService(self.runtime, node)
        await bootstrap.serve(Dispatcher(self.service, LocalAnswers(node)))

    @property
    def port(self) -> int:
        return self.listeners[0].port

    async def stop(self) -> None:
        for listener in self.listeners:
            await listener.stop_accepting()
        for listener in self.listeners:
            listener.close_connections()
        if self.runtime is not None:
            await self.runtime.close()
        if self.store is not None:
            await self.store.close()
