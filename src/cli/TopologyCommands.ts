import { Command, Options } from "@effect/cli"
import type * as amqp from "amqplib"
import { Console, Data, Effect } from "effect"
import { type AmqpChannel, AmqpClient, type AmqpConnection } from "../adapters/amqp/AmqpClient.js"
import {
  brokerAccessOf,
  BrokerRefused,
  BrokerUnavailable,
  closeQuietly,
  openConnection
} from "../adapters/amqp/AmqpConnection.js"
import { type QueueSpec, type Topology, topologyOf } from "../adapters/amqp/Topology.js"
import { Settings } from "../config.js"
import { describeCause } from "../domain/errors.js"
import { UsageError } from "./DeadLetterCommands.js"
import { table } from "./Table.js"

const json = Options.boolean("json").pipe(
  Options.withDescription("print JSON instead of tables: the plan, or with --delete what was deleted")
)
const remove = Options.boolean("delete").pipe(
  Options.withDescription(
    "delete every queue of the prefix's topology, with the messages in it, then every exchange; needs --yes. " +
      "Refused while a queue has consumers"
  )
)
const yes = Options.boolean("yes").pipe(
  Options.withDescription("confirm --delete: the queues' messages are lost with them")
)
const force = Options.boolean("force").pipe(
  Options.withDescription(
    "with --delete: delete queues that still have consumers too (the broker cancels them; " +
      "their unacknowledged messages are lost)"
  )
)

const argumentsOf = (args: Readonly<Record<string, string | number>>) =>
  Object.entries(args).map(([name, value]) => `${name}=${value}`).join(" ")

/** The topology as three tables: exchanges and queues with their arguments, bindings (to queues, then to exchanges). Arguments are never cut. */
const formatTopology = (topology: Topology, heading: string) =>
  [
    heading,
    "",
    table(
      ["EXCHANGE", "TYPE", "DURABLE", "ARGUMENTS"],
      topology.exchanges.map((e) => [e.name, e.type, String(e.durable), argumentsOf(e.arguments ?? {})]),
      Number.MAX_SAFE_INTEGER
    ),
    "",
    table(
      ["QUEUE", "DURABLE", "ARGUMENTS"],
      topology.queues.map((q) => [q.name, String(q.durable), argumentsOf(q.arguments)]),
      Number.MAX_SAFE_INTEGER
    ),
    "",
    table(
      ["EXCHANGE", "ROUTING KEY", "DESTINATION"],
      [
        ...topology.bindings.map((b) => [b.exchange, b.routingKey, b.queue]),
        ...topology.exchangeBindings.map((b) => [b.source, b.routingKey, `exchange ${b.destination}`])
      ]
    )
  ].join("\n")

/**
 * `topology --delete` found queues with consumers (a passive `queue.declare`'s
 * consumer count, or the broker's 406 PRECONDITION_FAILED to an `if-unused` delete) and
 * was not given `--force`. `deleted` names the queues deleted before it found one: none
 * when the check before any delete found it, which is the usual case.
 */
export class TopologyInUse extends Data.TaggedError("TopologyInUse")<{
  readonly queues: ReadonlyArray<{ readonly name: string; readonly consumers: number | null }>
  readonly deleted: ReadonlyArray<string>
}> {
  override get message() {
    const inUse = this.queues.map((q) =>
      q.consumers === null
        ? `${q.name} (a consumer came)`
        : `${q.name} (${q.consumers} ${q.consumers === 1 ? "consumer" : "consumers"})`
    ).join(", ")
    const deleted = this.deleted.length === 0
      ? "nothing was deleted"
      : `${this.deleted.length} queues were deleted before it (run again once it is unused)`
    return `topology --delete refused: ${inUse} still consumed; stop the roles and any other consumer, ` +
      `or add --force; ${deleted}`
  }
}

/** What `--delete` did to one queue: `messages` is how many it held when deleted (the broker's delete-ok count). */
export interface QueueDeletion {
  readonly name: string
  readonly existed: boolean
  readonly messages: number | null
}

export interface ExchangeDeletion {
  readonly name: string
  readonly existed: boolean
}

export interface TopologyDeletion {
  readonly queues: ReadonlyArray<QueueDeletion>
  readonly exchanges: ReadonlyArray<ExchangeDeletion>
}

/**
 * An amqplib channel with its two deletes. The kit's `AmqpChannel` (the seam shared with
 * the scripted fake) does not list them, so they are looked for on the channel itself;
 * amqplib's channels have them.
 */
type DeletingChannel = AmqpChannel & Pick<amqp.Channel, "deleteQueue" | "deleteExchange">

const canDelete = (channel: AmqpChannel): channel is DeletingChannel =>
  "deleteQueue" in channel && typeof channel.deleteQueue === "function" &&
  "deleteExchange" in channel && typeof channel.deleteExchange === "function"

