import {
  Config,
  ConfigError,
  ConfigProvider,
  Context,
  Duration,
  Effect,
  Either,
  Layer,
  LogLevel,
  Option,
  Redacted,
  Schedule
} from "effect"
import type { RetryPolicy } from "./app/failures.js"
import type { HandlerName } from "./domain/HandlerName.js"

/**
 * Every setting of the kit, read from the environment through `Config`. Names, defaults
 * and accepted values:
 *
 * | env | default | meaning |
 * |---|---|---|
 * | DOSTAVKA_AMQP_URL | amqp://guest:guest@127.0.0.1:5672 | broker URL (amqp: or amqps:), or a cluster's node URLs separated by commas, tried in turn; redacted in every log |
 * | DOSTAVKA_HTTP_PORT | 8080 | publication API port (1–65535), always bound to 127.0.0.1 |
 * | DOSTAVKA_DATA_DIR | ./var | folder of the SQLite files api.db, catalog.db, audit.db, claimed for one prefix (`claimDataDir`, `roles/DataDirClaim.ts`) |
 * | DOSTAVKA_PREFIX | dostavka | prefix of every exchange and queue name |
 * | DOSTAVKA_QUEUE_TYPE | classic | `classic` or `quorum` for the handler queues |
 * | DOSTAVKA_PREFETCH | 50 | unacked deliveries per consumer (basic.qos, per consumer), 1–65535 |
 * | DOSTAVKA_RELAY_WINDOW | 100 | publishes in flight before the relay waits for confirms, 1–10000 |
 * | DOSTAVKA_RELAY_POLL_MS | 100 | how often a relay looks at the outbox when nobody rang |
 * | DOSTAVKA_CONFIRM_TIMEOUT_MS | 5000 | after this a publish's outcome is Unknown |
 * | DOSTAVKA_RELAY_LEASE_MS | 2000 | the relay lease: renewed every quarter of it by the relay that holds it; a killed relay's successor publishes within about this |
 * | DOSTAVKA_DB_BUSY_TIMEOUT_MS | 5000 | how long a write waits for a SQLite lock another connection holds |
 * | DOSTAVKA_CONNECT_TIMEOUT_MS | 5000 | a broker connection attempt (TCP connect and AMQP handshake) gives up after this |
 * | DOSTAVKA_HEARTBEAT_S | 10 | AMQP heartbeat, seconds: a silent broker is noticed within about twice this |
 * | DOSTAVKA_RETRY_DELAYS_MS | 1000,10000,60000 | a failed delivery's delays, one retry queue per delay |
 * | DOSTAVKA_MAX_ATTEMPTS | 5 | deliveries of a message to a handler before it is dead-lettered as exhausted |
 * | DOSTAVKA_<HANDLER>_RETRY_DELAYS_MS, DOSTAVKA_<HANDLER>_MAX_ATTEMPTS | the two above | the same for one handler (CATALOG, AUDIT) |
 * | DOSTAVKA_RELAY_PARK_AFTER | 10 | rejections (returned or nacked) of an outbox row before it is parked |
 * | DOSTAVKA_TRUSTED_PUBLISHER | (none) | when set, receivers dead-letter events whose `user_id` is not this broker user |
 * | DOSTAVKA_MAX_EVENT_BYTES | 65536 | the largest message body a receiver decodes (1 KiB–64 MiB); a larger one is dead-lettered as `incompatible` unread |
 * | DOSTAVKA_HEALTH_PORT | (none) | when set, a relay or receiver process serves /healthz, /readyz and /metrics on 127.0.0.1 at this port |
 * | DOSTAVKA_MANAGEMENT_URL | http://<broker host>:15672 | RabbitMQ management HTTP API, for queue figures in the status view; without user info, the broker URL's user logs in; redacted |
 * | DOSTAVKA_TOPOLOGY_CHECK_MS | 30000 | how often the relay re-verifies its exchange, and each receiver its queues and bindings, restoring what is missing |
 *
 * A bad value fails with a `ConfigError` whose message names the variable, what is wrong
 * with the value and what is accepted, e.g. `DOSTAVKA_HTTP_PORT="abc" is not accepted: use
 * an integer from 1 to 65535`. A `DOSTAVKA_*` name that none of these reads is found by
 * `unknownVariables` (`cli/EnvironmentNames.ts`).
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
  /** How long one attempt to connect to the broker may take, TCP connect and AMQP handshake together. */
  readonly connectTimeout: Duration.Duration
  /** The AMQP heartbeat the kit asks for (RabbitMQ "Detecting Dead TCP Connections with Heartbeats"). */
  readonly heartbeat: Duration.Duration
  /** Each handler's delayed retry: its tiers and its attempt bound. */
  readonly retry: Readonly<Record<HandlerName, RetryPolicy>>
  /** How many times the broker may reject (return or nack) an outbox row before the relay parks it. */
  readonly parkAfter: number
  /** The broker user whose `user_id` events must carry, or `None` to accept any. */
  readonly trustedPublisher: Option.Option<string>
  /** The largest message body a receiver decodes, in bytes. */
  readonly maxEventBytes: number
  /** Where a relay or receiver process serves its health and metrics endpoints; `None`: nowhere. */
  readonly healthPort: Option.Option<number>
  /** The management HTTP API's base URL, or `None` for the broker's host on port 15672 (see `managementUrlOf`). */
  readonly managementUrl: Option.Option<Redacted.Redacted<string>>
  /** How often each role re-verifies its part of the topology and restores what is missing. */
  readonly topologyCheck: Duration.Duration
}

