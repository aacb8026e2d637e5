"""Result handles: query (and Python) results kept per session so that fetch_rows,
compare_results and run_python use them without running the query again.

A store belongs to one client (a stdio server, one HTTP session, one agent run), so what it keeps
(rows, and the Arrow copy run_python hands over) never needs a session in its key. The one store
that several clients share — stateless HTTP requests carry no session id — hands out random,
unguessable ids instead of a counter: there a result id is a capability, and a client reaches only
the results whose ids it was given.

Memory is bounded twice: each store by its own `max_bytes` ([limits] store_mb), and all the stores of
one server together by a `StoreBudget` ([limits] server_store_mb) they share. Each result is held for
the client whose call made it (`statement_owner`: an HTTP session, a token's identity, the anonymous
stateless clients, the local user); when the budget is full the least recently used result of the
client holding the most is evicted first, so one client's many or big results push out its own before
anyone else's. One result is never bigger than the smaller of the two bounds. The same budget holds the
working memory of the statements running now ([limits] statement_mb each, at most [limits]
server_statements of them: tools/engines/gate.py).

A result id is never given twice by one store: a sequential store counts on for as long as it lives
(a session's, for as long as the session), and the shared store's random ids carry a check that tells
an id of another server's (a replica, or this one before a restart) from one evicted here
(flexsql/handles.py)"""

from __future__ import annotations

import contextlib
import itertools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, PrivateAttr

from flexsql.errors import NotFoundError
from flexsql.handles import ELSEWHERE, RESULT_IDS
from flexsql.tools.engines.fetch import estimate_size, held_bytes
from flexsql.tools.engines.gate import statement_owner


class StoredResult(BaseModel):
    result_id: str
    columns: list[str]
    types: list[str] = []
    rows: list[tuple[Any, ...]]
    total_rows: int
    total_is_lower_bound: bool = False
    truncated: bool = False  # rows were dropped: `rows` holds fewer than total_rows
    kept_by_max_rows: bool = False  # fewer rows kept because the caller's max_rows asked for few
    cells_cut: int = 0  # cells kept as prefixes (over store_cell_kb), each ending in a cut marker
    ordered: bool = False  # the producing query had a top-level ORDER BY
    sql: str | None = None
    source: str | None = None
    origin: str = "query"  # "query" or "python"
    size_bytes: int = 0
    # the Arrow table run_python last handed over for these rows: kept with the result (not in a cache
    # keyed by id, which collides across stores), evicted with it, counted in the store's bytes
    _arrow: Any = PrivateAttr(default=None)


_DEFAULTS = {
    name: field.default for name, field in StoredResult.model_fields.items() if not field.is_required()
}


LOCAL_HOLDER = "local"
"""Who holds a result made outside any client's call (the local user, a script)."""

Entry = tuple[int, str]
"""A result in the budget: (its store's key, its id)."""


def current_holder() -> str:
    """Who the current call runs for, as the budget counts results (tools/engines/gate.py)."""
    return statement_owner.get() or LOCAL_HOLDER


