import type { GetMessage, Message } from "amqplib"
import { Duration, Effect, Layer } from "effect"
import { Settings } from "../../config.js"
import { describeCause } from "../../domain/errors.js"
import type { HandlerName } from "../../domain/HandlerName.js"
import {
  type DeadLetter,
  type DeadLetterMove,
  DeadLetters,
  type DeadLetterSelection,
  DeadLettersUnavailable,
  type DeadReason,
  isSelected,
  missingIds
} from "../../ports/DeadLetters.js"

/** The port's shape, with the broker client its operations still need. */
interface DeadLettersShape {
  readonly list: (
    handler: HandlerName,
    limit: number
  ) => Effect.Effect<ReadonlyArray<DeadLetter>, DeadLettersUnavailable, AmqpClient>
  readonly replay: (
    handler: HandlerName,
    selection: DeadLetterSelection,
    options: { readonly dryRun: boolean }
  ) => Effect.Effect<DeadLetterMove, DeadLettersUnavailable, AmqpClient>
  readonly purge: (
    handler: HandlerName,
    selection: DeadLetterSelection
  ) => Effect.Effect<DeadLetterMove, DeadLettersUnavailable, AmqpClient>
}
import { type AmqpChannel, AmqpClient } from "./AmqpClient.js"
import { brokerAccessOf, closeQuietly, openConnection } from "./AmqpConnection.js"
import { makeOperatorPublisher, type RawPublish } from "./AmqpPublisher.js"
import { KitHeaders, replayCopy } from "./FailureHeaders.js"
import { headersOf, headerValue, type MessageHeaders } from "./FieldTable.js"
import { HandlerRoutes, namesOf } from "./Topology.js"

/** How many dead letters a replay moves per round of confirms. */
const ReplayChunk = 500

/** How long one `basic.get` may take before the operation gives up, naming the queue. */
export const DeadReadTimeout = Duration.seconds(30)

const text = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)
const isoMs = (value: unknown): number | null => {
  const ms = typeof value === "string" ? Date.parse(value) : Number.NaN
  return Number.isNaN(ms) ? null : ms
}
/** An AMQP timestamp (`T`, seconds) in ms. */
const timestampMs = (value: unknown): number | null => {
  const seconds = typeof value === "object" && value !== null ? (value as { value?: unknown }).value : undefined
  return typeof seconds === "number" ? seconds * 1000 : null
}
const count = (
  value: unknown
): number => (typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : 0)

interface Death {
  readonly reason?: unknown
  readonly queue?: unknown
  readonly time?: unknown
  readonly count?: unknown
  readonly exchange?: unknown
  readonly "routing-keys"?: unknown
}

/**
 * A message's properties as plain data: every property amqplib decoded, and its header
 * table as the kit decoded it (`headersOf`), absent when that table could not be decoded.
 * Read through property descriptors: reading the patched amqplib's `headers` would run its
 * own decoder.
 */
const plainProperties = (message: Message, headers: MessageHeaders): Record<string, unknown> => {
  const { headers: _, ...others } = Object.getOwnPropertyDescriptors(message.properties)
  return {
    // Enumerable ones only: the patched amqplib's `rawHeaders` is not a property of the message.
    ...Object.fromEntries(Object.entries(others).flatMap(([name, d]) => (d.enumerable ? [[name, d.value]] : []))),
    ...(headers._tag === "Decoded" ? { headers: { ...headers.table.values } } : {})
  }
}

/** The broker's most recent death of a message (`x-death`'s first entry), if it has one. */
const lastDeath = (headers: MessageHeaders): Death | undefined => {
  const deaths = headerValue(headers, "x-death")
  return Array.isArray(deaths) ? (deaths[0] as Death | undefined) : undefined
}

/** True when the broker dead-lettered the message from the handler's own queue (see `readDeadLetter`). */
const diedInHandlerQueue = (message: Message, handlerQueue: string): boolean =>
  text(lastDeath(headersOf(message.properties))?.queue) === handlerQueue

/**
 * A message of a dead queue as an operator sees it. The kit's own dead copies carry their
 * story in its headers; one the broker dead-lettered by itself (a rejected copy, an
 * overflow, a delivery limit, an expiry) carries only `x-death`, from which its reason
 * (`rejected-by-broker`), tag (`x-death/<reason>`), time and origin are taken. When the
 * broker dead-lettered it from the handler's own queue (`handlerQueue`), its kit headers
 * are not the kit's (the kit never rejects its own copies there but for a copy it could not
 * write): whoever published it set them, so the story is the broker's alone. One whose
 * header table cannot be decoded has `headersRefused`, and no story but its id and body.
 */