/** A refusal of `name`'s value that says what is accepted; the value is shown unless `secret`. */
const refuse = (name: string, value: string, accepted: string, secret = false) =>
  ConfigError.InvalidData(
    [],
    `${name}=${
      secret ? "(hidden)" : JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}…` : value)
    } is not accepted: ${accepted}`
  )

/** An integer setting in `[min, max]`, `fallback` when the variable is not set. */
const integer = (name: string, fallback: number, min: number, max: number, unit = "") =>
  Config.string(name).pipe(
    Config.withDefault(String(fallback)),
    Config.mapOrFail((text) => {
      const n = Number(text.trim())
      return /^\s*\d+\s*$/.test(text) && n >= min && n <= max
        ? Either.right(n)
        : Either.left(refuse(name, text, `use an integer from ${min} to ${max}${unit}`))
    })
  )

const millis = (name: string, fallback: number, min: number, max: number) =>
  integer(name, fallback, min, max, " (milliseconds)").pipe(Config.map(Duration.millis))

/** One of `choices`. */
const oneOf = <const C extends ReadonlyArray<string>>(name: string, fallback: C[number], choices: C) =>
  Config.string(name).pipe(
    Config.withDefault(fallback),
    Config.mapOrFail((text) =>
      (choices as ReadonlyArray<string>).includes(text)
        ? Either.right(text as C[number])
        : Either.left(refuse(name, text, `use ${choices.slice(0, -1).join(", ")} or ${choices.at(-1)}`))
    )
  )

/**
 * An `amqp:` or `amqps:` URL with a host, or several separated by commas (the nodes of one
 * cluster, tried in turn), kept redacted; a refusal never shows it (it may hold a password).
 */
const brokerUrl = (name: string, fallback: string) =>
  Config.string(name).pipe(
    Config.withDefault(fallback),
    Config.mapOrFail((text) => {
      const urls = text.split(",").map((u) => u.trim())
      for (const [i, one] of urls.entries()) {
        const which = urls.length === 1 ? "it" : `its URL number ${i + 1}`
        let url: URL
        try {
          url = new URL(one)
        } catch {
          return Either.left(
            refuse(
              name,
              text,
              `${which} is not a URL; use amqp://user:password@host:5672/vhost (or amqps://), several separated by commas for a cluster`,
              true
            )
          )
        }
        if (url.protocol !== "amqp:" && url.protocol !== "amqps:") {
          return Either.left(
            refuse(name, text, `${which} has the scheme ${url.protocol.slice(0, 20)}; use amqp:// or amqps://`, true)
          )
        }
        if (url.hostname === "") {
          return Either.left(refuse(name, text, `${which} has no host; use amqp://user:password@host:5672/vhost`, true))
        }
      }
      return Either.right(Redacted.make(text))
    })
  )

