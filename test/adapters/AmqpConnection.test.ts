import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Redacted } from "effect"
import { decodeUrlPart, openConnection, scrubCredentials } from "../../src/adapters/amqp/AmqpConnection.js"
import { FakeAmqp } from "../support/FakeAmqp.js"

const cluster = (url: string) => ({
  url: Redacted.make(url),
  connectTimeout: Duration.seconds(5),
  heartbeat: Duration.seconds(10)
})

describe("openConnection over a cluster's list of nodes", () => {
  it.effect("tries the nodes in turn, and each reconnect starts after the node the last one reached", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      const access = cluster("amqp://u:p@n1:5672,amqp://u:p@n2:5672,amqp://u:p@n3:5672")
      fake.failures.push(new Error("connect ECONNREFUSED n1:5672"))
      const connect = Effect.scoped(openConnection(access, "t")).pipe(Effect.provide(fake.layer))
      yield* connect
      expect(fake.attempts.map((u) => new URL(u).hostname)).toEqual(["n1", "n2"])
      yield* connect
      yield* connect
      expect(fake.attempts.map((u) => new URL(u).hostname)).toEqual(["n1", "n2", "n3", "n1"])
    }))

  it.effect("when no node answers, one error names each node's failure and no password", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      fake.failures.push(new Error("connect ECONNREFUSED n1:5672"), new Error("connect ETIMEDOUT n2:5673"))
      const error = yield* Effect.flip(
        openConnection(cluster("amqp://u:pw1@n1:5672,amqp://u:pw2@n2:5673"), "t").pipe(
          Effect.scoped,
          Effect.provide(fake.layer)
        )
      )
      expect(error).toMatchObject({
        _tag: "BrokerUnavailable",
        detail: "n1:5672: connect ECONNREFUSED n1:5672; n2:5673: connect ETIMEDOUT n2:5673"
      })
      expect(error.message).not.toMatch(/pw1|pw2/)
    }))

  it.effect("a node that refuses the login is reported as BrokerRefused even when another is only down", () =>
    Effect.gen(function*() {
      const fake = new FakeAmqp()
      fake.failures.push(
        new Error("connect ECONNREFUSED n1:5672"),
        new Error(
          "Handshake terminated by server: 403 (ACCESS-REFUSED) with message \"ACCESS_REFUSED - Login was refused\""
        )
      )
      const error = yield* Effect.flip(
        openConnection(cluster("amqp://u:p@n1,amqp://u:p@n2"), "t").pipe(Effect.scoped, Effect.provide(fake.layer))
      )
      expect(error).toMatchObject({ _tag: "BrokerRefused", reason: "authentication" })
      expect(error.detail).toMatch(/^n2:5672: /)
    }))
})

describe("URL parts as the broker reads them", () => {
  it("decodes escapes, and keeps a % that starts no escape as it is (a password such as 50%off)", () => {
    expect(decodeUrlPart("p%40ss%3Aw0rd")).toBe("p@ss:w0rd")
    expect(decodeUrlPart("50%off")).toBe("50%off")
    expect(decodeUrlPart("100%")).toBe("100%")
    expect(decodeUrlPart("%E2%82%AC%zz%41")).toBe("€%zzA")
    expect(decodeUrlPart("%E2%82")).toBe("%E2%82")
  })

  it("scrubs a password with a literal % from a message, raw and decoded", () => {
    const url = Redacted.make("amqp://u:50%off@h:5672,amqp://v:p%40ss@g:5672")
    expect(scrubCredentials("refused 50%off and p%40ss and p@ss", url)).toBe("refused *** and *** and ***")
  })
})