export const readDeadLetter = (handler: HandlerName, handlerQueue: string, message: Message): DeadLetter => {
  const decoded = headersOf(message.properties)
  const death = lastDeath(decoded)
  const fromHandlerQueue = diedInHandlerQueue(message, handlerQueue)
  const header = (name: string) =>
    fromHandlerQueue && name.startsWith("x-dostavka-") ? undefined : headerValue(decoded, name)
  const ours = text(header(KitHeaders.reason))
  const reason: DeadReason = ours === "incompatible" || ours === "exhausted" || ours === "untrusted-publisher"
    ? ours
    : "rejected-by-broker"
  const byBroker = reason === "rejected-by-broker" && ours === undefined
  const keys = Array.isArray(death?.["routing-keys"]) ? (death["routing-keys"] as ReadonlyArray<unknown>) : []
  return {
    messageId: text(message.properties.messageId) ?? "(none)",
    handler,
    reason,
    errorTag: decoded._tag === "Undecodable"
      ? "headers/undecodable"
      : byBroker
      ? `x-death/${text(death?.reason) ?? "unknown"}`
      : text(header(KitHeaders.errorTag)) ?? "unknown",
    error: decoded._tag === "Undecodable"
      ? `its header table cannot be decoded: ${decoded.refusal.message}`
      : byBroker
      ? `dead-lettered by the broker from ${text(death?.queue) ?? "its queue"} (${text(death?.reason) ?? "no x-death"})`
      : text(header(KitHeaders.error)) ?? "",
    attempts: count(header(KitHeaders.attempts)),
    replays: count(header(KitHeaders.replays)),
    firstFailureAtMs: isoMs(header(KitHeaders.firstFailureAt)) ?? timestampMs(death?.time),
    lastFailureAtMs: isoMs(header(KitHeaders.lastFailureAt)) ?? timestampMs(death?.time),
    deadAtMs: isoMs(header(KitHeaders.deadAt)) ?? timestampMs(death?.time),
    originalExchange: text(header(KitHeaders.originalExchange)) ?? text(death?.exchange) ?? null,
    originalRoutingKey: text(header(KitHeaders.originalRoutingKey)) ?? text(keys[0]) ?? null,
    properties: plainProperties(message, decoded),
    ...(decoded._tag === "Undecodable" ? { headersRefused: decoded.refusal.message } : {}),
    body: message.content
  }
}

const unavailable = (what: string) => (cause: unknown) =>
  new DeadLettersUnavailable({ detail: `${what}: ${describeCause(cause)}` })

/**
 * The `DeadLetters` port over amqplib. Each operation opens its own connection (named
 * `<prefix>-operator`), and reads the dead queue with `basic.get` and manual acks:
 * what it keeps goes back with `basic.nack` + requeue, which puts classic and quorum
 * queues' messages back in their place. A replay publishes to the handler's exchange
 * with the routing key `redeliver` (its queue only), on a confirm channel of its own
 * publisher, and acks a dead letter only once its copy is confirmed. Needs `Settings`.
 */
