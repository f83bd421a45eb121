import { describe, expect, it } from "@effect/vitest"
import * as amqp from "amqplib"
import { Effect, Option, Redacted } from "effect"
import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { toPublish } from "../../src/adapters/amqp/EventBusAmqp.js"
import { KitHeaders } from "../../src/adapters/amqp/FailureHeaders.js"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { ApiRole } from "../../src/roles/api.js"
import { AuditRole, CatalogRole } from "../../src/roles/receivers.js"
import { RelayRole } from "../../src/roles/relay.js"
import { eventually, hasRabbitmqctl, peekQueue, tempDataDir, testVhost, uniquePrefix } from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { baseUrl, countRows, post, query, startRoles, testSettings } from "../support/roles.js"

const script = join(import.meta.dirname, "..", "..", "scripts", "broker-users.sh")

/** Runs `scripts/broker-users.sh` for `prefix` in `vhost`; returns each role's URL; deletes the users with the scope. */
const brokerUsers = (vhost: string, prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const out = execFileSync("bash", [script, "--vhost", vhost, "--prefix", prefix], { encoding: "utf8" })
      const urls = Object.fromEntries(
        out.split("\n").flatMap((line) => {
          const match = /^(\w+): DOSTAVKA_AMQP_URL=(\S+)$/.exec(line)
          return match ? [[match[1]!, match[2]!]] : []
        })
      )
      return urls as Record<"relay" | "catalog" | "audit" | "operator", string>
    }),
    () => Effect.sync(() => execFileSync("bash", [script, "--prefix", prefix, "--delete"], { stdio: "ignore" }))
  )

/** Whether `url`'s user may publish to `exchange`: the broker closes the channel with 403 when it may not. */
const mayPublish = (url: string, exchange: string) =>
  Effect.promise(async () => {
    const connection = await amqp.connect(url)
    try {
      const channel = await connection.createConfirmChannel()
      channel.on("error", () => {})
      channel.publish(exchange, "material.published.v1", Buffer.from("{}"), { messageId: "probe" })
      return await channel.waitForConfirms().then(() => true, () => false)
    } finally {
      await connection.close().catch(() => undefined)
    }
  })

if (!hasRabbitmqctl) {
  console.log("brokerUsers.it.test.ts skipped: it creates broker users with rabbitmqctl, which is not available here")
}

describe.skipIf(!hasRabbitmqctl)("a deployment with one least-privilege broker user per role", () => {
  it.scopedLive(
    "the roles work with their own users; none may publish where it should not; a forged event is dead-lettered as untrusted",
    () =>
      Effect.gen(function*() {
        const { url: adminUrl, vhost } = yield* testVhost("users")
        const prefix = uniquePrefix("users")
        const urls = yield* brokerUsers(vhost, prefix)
        const dir = yield* tempDataDir
        const trusted = { trustedPublisher: Option.some(`${prefix}-relay`) }
        const as = (role: keyof typeof urls) =>
          testSettings(prefix, dir, { amqpUrl: Redacted.make(urls[role]), ...trusted })
        yield* startRoles(CatalogRole, as("catalog"))
        yield* startRoles(AuditRole, as("audit"))
        yield* startRoles(RelayRole, as("relay"))
        const { context } = yield* startRoles(ApiRole, testSettings(prefix, dir))
        const base = baseUrl(context)
        for (const revision of [1, 2]) {
          expect(
            (yield* post(base, `users-${revision}`, MaterialMother.wire(MaterialMother.command({ revision })))).status
          ).toBe(202)
        }
        yield* eventually(
          Effect.sync(() => [countRows(dir, "catalog", "inbox"), countRows(dir, "audit", "inbox")]),
          ([c, a]) => c === 2 && a === 2
        )

        const names = namesOf(prefix)
        expect(yield* mayPublish(urls.catalog, names.exchange)).toBe(false)
        expect(yield* mayPublish(urls.relay, names.handlerExchange("catalog"))).toBe(false)
        expect(yield* mayPublish(urls.audit, names.handlerExchange("catalog"))).toBe(false)

        // Someone else allowed to write to the events exchange forges the newest revision there is.
        const forged = MaterialMother.envelope(MaterialMother.event({ revision: Number.MAX_SAFE_INTEGER }))
        const message = toPublish(names.exchange, forged)
        yield* Effect.promise(async () => {
          const connection = await amqp.connect(adminUrl)
          const channel = await connection.createConfirmChannel()
          channel.publish(message.exchange, message.routingKey, message.content, message.options)
          await channel.waitForConfirms()
          await connection.close()
        })
        yield* eventually(Effect.sync(() => query(dir, "catalog", "SELECT 1 FROM inbox").length), (n) => n === 2)
        const dead = yield* eventually(peekQueue(adminUrl, names.deadQueue("catalog")), (m) => m.length === 1)
        expect(dead[0]!.properties.messageId).toBe(forged.messageId)
        expect(dead[0]!.properties.headers).toMatchObject({
          [KitHeaders.reason]: "untrusted-publisher",
          [KitHeaders.errorTag]: "IncompatibleMessage/UntrustedPublisher"
        })
        expect(query(dir, "catalog", "SELECT revision FROM catalog_entries")).toEqual([{ revision: 2 }])
        expect(query(dir, "audit", "SELECT COUNT(*) AS n FROM audit_records")).toEqual([{ n: 2 }])
      }),
    60_000
  )
})
