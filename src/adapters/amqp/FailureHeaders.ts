import type { Message } from "amqplib"
import { createHash, randomUUID } from "node:crypto"
import type { HandlerFailure, IncompatibleMessage } from "../../app/failures.js"
import type { HandlerName } from "../../domain/HandlerName.js"
import type { RawPublish } from "./AmqpPublisher.js"
import {
  EmptyFieldTable,
  encodeFieldEntry,
  encodeFieldTable,
  type FieldEntry,
  headersOf,
  headerValue,
  type KitFieldValue,
  type MessageHeaders
} from "./FieldTable.js"

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
  originalUserId: "x-dostavka-original-user-id",
  /**
   * On a dead copy of a message whose header table the kit could not decode (see
   * `decodeFieldTable`): that table as it came, a complete encoded field table (its 4-byte
   * length, then its entries), as a byte array; the copy carries no other original header.
   */
  originalHeaders: "x-dostavka-original-headers"
} as const

/** Everything a failed attempt's copy is told about it. */
export interface FailureContext {
  readonly handler: HandlerName
  readonly failure: IncompatibleMessage | HandlerFailure
  /** Failed attempts including this one. */
  readonly attempts: number
  /** The failure's time, from `Clock.currentTimeMillis` (TestClock's in tests): every time header is written from it. */
  readonly nowMs: number
  /**
   * True when the original came through the handler's own exchange (a retry, a replay),
   * which only the kit writes to. Otherwise whatever it carries in the kit's headers was
   * set by someone else: the copy starts the story afresh and drops those headers.
   */
  readonly kitHeadersTrusted: boolean
}

/**
 * Headers the broker sets when it dead-letters a message (RabbitMQ "Dead Letter Exchanges").
 * No copy the kit publishes carries them: a copy is a new message, and RabbitMQ reads a
 * copied `x-death` as the copy's own history, so a retry that expires back into the queue
 * named there is dropped as a dead-letter cycle (rabbitmq-server #11159).
 */
export const BrokerDeathHeaders: ReadonlyArray<string> = [
  "x-death",
  "x-first-death-exchange",
  "x-first-death-queue",
  "x-first-death-reason",
  "x-last-death-exchange",
  "x-last-death-queue",
  "x-last-death-reason"
]

/** The largest header table a copy may have, in bytes: it must fit one frame of RabbitMQ's default `frame_max` (131,072 bytes) with the other properties. */
export const MaxCopyHeaderBytes = 126 * 1024

/** A copy that cannot be published as it would be built, and why; the consumer then rejects the original to the queue's dead-letter exchange. */
export class CopyNotEncodable extends Error {
  override readonly name = "CopyNotEncodable"
}

const text = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

const nonNegativeInteger = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : undefined

/** True when the message is a dead-letter copy of the kit (it has a reason); moved back by hand, it is a replay. */
export const isDeadCopy = (message: Message): boolean =>
  text(headerValue(headersOf(message.properties), KitHeaders.reason)) !== undefined

/**
 * Failed attempts before this delivery, from the kit's attempts header: 0 when it is
 * absent or not a non-negative integer, and 0 for a dead copy that was moved back to the
 * handler's queue by hand (a shovel, the management UI's "move messages"), which is
 * processed as a replay instead of being dead-lettered again because of its own headers.
 * The caller decides whether the header is to be trusted at all (see `toIncoming`).
 */
export const attemptsOf = (message: Message): number =>
  isDeadCopy(message)
    ? 0
    : nonNegativeInteger(headerValue(headersOf(message.properties), KitHeaders.attempts)) ?? 0

/** The properties a copy carries: every one the broker gave us, less `user_id` (the broker refuses one that is not the publishing connection's user) and the headers, which a copy writes itself. */
const copiedProperties = (message: Message): Record<string, unknown> => {
  // Read through descriptors: reading the patched amqplib's `headers` would run its own decoder.
  const { headers: _, userId: __, ...rest } = Object.getOwnPropertyDescriptors(message.properties)
  return Object.fromEntries(
    Object.entries(rest).flatMap(([name, d]) =>
      !d.enumerable || d.value === undefined || d.value === null ? [] : [[name, d.value]]
    )
  )
}

