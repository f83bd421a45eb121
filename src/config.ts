import { Config, ConfigProvider, Context, Duration, Effect, Layer, Redacted, Schedule } from "effect"

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
}

const positive = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.withDefault(fallback),
    Config.validate({ message: `${name} must be a positive integer`, validation: (n) => n > 0 })
  )

const millis = (name: string, fallback: number) => positive(name, fallback).pipe(Config.map(Duration.millis))

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
  storeBusyTimeout: millis("DOSTAVKA_DB_BUSY_TIMEOUT_MS", 5_000)
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

/** How long a receiver waits before handing a message back after a transient failure of its handler. */
export const handlerRequeueDelay = Duration.seconds(1)
