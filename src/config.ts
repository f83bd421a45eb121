import { Config, ConfigError, ConfigProvider, Context, Duration, Effect, Either, Layer, Option, Redacted, Schedule } from "effect"
import type { HandlerName } from "./domain/HandlerName.js"
import type { RetryPolicy } from "./app/failures.js"

/**
 * Every setting of the kit, read from the environment. Names and defaults:
 *
 * | env | default | meaning |
 * |---|---|---|
 * | DOSTAVKA_AMQP_URL | amqp://guest:guest@127.0.0.1:5672 | broker URL; redacted in every log |
 * | DOSTAVKA_HTTP_PORT | 8080 | publication API port, always bound to 127.0.0.1 |
 * | DOSTAVKA_DATA_DIR | ./var | folder of the SQLite files api.db, catalog.db, audit.db |
 * | DOSTAVKA_PREFIX | dostavka | prefix of every exchange and queue name |
 * | DOSTAVKA_QUEUE_TYPE | classic | `classic` or `quorum` for the handler queues |
 * | DOSTAVKA_PREFETCH | 50 | unacked deliveries per consumer (basic.qos, per consumer) |
 * | DOSTAVKA_RELAY_WINDOW | 100 | publishes in flight before the relay waits for confirms |
 * | DOSTAVKA_RELAY_POLL_MS | 100 | how often a relay looks at the outbox when nobody rang |
 * | DOSTAVKA_CONFIRM_TIMEOUT_MS | 5000 | after this a publish's outcome is Unknown |
 * | DOSTAVKA_RELAY_LEASE_MS | 15000 | a dead relay's lease expires after this; keep it above the confirm timeout |
 * | DOSTAVKA_DB_BUSY_TIMEOUT_MS | 5000 | how long a write waits for a SQLite lock another connection holds |
 * | DOSTAVKA_RETRY_DELAYS_MS | 1000,10000,60000 | a failed delivery's delays, one retry queue per delay |
 * | DOSTAVKA_MAX_ATTEMPTS | 5 | deliveries of a message to a handler before it is dead-lettered as exhausted |
 * | DOSTAVKA_<HANDLER>_RETRY_DELAYS_MS, DOSTAVKA_<HANDLER>_MAX_ATTEMPTS | the two above | the same for one handler (CATALOG, AUDIT) |
 * | DOSTAVKA_RELAY_PARK_AFTER | 10 | rejections (returned or nacked) of an outbox row before it is parked |
 */
export interface SettingsShape {
  readonly amqpUrl: Redacted.Redacted<string>
  readonly httpHost: "127.0.0.1"
  readonly httpPort: number
  readonly dataDir: string
  readonly prefix: string
  readonly queueType: "classic" | "quorum"
  readonly prefetch: number
  readonly relayWindow: number
  readonly relayPollInterval: Duration.Duration
  readonly confirmTimeout: Duration.Duration
  readonly relayLeaseTtl: Duration.Duration
  /** How long a transaction waits, in all, for a lock another connection holds, before it fails (HTTP 503). */
  readonly storeBusyTimeout: Duration.Duration
  /** Each handler's delayed retry: its tiers and its attempt bound. */
  readonly retry: Readonly<Record<HandlerName, RetryPolicy>>
  /** How many times the broker may reject (return or nack) an outbox row before the relay parks it. */
  readonly parkAfter: number
}

const positive = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.withDefault(fallback),
    Config.validate({ message: `${name} must be a positive integer`, validation: (n) => n > 0 })
  )

const millis = (name: string, fallback: number) => positive(name, fallback).pipe(Config.map(Duration.millis))

/** A list of positive integers in ms, e.g. `1000,10000,60000`, ascending, at most 10. */
const delays = (name: string) =>
  Config.string(name).pipe(
    Config.mapOrFail((text) => {
      const parts = text.split(",").map((part) => part.trim())
      const values = parts.map(Number)
      const valid = parts.length >= 1 && parts.length <= 10 && values.every((n) => Number.isInteger(n) && n > 0 && n <= 86_400_000) &&
        values.every((n, i) => i === 0 || n > values[i - 1]!)
      return valid
        ? Either.right(values.map(Duration.millis))
        : Either.left(ConfigError.InvalidData([], `${name} must be 1–10 ascending delays in ms (1–86400000), comma-separated, e.g. 1000,10000,60000; got ${JSON.stringify(text)}`))
    })
  )

const retryPolicy = (handler: HandlerName, fallback: Config.Config<RetryPolicy>): Config.Config<RetryPolicy> => {
  const upper = handler.toUpperCase()
  return Config.all({
    delays: delays(`DOSTAVKA_${upper}_RETRY_DELAYS_MS`).pipe(Config.option),
    maxAttempts: Config.integer(`DOSTAVKA_${upper}_MAX_ATTEMPTS`).pipe(
      Config.validate({ message: `DOSTAVKA_${upper}_MAX_ATTEMPTS must be a positive integer`, validation: (n) => n > 0 }),
      Config.option
    )
  }).pipe(
    Config.zipWith(fallback, (own, all) => ({
      delays: Option.getOrElse(own.delays, () => all.delays),
      maxAttempts: Option.getOrElse(own.maxAttempts, () => all.maxAttempts)
    }))
  )
}