class StoreBudget:
    """Bytes that all the result stores of one server may hold together ([limits] server_store_mb).

    Stores created with the budget charge it for every result they keep, each for its holder (the
    client whose call made it); when the total passes `max_bytes`, results are evicted (never the one
    being added): the least recently used result of the holder holding the most bytes first. The stores
    share the budget's lock, so a put, a get and an eviction across stores are atomic. A store that goes
    away (a session that ended) gives its bytes back."""

    def __init__(self, max_bytes: int, statements: int = 0, statement_bytes: int = 0) -> None:
        self.max_bytes = max_bytes
        # the working memory of running statements (engines/gate.py): `statements` slots, each holding
        # `statement_bytes` while its statement runs — together at most half of the budget
        self.statement_bytes = min(statement_bytes, max_bytes // (2 * statements)) if statements else 0
        self._working = 0
        self.lock = threading.RLock()
        # per holder: its results, least recently used first -> (bytes, when last used)
        self._held: dict[str, OrderedDict[Entry, tuple[int, int]]] = {}
        self._holder_bytes: dict[str, int] = {}
        self._holder_of: dict[Entry, str] = {}
        self._clock = itertools.count()
        self._stores: dict[int, weakref.ref[ResultStore]] = {}
        self._keys = itertools.count(1)
        self._bytes = 0
        self._reserved = 0  # bytes of fetches in progress (reserve / unreserve)

    @property
    def bytes_used(self) -> int:
        return self._bytes

    @property
    def bytes_reserved(self) -> int:
        """Bytes claimed by fetches in progress, not results yet."""
        return self._reserved

    @property
    def bytes_working(self) -> int:
        """Bytes held for the statements running now (their engines' memory outside any count)."""
        return self._working

    def bytes_held_by(self, holder: str) -> int:
        return self._holder_bytes.get(holder, 0)

    @property
    def result_room(self) -> int:
        """The most one result may hold: the budget less its own statement's working memory."""
        return self.max_bytes - self.statement_bytes

    def _total(self) -> int:
        return self._bytes + self._reserved + self._working

    def _victim(self, spare: Entry | None = None) -> Entry | None:
        """Under `lock`: the result to evict next — the least recently used of the holder holding the
        most bytes (of two holding as much, the one whose oldest result is older) — never `spare`."""
        best: tuple[int, int] | None = None
        found: Entry | None = None
        for holder, entries in self._held.items():
            entry = next((e for e in entries if e != spare), None)
            if entry is None:
                continue
            spared = entries.get(spare) if spare is not None else None
            held = self._holder_bytes[holder] - (spared[0] if spared is not None else 0)
            rank = (held, -entries[entry][1])
            if best is None or rank > best:
                best, found = rank, entry
        return found

    def _evict_until(self, until: int, spare: Entry | None = None) -> None:
        """Under `lock`: evict results (never `spare`) until at most `until` bytes are held, or none
        is left to evict."""
        while self._total() > until:
            victim = self._victim(spare)
            if victim is None:
                break
            self._evict(victim)

    def _room_for(self, size: int) -> bool:
        """Under `lock`: evict results until `size` more bytes fit; False when even with none left
        they do not (claims and running statements cannot be evicted)."""
        self._evict_until(self.max_bytes - size)
        return self._total() + size <= self.max_bytes

    def _evict(self, victim: Entry) -> None:
        """Under `lock`: drop one result from its store and from the budget."""
        owner, evicted = victim
        ref = self._stores.get(owner)
        store = ref() if ref is not None else None
        if store is not None:
            store._drop(evicted)
        self._release(owner, evicted)

    def hold_working(self, size: int) -> bool:
        """A statement starts: hold `size` bytes for it, evicting results for them; False (nothing held)
        when even with no result left the fetches in progress and the other running statements fill
        the budget — the gate then waits for them."""
        with self.lock:
            if not self._room_for(size):
                return False
            self._working += size
            return True

    def release_working(self, size: int) -> None:
        with self.lock:
            self._working = max(self._working - size, 0)

    def _join(self, store: ResultStore) -> int:
        key = next(self._keys)
        self._stores[key] = weakref.ref(store)
        weakref.finalize(store, self._leave, key)
        return key

    def _leave(self, key: int) -> None:
        with self.lock:
            self._stores.pop(key, None)
            for entry in [e for e in self._holder_of if e[0] == key]:
                self._release(*entry)

    def _charge(self, key: int, result_id: str, size: int, reserved: int = 0) -> None:
        """Under `lock`: count a result (again, when its size grew) as its holder's most recently used
        — in place of the `reserved` bytes its fetch claimed, in one step, so that no other fetch can
        claim them in between — then evict other results while the results and the fetches in
        progress together are over budget."""
        self._reserved = max(self._reserved - reserved, 0)
        entry = (key, result_id)
        holder = self._holder_of.get(entry) or current_holder()  # a result grown keeps its holder
        self._release(key, result_id)
        self._holder_of[entry] = holder
        self._held.setdefault(holder, OrderedDict())[entry] = (size, next(self._clock))
        self._holder_bytes[holder] = self._holder_bytes.get(holder, 0) + size
        self._bytes += size
        self._evict_until(self.max_bytes, spare=entry)

    def reserve(self, size: int) -> bool:
        """Room for `size` more bytes of a fetch in progress (its rows are not a result yet): results
        are evicted for it; False when even with none left the reservations in flight fill the budget.
        Release it with `unreserve`."""
        with self.lock:
            if not self._room_for(size):
                return False
            self._reserved += size
            return True

    def unreserve(self, size: int) -> None:
        with self.lock:
            self._reserved = max(self._reserved - size, 0)

    def _touch(self, key: int, result_id: str) -> None:
        entry = (key, result_id)
        holder = self._holder_of.get(entry)
        if holder is not None:
            entries = self._held[holder]
            entries[entry] = (entries.pop(entry)[0], next(self._clock))

    def _release(self, key: int, result_id: str) -> None:
        entry = (key, result_id)
        holder = self._holder_of.pop(entry, None)
        if holder is None:
            return
        entries = self._held[holder]
        size = entries.pop(entry)[0]
        self._bytes -= size
        self._holder_bytes[holder] -= size
        if not entries:
            del self._held[holder], self._holder_bytes[holder]


class Reservation:
    """The room one fetch in progress has claimed in a StoreBudget: called as `reserve(size)` for each
    rows it keeps (FetchLimits.reserve); False when there is no room left."""

    def __init__(self, budget: StoreBudget) -> None:
        self.budget = budget
        self.claimed = 0

    def __call__(self, size: int) -> bool:
        if not self.budget.reserve(size):
            return False
        self.claimed += size
        return True


class ResultStore:
    """A bounded LRU of results, by total approximate memory.

    `ids="sequential"` (`r1`, `r2`, …: short, and easy for a model to repeat) suits a store owned by
    one client; `ids="random"` (`r_` + 12 URL-safe characters: 60 random bits and a check,
    flexsql/handles.py) suits a store shared by clients that must not reach each other's results, and
    then errors never list the ids kept. Either way no id is given twice."""

    def __init__(
        self,
        max_bytes: int = 512 * 1024 * 1024,
        prefix: str = "r",
        ids: Literal["sequential", "random"] = "sequential",
        budget: StoreBudget | None = None,
    ) -> None:
        self.max_bytes = max_bytes
        self._prefix = prefix
        self.ids = ids
        self._items: OrderedDict[str, StoredResult] = OrderedDict()
        self._bytes = 0
        self._counter = itertools.count(1)
        self.budget = budget
        self._lock: threading.Lock | threading.RLock = budget.lock if budget is not None else threading.Lock()
        self._key = budget._join(self) if budget is not None else 0

    @contextlib.contextmanager
    def reservation(self) -> Iterator[Reservation | None]:
        """For one fetch that will become a result here: a `reserve(size)` that claims room in the
        server's budget as rows are kept (None without a budget). `put(..., reservation=)` turns the
        claim into the result's charge; whatever is still claimed when the fetch is over is released."""
        budget = self.budget
        if budget is None:
            yield None
            return
        claim = Reservation(budget)
        try:
            yield claim
        finally:
            budget.unreserve(claim.claimed)

    @property
    def max_result_bytes(self) -> int:
        """The most one result may hold: this store's size, or the server's budget when smaller."""
        return min(self.max_bytes, self.budget.result_room) if self.budget is not None else self.max_bytes

    def _new_id(self) -> str:
        if self.ids == "sequential":
            return f"{self._prefix}{next(self._counter)}"
        while True:  # a collision is ~never; checking costs nothing
            candidate = RESULT_IDS.mint()
            if candidate not in self._items:
                return candidate

    def put(self, reservation: Reservation | None = None, **fields: Any) -> StoredResult:
        """Keep a result; `reservation`: the claim its fetch made (`reservation()`), which the result's
        charge replaces."""
        rows = fields.get("rows", [])
        columns = len(fields.get("columns", []))
        size = estimate_size(rows) + held_bytes(len(rows), columns) + 64 * columns
        # the fields come from our own sources and tools: validating a million rows again costs seconds
        with self._lock:
            result_id = self._new_id()
            stored = StoredResult.model_construct(
                **{**_DEFAULTS, **fields, "result_id": result_id, "size_bytes": size}
            )
            self._items[result_id] = stored
            self._bytes += size
            self._evict()
            if self.budget is not None:
                claimed = 0
                if reservation is not None:
                    claimed, reservation.claimed = reservation.claimed, 0
                self.budget._charge(self._key, result_id, size, reserved=claimed)
            return stored

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and len(self._items) > 1:
            evicted = next(iter(self._items))
            self._drop(evicted)

    def _drop(self, result_id: str) -> None:
        """Under the lock: forget one result, here and in the server's budget."""
        stored = self._items.pop(result_id, None)
        if stored is None:
            return
        self._bytes -= stored.size_bytes
        if self.budget is not None:
            self.budget._release(self._key, result_id)

    def arrow(self, stored: StoredResult, build: Any) -> Any:
        """The result's rows as an Arrow table, built by `build()` once and kept with the result."""
        table = stored._arrow
        if table is not None:
            return table
        table = build()
        self.attach_arrow(stored, table)
        return table

    def attach_arrow(self, stored: StoredResult, table: Any) -> None:
        with self._lock:
            if stored._arrow is not None:
                return
            if self._items.get(stored.result_id) is not stored:  # evicted meanwhile: nothing to account
                stored._arrow = table
                return
            extra = int(getattr(table, "nbytes", 0))
            stored._arrow = table
            stored.size_bytes += extra
            self._bytes += extra
            self._evict()
            if self.budget is not None and self._items.get(stored.result_id) is stored:
                self.budget._charge(self._key, stored.result_id, stored.size_bytes)

    def clear(self) -> None:
        """Forget every result (the session this store served has ended); ids are still never reused."""
        with self._lock:
            for result_id in list(self._items):
                self._drop(result_id)

    def get(self, result_id: str) -> StoredResult:
        with self._lock:
            stored = self._items.get(result_id.strip())
            if stored is None:
                if RESULT_IDS.has_shape(result_id.strip()) and not RESULT_IDS.minted_here(result_id.strip()):
                    raise NotFoundError(
                        f"result_id {result_id!r} {ELSEWHERE}; run the query again here with run_query"
                    )
                if self.ids == "random":  # the ids kept are other clients' capabilities: never list them
                    raise NotFoundError(
                        f"result_id {result_id!r} is unknown or was evicted to save memory; "
                        "use an id this session was given, or run the query again with run_query"
                    )
                known = ", ".join(list(self._items)[-10:]) or "none yet"
                raise NotFoundError(
                    f"result_id {result_id!r} is unknown or was evicted to save memory "
                    f"(kept now: {known}); run the query again with run_query"
                )
            self._items.move_to_end(stored.result_id)
            if self.budget is not None:
                self.budget._touch(self._key, stored.result_id)
            return stored

    @property
    def bytes_used(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)