/** A list of positive integers in ms, e.g. `1000,10000,60000`, ascending, at most 10. */
const delays = (name: string) =>
  Config.string(name).pipe(
    Config.mapOrFail((text) => {
      const parts = text.split(",").map((part) => part.trim())
      const values = parts.map(Number)
      const valid = parts.length >= 1 && parts.length <= 10 &&
        parts.every((part, i) => /^\d+$/.test(part) && values[i]! >= 1 && values[i]! <= 86_400_000) &&
        values.every((n, i) => i === 0 || n > values[i - 1]!)
      return valid
        ? Either.right(values.map(Duration.millis))
        : Either.left(
          refuse(
            name,
            text,
            "use 1–10 ascending delays in milliseconds (1–86400000), comma-separated, e.g. 1000,10000,60000"
          )
        )
    })
  )

const maxAttempts = (name: string) =>
  Config.string(name).pipe(
    Config.mapOrFail((text) =>
      /^\s*\d+\s*$/.test(text) && Number(text) >= 1 && Number(text) <= 100
        ? Either.right(Number(text))
        : Either.left(refuse(name, text, "use an integer from 1 to 100"))
    )
  )

const retryPolicy = (handler: HandlerName, fallback: Config.Config<RetryPolicy>): Config.Config<RetryPolicy> => {
  const upper = handler.toUpperCase()
  return Config.all({
    delays: delays(`DOSTAVKA_${upper}_RETRY_DELAYS_MS`).pipe(Config.option),
    maxAttempts: maxAttempts(`DOSTAVKA_${upper}_MAX_ATTEMPTS`).pipe(Config.option)
  }).pipe(
    Config.zipWith(fallback, (own, all) => ({
      delays: Option.getOrElse(own.delays, () => all.delays),
      maxAttempts: Option.getOrElse(own.maxAttempts, () => all.maxAttempts)
    }))
  )
}

const defaultRetry: Config.Config<RetryPolicy> = Config.all({
  delays: delays("DOSTAVKA_RETRY_DELAYS_MS").pipe(
    Config.withDefault([Duration.seconds(1), Duration.seconds(10), Duration.seconds(60)])
  ),
  maxAttempts: maxAttempts("DOSTAVKA_MAX_ATTEMPTS").pipe(Config.withDefault(5))
})

