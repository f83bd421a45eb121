import { Effect, Redacted } from "effect"
import * as amqp from "amqplib"
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { randomUUID } from "node:crypto"
import { topologyOf } from "../../src/adapters/amqp/Topology.js"

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

/** Deletes every queue and the exchange of `prefix`'s topology when the scope closes. */
export const cleanupTopology = (prefix: string) =>
  Effect.addFinalizer(() =>
    Effect.promise(async () => {
      const connection = await amqp.connect(amqpUrl)
      const channel = await connection.createChannel()
      const topology = topologyOf(prefix, "classic")
      for (const q of topology.queues) await channel.deleteQueue(q.name)
      await channel.deleteExchange(topology.exchange.name)
      await channel.deleteExchange(topology.deadLetterExchange.name)
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
      if (Date.now() > deadline) return yield* Effect.dieMessage(`condition not met in ${timeoutMs} ms; last value ${JSON.stringify(value)}`)
      yield* Effect.sleep("50 millis")
    }
  })

export const redactedUrl = Redacted.make(amqpUrl)

/**
 * Closes, from the broker's side, every connection whose `connection_name` is `name`,
 * as a broker restart or a network cut would; returns how many it closed. Needs the
 * machine's `rabbitmqctl` (run as root), which is where these tests run.
 */
export const closeConnectionsNamed = (name: string) =>
  Effect.sync(() => {
    const listing = execFileSync("rabbitmqctl", ["list_connections", "pid", "client_properties", "-q"], { encoding: "utf8" })
    const pids = listing.split("\n")
      .filter((line) => line.includes(`{"connection_name","${name}"}`))
      .map((line) => line.split("\t")[0]!)
    for (const pid of pids) execFileSync("rabbitmqctl", ["close_connection", pid, "closed by a Dostavka test"], { stdio: "ignore" })
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
