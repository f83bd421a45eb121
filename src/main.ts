import { Command, Options } from "@effect/cli"
import { FetchHttpClient } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Layer, Logger, LogLevel, Option } from "effect"
import { Settings } from "./config.js"
import { DeadLettersAmqp } from "./adapters/amqp/DeadLettersAmqp.js"
import { deadCommand } from "./cli/DeadLetterCommands.js"
import { outboxCommand } from "./cli/OutboxCommands.js"
import { ApiStores } from "./roles/databases.js"
import { describeCause } from "./domain/errors.js"
import { OutboxSignal } from "./ports/OutboxSignal.js"
import { Supervisor } from "./ports/Supervisor.js"
import { ApiRole } from "./roles/api.js"
import { printReport, runDeliveryJob } from "./roles/deliveryJob.js"
import { RelayRole } from "./roles/relay.js"
import { AuditRole, CatalogRole } from "./roles/receivers.js"

const Roles = {
  api: ApiRole,
  relay: RelayRole,
  catalog: CatalogRole,
  audit: AuditRole,
  all: Layer.mergeAll(ApiRole, RelayRole, CatalogRole, AuditRole)
} as const

const role = Options.choice("role", ["api", "relay", "catalog", "audit", "all"] as const).pipe(
  Options.withDescription("run one role (or all of them) until SIGINT/SIGTERM"),
  Options.optional
)

const dataset = Options.file("dataset", { exists: "yes" }).pipe(
  Options.withDescription("the JSON Lines data set the main job publishes"),
  Options.withDefault("data/materials.jsonl")
)

/** Runs `effect` until it ends or a role fails (`Supervisor`); a failure shuts the roles down, then fails with `RoleFailed`. */
const untilAFailure = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Supervisor, (supervisor) => Effect.raceFirst(effect, supervisor.failed))

/**
 * `dostavka --role R` runs role R until it is signalled, then shuts down cleanly.
 * `dostavka` alone is the main job: every role in this process, the data set published
 * through the HTTP API, a delivery report once both receivers have applied every event.
 */
const dostavka = Command.make("dostavka", { role, dataset }, ({ dataset, role }) =>
  Option.match(role, {
    onSome: (name) => untilAFailure(Layer.launch(Roles[name])),
    onNone: () =>
      untilAFailure(runDeliveryJob(dataset).pipe(Effect.flatMap(printReport), Effect.provide(Roles.all)))
  }).pipe(Effect.provide(Layer.merge(OutboxSignal.layer, Supervisor.layer)))
)

const operatorCommands = [
  deadCommand.pipe(Command.provide(DeadLettersAmqp)),
  outboxCommand.pipe(Command.provide(ApiStores))
] as const

const cli = Command.run(dostavka.pipe(Command.withSubcommands(operatorCommands)), { name: "dostavka", version: "0.1.0" })

const logging = Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger)).pipe(
  Layer.merge(Logger.minimumLogLevel(process.env.DOSTAVKA_LOG_LEVEL === "debug" ? LogLevel.Debug : LogLevel.Info))
)

cli(process.argv).pipe(
  Effect.tapErrorCause((cause) =>
    Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logError(`stopped: ${describeCause(Cause.squash(cause))}`)
  ),
  Effect.provide(Layer.mergeAll(Settings.layer, NodeContext.layer, FetchHttpClient.layer, logging)),
  NodeRuntime.runMain({ disablePrettyLogger: true, disableErrorReporting: true })
)
