/**
 * BenchBroker: a vhost of its own on the machine's RabbitMQ for one bench run, created
 * through the management HTTP API and deleted when the run ends (whatever ends it), so
 * that nothing the bench declares or leaves in a queue touches another deployment. The
 * broker is `DOSTAVKA_AMQP_URL`'s (its first URL), by default guest@127.0.0.1:5672; the
 * management API is `DOSTAVKA_MANAGEMENT_URL`, by default that host's port 15672, with
 * the broker URL's user.
 */
import { Data, Effect } from "effect"

export class BenchBrokerError extends Data.TaggedError("BenchBrokerError")<{ readonly detail: string }> {
  override get message() {
    return this.detail
  }
}

export interface BenchBroker {
  readonly vhost: string
  /** The broker URL with the bench's vhost, for amqplib, rascal and the kit. */
  readonly amqpUrl: string
  readonly rabbitmqVersion: string
  readonly erlangVersion: string
}

/** Every bench vhost is named so; the suffix is the pid of the run that made it. */
const VhostPrefix = "dostavka-bench-"

const brokerUrl = () =>
  new URL((process.env.DOSTAVKA_AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672").split(",")[0]!.trim())

const management = () => {
  const broker = brokerUrl()
  const base = new URL(process.env.DOSTAVKA_MANAGEMENT_URL ?? `http://${broker.hostname}:15672`)
  const user = base.username !== "" ? base : broker
  const auth = `Basic ${
    Buffer.from(`${decodeURIComponent(user.username || "guest")}:${decodeURIComponent(user.password || "guest")}`)
      .toString("base64")
  }`
  base.username = ""
  base.password = ""
  return { base: base.toString().replace(/\/$/, ""), auth, user: decodeURIComponent(broker.username || "guest") }
}

/** One management API call; fails with `BenchBrokerError` naming it, unless its status is in `ok`. */
const call = (method: string, path: string, body?: unknown, ok: ReadonlyArray<number> = [200, 201, 204]) =>
  Effect.tryPromise({
    try: async () => {
      const m = management()
      const response = await fetch(`${m.base}${path}`, {
        method,
        headers: { authorization: m.auth, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(10_000)
      })
      const text = await response.text()
      if (!ok.includes(response.status)) {
        throw new Error(`${method} ${path}: HTTP ${response.status} ${text.slice(0, 200)}`)
      }
      return text === "" ? undefined : (JSON.parse(text) as unknown)
    },
    catch: (cause) =>
      new BenchBrokerError({
        detail: `RabbitMQ management API: ${cause instanceof Error ? cause.message : String(cause)}`
      })
  })

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Vhosts of earlier bench runs whose process is gone (killed before it could clean up). */
const removeStaleVhosts = Effect.gen(function*() {
  const vhosts = (yield* call("GET", "/api/vhosts")) as ReadonlyArray<{ readonly name: string }>
  for (const { name } of vhosts) {
    const pid = Number(name.slice(VhostPrefix.length))
    if (name.startsWith(VhostPrefix) && Number.isInteger(pid) && !isAlive(pid)) {
      yield* call("DELETE", `/api/vhosts/${encodeURIComponent(name)}`, undefined, [204, 404])
    }
  }
})

/** Creates the run's vhost, gives the broker URL's user every permission on it, and deletes it when the scope closes. */
export const benchBroker = Effect.acquireRelease(
  Effect.gen(function*() {
    yield* removeStaleVhosts
    const vhost = `${VhostPrefix}${process.pid}`
    const path = encodeURIComponent(vhost)
    yield* call("PUT", `/api/vhosts/${path}`, { description: "npm run bench (deleted when the run ends)" })
    yield* call("PUT", `/api/permissions/${path}/${encodeURIComponent(management().user)}`, {
      configure: ".*",
      write: ".*",
      read: ".*"
    })
    const overview = (yield* call("GET", "/api/overview")) as {
      readonly rabbitmq_version?: string
      readonly erlang_version?: string
    }
    const url = brokerUrl()
    url.pathname = `/${path}`
    return {
      vhost,
      amqpUrl: url.toString(),
      rabbitmqVersion: overview.rabbitmq_version ?? "unknown",
      erlangVersion: overview.erlang_version ?? "unknown"
    } satisfies BenchBroker
  }),
  (broker) => Effect.ignore(call("DELETE", `/api/vhosts/${encodeURIComponent(broker.vhost)}`, undefined, [204, 404]))
)

/** Empties queues of the bench's vhost (between rounds, so every round starts from the same depth). */
export const purgeQueues = (broker: BenchBroker, queues: ReadonlyArray<string>) =>
  Effect.forEach(
    queues,
    (queue) =>
      call(
        "DELETE",
        `/api/queues/${encodeURIComponent(broker.vhost)}/${encodeURIComponent(queue)}/contents`,
        undefined,
        [204, 404]
      ),
    { discard: true }
  )
