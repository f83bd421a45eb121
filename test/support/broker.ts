import * as amqp from "amqplib"
import { Duration, Effect, Redacted } from "effect"
import { execFileSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { BrokerAccess } from "../../src/adapters/amqp/AmqpConnection.js"
import { topologyOf } from "../../src/adapters/amqp/Topology.js"
import type { RetryPolicy } from "../../src/app/failures.js"
import type { HandlerName } from "../../src/domain/HandlerName.js"

export const amqpUrl = process.env.DOSTAVKA_AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672"

/** A prefix no other test uses, so tests may share the broker's default vhost. */
export const uniquePrefix = (name: string) => `test-${name}-${randomUUID().slice(0, 8)}`

/** A fresh data dir, removed when the scope closes. */
export const tempDataDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "dostavka-test-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** A plain amqplib connection for a test to look at the broker with; closed with the scope. */
export const testConnection = Effect.acquireRelease(
  Effect.promise(() => amqp.connect(amqpUrl)),
  (c) => Effect.promise(() => c.close().catch(() => undefined))
)

/**
 * Retry tiers short enough for a test to watch a message go round (0.3 s, then 0.6 s),
 * and three attempts; `testSettings` uses them unless a test says otherwise.
 */
export const testRetry: RetryPolicy = { delays: [Duration.millis(300), Duration.millis(600)], maxAttempts: 3 }

/** `testRetry` for every handler. */
export const testRetryByHandler: Record<HandlerName, RetryPolicy> = { catalog: testRetry, audit: testRetry }

/**
 * Deletes every queue and exchange of `prefix`'s topology (with the retry tiers of
 * `retry`, by default the tests' own) when the scope closes.
 */
export const cleanupTopology = (
  prefix: string,
  retry: Record<HandlerName, RetryPolicy> = testRetryByHandler,
  url: string = amqpUrl
) =>
  Effect.addFinalizer(() =>
    Effect.promise(async () => {
      const connection = await amqp.connect(url)
      const channel = await connection.createChannel()
      const topology = topologyOf({ prefix, queueType: "classic", retry })
      for (const q of topology.queues) await channel.deleteQueue(q.name)
      for (const e of topology.exchanges) await channel.deleteExchange(e.name)
      await connection.close()
    }).pipe(Effect.ignore)
  )

/** Repeats `check` every 50 ms until it holds, or fails after `timeoutMs` with what it last saw. */
export const eventually = <A, E, R>(check: Effect.Effect<A, E, R>, holds: (a: A) => boolean, timeoutMs = 20_000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const value = yield* check
      if (holds(value)) return value
      if (Date.now() > deadline) {
        return yield* Effect.dieMessage(`condition not met in ${timeoutMs} ms; last value ${JSON.stringify(value)}`)
      }
      yield* Effect.sleep("50 millis")
    }
  })

export const redactedUrl = Redacted.make(amqpUrl)

/** The machine's broker as the adapters reach it: short timeouts, so a test that breaks something fails fast. */
export const testAccess: BrokerAccess = {
  url: redactedUrl,
  connectTimeout: Duration.seconds(5),
  heartbeat: Duration.seconds(10)
}

/**
 * Closes, from the broker's side, every connection whose `connection_name` is `name`,
 * as a broker restart or a network cut would; returns how many it closed. Needs the
 * machine's `rabbitmqctl` (run as root), which is where these tests run.
 */
export const closeConnectionsNamed = (name: string) =>
  Effect.sync(() => {
    const listing = execFileSync("rabbitmqctl", ["list_connections", "pid", "client_properties", "-q"], {
      encoding: "utf8"
    })
    const pids = listing.split("\n")
      .filter((line) => line.includes(`{"connection_name","${name}"}`))
      .map((line) => line.split("\t")[0]!)
    for (const pid of pids) {
      execFileSync("rabbitmqctl", ["close_connection", pid, "closed by a Dostavka test"], { stdio: "ignore" })
    }
    return pids.length
  })

export const hasRabbitmqctl = (() => {
  try {
    execFileSync("rabbitmqctl", ["list_connections", "pid", "-q"], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
})()

const rabbitmqctl = (...args: ReadonlyArray<string>) =>
  Effect.sync(() => execFileSync("rabbitmqctl", ["-q", ...args], { encoding: "utf8" }))

/**
 * A vhost of the test's own on the machine's broker, for what must not touch the shared
 * default vhost (a policy), removed with everything in it when the scope closes. Returns
 * its name and an AMQP URL into it. Needs `rabbitmqctl` (run as root), as
 * `closeConnectionsNamed` does.
 */
export const testVhost = (name: string) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const vhost = `${name}-${randomUUID().slice(0, 8)}`
      yield* rabbitmqctl("add_vhost", vhost)
      yield* rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
      return { vhost, url: `${amqpUrl.replace(/\/+$/, "")}/${encodeURIComponent(vhost)}` }
    }),
    ({ vhost }) => Effect.ignore(rabbitmqctl("delete_vhost", vhost))
  )

/** Sets policy `name` in `vhost` on the queues matching `pattern` (RabbitMQ "Policies"). */
export const setPolicy = (vhost: string, name: string, pattern: string, definition: Record<string, unknown>) =>
  rabbitmqctl("set_policy", "-p", vhost, "--apply-to", "queues", name, pattern, JSON.stringify(definition))

export const clearPolicy = (vhost: string, name: string) => rabbitmqctl("clear_policy", "-p", vhost, name)

/** Waits until `queue` in `vhost` runs under policy `name` (`set_policy` returns before the queue has it). */
export const awaitPolicy = (vhost: string, queue: string, name: string | "") =>
  eventually(
    Effect.map(rabbitmqctl("list_queues", "-p", vhost, "name", "policy"), (out) =>
      out.split("\n").map((line) => line.split("\t")).find(([q]) => q === queue)?.[1]?.trim() ?? ""),
    (policy) =>
      policy === name
  )

/** Publishes `messages` on a confirm channel of `url` and waits for their confirms. */
export const publishRaw = (
  url: string,
  messages: ReadonlyArray<
    {
      readonly exchange: string
      readonly routingKey: string
      readonly content: Buffer
      readonly options: amqp.Options.Publish
    }
  >
) =>
  Effect.promise(async () => {
    const connection = await amqp.connect(url)
    try {
      const channel = await connection.createConfirmChannel()
      for (const m of messages) channel.publish(m.exchange, m.routingKey, m.content, m.options)
      await channel.waitForConfirms()
    } finally {
      await connection.close().catch(() => undefined)
    }
  })

/** Every message now on `queue`, read and put back (basic.get, then nack with requeue), oldest first. */
export const peekQueue = (url: string, queue: string) =>
  Effect.promise(async () => {
    const connection = await amqp.connect(url)
    try {
      const channel = await connection.createChannel()
      const { messageCount } = await channel.checkQueue(queue)
      const messages: Array<amqp.GetMessage> = []
      for (let i = 0; i < messageCount; i++) {
        const message = await channel.get(queue, { noAck: false })
        if (message === false) break
        messages.push(message)
      }
      channel.nackAll(true)
      await channel.close()
      return messages
    } finally {
      await connection.close().catch(() => undefined)
    }
  })

/** How many messages are ready on `queue` now; fails when there is no such queue. */
export const depthOf = (url: string, queue: string) =>
  Effect.tryPromise(async () => {
    const connection = await amqp.connect(url)
    try {
      const channel = await connection.createChannel()
      channel.on("error", () => {})
      return (await channel.checkQueue(queue)).messageCount
    } finally {
      await connection.close().catch(() => undefined)
    }
  })
