"""Routes each request frame: answered here, by the coordinator service, or upstream.

ApiVersions is always answered here (our ranges for what we serve, upstream's for what
we forward: before kgc first reaches its upstream, the answer waits for it), and so are
SaslHandshake and SaslAuthenticate (`net/sasl.py`). Metadata is answered here only in
standalone mode; with an upstream it is forwarded and rewritten by the gateway. Group APIs
go to the coordinator service on every listener (all group state lives in this one
process: docs/ARCHITECTURE.md); a group API kgc does not serve
(`protocol.api_keys.UNSERVED_GROUP_APIS`) is refused here, never forwarded. Anything else
goes upstream as an opaque frame, or closes the connection when there is no upstream.

A large frame (over `LARGE_FRAME_BYTES`) is decoded, and its answer encoded, on the app's
codec thread rather than on the loop (`net/codec.py`). The frames that
follow it on its connection wait until it has been handed to the service, so requests
still take effect in the order the client sent them (as Kafka, which reads a
connection's next request only after answering the last).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial
from typing import Any

from kafka.protocol.api_key import ApiKey

from coordinator import metrics
from coordinator.group.context import RequestContext
from coordinator.group.topics import NO_TOPICS
from coordinator.net import authorization, codec, sasl
from coordinator.net.authentication import Answer, SaslSession, SaslSettings
from coordinator.net.authorization import Caller
from coordinator.net.committed_topics import CHECKED_APIS, CommittedTopics
from coordinator.net.connection import KafkaConnection, LastFrame, ProtocolViolation
from coordinator.net.local_answers import LocalAnswers
from coordinator.net.passthrough import PassthroughSettings
from coordinator.net.pending_answers import PendingAnswer, settle
from coordinator.net.topic_ids import NEVER_VERSION, TOPIC_IDS_SINCE, TopicIds
from coordinator.security.acl import AclSource, ResourceType
from coordinator.security.principal import MappingRuleError, PrincipalMapper
from protocol.api_keys import STANDALONE_APIS, UNSERVED_GROUP_APIS
from protocol.error_responses import api_versions_error_response, error_response
from protocol.errors import ErrorCode
from protocol.headers import HeaderError, parse_request_header
from protocol.messages import MalformedRequest, decode_request, encode_response
from storage.eager_future import EagerFuture

log = logging.getLogger(__name__)

TRANSACTION_KEY = 1  # FindCoordinator KeyType (KIP-98)
# AddOffsetsToTxn's checks, in Kafka's order (its row in `protocol.apis`).
_ADD_OFFSETS_TXN_OP = authorization.needs(ApiKey.AddOffsetsToTxn, ResourceType.TRANSACTIONAL_ID)
_ADD_OFFSETS_GROUP_OP = authorization.needs(ApiKey.AddOffsetsToTxn, ResourceType.GROUP)
# What a ConsumerGroupHeartbeat's subscribed topics need: its regexes resolve to those.
_SUBSCRIBED_TOPIC_OP = authorization.needs(ApiKey.ConsumerGroupHeartbeat, ResourceType.TOPIC)

ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class Session:
    conn: KafkaConnection
    client_host: str
    upstream: Any = None
    auth: SaslSession | None = None     # None: the listener has no SASL
    tls_principal: str | None = None    # from the client's certificate (mTLS)
    # While a request must be settled before the next is served (a large frame decoded off
    # the loop, a login step judged, a commit's topics asked upstream): the frames read
    # after it, each with the future that will carry its answer, dispatched once it has
    # been handed on.
    held: deque | None = None

    def take_held(self) -> deque | None:
        """The held frames, now no longer held. A method, not `held, s.held = s.held, None`
        at the caller: the type checker would take `held` for None after the calls that
        follow, which may hold frames again."""
        held, self.held = self.held, None
        return held

    @property
    def principal(self) -> str:
        """Kafka's rule: the SASL principal on a SASL listener, else the certificate's, else ANONYMOUS."""
        if self.auth is not None:
            return self.auth.principal or ANONYMOUS
        return self.tls_principal or ANONYMOUS


class Dispatcher:
    def __init__(self, service: Any, answers: LocalAnswers, gateway: Any = None, *,
                 sasl: SaslSettings | PassthroughSettings | None = None, principals: PrincipalMapper | None = None,
                 authorizer: AclSource | None = None, clock=None, codec_pool: Executor | None = None,
                 topic_ids: TopicIds | None = None, transactions: Any = None,
                 committed_topics: CommittedTopics | None = None):
        self._service = service
        # Commits name topics the upstream must have (None: no upstream, nothing to check).
        self._committed_topics = committed_topics
        # AddOffsetsToTxn, answered with kgc's participant partition (coordinator/txn); None: forwarded.
        self._transactions = transactions
        self._tasks: set[asyncio.Future] = set()       # the loop keeps only a weak reference to a task
        # OffsetCommit/OffsetFetch v10 name topics by id; without an upstream none is known.
        self._topic_ids = topic_ids or TopicIds(lambda: NO_TOPICS)
        self._answers = answers
        self._versions = answers.versions
        self._gateway = gateway
        self._sasl = sasl
        self._principals = principals or PrincipalMapper()
        self._authorizer = authorizer       # None: every request allowed (Kafka without an authorizer)
        self._loop = asyncio.get_running_loop()
        self._clock = clock or (lambda: self._loop.time() * 1000)
        self._codec = codec.Codec(self._loop, codec_pool)

    def open(self, conn: KafkaConnection) -> Session:
        upstream = None
        if self._gateway is not None:
            upstream = self._gateway.session(conn.listener_node_id, conn)
        auth = None if self._sasl is None else self._sasl.session(self._clock, conn.peer_host, upstream)
        session = Session(conn, "/" + conn.peer_host, upstream, auth)
        if conn.peer_certificate:
            try:
                session.tls_principal = self._principals.principal(conn.peer_certificate)
            except (MappingRuleError, ValueError) as exc:
                log.warning("closing connection from %s: no principal for its certificate: %s", conn.peer_host, exc)
                conn.close()
        return session

    def close(self, session: Session) -> None:
        if session.upstream is not None:
            self._loop.create_task(session.upstream.close())

    def dispatch(self, session: Session, payload: bytes) -> bytes | asyncio.Future | None:
        if session.held is not None:
            later = self._loop.create_future()
            session.held.append((payload, later))
            return later
        try:
            header = parse_request_header(payload)
        except HeaderError as exc:
            raise ProtocolViolation(f"unreadable request header: {exc}") from exc
        api_key = header.api_key
        request_metrics = metrics.request(api_key, header.api_version)
        started = request_metrics.received()
        outcome = self._route(session, header, payload, request_metrics)
        if isinstance(outcome, asyncio.Future):
            outcome.add_done_callback(partial(_answered, request_metrics, started))
        elif outcome is not None:
            request_metrics.answered(started)
        return outcome

    def _route(self, session: Session, header, payload: bytes,
               request_metrics: metrics.RequestMetrics) -> bytes | asyncio.Future | None:
        api_key = header.api_key
        if api_key == ApiKey.ApiVersions:
            return self._api_versions(header, payload)
        if api_key in self._answers.sasl_ranges:
            return self._sasl_request(session, header, payload)
        if session.auth is not None:
            session.auth.admit(api_key)
        if api_key in self._versions and not (api_key in STANDALONE_APIS and session.upstream is not None):
            return self._local(session, header, payload, request_metrics)
        if api_key in UNSERVED_GROUP_APIS:
            # A group API kgc does not serve: upstream it would act on a group kgc holds.
            return self._unsupported_version(session, header, payload, None, request_metrics)
        if api_key == ApiKey.AddOffsetsToTxn and self._transactions is not None:
            return self._add_offsets_to_txn(session, header, payload)
        if session.upstream is not None:
            return session.upstream.forward(header, payload)
        raise ProtocolViolation(f"api key {api_key} (version {header.api_version}) is not served "
                                "and there is no upstream to forward it to")

    def _add_offsets_to_txn(self, session: Session, header, payload: bytes) -> bytes | asyncio.Future:
        """The group's participant partition joins the transaction in place of the
        upstream's `__consumer_offsets` partition, after Kafka's checks: WRITE on the
        transactional id, READ on the group."""
        request = codec.decode(header, payload)
        version = header.api_version
        if self._authorizer is not None:
            caller = Caller(self._authorizer.current(), session.principal, session.conn.peer_host)
            if not caller.transactional_id(_ADD_OFFSETS_TXN_OP, request.transactional_id):
                return encode_response(header, error_response(
                    ApiKey.AddOffsetsToTxn, version, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                    version)
            if not caller.group(_ADD_OFFSETS_GROUP_OP, request.group_id):
                return encode_response(header, error_response(
                    ApiKey.AddOffsetsToTxn, version, request, ErrorCode.GROUP_AUTHORIZATION_FAILED), version)
        # A client stuck after it (coordinator/txn/commits.py) gets this connection, its
        # transaction coordinator's, closed: the only thing that makes it look again.
        added = asyncio.ensure_future(self._transactions.add_offsets(session.conn.listener_node_id, request,
                                                                     session.conn.close))
        self._tasks.add(added)
        added.add_done_callback(self._tasks.discard)
        frame = self._loop.create_future()

        def answer(done: asyncio.Future) -> None:
            if frame.done():
                return
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE if done.cancelled() or done.exception() else done.result()
            if not done.cancelled() and done.exception() is not None:
                log.warning("AddOffsetsToTxn failed: %r", done.exception())
            frame.set_result(encode_response(header, error_response(ApiKey.AddOffsetsToTxn, version, request, code),
                                             version))
        added.add_done_callback(answer)
        return frame

    def _api_versions(self, header, payload: bytes) -> bytes | asyncio.Future:
        low, high = self._versions[ApiKey.ApiVersions]
        if header.api_version > high:
            # KIP-511: a newer client gets a v0 answer listing our range, then retries lower.
            return encode_response(header, api_versions_error_response(), 0)
        request = codec.decode(header, payload)
        if self._answers.upstream_unknown:
            return asyncio.ensure_future(self._api_versions_once_known(header, request))
        return encode_response(header, self._answers.api_versions(request), header.api_version)

    async def _api_versions_once_known(self, header, request) -> bytes:
        return encode_response(header, await self._answers.api_versions_once_known(request), header.api_version)

    def _sasl_request(self, session: Session, header, payload: bytes) -> bytes | asyncio.Future:
        low, high = self._answers.sasl_ranges[header.api_key]
        if not low <= header.api_version <= high:
            raise ProtocolViolation(f"{ApiKey(header.api_key).name} v{header.api_version} is not served "
                                    f"(we serve {low}-{high})")
        request = codec.decode(header, payload)
        auth = session.auth
        if auth is None:
            return encode_response(header, sasl.illegal_state(header.api_key, header.api_version), header.api_version)
        if header.api_key == ApiKey.SaslHandshake:
            answer = auth.handshake(header, payload, request)
        else:
            answer = auth.authenticate(header, payload, request)
        if not isinstance(answer, asyncio.Future):
            return self._sasl_frame(auth, session.conn, header, answer)
        # What the client sends before it has this answer waits for it, as in Kafka, which
        # reads nothing more while a login step is being judged: after a refusal it is never
        # served (the refusal is written, then the connection closes), after a success it is.
        session.held = deque()
        frame = self._loop.create_future()
        answer.add_done_callback(partial(self._sasl_answered, session, auth, header, frame))
        return frame

    @staticmethod
    def _sasl_frame(auth: SaslSession, conn: KafkaConnection, header, answer: Answer) -> bytes:
        response, last = answer
        if auth.principal is not None:
            conn.logged_in()        # frames past the login limit may come now
        # bytes: upstream's answer, relayed as it came (passthrough)
        data = response if isinstance(response, bytes) else encode_response(header, response, header.api_version)
        return LastFrame(data) if last else data

    def _sasl_answered(self, session: Session, auth: SaslSession, header, frame: asyncio.Future,
                       answer: asyncio.Future) -> None:
        if frame.done():
            return      # the client went away
        if (exc := answer.exception()) is not None:      # upstream gone mid-exchange: close the client
            frame.set_exception(exc)
            return
        response = self._sasl_frame(auth, session.conn, header, answer.result())
        frame.set_result(response)
        if type(response) is not LastFrame:
            self._release(session)

    def _local(self, session: Session, header, payload: bytes,
               request_metrics: metrics.RequestMetrics) -> bytes | asyncio.Future:
        api_key, version = header.api_key, header.api_version
        low, high = self._versions[api_key]
        if not low <= version <= high:
            return self._unsupported_version(session, header, payload, (low, high), request_metrics)
        if self._codec.off_loop(payload):
            return self._decode_off_loop(session, header, payload, request_metrics)
        return self._serve(session, header, payload, codec.decode(header, payload), request_metrics)

    def _decode_off_loop(self, session: Session, header, payload: bytes,
                         request_metrics: metrics.RequestMetrics) -> asyncio.Future:
        session.held = deque()
        frame = self._loop.create_future()
        decoding = self._codec.decode_off_loop(header, payload)
        decoding.add_done_callback(partial(self._decoded, session, header, payload, request_metrics, frame))
        return frame

    def _decoded(self, session: Session, header, payload: bytes, request_metrics: metrics.RequestMetrics,
                 frame: asyncio.Future, decoding: asyncio.Future) -> None:
        # Until this frame is served, `session.held` stays set; if it is never served (an
        # undecodable frame closes the connection), neither is anything read after it.
        if decoding.cancelled():        # the pool was shut down: kgc is stopping
            frame.cancel()
            return
        if frame.done():
            decoding.exception()        # retrieved: the client went away
            return
        if (error := decoding.exception()) is not None:
            frame.set_exception(error)
            return
        held = session.take_held()
        assert held is not None, "a frame decoded off the loop holds the frames read after it"
        try:
            outcome = self._serve(session, header, payload, decoding.result(), request_metrics)
        except Exception as exc:
            session.held = held
            frame.set_exception(exc)
            return
        settle(frame, outcome)
        if session.held is not None:        # held again (a commit's topics are being asked upstream)
            session.held.extend(held)
            return
        session.held = held
        self._release(session)

    def _release(self, session: Session) -> None:
        """Dispatch the frames held behind a request, in order, until one is held too."""
        held = session.take_held()
        while held:
            payload, later = held.popleft()
            if later.done():
                continue        # cancelled with its connection
            try:
                outcome = self.dispatch(session, payload)
            except Exception as exc:
                later.set_exception(exc)        # the connection closes there
                session.held = held
                return
            settle(later, outcome)
            if type(outcome) is LastFrame:
                session.held = held     # the connection closes after it: nothing more is served
                return
            if session.held is not None:        # held again (a large frame, a commit asked about): the rest wait
                session.held.extend(held)
                return

    def _serve(self, session: Session, header, payload: bytes, request: Any,
               request_metrics: metrics.RequestMetrics) -> bytes | asyncio.Future:
        api_key, version = header.api_key, header.api_version
        if api_key == ApiKey.Metadata:
            return encode_response(header, self._answers.metadata(request), version)
        if api_key == ApiKey.FindCoordinator and request.key_type == TRANSACTION_KEY and session.upstream:
            # Transactions stay upstream's business; the gateway points the answer at our listener.
            return session.upstream.forward(header, payload)
        # OffsetCommit/OffsetFetch v10: topic ids become names before the ACLs, which name
        # topics; the ids nobody knows are answered after the group's check, as in Kafka.
        by_id = version >= TOPIC_IDS_SINCE.get(api_key, NEVER_VERSION)
        if by_id:
            self._topic_ids.name(api_key, version, request)
        finish = None
        may_describe_topic = None
        if self._authorizer is not None:
            # Before the service: a denied request changes nothing and learns nothing.
            caller = Caller(self._authorizer.current(), session.principal, session.conn.peer_host)
            if api_key == ApiKey.ConsumerGroupHeartbeat:      # its regexes resolve to what it may see
                may_describe_topic = partial(caller.topic, _SUBSCRIBED_TOPIC_OP)
            guarded = authorization.guard(api_key, version, request, caller)
            if guarded.refusal is not None:
                metrics.response(request_metrics, api_key, version, guarded.refusal)
                return encode_response(header, guarded.refusal, version)
            request, finish = guarded.request, guarded.finish
        if by_id:
            resolved = self._topic_ids.resolve(api_key, version, request)
            if resolved.refusal is not None:
                refusal = finish(resolved.refusal) if finish is not None else resolved.refusal
                metrics.response(request_metrics, api_key, version, refusal)
                return encode_response(header, refusal, version)
            request, finish = resolved.request, _then(finish, resolved.finish)
        ctx = RequestContext(version, header.client_id or "", session.client_host, may_describe_topic)
        checked = self._committed_topics
        if api_key in CHECKED_APIS and checked is not None:
            return self._check_topics(checked, session, ctx, header, payload, request, request_metrics, finish)
        return self._submit(ctx, header, payload, request, request_metrics, finish)

    def _check_topics(self, checked: CommittedTopics, session: Session, ctx: RequestContext, header,
                      payload: bytes, request: Any, request_metrics: metrics.RequestMetrics,
                      finish: Callable[[Any], Any] | None) -> bytes | asyncio.Future:
        """A commit, once its topics are known to exist upstream (`net/committed_topics.py`):
        at once when kgc knows them, else after asking, with the connection's later
        requests held meanwhile so that they are served after it."""
        names = checked.to_ask(request)
        if names is None:
            return self._submit(ctx, header, payload, request, request_metrics, finish)
        if not names:
            return self._checked(checked, ctx, header, payload, request, request_metrics, finish, {})
        session.held = deque()
        frame = self._loop.create_future()
        asking = asyncio.ensure_future(checked.ask(names))
        self._tasks.add(asking)

        def asked(done: asyncio.Future) -> None:
            self._tasks.discard(done)
            if frame.done():
                if not done.cancelled():
                    done.exception()    # retrieved: the client went away
                return
            if done.cancelled():        # kgc is stopping
                frame.cancel()
                return
            if (error := done.exception()) is not None:
                frame.set_exception(error)
                return
            try:
                outcome = self._checked(checked, ctx, header, payload, request, request_metrics, finish,
                                        done.result())
            except Exception as exc:
                frame.set_exception(exc)
                return
            settle(frame, outcome)
            self._release(session)
        asking.add_done_callback(asked)
        return frame

    def _checked(self, checked: CommittedTopics, ctx: RequestContext, header, payload: bytes, request: Any,
                 request_metrics: metrics.RequestMetrics, finish: Callable[[Any], Any] | None,
                 asked: Mapping[str, int]) -> bytes | asyncio.Future:
        api_key, version = header.api_key, header.api_version
        verdict = checked.check(api_key, version, request, asked)
        if verdict.refusal is not None:
            refusal = finish(verdict.refusal) if finish is not None else verdict.refusal
            metrics.response(request_metrics, api_key, version, refusal)
            return encode_response(header, refusal, version)
        return self._submit(ctx, header, payload, verdict.request, request_metrics, _then(finish, verdict.finish))

    def _submit(self, ctx: RequestContext, header, payload: bytes, request: Any,
                request_metrics: metrics.RequestMetrics,
                finish: Callable[[Any], Any] | None) -> bytes | asyncio.Future:
        api_key = header.api_key
        outcome = self._service.submit(ctx, api_key, request)
        if not isinstance(outcome, asyncio.Future):
            # Answered inline (a Heartbeat on an idle partition): no task, no future.
            if finish is not None:
                outcome = finish(outcome)
            return self._codec.answer(header, payload, request, request_metrics, outcome)
        frame = EagerFuture(self._loop)
        pending = PendingAnswer(self, ctx, header, payload, request_metrics, frame, outcome, finish)
        if isinstance(outcome, EagerFuture):
            # The partition's own future: answered in the call that releases it (after
            # a group commit, the writer's callback), not a loop turn later.
            outcome.when_done(pending)
        else:
            outcome.add_done_callback(pending)
        frame.add_done_callback(pending)
        return frame

    def respond_later(self, ctx: RequestContext, header, payload: bytes, request_metrics: metrics.RequestMetrics,
                      outcome: asyncio.Future, finish: Callable[[Any], Any] | None) -> bytes | asyncio.Future | None:
        """The answer frame of a request whose runtime future (`outcome`) is done: its
        result as the authorizer's `finish` edits it, or the service's error answer, for
        which the request is decoded again from its bytes (`PendingAnswer` keeps only those)."""
        request = None
        if outcome.exception() is None:
            response = outcome.result()
            if finish is not None:
                response = finish(response)
        else:
            request = codec.decode(header, payload)
            response = self._service.answer(ctx, header.api_key, request, outcome)
        return self._codec.answer(header, payload, request, request_metrics, response)

    def _unsupported_version(self, session: Session, header, payload: bytes, served: tuple[int, int] | None,
                             request_metrics: metrics.RequestMetrics) -> bytes:
        """Answer UNSUPPORTED_VERSION in the request's own shape when the codec knows it
        (e.g. OffsetCommit v0-1 under `min_group_api_versions = "kafka4"`, or a
        TxnOffsetCommit, a group API not served at all: `served` None), counted among the
        API's response errors; otherwise there is no shape the client could read, so
        close, as Kafka closes on an API its listener does not serve."""
        name = ApiKey(header.api_key).name
        served_text = "no version" if served is None else f"{served[0]}-{served[1]}"
        log.debug("refusing %s v%d from %s: we serve %s", name, header.api_version,
                  session.client_host, served_text)
        try:
            request = decode_request(header.api_key, header.api_version, payload[header.header_len:])
            response = error_response(header.api_key, header.api_version, request, ErrorCode.UNSUPPORTED_VERSION)
            frame = encode_response(header, response, header.api_version)
        except (MalformedRequest, ValueError, KeyError) as exc:
            raise ProtocolViolation(f"{name} v{header.api_version} is not served (we serve {served_text})") from exc
        metrics.response(request_metrics, header.api_key, header.api_version, response)
        return frame


def _then(first: Callable[[Any], Any] | None, second: Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
    """`second(first(answer))`, either of them absent."""
    if first is None or second is None:
        return first or second
    return lambda answer: second(first(answer))


def _answered(request_metrics: metrics.RequestMetrics, started: float, fut: asyncio.Future) -> None:
    if not fut.cancelled():     # cancelled: the client went away, nothing was answered
        request_metrics.answered(started)