export const settingsConfig: Config.Config<SettingsShape> = Config.all({
  amqpUrl: brokerUrl("DOSTAVKA_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672"),
  httpHost: Config.succeed("127.0.0.1" as const),
  httpPort: integer("DOSTAVKA_HTTP_PORT", 8080, 1, 65_535),
  dataDir: Config.string("DOSTAVKA_DATA_DIR").pipe(
    Config.withDefault("./var"),
    Config.mapOrFail((
      text
    ) => (text.trim() === ""
      ? Either.left(refuse("DOSTAVKA_DATA_DIR", text, "use a folder path"))
      : Either.right(text))
    )
  ),
  prefix: Config.string("DOSTAVKA_PREFIX").pipe(
    Config.withDefault("dostavka"),
    Config.mapOrFail((text) =>
      /^[A-Za-z0-9._-]{1,100}$/.test(text)
        ? Either.right(text)
        : Either.left(refuse("DOSTAVKA_PREFIX", text, "use 1–100 characters of A-Z a-z 0-9 . _ -"))
    )
  ),
  queueType: oneOf("DOSTAVKA_QUEUE_TYPE", "classic", ["classic", "quorum"] as const),
  prefetch: integer("DOSTAVKA_PREFETCH", 50, 1, 65_535),
  relayWindow: integer("DOSTAVKA_RELAY_WINDOW", 100, 1, 10_000),
  relayPollInterval: millis("DOSTAVKA_RELAY_POLL_MS", 100, 1, 60_000),
  confirmTimeout: millis("DOSTAVKA_CONFIRM_TIMEOUT_MS", 5_000, 100, 600_000),
  relayLeaseTtl: millis("DOSTAVKA_RELAY_LEASE_MS", 2_000, 1_000, 3_600_000),
  storeBusyTimeout: millis("DOSTAVKA_DB_BUSY_TIMEOUT_MS", 5_000, 1, 600_000),
  connectTimeout: millis("DOSTAVKA_CONNECT_TIMEOUT_MS", 5_000, 100, 600_000),
  heartbeat: integer("DOSTAVKA_HEARTBEAT_S", 10, 1, 600, " (seconds)").pipe(Config.map(Duration.seconds)),
  retry: Config.all({
    catalog: retryPolicy("catalog", defaultRetry),
    audit: retryPolicy("audit", defaultRetry)
  }),
  parkAfter: integer("DOSTAVKA_RELAY_PARK_AFTER", 10, 1, 1_000),
  trustedPublisher: Config.string("DOSTAVKA_TRUSTED_PUBLISHER").pipe(Config.option),
  maxEventBytes: integer("DOSTAVKA_MAX_EVENT_BYTES", 64 * 1024, 1024, 64 * 1024 * 1024, " (bytes)"),
  healthPort: Config.string("DOSTAVKA_HEALTH_PORT").pipe(
    Config.option,
    Config.mapOrFail((text) =>
      Option.match(text, {
        onNone: () => Either.right(Option.none()),
        onSome: (t) =>
          /^\s*\d+\s*$/.test(t) && Number(t) >= 1 && Number(t) <= 65_535
            ? Either.right(Option.some(Number(t)))
            : Either.left(refuse("DOSTAVKA_HEALTH_PORT", t, "use an integer from 1 to 65535"))
      })
    )
  ),
  managementUrl: Config.string("DOSTAVKA_MANAGEMENT_URL").pipe(
    Config.option,
    Config.mapOrFail((text) =>
      Option.match(text, {
        onNone: () => Either.right(Option.none()),
        onSome: (t) => {
          const url = URL.canParse(t) ? new URL(t) : undefined
          return url !== undefined && (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== ""
            ? Either.right(Option.some(Redacted.make(t)))
            : Either.left(
              refuse("DOSTAVKA_MANAGEMENT_URL", t, "use http://user:password@host:15672 (or https://)", true)
            )
        }
      })
    )
  ),
  topologyCheck: millis("DOSTAVKA_TOPOLOGY_CHECK_MS", 30_000, 1_000, 86_400_000)
})

/** The log's least severe level: `debug`, `info`, `warning` or `error` (`DOSTAVKA_LOG_LEVEL`, default `info`). */
export const logLevelConfig: Config.Config<LogLevel.LogLevel> = oneOf(
  "DOSTAVKA_LOG_LEVEL",
  "info",
  ["debug", "info", "warning", "error"] as const
).pipe(
  Config.map((level) =>
    ({ debug: LogLevel.Debug, info: LogLevel.Info, warning: LogLevel.Warning, error: LogLevel.Error })[level]
  )
)

/** The messages of a `ConfigError`, one per refused variable, as the settings above wrote them. */
export const describeConfigError = (error: ConfigError.ConfigError): string => {
  const messages: Array<string> = []
  const walk = (e: ConfigError.ConfigError): void => {
    switch (e._op) {
      case "And":
      case "Or":
        walk(e.left)
        walk(e.right)
        return
      case "InvalidData":
      case "MissingData":
      case "Unsupported":
        messages.push(
          e.path.length === 0 || e.message.includes(e.path.join(".")) ? e.message : `${e.path.join(".")}: ${e.message}`
        )
        return
      case "SourceUnavailable":
        messages.push(e.message)
    }
  }
  walk(error)
  return [...new Set(messages)].join("; ")
}

const emptyProvider = ConfigProvider.fromMap(new Map())

export class Settings extends Context.Tag("dostavka/Settings")<Settings, SettingsShape>() {
  /** Reads the environment; fails with a `ConfigError` naming the bad variable. */
  static readonly layer = Layer.effect(Settings, settingsConfig)
  /** Settings for tests: the defaults, overridden field by field. */
  static readonly with = (overrides: Partial<SettingsShape>) =>
    Layer.effect(
      Settings,
      Effect.map(
        Effect.orDie(Effect.withConfigProvider(settingsConfig, emptyProvider)),
        (s) => ({ ...s, ...overrides })
      )
    )
}

/**
 * Reconnect after a lost connection or channel, and wait for the broker at start:
 * exponential from 250 ms, doubled each time, capped at 4 s, every delay randomly jittered
 * (×0.8–1.2, so at most 4.8 s), forever. The cap bounds how long a role stays away after
 * the broker is back (within about 5 s); the jitter keeps a fleet of consumers from
 * reconnecting in lockstep (RabbitMQ "Connection recovery"). An attempt against a broker
 * that is down costs a refused TCP connect, so a 4 s cadence is no storm. Each loss of an
 * established connection starts it afresh.
 */
export const reconnectPolicy = Schedule.exponential("250 millis", 2).pipe(
  Schedule.union(Schedule.spaced("4 seconds")),
  Schedule.jittered
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