/** The broker closed the channel of one operation with `code` (404 NOT_FOUND, 406 PRECONDITION_FAILED, …). */
class ChannelRefused extends Data.TaggedError("ChannelRefused")<{ readonly code: number; readonly detail: string }> {}

const replyCodeOf = (cause: unknown): number | undefined =>
  typeof cause === "object" && cause !== null && typeof (cause as { code?: unknown }).code === "number"
    ? (cause as { code: number }).code
    : undefined

/**
 * Runs `operation` on a channel of its own, closed afterwards: a 404 or a 406 closes the
 * channel it happens on (AMQP 0-9-1 channel exceptions), so one refused operation never
 * costs the next. A refusal the caller decides on is `ChannelRefused` with its reply
 * code; 403 is `BrokerRefused` (`permissions`); anything else `BrokerUnavailable`.
 */
const onChannel = <A>(connection: AmqpConnection, what: string, operation: (channel: DeletingChannel) => Promise<A>) =>
  Effect.acquireUseRelease(
    Effect.tryPromise({
      try: () => connection.createChannel(),
      catch: (cause) => new BrokerUnavailable({ detail: `opening a channel: ${describeCause(cause)}` })
    }),
    (channel) => {
      channel.on("error", () => {})
      if (!canDelete(channel)) return Effect.dieMessage("the AMQP client's channels cannot delete queues or exchanges")
      return Effect.tryPromise({
        try: () => operation(channel),
        catch: (cause) => {
          const code = replyCodeOf(cause)
          const detail = `${what}: ${describeCause(cause)}`
          return code === 403
            ? new BrokerRefused({ reason: "permissions", detail })
            : code === undefined
            ? new BrokerUnavailable({ detail })
            : new ChannelRefused({ code, detail })
        }
      })
    },
    (channel) => closeQuietly(() => channel.close())
  )

/** 404 NOT_FOUND as `fallback`; every other refusal stays a failure (`BrokerUnavailable` for an unexpected code). */
const unlessNotFound = <B>(fallback: B) => <A, E, R>(effect: Effect.Effect<A, E | ChannelRefused, R>) =>
  Effect.catchIf(
    effect,
    (error): error is ChannelRefused => error instanceof ChannelRefused,
    (refused) =>
      refused.code === 404 ? Effect.succeed(fallback) : Effect.fail(new BrokerUnavailable({ detail: refused.detail }))
  )

/** A queue's consumers and messages now (a passive `queue.declare`), or `null` when it does not exist. */
const queueState = (connection: AmqpConnection, queue: QueueSpec) =>
  onChannel(connection, `checking queue '${queue.name}'`, (channel) => channel.checkQueue(queue.name)).pipe(
    unlessNotFound(null)
  )

/**
 * Deletes every queue and then every exchange of `topology`, over one connection
 * (`<prefix>-topology`) and a channel per operation.
 *
 * First it checks every queue (a passive `queue.declare`): when one has consumers and
 * `force` is not given, it deletes nothing and fails with `TopologyInUse`. A classic
 * queue is then deleted with `if-unused`, so a consumer that arrived since the check
 * makes the broker refuse with 406 PRECONDITION_FAILED instead of cancelling it (AMQP
 * 0-9-1 reference, `queue.delete`: "If set, the server will only delete the queue if it
 * has no consumers... raises a channel exception instead"): `TopologyInUse`, naming what
 * was deleted before. RabbitMQ does not implement `if-unused` for quorum queues (it
 * answers 540 NOT_IMPLEMENTED: rabbitmq-server #2211, #10543), so there the check alone
 * guards. With `force`, every queue goes, and the broker cancels its consumers.
 *
 * Queues go first: an exchange's bindings go with the queues, and a queue left without
 * its dead-letter exchange would drop what it dead-letters. An exchange is deleted
 * whatever else is bound to it. Returns, per object, whether it existed (a passive
 * declare's 404 says not; deleting a missing object succeeds in RabbitMQ, so only the
 * check can tell) and each deleted queue's message count. Fails with `TopologyInUse`,
 * `BrokerRefused` (login, vhost, or `permissions` to delete) or `BrokerUnavailable`.
 */
