/**
 * KitInProcess: runs one of the kit's own role Layers (`RelayRole`, `CatalogRole`) inside
 * the bench process, composed as `src/main.ts` composes it (the role over
 * `ProcessServices` and `Settings`), with settings given field by field instead of read
 * from the environment. Its log lines go through a logger that prints warnings and
 * errors (`kitLogger`) and notes when given lines first appear (and the CPU used by then): the kit logs `relay holds the lease`
 * when its relay starts to drain and `consuming` when a receiver's consumer is
 * registered, and those are the moments a round's clock starts.
 */
import { Context, Deferred, Effect, Exit, FiberId, Layer, Logger, Redacted } from "effect"
import { AmqpClient } from "../../src/adapters/amqp/AmqpClient.js"
import { brokerAccessOf, openConnection } from "../../src/adapters/amqp/AmqpConnection.js"
import { declarePlan, topologyPlanOf } from "../../src/adapters/amqp/Topology.js"
import { Settings, type SettingsShape } from "../../src/config.js"
import { Supervisor } from "../../src/ports/Supervisor.js"
import { ProcessServices } from "../../src/roles/ProcessServices.js"
import { BenchFailure } from "./BenchFailure.js"
import { kitLogger } from "./BenchLog.js"
import type { Mark } from "./RoundClock.js"

export interface KitSettings {
  readonly amqpUrl: string
  readonly prefix: string
  readonly dataDir: string
}

/** The kit's defaults, with the bench's broker, prefix and data dir. */
export const settingsLayer = (s: KitSettings, more: Partial<SettingsShape> = {}) =>
  Settings.with({ amqpUrl: Redacted.make(s.amqpUrl), prefix: s.prefix, dataDir: s.dataDir, ...more })

/** The kit's settings as a value (its defaults and `s`), e.g. for the relay window. */
export const settingsOf = (s: KitSettings, more: Partial<SettingsShape> = {}) =>
  Effect.provide(Settings, settingsLayer(s, more))

/** Declares the kit's whole topology for `s.prefix` (exchanges, handler, retry and dead queues, bindings). */
export const declareKitTopology = (s: KitSettings) =>
  Effect.gen(function*() {
    const settings = yield* Settings
    yield* Effect.scoped(
      Effect.flatMap(openConnection(brokerAccessOf(settings), `${s.prefix}-bench-setup`), (connection) =>
        declarePlan(connection, topologyPlanOf(settings, "all")))
    )
  }).pipe(Effect.provide(AmqpClient.live), Effect.provide(settingsLayer(s)))

const textOf = (message: unknown): string =>
  Array.isArray(message) ? message.map((m) => (typeof m === "string" ? m : String(m))).join(" ") : String(message)

/**
 * In place of `kitLogger`: the same lines, and the time each of `markers` was first logged.
 */
export const markerLogger = (markers: ReadonlyArray<string>) => {
  const seen = new Map(markers.map((m) => [m, Deferred.unsafeMake<Mark>(FiberId.none)] as const))
  const logger = Logger.make<unknown, void>((options) => {
    const marker = seen.get(textOf(options.message))
    if (marker !== undefined) {
      Deferred.unsafeDone(marker, Exit.succeed({ at: options.date.getTime(), cpu: process.cpuUsage() }))
    }
    kitLogger.log(options)
  })
  return {
    layer: Logger.replace(kitLogger, logger),
    /**
     * When `marker` was first logged (ms since the epoch, and the process's CPU usage then);
     * waits for it, a minute at most: a role that never logs it (the line was reworded)
     * fails the round with a message that says so, rather than leaving it to time out.
     */
    at: (marker: string) =>
      Deferred.await(seen.get(marker)!).pipe(
        Effect.timeoutFail({
          duration: "1 minute",
          onTimeout: () =>
            new BenchFailure({
              what: "kit role",
              detail: `it never logged "${marker}", the line the bench starts its clock at`
            })
        })
      )
  }
}

/**
 * Builds `role` in the caller's scope, over the process services and `settings`; it runs
 * until the scope closes. Returns the `Supervisor`, whose `failed` ends when a loop of the role died.
 */
export const startRole = <E, R>(role: Layer.Layer<never, E, R>, settings: Layer.Layer<Settings>) =>
  Effect.map(
    Layer.build(role.pipe(Layer.provideMerge(ProcessServices), Layer.provide(settings))),
    (context) => Context.get(context, Supervisor)
  )