/**
 * A copy's header table: the original's entries byte for byte (every AMQP type as it
 * came), less those named in `replaced` and the broker's death headers, then `kit`.
 * When the original's table could not be decoded, none of it is kept but its bytes, in
 * `KitHeaders.originalHeaders`. Throws `CopyNotEncodable` when the result would not fit
 * one frame (`MaxCopyHeaderBytes`).
 */
const copyHeaders = (
  headers: MessageHeaders,
  kit: Readonly<Record<string, KitFieldValue>>,
  replaced: ReadonlyArray<string>
): Buffer => {
  const dropped = new Set([...replaced, ...Object.keys(kit), ...BrokerDeathHeaders])
  const kept: ReadonlyArray<FieldEntry> = headers._tag === "Decoded"
    ? headers.table.entries.filter((entry) => !dropped.has(entry.name))
    : []
  const original = headers._tag === "Undecodable"
    ? [encodeFieldEntry(KitHeaders.originalHeaders, encodeFieldTable([headers.bytes]))]
    : []
  const table = encodeFieldTable([
    ...kept.map((entry) => entry.bytes),
    ...original,
    ...Object.entries(kit).map(([name, value]) => encodeFieldEntry(name, value))
  ])
  if (table.length > MaxCopyHeaderBytes) {
    throw new CopyNotEncodable(
      `its header table would be ${table.length} bytes, over the ${MaxCopyHeaderBytes} that fit one frame`
    )
  }
  return table
}

/** Headers that tell nothing: what the story is read from when the original's kit headers are not to be trusted. */
const UnknownHeaders: MessageHeaders = { _tag: "Decoded", table: EmptyFieldTable }

/** The kit's names a copy drops from an original it does not trust (see `FailureContext.kitHeadersTrusted`). */
const kitNames = (context: FailureContext): ReadonlyArray<string> =>
  context.kitHeadersTrusted ? [] : Object.values(KitHeaders)

