/**
 * Admission: what a receiver decides about a delivery before any store is touched. Pure:
 * a delivery is either an event with the ids its receipt will carry, or incompatible
 * (dead-lettered at once, never retried), and the reason says which rule refused it.
 */
import { Either, Option } from "effect"
import { decodeEvent, isKeepableCorrelationId, type KnownEvent } from "../domain/Envelope.js"
import { IncompatibleMessage } from "./failures.js"

/** A message as the consumer hands it over: AMQP properties that matter, the body's bytes as received, and its failed attempts. */
export interface IncomingMessage {
  readonly messageId: string | undefined
  readonly correlationId: string | undefined
  readonly type: string | undefined
  readonly schemaVersion: unknown
  readonly contentType: string | undefined
  readonly body: Uint8Array
  /** Failed attempts before this delivery, from the kit's own header (0 for a first delivery or a replay). */
  readonly attempts: number
  /** The publisher's `user_id`, which the broker validated against its connection's user. */
  readonly userId: string | undefined
  /** True when it came straight from the events exchange, false for a retry, a replay, or a message moved by an operator. */
  readonly fromEventsExchange: boolean
  /** The `traceparent` header as received (W3C Trace Context), if any: the parent of the receiver's span. */
  readonly traceparent?: unknown
  /** Why its header table could not be decoded (an unknown type, nested too deep, a name given twice), when it could not. */
  readonly headersRefused?: string
}

/** What a received message carries besides its event. */
export interface ReceivedMessage {
  /** The inbox's key: the event's canonical (lower-case) UUID. */
  readonly messageId: string
  readonly correlationId: string
}

/** A delivery admitted for its handler: the event, its ids, and the `traceparent` it came with. */
export interface Admitted {
  readonly event: KnownEvent
  readonly message: ReceivedMessage
  readonly traceparent: unknown
}

/** What a receiver accepts before it decodes a delivery. */
export interface ReceiveLimits {
  /** With a value, an event that came straight from the events exchange must carry this broker user as its `user_id` (see `untrusted`). */
  readonly trustedPublisher: Option.Option<string>
  /** The largest body it decodes, in bytes; a larger one is incompatible before it is read as text. */
  readonly maxEventBytes: number
}

/** No publisher check, and events up to 64 KiB: the defaults of `DOSTAVKA_TRUSTED_PUBLISHER` and `DOSTAVKA_MAX_EVENT_BYTES`. */
export const DefaultReceiveLimits: ReceiveLimits = { trustedPublisher: Option.none(), maxEventBytes: 64 * 1024 }

const refuse = (errorTag: string, detail: string) => Either.left(new IncompatibleMessage({ errorTag, detail }))

/**
 * Trust in a delivery's publisher: with `trustedPublisher` set, an event that came straight
 * from the events exchange must carry that broker user as its `user_id` (RabbitMQ checks
 * `user_id` against the publishing connection's user, "Validated User-ID"). Retries and
 * replays come through the handler's own exchange, which only the kit's users may write
 * to (see `scripts/broker-users.sh`), so they are not checked again.
 */
const untrusted = (incoming: IncomingMessage, trustedPublisher: Option.Option<string>): boolean =>
  Option.isSome(trustedPublisher) && incoming.fromEventsExchange && incoming.userId !== trustedPublisher.value

/**
 * Admits a delivery, or says why it is incompatible, in this order:
 * - from a publisher that is not `limits.trustedPublisher`, when set (`UntrustedPublisher`);
 * - a header table that could not be decoded (`bad-headers`), or a body over
 *   `limits.maxEventBytes` (`too-large`: an event carries no material body, so a large one
 *   is not an event, and refusing it by its length never reads it into a string);
 * - no `message_id` (`no-message-id`);
 * - an unknown type or version, a non-JSON content type, a body that fails the schema
 *   (`decodeEvent`'s reasons);
 * - a `correlation_id` over 255 characters or not valid UTF-8 (`bad-correlation-id`);
 * - a `message_id` that is not the event's `event_id` (`id-mismatch`): the event's id is a
 *   canonical UUID (lower-case ASCII hex, RFC 9562 §4), and a `message_id` is the same UUID
 *   exactly when its lower-case form equals it (no character outside ASCII lower-cases to
 *   a hex digit); the inbox keys on that one form.
 */
export const admit = (
  incoming: IncomingMessage,
  limits: ReceiveLimits
): Either.Either<Admitted, IncompatibleMessage> => {
  if (untrusted(incoming, limits.trustedPublisher)) {
    const by = incoming.userId === undefined
      ? "a user who did not set user_id"
      : `'${incoming.userId.slice(0, 100)}'`
    return refuse(
      "UntrustedPublisher",
      `published by ${by}, not by the trusted publisher '${Option.getOrElse(limits.trustedPublisher, () => "")}'`
    )
  }
  if (incoming.headersRefused !== undefined) {
    return refuse("UndecodableMessage.bad-headers", `its header table cannot be decoded: ${incoming.headersRefused}`)
  }
  if (incoming.body.byteLength > limits.maxEventBytes) {
    return refuse(
      "UndecodableMessage.too-large",
      `its body is ${incoming.body.byteLength} bytes; an event is at most ${limits.maxEventBytes}`
    )
  }
  if (incoming.messageId === undefined || incoming.messageId === "") {
    return refuse("UndecodableMessage.no-message-id", "the message has no message_id property")
  }
  const decoded = decodeEvent(incoming)
  if (Either.isLeft(decoded)) return Either.left(IncompatibleMessage.of(decoded.left))
  if (incoming.correlationId !== undefined && !isKeepableCorrelationId(incoming.correlationId)) {
    return refuse(
      "UndecodableMessage.bad-correlation-id",
      "correlation_id is over 255 characters or was not valid UTF-8"
    )
  }
  const event = decoded.right
  if (event.eventId !== incoming.messageId.toLowerCase()) {
    return refuse(
      "UndecodableMessage.id-mismatch",
      `message_id ${incoming.messageId.slice(0, 100)} is not the event's event_id ${event.eventId}`
    )
  }
  return Either.right({
    event,
    message: { messageId: event.eventId, correlationId: incoming.correlationId ?? "" },
    traceparent: incoming.traceparent
  })
}
