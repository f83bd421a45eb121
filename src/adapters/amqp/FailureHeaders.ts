import type { Message, MessageProperties } from "amqplib"
import { randomUUID } from "node:crypto"
import type { HandlerFailure, IncompatibleMessage } from "../../app/failures.js"
import type { HandlerName } from "../../domain/HandlerName.js"
import type { RawPublish } from "./AmqpPublisher.js"

/**
 * The headers the kit adds to a retry or dead-letter copy. The body and every other
 * property stay as they were. The kit reads only its own headers, never `x-death`: RabbitMQ
 * 4 ignores an `x-death` a client sets, and its counts changed between versions.
 */
export const KitHeaders = {
  /** Failed attempts so far (an integer); absent on a first delivery and after a replay. */
  attempts: "x-dostavka-attempts",
  firstFailureAt: "x-dostavka-first-failure-at",
  lastFailureAt: "x-dostavka-last-failure-at",
  /** The failure's class and tag, e.g. `TransientFailure/PersistenceError.unavailable`. */
  errorTag: "x-dostavka-error-tag",
  /** The failure's message, at most 1,000 characters. */
  error: "x-dostavka-error",
  handler: "x-dostavka-handler",
  originalExchange: "x-dostavka-original-exchange",
  originalRoutingKey: "x-dostavka-original-routing-key",
  /** `incompatible`, `exhausted` or `untrusted-publisher`; present only on a dead-letter copy. */
  reason: "x-dostavka-reason",
  deadAt: "x-dostavka-dead-at",
  /** A dead copy keeps the original's `expiration` here, so that it does not expire itself. */
  originalExpiration: "x-dostavka-original-expiration",
  /** How many times an operator sent the message back from the dead queue. */
  replays: "x-dostavka-replays",
  /** The original's `user_id`, which a copy cannot carry (the broker checks it against the copying connection's user). */
  originalUserId: "x-dostavka-original-user-id"
} as const

/** Everything a failed attempt's copy is told about it. */
export interface FailureContext {
  readonly handler: HandlerName
  readonly failure: IncompatibleMessage | HandlerFailure
  /** Failed attempts including this one. */
  readonly attempts: number
  /** The failure's time, from `Clock.currentTimeMillis` (TestClock's in tests): every time header is written from it. */
  readonly nowMs: number
}

type Headers = Record<string, unknown>

const headersOf = (properties: MessageProperties): Headers => ({ ...(properties.headers ?? {}) })

const nonNegativeInteger = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : undefined

/** True when the message is a dead-letter copy of the kit (it has a reason); moved back by hand, it is a replay. */
export const isDeadCopy = (properties: MessageProperties): boolean =>
  typeof properties.headers?.[KitHeaders.reason] === "string"

/**
 * Failed attempts before this delivery, from the kit's attempts header: 0 when it is
 * absent or not a non-negative integer, and 0 for a dead copy that was moved back to the
 * handler's queue by hand (a shovel, the management UI's "move messages"), which is
 * processed as a replay instead of being dead-lettered again because of its own headers.
 */
export const attemptsOf = (properties: MessageProperties): number =>
  isDeadCopy(properties) ? 0 : nonNegativeInteger(properties.headers?.[KitHeaders.attempts]) ?? 0

/** The properties a copy carries: every one the broker gave us, less `user_id` (the broker refuses one that is not the publishing connection's user). */
const copiedProperties = (message: Message) => {
  const { headers: _, userId: __, ...rest } = message.properties
  return Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined && v !== null))
}

const failureHeaders = (message: Message, context: FailureContext): Headers => {
  const headers = headersOf(message.properties)
  const wasDead = isDeadCopy(message.properties)
  delete headers[KitHeaders.reason]
  delete headers[KitHeaders.deadAt]
  const now = new Date(context.nowMs).toISOString()
  return {
    ...headers,
    [KitHeaders.attempts]: context.attempts,
    [KitHeaders.firstFailureAt]: typeof headers[KitHeaders.firstFailureAt] === "string"
      ? headers[KitHeaders.firstFailureAt]
      : now,
    [KitHeaders.lastFailureAt]: now,
    [KitHeaders.errorTag]: `${context.failure._tag}/${context.failure.errorTag}`,
    [KitHeaders.error]: context.failure.detail,
    [KitHeaders.handler]: context.handler,
    [KitHeaders.originalExchange]: typeof headers[KitHeaders.originalExchange] === "string"
      ? headers[KitHeaders.originalExchange]
      : message.fields.exchange,
    [KitHeaders.originalRoutingKey]: typeof headers[KitHeaders.originalRoutingKey] === "string"
      ? headers[KitHeaders.originalRoutingKey]
      : message.fields.routingKey,
    ...(wasDead ? { [KitHeaders.replays]: (nonNegativeInteger(headers[KitHeaders.replays]) ?? 0) + 1 } : {}),
    ...(typeof message.properties.userId === "string" ? { [KitHeaders.originalUserId]: message.properties.userId } : {})
  }
}

