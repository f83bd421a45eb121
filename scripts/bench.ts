/**
 * `npm run bench`: measures the kit against raw amqplib and rascal on the machine's
 * RabbitMQ, in a vhost of its own (created through the management API, deleted at the
 * end), on messages shaped like the kit's (≈1 KiB JSON, persistent). Suites: relay,
 * receiver, e2e, api, footprint (scripts/bench/*Suite.ts say what each measures); name
 * some to run only those. Prints a table (ratios first) on stdout, progress on stderr,
 * writes the same figures as JSON under bench/results/, and ends with one summary line
 * of ratios. `--quick` is a reduced run of under two minutes.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import { join } from "node:path"
import { apiSuite } from "./bench/ApiSuite.js"
import { benchBroker } from "./bench/BenchBroker.js"
import type { BenchBroker } from "./bench/BenchBroker.js"
import { BenchLogging, say } from "./bench/BenchLog.js"
import { type BenchOptions, BenchUsageError, parseOptions, type SuiteName } from "./bench/BenchOptions.js"
import { machineOf, renderTables, summaryLine, writeJson } from "./bench/BenchReport.js"
import { e2eSuite } from "./bench/E2eSuite.js"
import type { SuiteResult } from "./bench/Figures.js"
import { footprintSuite } from "./bench/FootprintSuite.js"
import { receiverSuite } from "./bench/ReceiverSuite.js"
import { relaySuite } from "./bench/RelaySuite.js"

const projectDir = join(import.meta.dirname, "..")

const suites: Record<SuiteName, (options: BenchOptions, broker: BenchBroker) => Effect.Effect<SuiteResult, unknown>> = {
  relay: relaySuite,
  receiver: receiverSuite,
  e2e: (options, broker) => e2eSuite(options, broker, projectDir),
  api: (options, broker) => apiSuite(options, broker, projectDir),
  footprint: (options, broker) => footprintSuite(options, broker, projectDir)
}

const startedAt = new Date()

const program = Effect.gen(function*() {
  const options = yield* Effect.try({
    try: () => parseOptions(process.argv.slice(2)),
    catch: (error) => (error instanceof BenchUsageError ? error : new BenchUsageError({ detail: String(error) }))
  })
  const broker = yield* benchBroker
  yield* say(
    `vhost ${broker.vhost} on RabbitMQ ${broker.rabbitmqVersion}; suites ${options.suites.join(", ")}${
      options.quick ? " (quick)" : ""
    }`
  )
  const results: Array<SuiteResult> = []
  for (const name of options.suites) {
    const suiteStartedAt = Date.now()
    yield* say(`suite ${name}`)
    results.push(yield* suites[name](options, broker))
    yield* say(`suite ${name} done in ${((Date.now() - suiteStartedAt) / 1000).toFixed(0)} s`)
  }
  const machine = machineOf(broker)
  yield* Console.log(
    `Dostavka bench${
      options.quick ? " (quick)" : ""
    }: ${machine.cores} cores (${machine.cpu}), Node ${machine.node}, RabbitMQ ${machine.rabbitmq} (Erlang ${machine.erlang}), amqplib ${machine.amqplib}, rascal ${machine.rascal}, ${machine.os}\n`
  )
  yield* Console.log(renderTables(results))
  const file = writeJson(projectDir, options, machine, startedAt, results)
  yield* Console.log(`\nJSON: ${file}`)
  yield* Console.log(summaryLine(results))
}).pipe(
  Effect.scoped,
  Effect.tapErrorCause((cause) => Console.error(`bench: failed: ${cause}`)),
  Effect.provide(BenchLogging)
)

NodeRuntime.runMain(program, { disablePrettyLogger: true, disableErrorReporting: true })
