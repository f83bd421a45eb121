import { Effect, Option } from "effect"
import { describeCause } from "../../domain/errors.js"
import type { AmqpConnection } from "./AmqpClient.js"
import { BrokerUnavailable, closeQuietly } from "./AmqpConnection.js"
import type { ManagementApi } from "./ManagementApi.js"
import type { Topology } from "./Topology.js"

/** What a check found of a topology: the objects the broker lacks, and whether bindings could be checked at all. */
export interface TopologyCheck {
  /** e.g. `queue 'p.catalog'`, `binding 'p.events' -> 'p.catalog' (material.published.v1)`. */
  readonly missing: ReadonlyArray<string>
  /** False when the management API did not answer: AMQP has no passive check for a binding. */
  readonly bindingsChecked: boolean
}

const isNotFound = (cause: unknown) => /\b404\b|NOT_FOUND/.test(describeCause(cause))

/** A passive declare on a channel of its own (a 404 closes the channel): true when the object exists. */
const exists = (
  connection: AmqpConnection,
  check: (channel: Awaited<ReturnType<AmqpConnection["createChannel"]>>) => Promise<unknown>
) =>
  Effect.acquireUseRelease(
    Effect.tryPromise({
      try: () => connection.createChannel(),
      catch: (cause) => new BrokerUnavailable({ detail: `opening a channel: ${describeCause(cause)}` })
    }),
    (channel) => {
      channel.on("error", () => {})
      return Effect.tryPromise(() => check(channel)).pipe(
        Effect.as(true),
        Effect.catchAll((error) =>
          isNotFound(error.error)
            ? Effect.succeed(false)
            : Effect.fail(new BrokerUnavailable({ detail: describeCause(error.error) }))
        )
      )
    },
    (channel) => closeQuietly(() => channel.close())
  )

/**
 * What of `topology` the broker lacks: its exchanges and queues by passive declare
 * (`exchange.declare`/`queue.declare` with `passive`), its bindings (to queues and to
 * exchanges) through the management API's binding lists, since AMQP 0-9-1 has no passive
 * `queue.bind`. Fails with
 * `BrokerUnavailable`; a management API that does not answer only leaves the bindings
 * unchecked.
 */
export const checkTopology = (
  connection: AmqpConnection,
  topology: Topology,
  management: Option.Option<ManagementApi["Type"]>
) =>
  Effect.gen(function*() {
    const missing: Array<string> = []
    for (const exchange of topology.exchanges) {
      if (!(yield* exists(connection, (ch) => ch.checkExchange(exchange.name)))) {
        missing.push(`exchange '${exchange.name}'`)
      }
    }
    for (const queue of topology.queues) {
      if (!(yield* exists(connection, (ch) => ch.checkQueue(queue.name)))) missing.push(`queue '${queue.name}'`)
    }
    let bindingsChecked = Option.isSome(management)
    if (Option.isSome(management)) {
      const api = management.value
      const checks = [
        ...topology.bindings.map((b) => ({
          name: `binding '${b.exchange}' -> '${b.queue}' (${b.routingKey})`,
          found: Effect.map(api.bindingKeys(b.exchange, b.queue), (keys) => keys.includes(b.routingKey))
        })),
        ...topology.exchangeBindings.map((b) => ({
          name: `binding '${b.source}' -> exchange '${b.destination}' (${b.routingKey})`,
          found: Effect.map(api.exchangeBindingKeys(b.source, b.destination), (keys) => keys.includes(b.routingKey))
        }))
      ]
      const found = yield* Effect.either(Effect.forEach(checks, (check) => check.found))
      if (found._tag === "Left") {
        bindingsChecked = false
      } else {
        for (const [i, check] of checks.entries()) if (!found.right[i]) missing.push(check.name)
      }
    }
    return { missing, bindingsChecked } satisfies TopologyCheck
  })