const defaultRetry: Config.Config<RetryPolicy> = Config.all({
  delays: delays("DOSTAVKA_RETRY_DELAYS_MS").pipe(Config.withDefault([Duration.seconds(1), Duration.seconds(10), Duration.seconds(60)])),
  maxAttempts: positive("DOSTAVKA_MAX_ATTEMPTS", 5)
})

export const settingsConfig: Config.Config<SettingsShape> = Config.all({
  amqpUrl: Config.redacted("DOSTAVKA_AMQP_URL").pipe(
    Config.withDefault(Redacted.make("amqp://guest:guest@127.0.0.1:5672"))
  ),
  httpHost: Config.succeed("127.0.0.1" as const),
  httpPort: Config.port("DOSTAVKA_HTTP_PORT").pipe(Config.withDefault(8080)),
  dataDir: Config.string("DOSTAVKA_DATA_DIR").pipe(Config.withDefault("./var")),
  prefix: Config.string("DOSTAVKA_PREFIX").pipe(
    Config.withDefault("dostavka"),
    Config.validate({
      message: "DOSTAVKA_PREFIX must be 1–100 characters of A-Z a-z 0-9 . _ -",
      validation: (s) => /^[A-Za-z0-9._-]{1,100}$/.test(s)
    })
  ),
  queueType: Config.literal("classic", "quorum")("DOSTAVKA_QUEUE_TYPE").pipe(Config.withDefault("classic" as const)),
  prefetch: positive("DOSTAVKA_PREFETCH", 50),
  relayWindow: positive("DOSTAVKA_RELAY_WINDOW", 100),
  relayPollInterval: millis("DOSTAVKA_RELAY_POLL_MS", 100),
  confirmTimeout: millis("DOSTAVKA_CONFIRM_TIMEOUT_MS", 5_000),
  relayLeaseTtl: millis("DOSTAVKA_RELAY_LEASE_MS", 15_000),
  storeBusyTimeout: millis("DOSTAVKA_DB_BUSY_TIMEOUT_MS", 5_000),
  retry: Config.all({
    catalog: retryPolicy("catalog", defaultRetry),
    audit: retryPolicy("audit", defaultRetry)
  }),
  parkAfter: positive("DOSTAVKA_RELAY_PARK_AFTER", 10)
})

const emptyProvider = ConfigProvider.fromMap(new Map())

export class Settings extends Context.Tag("dostavka/Settings")<Settings, SettingsShape>() {
  /** Reads the environment; fails with a `ConfigError` naming the bad variable. */
  static readonly layer = Layer.effect(Settings, settingsConfig)
  /** Settings for tests: the defaults, overridden field by field. */
  static readonly with = (overrides: Partial<SettingsShape>) =>
    Layer.effect(
      Settings,
      Effect.map(Effect.orDie(Effect.withConfigProvider(settingsConfig, emptyProvider)), (s) => ({ ...s, ...overrides }))
    )
}


/**
 * Reconnect after a lost connection or channel: exponential from 250 ms, doubled each
 * time, randomly jittered (×0.8–1.2), never more than 30 s apart, forever. Jitter keeps
 * a fleet of consumers from reconnecting in lockstep after a broker restart (RabbitMQ
 * "Connection recovery"). Each loss of an established connection starts it afresh.
 */
export const reconnectPolicy = Schedule.exponential("250 millis", 2).pipe(
  Schedule.jittered,
  Schedule.union(Schedule.spaced("30 seconds"))
)

/**
 * After a relay batch that was not entirely confirmed: wait 200 ms, doubling up to 10 s,
 * before draining again. Reset by the next fully confirmed batch.
 */
export const relayBackoff = Schedule.exponential("200 millis", 2).pipe(
  Schedule.union(Schedule.spaced("10 seconds"))
)

/**
 * How long a consumer waits before handing a message back whose retry or dead-letter copy
 * had an unknown outcome (the publishing connection was lost, or no confirm came).
 */
export const copyRequeueDelay = Duration.seconds(1)

/**
 * When the relay publishes again a row the broker rejected (returned or nacked): 1 s after
 * the first rejection, doubling, at most 10 s apart. Rows are deferred one by one, so a
 * rejected row never holds back the rows behind it; after `parkAfter` rejections it is
 * parked instead.
 */
export const rejectedRowDelay = (rejections: number): Duration.Duration =>
  Duration.millis(Math.min(10_000, 1_000 * 2 ** Math.max(0, Math.min(rejections - 1, 10))))
