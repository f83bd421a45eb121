import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { createServer as createHttpServer, type Server as HttpServer } from "node:http"
import { createServer, type Server } from "node:net"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { CatalogRole } from "../../src/roles/receivers.js"
import {
  amqpUrl,
  cleanupTopology,
  depthOf,
  eventually,
  publishRaw,
  tempDataDir,
  uniquePrefix
} from "../support/broker.js"
import { dostavka, projectRoot } from "../support/cli.js"
import { startRoles, testSettings } from "../support/roles.js"

describe("the command line", () => {
  it.live(
    "a bad setting or argument is one line on stderr, naming it and what is accepted, and exit code 2",
    () =>
      Effect.gen(function*() {
        const cases = [
          [
            ["--role", "api"],
            { DOSTAVKA_HTTP_PORT: "abc" },
            "dostavka: configuration: DOSTAVKA_HTTP_PORT=\"abc\" is not accepted: use an integer from 1 to 65535"
          ],
          [
            ["--role", "relay"],
            { DOSTAVKA_QUEUE_TYPE: "stream" },
            "dostavka: configuration: DOSTAVKA_QUEUE_TYPE=\"stream\" is not accepted: use classic or quorum"
          ],
          [
            ["--role", "catalog"],
            { DOSTAVKA_PREFETCH: "0" },
            "dostavka: configuration: DOSTAVKA_PREFETCH=\"0\" is not accepted: use an integer from 1 to 65535"
          ],
          [["--role", "bogus"], {}, "dostavka: --role \"bogus\" is not a role: use api, relay, catalog, audit, all"],
          [
            ["dead", "list", "--handler", "catalog"],
            { DOSTAVKA_LOG_LEVEL: "loud" },
            "dostavka: configuration: DOSTAVKA_LOG_LEVEL=\"loud\" is not accepted: use debug, info, warning or error"
          ]
        ] as const
        const results = yield* Effect.forEach(cases, ([args, env]) => dostavka(args, env), { concurrency: 3 })
        for (const [i, [, , line]] of cases.entries()) {
          expect(results[i]!.code).toBe(2)
          expect(results[i]!.stderr.trim()).toBe(line)
        }
      }),
    120_000
  )

  it.live("--help and --version work whatever the environment holds", () =>
    Effect.gen(function*() {
      const [help, version] = yield* Effect.all([
        dostavka(["--help"], { DOSTAVKA_HTTP_PORT: "abc" }),
        dostavka(["--version"], { DOSTAVKA_QUEUE_TYPE: "stream" })
      ], { concurrency: 2 })
      expect(help.code).toBe(0)
      expect(help.stdout).toContain("--role")
      expect(version.code).toBe(0)
      expect(version.stdout.trim()).toBe("0.1.0")
    }), 60_000)

  it.scopedLive(
    "dead list and outbox list print what an operator needs, in a table and as JSON",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("cli")
        yield* cleanupTopology(prefix)
        yield* startRoles(CatalogRole, testSettings(prefix, dir))
        const names = namesOf(prefix)
        yield* publishRaw(amqpUrl, [{
          exchange: names.exchange,
          routingKey: "material.published.v1",
          content: Buffer.from("{bad"),
          options: {
            messageId: "cli-poison",
            type: "material.published.v1",
            contentType: "application/json",
            headers: { "x-schema-version": 1 }
          }
        }])
        yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 1)
        const env = { DOSTAVKA_PREFIX: prefix, DOSTAVKA_DATA_DIR: dir }
        const table = yield* dostavka(["dead", "list", "--handler", "catalog"], env)
        expect(table.code).toBe(0)
        const [header, row] = table.stdout.trim().split("\n")
        expect(header).toMatch(/^MESSAGE ID\s+REASON\s+ATTEMPTS\s+AGE\s+ERROR$/)
        expect(row).toMatch(
          /^cli-poison\s+incompatible\s+0\s+\d+s\s+IncompatibleMessage\/UndecodableMessage.bad-body: the body is not valid JSON/
        )
        const json = yield* dostavka(["dead", "show", "--handler", "catalog", "--id", "cli-poison", "--json"], env)
        expect(JSON.parse(json.stdout)).toMatchObject({
          message_id: "cli-poison",
          reason: "incompatible",
          body: "{bad",
          bodyEncoding: "utf-8"
        })
        expect(yield* depthOf(amqpUrl, names.deadQueue("catalog"))).toBe(1)
        const parked = yield* dostavka(["outbox", "list", "--parked", "--json"], env)
        expect(parked).toMatchObject({ code: 0 })
        expect(JSON.parse(parked.stdout)).toEqual([])
        const purge = yield* dostavka(["dead", "purge", "--handler", "catalog", "--all"], env)
        expect(purge).toMatchObject({
          code: 2,
          stderr: "dostavka: purge deletes dead letters for good; add --yes to do it\n"
        })
      }),
    120_000
  )

  it.scopedLive(
    "what comes off the bus cannot act on the operator's terminal; --limit below 1 is a usage error; purge --head removes the head whatever it holds",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("cli-esc")
        yield* cleanupTopology(prefix)
        yield* startRoles(CatalogRole, testSettings(prefix, dir))
        const names = namesOf(prefix)
        const hostile = "evil\u001b[31m\r\u009b2J\u202e"
        yield* publishRaw(amqpUrl, [{
          exchange: names.exchange,
          routingKey: "material.published.v1",
          content: Buffer.from(`{bad ${hostile}`),
          options: {
            messageId: hostile,
            type: `material.published.v1${hostile}`,
            contentType: "application/json",
            headers: { "x-schema-version": 1 }
          }
        }])
        yield* eventually(depthOf(amqpUrl, names.deadQueue("catalog")), (n) => n === 1)
        const env = { DOSTAVKA_PREFIX: prefix, DOSTAVKA_DATA_DIR: dir }
        // One at a time: a reader holds the letters it has read until it puts them back.
        const outputs = yield* Effect.all([
          dostavka(["dead", "list", "--handler", "catalog"], env),
          dostavka(["dead", "list", "--handler", "catalog", "--json"], env),
          dostavka(["dead", "show", "--handler", "catalog", "--id", hostile], env),
          dostavka(["dead", "show", "--handler", "catalog", "--id", hostile, "--json"], env)
        ])
        for (const [i, output] of outputs.entries()) {
          expect(output.code).toBe(0)
          // eslint-disable-next-line no-control-regex -- no control character may reach the terminal
          expect(output.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/)
          expect(output.stdout).toContain(i % 2 === 0 ? "\\x1b[31m" : "\\u001b[31m")
        }
        expect(JSON.parse(outputs[3]!.stdout)).toMatchObject({ message_id: hostile, body: `{bad ${hostile}` })
        for (const limit of ["0", "-1"]) {
          const refused = yield* dostavka(["dead", "list", "--handler", "catalog", "--limit", limit], env)
          expect(refused).toMatchObject({
            code: 2,
            stderr: `dostavka: --limit ${limit} shows nothing: give 1 or more\n`
          })
        }
        const unknown = Array.from({ length: 100 }, (_, i) => `unknown-${i}`)
        const missed = yield* dostavka([
          "dead",
          "replay",
          "--handler",
          "catalog",
          ...unknown.flatMap((id) => ["--id", id])
        ], env)
        expect(missed.stdout).toContain("not found: 100: unknown-0, unknown-1,")
        expect(missed.stdout).toContain("unknown-19 and 80 more\n")
        expect(missed.stdout).not.toContain("unknown-20")
        const purged = yield* dostavka(["dead", "purge", "--handler", "catalog", "--head", "--yes"], env)
        expect(purged).toMatchObject({ code: 0, stderr: "" })
        expect(purged.stdout).toContain("purged 1 dead letter(s) of catalog: evil\\x1b[31m")
        expect(yield* depthOf(amqpUrl, names.deadQueue("catalog"))).toBe(0)
      }),
    120_000
  )

  it.scopedLive(
    "status --json escapes what it shows: a management URL answering a page with a C1 CSI and a bidi override leaves them as \\u escapes",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("status-escapes")
        yield* cleanupTopology(prefix)
        yield* startRoles(CatalogRole, testSettings(prefix, dir))
        const page = yield* Effect.acquireRelease(
          Effect.async<HttpServer>((resume) => {
            const server = createHttpServer((_, response) => {
              response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
              response.end("\u009b2J\u202eevil <html>")
            })
            server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
          }),
          (server) => Effect.sync(() => server.close())
        )
        const run = yield* dostavka(["status", "--json"], {
          DOSTAVKA_PREFIX: prefix,
          DOSTAVKA_DATA_DIR: dir,
          DOSTAVKA_RETRY_DELAYS_MS: "300,600",
          DOSTAVKA_MAX_ATTEMPTS: "3",
          DOSTAVKA_MANAGEMENT_URL: `http://127.0.0.1:${(page.address() as { port: number }).port}`
        })
        expect(run.code).toBe(0)
        expect(run.stdout).toContain("not valid JSON")
        expect(run.stdout).not.toMatch(/[\u009b\u202e]/)
      }),
    60_000
  )

  it.live(
    "a broker that refuses the login stops a role at start with one line, instead of retrying forever",
    () =>
      Effect.gen(function*() {
        const refused = yield* dostavka(["--role", "relay"], {
          DOSTAVKA_AMQP_URL: "amqp://guest:wrong-password@127.0.0.1:5672",
          DOSTAVKA_DATA_DIR: "/tmp/dostavka-cli-refused"
        })
        expect(refused.code).toBe(1)
        const lines = refused.stderr.trim().split("\n")
        expect(lines.at(-1)).toMatch(
          /^dostavka: stopped: broker refused the connection \(authentication\): .*ACCESS.REFUSED/
        )
        expect(refused.stderr).not.toContain("wrong-password")
      }),
    60_000
  )

  it.live(
    "a broker that accepts TCP and never speaks AMQP: each attempt ends, and SIGTERM stops the role within 10 s",
    () =>
      Effect.gen(function*() {
        const silent = yield* Effect.acquireRelease(
          Effect.async<Server>((resume) => {
            const server = createServer(() => {})
            server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
          }),
          (server) => Effect.sync(() => server.close())
        )
        const address = silent.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "--role", "catalog"], {
          cwd: projectRoot,
          env: {
            ...process.env,
            DOSTAVKA_AMQP_URL: `amqp://guest:guest@127.0.0.1:${port}`,
            DOSTAVKA_CONNECT_TIMEOUT_MS: "500",
            DOSTAVKA_DATA_DIR: "/tmp/dostavka-cli-silent"
          },
          stdio: ["ignore", "ignore", "pipe"]
        })
        let stderr = ""
        child.stderr.on("data", (chunk) => (stderr += String(chunk)))
        const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
        yield* eventually(
          Effect.sync(() => stderr.split("waiting for the broker").length - 1),
          (attempts) => attempts >= 2,
          30_000
        )
        expect(stderr).toContain("connect ETIMEDOUT")
        const signalledAt = Date.now()
        child.kill("SIGTERM")
        const code = yield* Effect.promise(() => exited)
        expect(Date.now() - signalledAt).toBeLessThan(10_000)
        expect(code).toBe(0)
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "topology prints what the roles declare for the configured prefix and retry tiers, without the broker; --json gives the plan",
    () =>
      Effect.gen(function*() {
        // No broker answers on port 1: the command must not need one.
        const env = {
          DOSTAVKA_PREFIX: "plan",
          DOSTAVKA_CATALOG_RETRY_DELAYS_MS: "1000,5000",
          DOSTAVKA_AMQP_URL: "amqp://guest:guest@127.0.0.1:1"
        }
        const [text, json] = yield* Effect.all([dostavka(["topology"], env), dostavka(["topology", "--json"], env)], {
          concurrency: 2
        })
        expect(text.code).toBe(0)
        expect(text.stdout).toContain("topology for prefix plan, classic queues")
        expect(text.stdout).toMatch(
          /plan\.catalog\.retry\.1s +true +x-queue-type=classic x-message-ttl=1000 x-dead-letter-exchange=plan\.catalog\.dlx x-dead-letter-routing-key=redeliver/
        )
        expect(text.stdout).toMatch(/plan\.catalog\.dlx +retry\.5s +plan\.catalog\.retry\.5s/)
        expect(text.stdout).not.toContain("plan.catalog.retry.10s")
        expect(text.stdout).toContain("plan.audit.retry.60s")

        expect(json.code).toBe(0)
        const plan = JSON.parse(json.stdout) as {
          queues: ReadonlyArray<{ name: string; arguments: Record<string, unknown> }>
          bindings: ReadonlyArray<{ exchange: string; routingKey: string; queue: string }>
        }
        expect(plan.queues.find((q) => q.name === "plan.catalog")?.arguments).toEqual({
          "x-queue-type": "classic",
          "x-dead-letter-exchange": "plan.catalog.dlx",
          "x-dead-letter-routing-key": "dead"
        })
        expect(plan.queues.map((q) => q.name)).toContain("plan.catalog.retry.5s")
        expect(plan.bindings).toContainEqual({
          exchange: "plan.events",
          routingKey: "material.published.v1",
          queue: "plan.audit"
        })
      }),
    60_000
  )
})