export const DeadLettersAmqp = Layer.effect(
  DeadLetters,
  Effect.gen(function*() {
    const settings = yield* Settings
    const client = yield* AmqpClient
    const names = namesOf(settings.prefix)

    /** Runs `use` with a channel holding the dead queue's messages read so far; everything not acked returns to the queue. */
    const withDeadQueue = <A>(
      handler: HandlerName,
      use: (channel: AmqpChannel, queue: string, depth: number) => Effect.Effect<A, DeadLettersUnavailable>
    ) =>
      Effect.scoped(Effect.gen(function*() {
        const connection = yield* openConnection(brokerAccessOf(settings), `${settings.prefix}-operator`).pipe(
          Effect.mapError((e) => new DeadLettersUnavailable({ detail: e.message }))
        )
        const channel = yield* Effect.acquireRelease(
          Effect.tryPromise({ try: () => connection.createChannel(), catch: unavailable("opening a channel") }),
          (ch) =>
            closeQuietly(async () => {
              ch.nackAll(true)
              await ch.close()
            })
        )
        channel.on("error", () => {})
        const queue = names.deadQueue(handler)
        const { messageCount } = yield* Effect.tryPromise({
          try: () => channel.checkQueue(queue),
          catch: unavailable(`queue '${queue}' (has the ${handler} role run on this broker and prefix?)`)
        })
        return yield* use(channel, queue, messageCount)
      }))

    /** The next message of the queue, or `undefined` when there is none; fails after `DeadReadTimeout`. */
    const next = (channel: AmqpChannel, queue: string) =>
      Effect.tryPromise({
        try: () => channel.get(queue, { noAck: false }),
        catch: unavailable(`basic.get on '${queue}'`)
      }).pipe(
        Effect.timeoutFail({
          duration: DeadReadTimeout,
          onTimeout: () =>
            new DeadLettersUnavailable({
              detail: `basic.get on '${queue}': no answer within ${Duration.format(DeadReadTimeout)}`
            })
        }),
        Effect.map((m): GetMessage | undefined => (m === false ? undefined : m))
      )

    const idOf = (message: Message) => String(message.properties.messageId)

    const port: DeadLettersShape = {
      list: (handler, limit) =>
        withDeadQueue(handler, (channel, queue, depth) =>
          Effect.gen(function*() {
            const letters: Array<DeadLetter> = []
            while (letters.length < Math.min(limit, depth)) {
              const message = yield* next(channel, queue)
              if (message === undefined) break
              letters.push(readDeadLetter(handler, names.queue(handler), message))
            }
            return letters
          })),

      replay: (handler, selection, { dryRun }) =>
        Effect.scoped(
          Effect.gen(function*() {
            const publisher = yield* makeOperatorPublisher(settings, handler)
            const exchange = names.handlerExchange(handler)
            return yield* withDeadQueue(handler, (channel, queue, depth) =>
              Effect.gen(function*() {
                const seen: Array<string> = []
                const moved: Array<string> = []
                const failed: Array<string> = []
                const undecodable: Array<string> = []
                let chunk: Array<readonly [GetMessage, RawPublish]> = []
                const flush = Effect.gen(function*() {
                  if (chunk.length === 0) return
                  const outcomes = yield* publisher.publish(chunk.map(([, copy]) => copy))
                  for (const [i, [message]] of chunk.entries()) {
                    if (outcomes[i]?._tag === "Confirmed") {
                      channel.ack(message)
                      moved.push(idOf(message))
                    } else {
                      failed.push(idOf(message))
                    }
                  }
                  chunk = []
                })
                for (let read = 0; read < depth; read++) {
                  const message = yield* next(channel, queue)
                  if (message === undefined) break
                  seen.push(idOf(message))
                  if (!isSelected(selection, idOf(message), read)) continue
                  const copy = replayCopy(
                    message,
                    exchange,
                    HandlerRoutes.redeliver,
                    !diedInHandlerQueue(message, names.queue(handler))
                  )
                  if (copy === undefined) undecodable.push(idOf(message))
                  else if (dryRun) moved.push(idOf(message))
                  else chunk.push([message, copy])
                  if (chunk.length >= ReplayChunk) yield* flush
                }
                yield* flush
                return { moved, failed, undecodable, notFound: missingIds(selection, seen) } satisfies DeadLetterMove
              }))
          }).pipe(
            Effect.mapError((
              e
            ) => (e._tag === "DeadLettersUnavailable" ? e : new DeadLettersUnavailable({ detail: e.message })))
          )
        ),

      purge: (handler, selection) =>
        withDeadQueue(handler, (channel, queue, depth) =>
          Effect.gen(function*() {
            const seen: Array<string> = []
            const moved: Array<string> = []
            for (let read = 0; read < depth; read++) {
              const message = yield* next(channel, queue)
              if (message === undefined) break
              seen.push(idOf(message))
              if (isSelected(selection, idOf(message), read)) {
                channel.ack(message)
                moved.push(idOf(message))
              }
              if (selection._tag === "Head") break
            }
            return {
              moved,
              failed: [],
              undecodable: [],
              notFound: missingIds(selection, seen)
            } satisfies DeadLetterMove
          }))
    }
    return DeadLetters.of({
      list: (handler, limit) => Effect.provideService(port.list(handler, limit), AmqpClient, client),
      replay: (handler, selection, options) =>
        Effect.provideService(port.replay(handler, selection, options), AmqpClient, client),
      purge: (handler, selection) => Effect.provideService(port.purge(handler, selection), AmqpClient, client)
    })
  })
).pipe(Layer.provide(AmqpClient.live))
