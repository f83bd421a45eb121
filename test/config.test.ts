import { describe, expect, it } from "@effect/vitest"
import { Clock, ConfigProvider, type Duration, Effect, Fiber, Random, Redacted, Ref, TestClock } from "effect"
import { scrubCredentials } from "../src/adapters/amqp/AmqpConnection.js"
import { describeConfigError, logLevelConfig, reconnectPolicy, settingsConfig } from "../src/config.js"

/** The gaps in ms between the attempts `policy` allows for an effect that always fails, over `span`. */
const gapsOver = (policy: typeof reconnectPolicy, span: Duration.DurationInput) =>
  Effect.gen(function*() {
    const times = yield* Ref.make<ReadonlyArray<number>>([])
    const attempt = Effect.flatMap(Clock.currentTimeMillis, (t) => Ref.update(times, (all) => [...all, t])).pipe(
      Effect.zipRight(Effect.fail("broker down"))
    )
    const fiber = yield* Effect.fork(Effect.retry(attempt, policy))
    yield* TestClock.adjust(span)
    yield* Fiber.interrupt(fiber)
    const at = yield* Ref.get(times)
    return at.slice(1).map((t, i) => Math.round(t - at[i]!))
  })

describe("reconnectPolicy", () => {
  it.effect("is jittered: the gaps are not exact doublings of 250 ms", () =>
    Effect.gen(function*() {
      const gaps = yield* gapsOver(reconnectPolicy, "30 seconds").pipe(Effect.withRandom(Random.make("a fixed seed")))
      const exact = gaps.slice(0, 8).map((_, i) => Math.min(250 * 2 ** i, 4_000))
      expect(gaps.slice(0, 8)).not.toEqual(exact)
      const offBy = gaps.slice(0, 8).map((g, i) => Math.abs(g / exact[i]! - 1))
      expect(offBy.filter((d) => d > 0.01).length).toBeGreaterThanOrEqual(6)
      expect(Math.max(...offBy)).toBeLessThanOrEqual(0.2)
    }))

  it.effect("starts near 250 ms, roughly doubles with jitter, and never waits more than 4.8 s: back within 5 s of the broker", () =>
    Effect.gen(function*() {
      const gaps = yield* gapsOver(reconnectPolicy, "5 minutes")
      expect(gaps[0]).toBeGreaterThanOrEqual(200)
      expect(gaps[0]).toBeLessThanOrEqual(300)
      for (let i = 1; i < 4; i++) {
        expect(gaps[i]! / gaps[i - 1]!).toBeGreaterThan(1.3)
        expect(gaps[i]! / gaps[i - 1]!).toBeLessThan(3.1)
      }
      expect(Math.max(...gaps)).toBeLessThanOrEqual(4_800)
      expect(gaps.slice(-20).every((g) => g >= 3_200 && g <= 4_800)).toBe(true)
      // About one attempt every 4 s while the broker is away, never closer than 3.2 s once capped:
      // no storm. (75 on average over 5 minutes; jitter alone may take it past 80.)
      expect(gaps.length).toBeLessThanOrEqual(5 + Math.ceil(300_000 / 3_200))
    }))
})