export const deleteTopology = (topology: Topology, options: { readonly force: boolean }) =>
  Effect.gen(function*() {
    const settings = yield* Settings
    const connection = yield* openConnection(brokerAccessOf(settings), `${settings.prefix}-topology`)
    const found = yield* Effect.forEach(
      topology.queues,
      (queue) => Effect.map(queueState(connection, queue), (state) => ({ queue, state }))
    )
    const inUse = found.filter(({ state }) => state !== null && state.consumerCount > 0)
    if (inUse.length > 0 && !options.force) {
      return yield* new TopologyInUse({
        queues: inUse.map(({ queue, state }) => ({ name: queue.name, consumers: state?.consumerCount ?? null })),
        deleted: []
      })
    }
    const queues: Array<QueueDeletion> = []
    for (const { queue, state } of found) {
      if (state === null) {
        queues.push({ name: queue.name, existed: false, messages: null })
        continue
      }
      const ifUnused = !options.force && queue.arguments["x-queue-type"] !== "quorum"
      const deleted = yield* onChannel(
        connection,
        `deleting queue '${queue.name}'`,
        (channel) => channel.deleteQueue(queue.name, { ifUnused })
      ).pipe(
        Effect.catchTag("ChannelRefused", (refused): Effect.Effect<never, TopologyInUse | BrokerUnavailable> =>
          refused.code === 406
            ? Effect.fail(
              new TopologyInUse({
                queues: [{ name: queue.name, consumers: null }],
                deleted: queues.filter((q) =>
                  q.existed
                ).map((q) => q.name)
              })
            )
            : Effect.fail(new BrokerUnavailable({ detail: refused.detail })))
      )
      queues.push({ name: queue.name, existed: true, messages: deleted.messageCount })
    }
    const exchanges = yield* Effect.forEach(topology.exchanges, (exchange) =>
      onChannel(connection, `checking exchange '${exchange.name}'`, (channel) =>
        channel.checkExchange(exchange.name))
        .pipe(
          Effect.as(true),
          unlessNotFound(false),
          Effect.tap((existed) =>
            existed
              ? onChannel(connection, `deleting exchange '${exchange.name}'`, (c) =>
                c.deleteExchange(exchange.name))
                .pipe(unlessNotFound(undefined))
              : Effect.void
          ),
          Effect.map((existed): ExchangeDeletion => ({ name: exchange.name, existed }))
        ))
    return { queues, exchanges } satisfies TopologyDeletion
  }).pipe(Effect.scoped, Effect.withSpan("Topology.delete"))

/** What `--delete` did as a person reads it: one line of counts, then the queues and the exchanges. */
const formatDeletion = (deletion: TopologyDeletion, prefix: string) => {
  const deleted = deletion.queues.filter((q) => q.existed)
  const messages = deleted.reduce((n, q) => n + (q.messages ?? 0), 0)
  const exchanges = deletion.exchanges.filter((e) => e.existed)
  const missing = deletion.queues.length - deleted.length + deletion.exchanges.length - exchanges.length
  return [
    `deleted the topology of prefix ${prefix}: ${deleted.length} queues (${messages} messages with them) and ` +
    `${exchanges.length} exchanges; ${missing} did not exist`,
    "",
    table(
      ["QUEUE", "RESULT", "MESSAGES"],
      deletion.queues.map((
        q
      ) => [q.name, q.existed ? "deleted" : "did not exist", q.existed ? String(q.messages) : "-"])
    ),
    "",
    table(["EXCHANGE", "RESULT"], deletion.exchanges.map((e) => [e.name, e.existed ? "deleted" : "did not exist"]))
  ].join("\n")
}

/**
 * `dostavka topology [--json]`: what every role declares (`topologyOf`) for the configured
 * `DOSTAVKA_PREFIX`, `DOSTAVKA_QUEUE_TYPE` and retry tiers. It reads the settings only:
 * it never connects to the broker, so it shows what a deployment would declare before it
 * runs, and what a `TopologyMismatch` compares against.
 *
 * `dostavka topology --delete --yes [--force] [--json]`: removes that topology from the
 * broker (`deleteTopology`) and prints what it deleted. Without `--yes` it is a
 * `UsageError` (exit 2) and connects to nothing; `--yes` and `--force` mean nothing
 * without `--delete`. Retry queues of tiers no longer configured are not in the
 * topology, so they are not deleted.
 */
export const topologyCommand = Command.make(
  "topology",
  { json, delete: remove, yes, force },
  (options) =>
    Effect.gen(function*() {
      const settings = yield* Settings
      const topology = topologyOf(settings)
      if (!options.delete) {
        if (options.yes || options.force) {
          return yield* new UsageError({ detail: "--yes and --force go with --delete only" })
        }
        return yield* Console.log(
          options.json
            ? JSON.stringify(topology, null, 2)
            : formatTopology(topology, `topology for prefix ${settings.prefix}, ${settings.queueType} queues`)
        )
      }
      if (!options.yes) {
        return yield* new UsageError({
          detail: `topology --delete deletes every queue of prefix ${settings.prefix} with the messages in it, ` +
            "and its exchanges: add --yes to do it"
        })
      }
      const deletion = yield* deleteTopology(topology, { force: options.force }).pipe(Effect.provide(AmqpClient.live))
      yield* Console.log(
        options.json ? JSON.stringify(deletion, null, 2) : formatDeletion(deletion, settings.prefix)
      )
    })
).pipe(
  Command.withDescription(
    "print the exchanges, queues (with arguments) and bindings every role declares for DOSTAVKA_PREFIX, " +
      "without connecting; with --delete --yes, delete them from the broker"
  )
)
