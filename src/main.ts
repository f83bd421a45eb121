import { CliConfig, Command, HelpDoc, Options, Span, ValidationError } from "@effect/cli"
import { FetchHttpClient } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Cause, ConfigError, ConfigProvider, Console, Effect, Either, Exit, Layer, Option } from "effect"
import { BrokerStatsAmqp } from "./adapters/amqp/BrokerStatsAmqp.js"
import { DeadLettersAmqp } from "./adapters/amqp/DeadLettersAmqp.js"
import { RedeliveryAmqp } from "./adapters/amqp/RedeliveryAmqp.js"
import { PortUnavailable } from "./adapters/http/LoopbackHttpServer.js"
import { logFormatConfig, LoggingLive } from "./adapters/logging/Logging.js"
import { TracingLive } from "./adapters/tracing/Tracing.js"
import { commandLineOf, takeLogLevel, terminalConsole } from "./cli/CommandLine.js"
import { deadCommand, NothingFound, PartlyDone, UsageError } from "./cli/DeadLetterCommands.js"
import { describeUnknownVariable, ToolVariables, unknownVariables, variablesReadBy } from "./cli/EnvironmentNames.js"
import { outboxCommand } from "./cli/OutboxCommands.js"
import { AttentionNeeded, GapsFound, reconcileCommand, statusCommand } from "./cli/StatusCommands.js"
import { topologyCommand, TopologyInUse } from "./cli/TopologyCommands.js"
import { describeConfigError, logLevelConfig, Settings, settingsConfig } from "./config.js"
import { describeCause } from "./domain/errors.js"
import { runDeliveryJob, withJobLogLevel } from "./jobs/deliveryJob.js"
import { printReport } from "./jobs/DeliveryReport.js"
import { RoleFailed, Supervisor } from "./ports/Supervisor.js"
import { statusViewOver } from "./roles/api.js"
import {
  ApiReader,
  ApiReaderIfPresent,
  ApiStores,
  AuditReader,
  CatalogReader,
  HandlerInboxesSqlite
} from "./roles/databases.js"
import { claimDataDir, DataDirOfAnotherPrefix, dataDirPrefix } from "./roles/DataDirClaim.js"
import { processServices } from "./roles/ProcessServices.js"
import { type RoleName, Roles } from "./roles/Roles.js"

const roleNames = Object.keys(Roles) as ReadonlyArray<RoleName>

const role = Options.choice("role", roleNames).pipe(
  Options.withDescription(
    "run one role until SIGINT or SIGTERM: api (the publication API), relay (the outbox to the broker), " +
      "catalog or audit (a receiver), or all (the four in one process); without --role, the main job runs"
  ),
  Options.optional
)

const dataset = Options.file("dataset", { exists: "yes" }).pipe(
  Options.withDescription("the JSON Lines data set the main job publishes"),
  Options.withDefault("data/materials.jsonl")
)

const commandLine = takeLogLevel(process.argv.slice(2))

/** Every `DOSTAVKA_*` name the kit or its tools read: the settings' own (`variablesReadBy`) and `ToolVariables`. */
const knownVariables = [
  ...variablesReadBy([settingsConfig, logLevelConfig, logFormatConfig]),
  ...ToolVariables
]

/** One warning line per `DOSTAVKA_*` variable nothing reads, with the name it was likely meant to be. */
const UnknownVariablesWarned = Layer.effectDiscard(
  Effect.forEach(
    unknownVariables(process.env, knownVariables),
    (unknown) => Effect.logWarning(describeUnknownVariable(unknown)),
    { discard: true }
  )
)

/**
 * Settings and logging, read from the environment when a command runs, not before: so
 * `--help` and `--version` work whatever the environment holds. Logs go to stderr, in
 * `DOSTAVKA_LOG_FORMAT` at `DOSTAVKA_LOG_LEVEL` (or `--log-level`); the names of the
 * environment that are no setting are logged as warnings first.
 */