describe("settings", () => {
  const load = (env: Record<string, string>) =>
    Effect.withConfigProvider(settingsConfig, ConfigProvider.fromMap(new Map(Object.entries(env))))

  it.effect("defaults: the local broker, port 8080, ./var, prefix dostavka, classic queues", () =>
    Effect.gen(function*() {
      const s = yield* load({})
      expect({ ...s, amqpUrl: Redacted.value(s.amqpUrl) }).toMatchObject({
        amqpUrl: "amqp://guest:guest@127.0.0.1:5672",
        httpHost: "127.0.0.1",
        httpPort: 8080,
        dataDir: "./var",
        prefix: "dostavka",
        queueType: "classic",
        prefetch: 50,
        relayWindow: 100
      })
      expect(String(s.amqpUrl)).not.toContain("guest")
    }))

  it.effect.each([
    [{ DOSTAVKA_HTTP_PORT: "abc" }, "DOSTAVKA_HTTP_PORT=\"abc\" is not accepted: use an integer from 1 to 65535"],
    [{ DOSTAVKA_HTTP_PORT: "0" }, "DOSTAVKA_HTTP_PORT=\"0\" is not accepted: use an integer from 1 to 65535"],
    [{ DOSTAVKA_HTTP_PORT: "70000" }, "DOSTAVKA_HTTP_PORT=\"70000\" is not accepted: use an integer from 1 to 65535"],
    [
      { DOSTAVKA_PREFIX: "no spaces" },
      "DOSTAVKA_PREFIX=\"no spaces\" is not accepted: use 1–100 characters of A-Z a-z 0-9 . _ -"
    ],
    [{ DOSTAVKA_QUEUE_TYPE: "stream" }, "DOSTAVKA_QUEUE_TYPE=\"stream\" is not accepted: use classic or quorum"],
    [{ DOSTAVKA_PREFETCH: "0" }, "DOSTAVKA_PREFETCH=\"0\" is not accepted: use an integer from 1 to 65535"],
    [
      { DOSTAVKA_CONFIRM_TIMEOUT_MS: "abc" },
      "DOSTAVKA_CONFIRM_TIMEOUT_MS=\"abc\" is not accepted: use an integer from 100 to 600000 (milliseconds)"
    ],
    [
      { DOSTAVKA_AMQP_URL: "http://u:hunter2@h" },
      "DOSTAVKA_AMQP_URL=(hidden) is not accepted: it has the scheme http:; use amqp:// or amqps://"
    ],
    [
      { DOSTAVKA_RELAY_LEASE_MS: "500" },
      "DOSTAVKA_RELAY_LEASE_MS=\"500\" is not accepted: use an integer from 1000 to 3600000 (milliseconds)"
    ]
  ] as ReadonlyArray<readonly [Record<string, string>, string]>)(
    "%j is refused in one line that names the variable and what is accepted",
    ([env, message]) =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(load(env))
        expect(describeConfigError(error)).toContain(message)
        expect(describeConfigError(error)).not.toContain("hunter2")
      })
  )

  it.effect("the log level accepts warning, and refuses what it does not know", () =>
    Effect.gen(function*() {
      const level = (value: string) =>
        Effect.withConfigProvider(logLevelConfig, ConfigProvider.fromMap(new Map([["DOSTAVKA_LOG_LEVEL", value]])))
      expect((yield* level("warning")).label).toBe("WARN")
      expect(describeConfigError(yield* Effect.flip(level("verbose")))).toBe(
        "DOSTAVKA_LOG_LEVEL=\"verbose\" is not accepted: use debug, info, warning or error"
      )
    }))

  it.effect("a bad value fails naming the variable", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(load({ DOSTAVKA_PREFETCH: "0" }))
      expect(String(error)).toContain("DOSTAVKA_PREFETCH")
      const queueType = yield* Effect.flip(load({ DOSTAVKA_QUEUE_TYPE: "mirrored" }))
      expect(String(queueType)).toContain("DOSTAVKA_QUEUE_TYPE")
    }))

  it("log lines never carry the broker password, decoded or as written, of any node of a list", () => {
    const url = Redacted.make("amqp://svc:s3cr%3Ft@broker:5672/prod")
    expect(scrubCredentials("ACCESS_REFUSED for svc with s3cr?t", url)).toBe("ACCESS_REFUSED for svc with ***")
    expect(scrubCredentials("amqp://svc:s3cr%3Ft@broker:5672/prod failed", url)).toBe(
      "amqp://svc:***@broker:5672/prod failed"
    )
    const cluster = Redacted.make("amqp://svc:one@n1:5672, amqp://svc:two@n2:5672")
    expect(scrubCredentials("n1 said one, n2 said two", cluster)).toBe("n1 said ***, n2 said ***")
  })

  it.effect("DOSTAVKA_AMQP_URL takes a cluster's nodes separated by commas; a bad one is named by its place, never shown", () =>
    Effect.gen(function*() {
      const list = "amqp://u:p@n1:5672,amqp://u:p@n2:5673, amqps://u:p@n3:5671"
      expect(Redacted.value((yield* load({ DOSTAVKA_AMQP_URL: list })).amqpUrl)).toBe(list)
      const refused = yield* Effect.flip(load({ DOSTAVKA_AMQP_URL: "amqp://u:secret@n1:5672,http://u:secret@n2" }))
      expect(describeConfigError(refused)).toBe(
        "DOSTAVKA_AMQP_URL=(hidden) is not accepted: its URL number 2 has the scheme http:; use amqp:// or amqps://"
      )
      const empty = yield* Effect.flip(load({ DOSTAVKA_AMQP_URL: "amqp://n1:5672," }))
      expect(describeConfigError(empty)).toContain("its URL number 2 is not a URL")
    }))
})