/** The kit's headers on a failed attempt's copy, continuing the story the original carries (first failure, origin, replays). */
const failureStory = (message: Message, context: FailureContext): Record<string, KitFieldValue> => {
  const headers = context.kitHeadersTrusted ? headersOf(message.properties) : UnknownHeaders
  const earlier = (name: string) => text(headerValue(headers, name))
  const now = new Date(context.nowMs).toISOString()
  const replays = nonNegativeInteger(headerValue(headers, KitHeaders.replays))
  const userId = text(message.properties.userId)
  return {
    [KitHeaders.attempts]: context.attempts,
    [KitHeaders.firstFailureAt]: earlier(KitHeaders.firstFailureAt) ?? now,
    [KitHeaders.lastFailureAt]: now,
    [KitHeaders.errorTag]: `${context.failure._tag}/${context.failure.errorTag}`,
    [KitHeaders.error]: context.failure.detail,
    [KitHeaders.handler]: context.handler,
    [KitHeaders.originalExchange]: earlier(KitHeaders.originalExchange) ?? message.fields.exchange,
    [KitHeaders.originalRoutingKey]: earlier(KitHeaders.originalRoutingKey) ?? message.fields.routingKey,
    ...(context.kitHeadersTrusted && isDeadCopy(message)
      ? { [KitHeaders.replays]: (replays ?? 0) + 1 }
      : replays === undefined
      ? {}
      : { [KitHeaders.replays]: replays }),
    ...(userId === undefined ? {} : { [KitHeaders.originalUserId]: userId })
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
 * A copy is the same copy when it goes to the same destination with the same story, and
 * is made from the same original: one with the same header table, which a redelivery of
 * that original keeps (less `x-delivery-count`, which a quorum queue sets on each
 * redelivery). The publisher sends a copy with a key it saw confirmed only once; the
 * original's table tells apart two lives of one message id whose new story is the same
 * (a retry or dead copy moved back by hand starts afresh, as its first delivery did).
 */
const sameCopy = (
  exchange: string,
  routingKey: string,
  messageId: string,
  kit: Record<string, KitFieldValue>,
  original: MessageHeaders
) => {
  const digest = createHash("sha256")
  if (original._tag === "Undecodable") digest.update(original.bytes)
  else for (const entry of original.table.entries) if (entry.name !== "x-delivery-count") digest.update(entry.bytes)
  return [
    exchange,
    routingKey,
    messageId,
    kit[KitHeaders.attempts] ?? "",
    kit[KitHeaders.replays] ?? 0,
    kit[KitHeaders.reason] ?? "",
    digest.digest("base64")
  ].join("\u0000")
}

/**
 * The copy of a failed delivery for a retry queue: the same body (byte for byte) and
 * properties, persistent, with the failure headers; published to the handler's exchange
 * with the tier's routing key. Throws `CopyNotEncodable` (see `copyHeaders`).
 */
export const retryCopy = (
  message: Message,
  context: FailureContext,
  exchange: string,
  routingKey: string
): RawPublish => {
  const kit = failureStory(message, context)
  const headers = copyHeaders(headersOf(message.properties), kit, [
    KitHeaders.reason,
    KitHeaders.deadAt,
    ...kitNames(context)
  ])
  const messageId = copyId(message)
  return {
    exchange,
    routingKey,
    content: message.content,
    options: { ...copiedProperties(message), messageId, persistent: true, headers },
    sameAs: sameCopy(exchange, routingKey, messageId, kit, headersOf(message.properties))
  }
}

/**
 * The copy of a delivery for the handler's dead-letter queue: as a retry copy, plus the
 * reason and when; `expiration` moves to a header, so the copy does not expire. An
 * original without a `timestamp` gets the time it was dead-lettered as one, so that the
 * dead queue's head always tells its age without being read (the management API's
 * `head_message_timestamp`). Throws `CopyNotEncodable` (see `copyHeaders`).
 */
export const deadCopy = (
  message: Message,
  context: FailureContext & { readonly reason: "incompatible" | "exhausted" | "untrusted-publisher" },
  exchange: string,
  routingKey: string
): RawPublish => {
  const { expiration, ...properties } = copiedProperties(message)
  const kit = {
    ...failureStory(message, context),
    [KitHeaders.reason]: context.reason,
    [KitHeaders.deadAt]: new Date(context.nowMs).toISOString(),
    ...(expiration === undefined ? {} : { [KitHeaders.originalExpiration]: String(expiration) })
  }
  const headers = copyHeaders(headersOf(message.properties), kit, kitNames(context))
  const messageId = copyId(message)
  return {
    exchange,
    routingKey,
    content: message.content,
    options: {
      timestamp: Math.floor(context.nowMs / 1000),
      ...properties,
      messageId,
      persistent: true,
      headers
    },
    sameAs: sameCopy(exchange, routingKey, messageId, kit, headersOf(message.properties))
  }
}

/**
 * A dead letter sent back to its handler by an operator: the same body and properties,
 * its `expiration` restored, the attempt and failure headers and the broker's death
 * headers removed (a fresh start), and the replay counter incremented. Without
 * `kitHeadersTrusted` (the broker dead-lettered it from the handler's queue, so its kit
 * headers are its publisher's), every kit header is dropped and it counts as replayed once. `undefined` for a
 * dead letter whose header table cannot be decoded: sent back, it could only be
 * dead-lettered again (see `KitHeaders.originalHeaders`).
 */
export const replayCopy = (
  message: Message,
  exchange: string,
  routingKey: string,
  kitHeadersTrusted = true
): RawPublish | undefined => {
  const headers = headersOf(message.properties)
  if (headers._tag === "Undecodable") return undefined
  const story = kitHeadersTrusted ? headers : UnknownHeaders
  const expiration = text(headerValue(story, KitHeaders.originalExpiration))
  const kit = { [KitHeaders.replays]: (nonNegativeInteger(headerValue(story, KitHeaders.replays)) ?? 0) + 1 }
  const cleared = Object.values(KitHeaders).filter((name) =>
    !kitHeadersTrusted || (name !== KitHeaders.originalExchange && name !== KitHeaders.originalRoutingKey)
  )
  const messageId = copyId(message)
  return {
    exchange,
    routingKey,
    content: message.content,
    options: {
      ...copiedProperties(message),
      messageId,
      persistent: true,
      ...(expiration === undefined ? {} : { expiration }),
      headers: copyHeaders(headers, kit, cleared)
    },
    sameAs: sameCopy(exchange, routingKey, messageId, kit, headersOf(message.properties))
  }
}