const Environment = Settings.layer.pipe(
  Layer.provideMerge(UnknownVariablesWarned),
  Layer.provideMerge(LoggingLive),
  Layer.provide(
    Either.match(commandLine, {
      onLeft: () => Layer.empty,
      onRight: ({ level }) =>
        Option.match(level, {
          onNone: () => Layer.empty,
          onSome: (value) =>
            Layer.setConfigProvider(
              ConfigProvider.fromMap(new Map([["DOSTAVKA_LOG_LEVEL", value]])).pipe(
                ConfigProvider.orElse(() => ConfigProvider.fromEnv())
              )
            )
        })
    })
  )
)

/**
 * Before a command opens a database in `DOSTAVKA_DATA_DIR` or writes on its behalf (the
 * roles, `outbox`, `reconcile`): the folder is claimed for `DOSTAVKA_PREFIX`, and one of
 * another prefix stops the command (`claimDataDir`).
 */
const DataDirClaimed = Layer.effectDiscard(claimDataDir)

/**
 * Before `status`, which only reads: a folder of another prefix is a warning, not a
 * refusal. Its figures would pair that prefix's outbox and inboxes with this prefix's
 * queues, and the operator is told so; refusing would hide the figures of the one
 * deployment they may be trying to understand.
 */
const DataDirChecked = Layer.effectDiscard(
  Effect.all([Settings, dataDirPrefix]).pipe(
    Effect.flatMap(([settings, holds]) =>
      Option.isSome(holds) && holds.value !== settings.prefix
        ? Effect.logWarning(
          new DataDirOfAnotherPrefix({ dataDir: settings.dataDir, holds: holds.value, prefix: settings.prefix })
            .message
        )
        : Effect.void
    ),
    Effect.ignore
  )
)

/** A process's name in its traces and on its metrics' `service_name`: `dostavka-<role>`, or `dostavka` for the main job. */
const serviceNameOf = (role: Option.Option<RoleName>) =>
  Option.match(role, { onNone: () => "dostavka", onSome: (r) => `dostavka-${r}` })

/** Runs `effect` until it ends or a role fails (`Supervisor`); a failure shuts the roles down, then fails with `RoleFailed`. */
const untilAFailure = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Supervisor, (supervisor) => Effect.raceFirst(effect, supervisor.failed))

const runMainJob = (dataset: string) =>
  untilAFailure(
    runDeliveryJob(dataset, { api: ApiReader, catalog: CatalogReader, audit: AuditReader, broker: BrokerStatsAmqp })
      .pipe(
        Effect.flatMap(printReport),
        Effect.provide(Roles.all),
        withJobLogLevel
      )
  )

/**
 * `dostavka --role R` runs role R until it is signalled, then shuts down cleanly.
 * `dostavka` alone is the main job: every role in this process, the data set published
 * through the HTTP API, a delivery report once both receivers have applied every event.
 */
const dostavka = Command.make("dostavka", { role, dataset }, ({ dataset, role }) =>
  Effect.gen(function*() {
    yield* claimDataDir
    if (Option.isSome(role)) return yield* untilAFailure(Layer.launch(Roles[role.value]))
    return yield* runMainJob(dataset)
  }).pipe(
    Effect.provide(processServices(serviceNameOf(role))),
    Effect.provide(TracingLive(serviceNameOf(role))),
    Effect.provide(Environment)
  ))

const operatorCommands = [
  deadCommand.pipe(Command.provide(DeadLettersAmqp), Command.provide(Environment)),
  outboxCommand.pipe(Command.provide(ApiStores.pipe(Layer.provide(DataDirClaimed))), Command.provide(Environment)),
  topologyCommand.pipe(Command.provide(Environment)),
  statusCommand.pipe(
    Command.provide(statusViewOver(ApiReaderIfPresent).pipe(Layer.provide(DataDirChecked))),
    Command.provide(Environment)
  ),
  reconcileCommand.pipe(
    Command.provide(
      Layer.mergeAll(ApiReader, HandlerInboxesSqlite, RedeliveryAmqp, BrokerStatsAmqp).pipe(
        Layer.provide(DataDirClaimed)
      )
    ),
    Command.provide(Environment)
  )
] as const

const root = dostavka.pipe(Command.withSubcommands(operatorCommands))

