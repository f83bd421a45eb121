import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { type Topology, topologyOf } from "../adapters/amqp/Topology.js"
import { Settings } from "../config.js"
import { table } from "./Table.js"

const json = Options.boolean("json").pipe(Options.withDescription("print the plan as JSON instead of tables"))

const argumentsOf = (args: Readonly<Record<string, string | number>>) =>
  Object.entries(args).map(([name, value]) => `${name}=${value}`).join(" ")

/** The topology as three tables: exchanges, queues with their arguments, bindings. Arguments are never cut. */
const formatTopology = (topology: Topology, heading: string) =>
  [
    heading,
    "",
    table(["EXCHANGE", "TYPE", "DURABLE"], topology.exchanges.map((e) => [e.name, e.type, String(e.durable)])),
    "",
    table(
      ["QUEUE", "DURABLE", "ARGUMENTS"],
      topology.queues.map((q) => [q.name, String(q.durable), argumentsOf(q.arguments)]),
      Number.MAX_SAFE_INTEGER
    ),
    "",
    table(
      ["EXCHANGE", "ROUTING KEY", "QUEUE"],
      topology.bindings.map((b) => [b.exchange, b.routingKey, b.queue])
    )
  ].join("\n")

/**
 * `dostavka topology [--json]`: what every role declares (`topologyOf`) for the configured
 * `DOSTAVKA_PREFIX`, `DOSTAVKA_QUEUE_TYPE` and retry tiers. It reads the settings only:
 * it never connects to the broker, so it shows what a deployment would declare before it
 * runs, and what a `TopologyMismatch` compares against.
 */
export const topologyCommand = Command.make("topology", { json }, ({ json }) =>
  Effect.gen(function*() {
    const settings = yield* Settings
    const topology = topologyOf(settings)
    yield* Console.log(
      json
        ? JSON.stringify(topology, null, 2)
        : formatTopology(topology, `topology for prefix ${settings.prefix}, ${settings.queueType} queues`)
    )
  })).pipe(
    Command.withDescription("print the exchanges, queues (with arguments) and bindings every role declares")
  )
