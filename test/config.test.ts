import { describe, expect, it } from "@effect/vitest"
import { Clock, ConfigProvider, Duration, Effect, Fiber, Redacted, Ref, TestClock } from "effect"
import { reconnectPolicy, settingsConfig } from "../src/config.js"
import { scrubCredentials } from "../src/adapters/amqp/AmqpConnection.js"

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
  it.effect("starts near 250 ms, roughly doubles with jitter, and never waits more than 30 s", () =>
    Effect.gen(function*() {
      const gaps = yield* gapsOver(reconnectPolicy, "5 minutes")
      expect(gaps[0]).toBeGreaterThanOrEqual(200)
      expect(gaps[0]).toBeLessThanOrEqual(300)
      for (let i = 1; i < 6; i++) {
        expect(gaps[i]! / gaps[i - 1]!).toBeGreaterThan(1.3)
        expect(gaps[i]! / gaps[i - 1]!).toBeLessThan(3.1)
      }
      expect(Math.max(...gaps)).toBeLessThanOrEqual(30_000)
      expect(gaps.slice(-3).every((g) => g === 30_000)).toBe(true)
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

  it.effect("a bad value fails naming the variable", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(load({ DOSTAVKA_PREFETCH: "0" }))
      expect(String(error)).toContain("DOSTAVKA_PREFETCH")
      const queueType = yield* Effect.flip(load({ DOSTAVKA_QUEUE_TYPE: "mirrored" }))
      expect(String(queueType)).toContain("DOSTAVKA_QUEUE_TYPE")
    }))

  it("log lines never carry the broker password", () => {
    const url = Redacted.make("amqp://svc:s3cr%3Ft@broker:5672/prod")
    expect(scrubCredentials("ACCESS_REFUSED for svc with s3cr?t", url)).toBe("ACCESS_REFUSED for svc with ***")
  })
})