/**
 * The help pages show the kit's options only: @effect/cli's built-ins are hidden (its
 * `--log-level` would do nothing here, `--wizard` prompts for every option, and
 * `--completions` is there for whoever looks for it); the ones that work are in the footer.
 */
const cliConfig = CliConfig.make({ showBuiltIns: false })

/** The end of every help page: the options of every command, and what the exit code says. */
const helpFooter = HelpDoc.blocks([
  HelpDoc.h1("GLOBAL OPTIONS"),
  HelpDoc.descriptionList([
    [
      Span.text("--log-level debug | info | warning | error"),
      HelpDoc.p("the least severe log line written to stderr (DOSTAVKA_LOG_LEVEL)")
    ],
    [Span.text("-h, --help"), HelpDoc.p("this page; after a command, that command's page")],
    [Span.text("--version"), HelpDoc.p("the kit's version")]
  ]),
  HelpDoc.h1("EXIT CODES"),
  HelpDoc.p(
    "0 done, or stopped by SIGINT/SIGTERM; 1 nothing found for what was asked, part of the work not done " +
      "(the counts are printed), or a role that stopped; 2 a bad command line or setting, a port in use, " +
      "a data dir of another prefix"
  )
])

const cli = Command.run(root, { name: "dostavka", version: "0.1.0", footer: helpFooter })

/**
 * The exit code of a run (README, "Exit codes"): 0 when it did what was asked, or was
 * stopped by a signal; 1 when it found nothing of what was asked (`NothingFound`), did
 * part of it (`PartlyDone`, the counts printed), or a role stopped; 2 for a bad command
 * line or setting (one line on stderr says which, and what is accepted), a port a role
 * cannot listen on (`PortUnavailable`: the setting has to change, as for a bad value;
 * a restart alone will not help while another process holds the port), and a data dir
 * of another prefix (`DataDirOfAnotherPrefix`).
 */
const exitCodeOf = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return 0
  const error = Cause.squash(exit.cause)
  return ConfigError.isConfigError(error) || ValidationError.isValidationError(error) ||
      error instanceof UsageError || error instanceof PortUnavailable || error instanceof DataDirOfAnotherPrefix
    ? 2
    : 1
}

/** One line for what ended the run; the CLI printed its own validation errors, if any reached it. */
const report = (cause: Cause.Cause<unknown>) => {
  if (Cause.isInterruptedOnly(cause)) return Effect.void
  const error = Cause.squash(cause)
  if (ValidationError.isValidationError(error)) return Effect.void
  if (ConfigError.isConfigError(error)) return Console.error(`dostavka: configuration: ${describeConfigError(error)}`)
  if (
    error instanceof UsageError || error instanceof NothingFound || error instanceof PartlyDone ||
    error instanceof GapsFound || error instanceof AttentionNeeded || error instanceof TopologyInUse ||
    error instanceof PortUnavailable ||
    error instanceof DataDirOfAnotherPrefix
  ) {
    return Console.error(`dostavka: ${error.message}`)
  }
  if (error instanceof RoleFailed) return Console.error(`dostavka: stopped: ${error.message}`)
  return Console.error(`dostavka: stopped: ${describeCause(error)}`)
}

const { asksForHelp, check: checkCommandLine } = commandLineOf(root, dostavka, operatorCommands, cliConfig)

const program = Effect.gen(function*() {
  const { args } = yield* commandLine
  const help = asksForHelp(args)
  if (!help) yield* checkCommandLine(args)
  // A command group alone gets its help page as `--help` gives it: its command is not run,
  // so nothing it is provided with (a database in the data dir) is opened for a page.
  const shown = help && !args.includes("--help") && !args.includes("-h") ? [...args, "--help"] : args
  yield* terminalConsole(help)(cli([...process.argv.slice(0, 2), ...shown]))
})

program.pipe(
  Effect.tapErrorCause(report),
  Effect.provide(Layer.mergeAll(NodeContext.layer, FetchHttpClient.layer, CliConfig.layer(cliConfig))),
  (program) =>
    NodeRuntime.runMain(program, {
      disablePrettyLogger: true,
      disableErrorReporting: true,
      teardown: (exit, onExit) => onExit(exitCodeOf(exit))
    })
)
