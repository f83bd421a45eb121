import { Command, Options, ValidationError } from "@effect/cli"
import { FetchHttpClient } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Cause, ConfigError, Console, Effect, Exit, Layer, Option } from "effect"
import { DeadLettersAmqp } from "./adapters/amqp/DeadLettersAmqp.js"
import { RedeliveryAmqp } from "./adapters/amqp/RedeliveryAmqp.js"
import { LoggingLive } from "./adapters/logging/Logging.js"
import { TracingLive } from "./adapters/tracing/Tracing.js"
import { deadCommand, UsageError } from "./cli/DeadLetterCommands.js"
import { outboxCommand } from "./cli/OutboxCommands.js"
import { GapsFound, reconcileCommand, statusCommand } from "./cli/StatusCommands.js"
import { topologyCommand } from "./cli/TopologyCommands.js"
import { describeConfigError, Settings } from "./config.js"
import { describeCause } from "./domain/errors.js"
import { printReport, runDeliveryJob } from "./jobs/deliveryJob.js"
import { RoleFailed, Supervisor } from "./ports/Supervisor.js"
import { ApiRole, statusViewOver } from "./roles/api.js"
import {
  ApiReader,
  ApiReaderIfPresent,
  ApiStores,
  AuditReader,
  CatalogReader,
  HandlerInboxesSqlite
} from "./roles/databases.js"
import { HealthRole } from "./roles/health.js"
import { ProcessServices } from "./roles/ProcessServices.js"
import { AuditRole, CatalogRole } from "./roles/receivers.js"
import { RelayRole } from "./roles/relay.js"

// A process without the API serves /healthz, /readyz and /metrics on DOSTAVKA_HEALTH_PORT when set.
const Roles = {
  api: ApiRole,
  relay: Layer.merge(RelayRole, HealthRole),
  catalog: Layer.merge(CatalogRole, HealthRole),
  audit: Layer.merge(AuditRole, HealthRole),
  all: Layer.mergeAll(ApiRole, RelayRole, CatalogRole, AuditRole)
} as const
type RoleName = keyof typeof Roles
const roleNames = Object.keys(Roles) as ReadonlyArray<RoleName>

const role = Options.text("role").pipe(
  Options.withDescription(`run one role until SIGINT/SIGTERM: ${roleNames.join(", ")} (all four in one process)`),
  Options.optional
)

const dataset = Options.file("dataset", { exists: "yes" }).pipe(
  Options.withDescription("the JSON Lines data set the main job publishes"),
  Options.withDefault("data/materials.jsonl")
)

/**
 * Settings and logging, read from the environment when a command runs, not before: so
 * `--help` and `--version` work whatever the environment holds. Logs go to stderr, in
 * `DOSTAVKA_LOG_FORMAT` at `DOSTAVKA_LOG_LEVEL`.
 */
const Environment = Layer.mergeAll(Settings.layer, LoggingLive)

/** Runs `effect` until it ends or a role fails (`Supervisor`); a failure shuts the roles down, then fails with `RoleFailed`. */
const untilAFailure = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Supervisor, (supervisor) => Effect.raceFirst(effect, supervisor.failed))

/**
 * `dostavka --role R` runs role R until it is signalled, then shuts down cleanly.
 * `dostavka` alone is the main job: every role in this process, the data set published
 * through the HTTP API, a delivery report once both receivers have applied every event.
 */
const runRole = (name: string) =>
  Effect.gen(function*() {
    if (!(roleNames as ReadonlyArray<string>).includes(name)) {
      return yield* new UsageError({
        detail: `--role ${JSON.stringify(name)} is not a role: use ${roleNames.join(", ")}`
      })
    }
    return yield* untilAFailure(Layer.launch(Roles[name as RoleName]))
  })

const runMainJob = (dataset: string) =>
  untilAFailure(
    runDeliveryJob(dataset, { api: ApiReader, catalog: CatalogReader, audit: AuditReader }).pipe(
      Effect.flatMap(printReport),
      Effect.provide(Roles.all)
    )
  )

const dostavka = Command.make("dostavka", { role, dataset }, ({ dataset, role }) =>
  Effect.gen(function*() {
    if (Option.isSome(role)) return yield* runRole(role.value)
    return yield* runMainJob(dataset)
  }).pipe(
    Effect.provide(ProcessServices),
    Effect.provide(TracingLive(Option.match(role, { onNone: () => "dostavka", onSome: (r) => `dostavka-${r}` }))),
    Effect.provide(Environment)
  ))

const operatorCommands = [
  deadCommand.pipe(Command.provide(DeadLettersAmqp), Command.provide(Environment)),
  outboxCommand.pipe(Command.provide(ApiStores), Command.provide(Environment)),
  topologyCommand.pipe(Command.provide(Environment)),
  statusCommand.pipe(Command.provide(statusViewOver(ApiReaderIfPresent)), Command.provide(Environment)),
  reconcileCommand.pipe(
    Command.provide(Layer.mergeAll(ApiReader, HandlerInboxesSqlite, RedeliveryAmqp)),
    Command.provide(Environment)
  )
] as const

const cli = Command.run(dostavka.pipe(Command.withSubcommands(operatorCommands)), {
  name: "dostavka",
  version: "0.1.0"
})

/**
 * The exit code of a run: 0 when it ended, or was stopped by a signal; 2 for a bad
 * command line or setting (one line on stderr says which, and what is accepted); 1 for
 * anything else, such as a role that failed.
 */
const exitCodeOf = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return 0
  const error = Cause.squash(exit.cause)
  return ConfigError.isConfigError(error) || ValidationError.isValidationError(error) || error instanceof UsageError
    ? 2
    : 1
}

/** One line for what ended the run: the CLI already printed its own validation errors. */
const report = (cause: Cause.Cause<unknown>) => {
  if (Cause.isInterruptedOnly(cause)) return Effect.void
  const error = Cause.squash(cause)
  if (ValidationError.isValidationError(error)) return Effect.void
  if (ConfigError.isConfigError(error)) return Console.error(`dostavka: configuration: ${describeConfigError(error)}`)
  if (error instanceof UsageError || error instanceof GapsFound) return Console.error(`dostavka: ${error.detail}`)
  if (error instanceof RoleFailed) return Console.error(`dostavka: stopped: ${error.message}`)
  return Console.error(`dostavka: stopped: ${describeCause(error)}`)
}

cli(process.argv).pipe(
  Effect.tapErrorCause(report),
  Effect.provide(Layer.mergeAll(NodeContext.layer, FetchHttpClient.layer)),
  (program) =>
    NodeRuntime.runMain(program, {
      disablePrettyLogger: true,
      disableErrorReporting: true,
      teardown: (exit, onExit) => onExit(exitCodeOf(exit))
    })
)