/**
 * The message id a copy is published under: the original's, or a fresh one (the publisher
 * ties a basic.return to its publish by it). Taken once per copy, so that its properties
 * and its `sameAs` key name the same id.
 */
const copyId = (message: Message) =>
  typeof message.properties.messageId === "string" && message.properties.messageId !== ""
    ? message.properties.messageId
    : `no-id-${randomUUID()}`

/**
 * The copy of a failed delivery for a retry queue: the same body (byte for byte) and
 * properties, persistent, with the failure headers; published to the handler's exchange
 * with the tier's routing key.
 */
export const retryCopy = (
  message: Message,
  context: FailureContext,
  exchange: string,
  routingKey: string
): RawPublish => {
  const headers = failureHeaders(message, context)
  const messageId = copyId(message)
  return {
    exchange,
    routingKey,
    content: message.content,
    options: { ...copiedProperties(message), messageId, persistent: true, headers },
    sameAs: sameCopy(exchange, routingKey, messageId, headers)
  }
}

/** A copy is the same copy when it is of the same message, for the same attempt, replay and destination. */
const sameCopy = (exchange: string, routingKey: string, messageId: string, headers: Headers) =>
  [
    exchange,
    routingKey,
    messageId,
    headers[KitHeaders.attempts],
    headers[KitHeaders.replays] ?? 0,
    headers[KitHeaders.reason] ?? ""
  ].join("\u0000")

/**
 * The copy of a delivery for the handler's dead-letter queue: as a retry copy, plus the
 * reason and when; `expiration` moves to a header, so the copy does not expire.
 */
export const deadCopy = (
  message: Message,
  context: FailureContext & { readonly reason: "incompatible" | "exhausted" | "untrusted-publisher" },
  exchange: string,
  routingKey: string
): RawPublish => {
  const { expiration, ...properties } = copiedProperties(message)
  const headers = {
    ...failureHeaders(message, context),
    [KitHeaders.reason]: context.reason,
    [KitHeaders.deadAt]: new Date(context.nowMs).toISOString(),
    ...(expiration === undefined ? {} : { [KitHeaders.originalExpiration]: String(expiration) })
  }
  const messageId = copyId(message)
  return {
    exchange,
    routingKey,
    content: message.content,
    options: { ...properties, messageId, persistent: true, headers },
    sameAs: sameCopy(exchange, routingKey, messageId, headers)
  }
}

/** Headers the broker sets when it dead-letters a message (RabbitMQ "Dead Letter Exchanges"). */
const BrokerDeathHeaders = [
  "x-death",
  "x-first-death-exchange",
  "x-first-death-queue",
  "x-first-death-reason",
  "x-last-death-exchange",
  "x-last-death-queue",
  "x-last-death-reason"
]

/**
 * A dead letter sent back to its handler by an operator: the same body and properties,
 * its `expiration` restored, the attempt and failure headers and the broker's death
 * headers removed (a fresh start), and the replay counter incremented.
 */
export const replayCopy = (message: Message, exchange: string, routingKey: string): RawPublish => {
  const headers = headersOf(message.properties)
  const expiration = headers[KitHeaders.originalExpiration]
  for (const name of [...Object.values(KitHeaders), ...BrokerDeathHeaders]) {
    if (name !== KitHeaders.replays && name !== KitHeaders.originalExchange && name !== KitHeaders.originalRoutingKey) {
      delete headers[name]
    }
  }
  headers[KitHeaders.replays] = (nonNegativeInteger(message.properties.headers?.[KitHeaders.replays]) ?? 0) + 1
  const messageId = copyId(message)
  return {
    exchange,
    routingKey,
    content: message.content,
    options: {
      ...copiedProperties(message),
      messageId,
      persistent: true,
      ...(typeof expiration === "string" ? { expiration } : {}),
      headers
    },
    sameAs: sameCopy(exchange, routingKey, messageId, headers)
  }
}
