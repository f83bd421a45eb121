/**
 * KitInProcess: runs one of the kit's own role Layers (`RelayRole`, `CatalogRole`) inside
 * the bench process, composed as `src/main.ts` composes it (the role over
 * `ProcessServices` and `Settings`), with settings given field by field instead of read
 * from the environment. Its log lines go through a logger that prints warnings and
 * errors (`kitLogger`) and notes when given lines first appear (and the CPU used by then): the kit logs `relay holds the lease`
 * when its relay starts to drain and `consuming` when a receiver's consumer is
 * registered, and those are the moments a round's clock starts.
 */
import { Context, Deferred, Duration, Effect, Exit, FiberId, Layer, Logger, Redacted } from "effect"
import { AmqpClient } from "../../src/adapters/amqp/AmqpClient.js"
import { brokerAccessOf, openConnection } from "../../src/adapters/amqp/AmqpConnection.js"
import { declarePlan, topologyPlanOf } from "../../src/adapters/amqp/Topology.js"
import { Settings, type SettingsShape } from "../../src/config.js"
import type { Envelope } from "../../src/domain/Envelope.js"
import { Outbox } from "../../src/ports/Outbox.js"
import { Supervisor } from "../../src/ports/Supervisor.js"
import { Transaction } from "../../src/ports/Transaction.js"
import { ApiStores } from "../../src/roles/databases.js"
import { ProcessServices } from "../../src/roles/ProcessServices.js"
import { BenchFailure, orBenchFailure } from "./BenchFailure.js"
import { kitLogger } from "./BenchLog.js"
import { type Mark, resultOf } from "./RoundClock.js"
import { tempDir } from "./TempDir.js"

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

/** A kit round that takes longer than this failed. */
const KitRoundTimeout = Duration.minutes(5)

/**
 * One measured round of a kit role in this process: `prepare` writes its input into a
 * fresh data dir, `role` starts over it, the clock starts when the role logs `marker` and
 * stops at the mark `until` answers (it polls the role's database), or the round fails
 * with the role's supervisor. `profile` wraps the measured part (`--cpu-profile`). Any
 * failure is a `BenchFailure` naming `what`, as is a round over `KitRoundTimeout`.
 */
export const kitRound = <E1, R1, E2, E3>(options: {
  readonly what: string
  readonly prefix: string
  readonly amqpUrl: string
  readonly role: Layer.Layer<never, E1, R1>
  readonly marker: string
  readonly count: number
  readonly prepare: (s: KitSettings) => Effect.Effect<void, E2>
  readonly until: (s: KitSettings) => Effect.Effect<Mark, E3>
  readonly profile: <A, E, R>(e: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}) =>
  Effect.scoped(Effect.gen(function*() {
    const s: KitSettings = { amqpUrl: options.amqpUrl, prefix: options.prefix, dataDir: yield* tempDir(options.prefix) }
    yield* options.prepare(s)
    const markers = markerLogger([options.marker])
    return yield* Effect.gen(function*() {
      const supervisor = yield* startRole(options.role, settingsLayer(s)).pipe(Effect.provide(markers.layer))
      const startedAt = yield* markers.at(options.marker)
      const endedAt = yield* Effect.raceFirst(options.until(s), supervisor.failed)
      return resultOf(options.count, startedAt, endedAt)
    }).pipe(options.profile)
  })).pipe(
    orBenchFailure(options.what),
    Effect.timeoutFail({
      duration: KitRoundTimeout,
      onTimeout: () => new BenchFailure({ what: options.what, detail: "round timed out" })
    })
  )

/**
 * Writes `rows` into the outbox of `s.dataDir` as the API would (`Outbox.enqueue`), 5,000
 * per transaction; with `parked`, parks them in the same transaction, so that a relay
 * leaves them until they are released.
 */
export const writeOutbox = (s: KitSettings, rows: ReadonlyArray<Envelope>, options: { readonly parked: boolean }) =>
  Effect.gen(function*() {
    const outbox = yield* Outbox
    const transaction = yield* Transaction
    const now = Date.now()
    for (let i = 0; i < rows.length; i += 5_000) {
      const chunk = rows.slice(i, i + 5_000)
      yield* transaction.run(Effect.zipRight(
        Effect.forEach(chunk, (row) => outbox.enqueue(row, now), { discard: true }),
        options.parked
          ? outbox.reject(
            chunk.map((row) => ({ messageId: row.messageId, error: "bench: parked until released", retryAtMs: null })),
            now
          )
          : Effect.void
      ))
    }
  }).pipe(Effect.provide(ApiStores), Effect.provide(settingsLayer(s)))
