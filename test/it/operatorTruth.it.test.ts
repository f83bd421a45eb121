import { describe, expect, it } from "@effect/vitest"
import * as amqp from "amqplib"
import { Effect, Redacted } from "effect"
import { execFile, spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer as createHttpServer } from "node:http"
import { createServer, type Server } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { CatalogRole } from "../../src/roles/receivers.js"
import {
  amqpUrl,
  awaitPolicy,
  cleanupTopology,
  clearPolicy,
  depthOf,
  eventually,
  hasRabbitmqctl,
  publishRaw,
  setPolicy,
  tempDataDir,
  testVhost,
  uniquePrefix
} from "../support/broker.js"
import { dostavka, projectRoot } from "../support/cli.js"
import { startRoles, testSettings } from "../support/roles.js"

/** The last line a run wrote on stderr: the one it ends with. */
const lastLine = (text: string) => text.trim().split("\n").at(-1) ?? ""

/** A message the catalog can never decode: it goes to the dead queue at once, as `incompatible`. */
const poison = (prefix: string, messageId: string) => ({
  exchange: namesOf(prefix).exchange,
  routingKey: "material.published.v1",
  content: Buffer.from("{not json"),
  options: {
    messageId,
    type: "material.published.v1",
    contentType: "application/json",
    headers: { "x-schema-version": 1 }
  }
})

/** A TCP server on a free port of 127.0.0.1 that holds it and answers nothing; closed with the scope. */
const portHeld = Effect.acquireRelease(
  Effect.async<Server>((resume) => {
    const server = createServer(() => {})
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
  }),
  (server) => Effect.sync(() => server.close())
).pipe(Effect.map((server) => {
  const address = server.address()
  return typeof address === "object" && address !== null ? address.port : 0
}))

/** Whether the broker has this queue (or exchange) now, asked on a channel of its own. */
const brokerHas = (kind: "queue" | "exchange", name: string) =>
  Effect.promise(async () => {
    const connection = await amqp.connect(amqpUrl)
    try {
      const channel = await connection.createChannel()
      channel.on("error", () => {})
      await (kind === "queue" ? channel.checkQueue(name) : channel.checkExchange(name))
      return true
    } catch {
      return false
    } finally {
      await connection.close().catch(() => undefined)
    }
  })

describe("exit codes mean something (issue 16 §8)", () => {
  it.scopedLive(
    "one dead letter and a queue refusing publishes: 'replayed 0 … not confirmed', exit 1, the letter stays; once the queue takes it, exit 0",
    () =>
      Effect.gen(function*() {
        if (!hasRabbitmqctl) return
        const { url, vhost } = yield* testVhost("truth-replay")
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("truth-replay")
        const names = namesOf(prefix)
        yield* startRoles(CatalogRole, testSettings(prefix, dir, { amqpUrl: Redacted.make(url) }))
        yield* publishRaw(url, [poison(prefix, "truth-1")])
        yield* eventually(depthOf(url, names.deadQueue("catalog")), (n) => n === 1)
        yield* setPolicy(vhost, "refuse", `^${prefix}\\.catalog$`, { "max-length": 0, overflow: "reject-publish" })
        yield* awaitPolicy(vhost, names.queue("catalog"), "refuse")
        const env = { DOSTAVKA_AMQP_URL: url, DOSTAVKA_PREFIX: prefix, DOSTAVKA_DATA_DIR: dir }

        const refused = yield* dostavka(["dead", "replay", "--handler", "catalog", "--all"], env)
        expect(refused.stdout).toContain("replayed 0 dead letter(s) of catalog\n")
        expect(refused.stdout).toContain("not confirmed by the broker, left in place: 1: truth-1")
        expect(lastLine(refused.stderr)).toBe(
          "dostavka: replayed 0 of 1 dead letter(s) of catalog: 1 not confirmed by the broker (left in place; run it again)"
        )
        expect(refused.code).toBe(1)
        expect(yield* depthOf(url, names.deadQueue("catalog"))).toBe(1)

        yield* clearPolicy(vhost, "refuse")
        yield* awaitPolicy(vhost, names.queue("catalog"), "")
        const replayed = yield* dostavka(["dead", "replay", "--handler", "catalog", "--id", "truth-1"], env)
        expect(replayed).toMatchObject({ code: 0, stdout: "replayed 1 dead letter(s) of catalog: truth-1\n" })
      }),
    120_000
  )

  it.scopedLive(
    "a miss exits 1 and says what was not found; part of it exits 1 with the counts; --all with nothing to do exits 0",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const prefix = uniquePrefix("truth-miss")
        yield* cleanupTopology(prefix)
        yield* startRoles(CatalogRole, testSettings(prefix, dir))
        const env = { DOSTAVKA_PREFIX: prefix, DOSTAVKA_DATA_DIR: dir }
        const dead = (...args: ReadonlyArray<string>) => dostavka(["dead", ...args, "--handler", "catalog"], env)

        const [emptyAll, emptyHead, unknownReplay, unknownShow] = yield* Effect.all([
          dead("replay", "--all"),
          dead("purge", "--head", "--yes"),
          dead("replay", "--id", "nope"),
          dead("show", "--id", "nope")
        ], { concurrency: 2 })
        expect(emptyAll).toMatchObject({ code: 0, stdout: "replayed 0 dead letter(s) of catalog\n", stderr: "" })
        expect(emptyHead.code).toBe(1)
        expect(lastLine(emptyHead.stderr)).toBe("dostavka: the dead queue of catalog is empty: nothing purged")
        expect(unknownReplay.code).toBe(1)
        expect(unknownReplay.stdout).toContain("not found: 1: nope")
        expect(lastLine(unknownReplay.stderr)).toBe(
          "dostavka: no dead letter of catalog has that id: nothing replayed; dead list --handler catalog shows their ids"
        )
        expect(unknownShow.code).toBe(1)
        expect(lastLine(unknownShow.stderr)).toBe(
          "dostavka: no dead letter with message id nope for catalog; dead list --handler catalog shows their ids"
        )

        yield* publishRaw(amqpUrl, [poison(prefix, "truth-real")])
        yield* eventually(depthOf(amqpUrl, namesOf(prefix).deadQueue("catalog")), (n) => n === 1)
        const part = yield* dead("purge", "--id", "truth-real", "--id", "nope", "--yes")
        expect(part.code).toBe(1)
        expect(part.stdout).toContain("purged 1 dead letter(s) of catalog: truth-real")
        expect(lastLine(part.stderr)).toBe("dostavka: purged 1 of 2 dead letter(s) of catalog: 1 not found")

        const event = randomUUID()
        const [retryUnknown, retryAll] = yield* Effect.all([
          dostavka(["outbox", "retry", "--id", event], env),
          dostavka(["outbox", "retry", "--all"], env)
        ])
        expect(retryUnknown.code).toBe(1)
        expect(retryUnknown.stdout).toContain(`not parked or not known: 1: ${event}`)
        expect(lastLine(retryUnknown.stderr)).toBe(
          "dostavka: released nothing: 1 of the 1 id(s) name no parked row; outbox list --parked shows them"
        )
        expect(retryAll).toMatchObject({ code: 0, stderr: "" })
        expect(retryAll.stdout).toContain("released 0 parked row(s)")
      }),
    120_000
  )
})

describe("a broker that refuses at start is named, and stops the role (issue 16 §9)", () => {
  it.scopedLive(
    "a vhost that does not exist: one line naming it and what to do, exit 1, within seconds",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const vhost = `novhost-${randomUUID().slice(0, 8)}`
        const startedAt = Date.now()
        const run = yield* dostavka(["--role", "relay"], {
          DOSTAVKA_AMQP_URL: `${amqpUrl.replace(/\/+$/, "")}/${vhost}`,
          DOSTAVKA_PREFIX: uniquePrefix("truth-vhost"),
          DOSTAVKA_DATA_DIR: dir
        })
        expect(Date.now() - startedAt).toBeLessThan(30_000)
        expect(run.code).toBe(1)
        expect(lastLine(run.stderr)).toBe(
          `dostavka: stopped: broker refused the connection (vhost): the broker closed the connection at ` +
            `connection.open of vhost "${vhost}": it does not exist, or user "guest" may not use it; create the ` +
            "vhost (rabbitmqctl add_vhost) and give the user permissions on it, or fix the vhost in DOSTAVKA_AMQP_URL"
        )
        expect(run.stderr).not.toContain("waiting for the broker")
      }),
    60_000
  )

  it.scopedLive(
    "a port that answers HTTP, not AMQP (a web server of the test, and the management port): named as such, exit 1",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const web = yield* Effect.acquireRelease(
          Effect.async<ReturnType<typeof createHttpServer>>((resume) => {
            const server = createHttpServer((_request, response) => response.end("hello"))
            server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
          }),
          (server) => Effect.sync(() => server.close())
        )
        const address = web.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        const management = yield* Effect.promise(() =>
          fetch("http://127.0.0.1:15672/").then((r) => r.status > 0, () => false)
        )
        const targets = management ? [port, 15672] : [port]
        const runs = yield* Effect.forEach(targets, (target) =>
          dostavka(["--role", "catalog"], {
            DOSTAVKA_AMQP_URL: `amqp://guest:guest@127.0.0.1:${target}`,
            DOSTAVKA_CONNECT_TIMEOUT_MS: "1000",
            DOSTAVKA_PREFIX: uniquePrefix("truth-http"),
            DOSTAVKA_DATA_DIR: join(dir, String(target))
          }), { concurrency: 2 })
        for (const [i, run] of runs.entries()) {
          expect(run.code).toBe(1)
          expect(lastLine(run.stderr)).toBe(
            `dostavka: stopped: 127.0.0.1:${
              targets[i]
            } answered HTTP, not AMQP: is DOSTAVKA_AMQP_URL the management port?`
          )
        }
      }),
    90_000
  )

  it.live(
    "a broker that refuses the TCP connection is still waited for, and SIGTERM stops the role with exit 0",
    () =>
      Effect.gen(function*() {
        const port = yield* Effect.scoped(portHeld)
        const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "--role", "relay"], {
          cwd: projectRoot,
          env: {
            ...process.env,
            DOSTAVKA_AMQP_URL: `amqp://guest:guest@127.0.0.1:${port}`,
            DOSTAVKA_DATA_DIR: mkdtempSync(join(tmpdir(), "dostavka-truth-refused-")),
            DOSTAVKA_PREFIX: uniquePrefix("truth-refused")
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
        expect(stderr).toContain("ECONNREFUSED")
        child.kill("SIGTERM")
        expect(yield* Effect.promise(() => exited)).toBe(0)
      }),
    60_000
  )
})

describe("a role binds its own port before it touches the broker (issue 16 §10)", () => {
  it.scopedLive(
    "a health port or API port in use: one line naming the variable to change, exit 2, and nothing declared on the broker",
    () =>
      Effect.gen(function*() {
        const port = yield* portHeld
        const dir = yield* tempDataDir
        const [catalog, api, all] = [
          uniquePrefix("truth-port-c"),
          uniquePrefix("truth-port-a"),
          uniquePrefix("truth-port-l")
        ]
        for (const prefix of [catalog, api, all]) yield* cleanupTopology(prefix)
        const runs = yield* Effect.all([
          dostavka(["--role", "catalog"], {
            DOSTAVKA_HEALTH_PORT: String(port),
            DOSTAVKA_PREFIX: catalog,
            DOSTAVKA_DATA_DIR: join(dir, "catalog")
          }),
          dostavka(["--role", "api"], {
            DOSTAVKA_HTTP_PORT: String(port),
            DOSTAVKA_PREFIX: api,
            DOSTAVKA_DATA_DIR: join(dir, "api")
          }),
          dostavka(["--role", "all"], {
            DOSTAVKA_HTTP_PORT: String(port),
            DOSTAVKA_PREFIX: all,
            DOSTAVKA_DATA_DIR: join(dir, "all")
          })
        ], { concurrency: 3 })
        const [health, http] = ["DOSTAVKA_HEALTH_PORT", "DOSTAVKA_HTTP_PORT"].map((setting) =>
          `dostavka: ${setting}=${port}: port ${port} is in use on 127.0.0.1; set ${setting} to a free port`
        )
        expect(runs.map((run) => run.code)).toEqual([2, 2, 2])
        expect(runs.map((run) => lastLine(run.stderr))).toEqual([health, http, http])
        expect(yield* brokerHas("queue", namesOf(catalog).queue("catalog"))).toBe(false)
        expect(yield* brokerHas("exchange", namesOf(all).exchange)).toBe(false)
        expect(yield* brokerHas("queue", namesOf(all).queue("audit"))).toBe(false)
      }),
    120_000
  )
})

describe("the broker script leaves a broker it was not asked about alone (issue 16 §11)", () => {
  it.scoped(
    "a local URL on another port: no rabbitmq-server, no plugin, one line saying why, exit 1 at once",
    () =>
      Effect.gen(function*() {
        const fakes = yield* Effect.acquireRelease(
          Effect.sync(() => mkdtempSync(join(tmpdir(), "dostavka-fake-rabbit-"))),
          (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
        )
        const calls = join(fakes, "calls")
        writeFileSync(calls, "")
        for (const tool of ["rabbitmq-server", "rabbitmq-plugins", "rabbitmqctl", "epmd", "apt-get"]) {
          writeFileSync(join(fakes, tool), `#!/bin/sh\necho "${tool} $*" >> "${calls}"\n`)
          chmodSync(join(fakes, tool), 0o755)
        }
        const port = yield* portHeld.pipe(Effect.scoped)
        const run = (...args: ReadonlyArray<string>) =>
          Effect.async<{ code: number; stderr: string; ms: number }>((resume) => {
            const startedAt = Date.now()
            execFile("bash", ["scripts/broker.sh", ...args], {
              cwd: projectRoot,
              env: {
                ...process.env,
                PATH: `${fakes}:${process.env.PATH}`,
                DOSTAVKA_AMQP_URL: `amqp://guest:guest@127.0.0.1:${port}`,
                DOSTAVKA_BROKER_WAIT_S: "5"
              },
              timeout: 30_000
            }, (error, _stdout, stderr) =>
              resume(Effect.succeed({
                code: error === null ? 0 : typeof error.code === "number" ? error.code : 1,
                stderr,
                ms: Date.now() - startedAt
              })))
          })
        for (const args of [["--no-install"], []]) {
          const result = yield* run(...args)
          expect(result.code).toBe(1)
          expect(result.ms).toBeLessThan(5_000)
          expect(result.stderr.trim()).toBe(
            `broker: nothing answers on 127.0.0.1:${port} (DOSTAVKA_AMQP_URL); this script starts a broker only ` +
              "for the local default 127.0.0.1:5672, so start that broker, or fix the URL"
          )
        }
        expect(readFileSync(calls, "utf8")).toBe("")
      }),
    60_000
  )
})

describe("what the environment holds is checked (issue 16 §12)", () => {
  it.live(
    "a misspelt DOSTAVKA_* variable is one warning at start, with the name it was meant to be",
    () =>
      Effect.gen(function*() {
        const run = yield* dostavka(["topology"], { DOSTAVKA_CATALOG_MAX_ATTEMPS: "3" })
        expect(run.code).toBe(0)
        const warnings = run.stderr.split("\n").filter((line) => line.includes("is not a setting"))
        expect(warnings).toHaveLength(1)
        expect(warnings[0]).toContain(
          "message=\"DOSTAVKA_CATALOG_MAX_ATTEMPS is not a setting, and is ignored; did you mean DOSTAVKA_CATALOG_MAX_ATTEMPTS?\""
        )
      }),
    60_000
  )

  it.scopedLive(
    "a data dir claimed by one prefix: a role or a writing command of another stops at start naming both; status warns",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDataDir
        const [blue, green] = [uniquePrefix("truth-blue"), uniquePrefix("truth-green")]
        const claimed = yield* dostavka(["outbox", "list", "--parked"], {
          DOSTAVKA_PREFIX: blue,
          DOSTAVKA_DATA_DIR: dir
        })
        expect(claimed).toMatchObject({ code: 0, stdout: "no parked rows\n" })
        expect(readFileSync(join(dir, "prefix"), "utf8")).toBe(`${blue}\n`)

        const line = `dostavka: DOSTAVKA_DATA_DIR=${dir} holds the databases of prefix ${blue}, and this is prefix ` +
          `${green}: set DOSTAVKA_DATA_DIR to a folder of its own for ${green} (or DOSTAVKA_PREFIX=${blue})`
        const green$ = { DOSTAVKA_PREFIX: green, DOSTAVKA_DATA_DIR: dir }
        const [relay, outbox, status] = yield* Effect.all([
          // No broker on port 1: the role must stop before it would wait for one.
          dostavka(["--role", "relay"], { ...green$, DOSTAVKA_AMQP_URL: "amqp://guest:guest@127.0.0.1:1" }),
          dostavka(["outbox", "retry", "--all"], green$),
          dostavka(["status", "--json"], green$)
        ], { concurrency: 3 })
        expect(relay).toMatchObject({ code: 2, stderr: `${line}\n` })
        expect(outbox).toMatchObject({ code: 2, stderr: `${line}\n` })
        expect(status.stderr).toContain(line.slice("dostavka: ".length))
        expect(readFileSync(join(dir, "prefix"), "utf8")).toBe(`${blue}\n`)
        const again = yield* dostavka(["outbox", "list", "--parked"], { DOSTAVKA_PREFIX: blue, DOSTAVKA_DATA_DIR: dir })
        expect(again.code).toBe(0)
      }),
    120_000
  )
})

describe("the command line says what it does (issue 16 §13)", () => {
  /** The option blocks of a help page: each `--name …` line with the indented lines under it. */
  const optionBlocks = (page: string) =>
    page.split(/\n(?=--)/).slice(1).map((block) => block.split("\n\n").filter((line) => line !== "")).map((
      [header, ...lines]
    ) => ({ header: header!, lines: lines.map((l) => l.trim()) }))
  /** The lines @effect/cli writes for every option of a kind: none of them describes the option. */
  const generic =
    /^(One of the following|An existing file|An integer|A true or false|A user-defined|This setting is|This option may be)/

  it.live(
    "help pages: no filler, no --wizard, no colour into a pipe, every option of these commands described",
    () =>
      Effect.gen(function*() {
        const pages = [
          ["--help"],
          ["dead"],
          ["dead", "list", "--help"],
          ["dead", "show", "--help"],
          ["dead", "replay", "--help"],
          ["dead", "purge", "--help"],
          ["outbox", "list", "--help"],
          ["outbox", "retry", "--help"]
        ] as const
        const runs = yield* Effect.forEach(pages, (args) => dostavka(args), { concurrency: 3 })
        for (const [i, run] of runs.entries()) {
          expect(run.code, pages[i]!.join(" ")).toBe(0)
          for (const filler of ["A user-defined piece of text.", "A true or false value.", "--wizard", "\u001b["]) {
            expect(run.stdout, pages[i]!.join(" ")).not.toContain(filler)
          }
          expect(run.stdout).toContain("--log-level debug | info | warning | error")
          expect(run.stdout).toContain("EXIT CODES")
          const own = run.stdout.slice(0, run.stdout.indexOf("GLOBAL OPTIONS"))
          for (const block of optionBlocks(own)) {
            expect(block.lines.filter((line) => !generic.test(line)), `${pages[i]!.join(" ")}: ${block.header}`)
              .not.toEqual([])
          }
        }
        expect(runs[0]!.stdout).toContain("--role api | relay | catalog | audit | all")
      }),
    120_000
  )

  it.live(
    "a bad command line is one line starting with dostavka: and saying what to do, exit 2",
    () =>
      Effect.gen(function*() {
        const cases = [
          [["--role"], "dostavka: --role needs a value: use api, relay, catalog, audit or all"],
          [
            ["--rol", "api"],
            "dostavka: unknown option --rol for dostavka (did you mean --role?); dostavka --help lists its options"
          ],
          [
            ["dead", "lst"],
            "dostavka: unknown command \"lst\" for dostavka dead (did you mean list?): use list, purge, replay or show"
          ],
          [
            ["dead", "list", "--handler", "catalog", "--bogus"],
            "dostavka: unknown option --bogus for dostavka dead list; dostavka dead list --help lists its options"
          ],
          [["dead", "list", "--handler", "x"], "dostavka: --handler \"x\" is not accepted: use catalog or audit"],
          [
            ["dead", "show", "--handler", "catalog"],
            "dostavka: dostavka dead show needs --id; dostavka dead show --help lists its options"
          ],
          [
            ["--log-level", "loud", "topology"],
            "dostavka: --log-level \"loud\" is not accepted: use debug, info, warning or error"
          ]
        ] as const
        const runs = yield* Effect.forEach(cases, ([args]) => dostavka(args), { concurrency: 3 })
        for (const [i, [args, line]] of cases.entries()) {
          expect({ code: runs[i]!.code, stderr: runs[i]!.stderr }, args.join(" ")).toEqual({
            code: 2,
            stderr: `${line}\n`
          })
        }
      }),
    120_000
  )

  it.live("--log-level works, anywhere on the line, and wins over DOSTAVKA_LOG_LEVEL", () =>
    Effect.gen(function*() {
      // A variable that is no setting: a warning line at start, written only at warning level or below.
      const env = { DOSTAVKA_NOT_A_SETTING: "1" }
      const [plain, quiet, loud] = yield* Effect.all([
        dostavka(["topology"], env),
        dostavka(["--log-level", "error", "topology"], env),
        dostavka(["topology", "--log-level=warning"], { ...env, DOSTAVKA_LOG_LEVEL: "error" })
      ], { concurrency: 3 })
      for (const run of [plain, quiet, loud]) expect(run.code).toBe(0)
      expect(plain.stderr).toContain("DOSTAVKA_NOT_A_SETTING is not a setting")
      expect(quiet.stderr).toBe("")
      expect(loud.stderr).toContain("DOSTAVKA_NOT_A_SETTING is not a setting")
    }), 60_000)

  it.live("colour on a terminal only, and never with NO_COLOR", () =>
    Effect.gen(function*() {
      const onTerminal = (env: Record<string, string>) =>
        Effect.async<string>((resume) => {
          // script(1) gives the CLI a pseudo-terminal as stdout.
          execFile(
            "script",
            ["-qec", `${process.execPath} --import tsx src/main.ts --help`, "/dev/null"],
            { cwd: projectRoot, env: { ...process.env, ...env }, timeout: 60_000 },
            (_error, stdout) => resume(Effect.succeed(stdout))
          )
        })
      const [coloured, plain] = yield* Effect.all([onTerminal({ NO_COLOR: "" }), onTerminal({ NO_COLOR: "1" })], {
        concurrency: 2
      })
      expect(coloured).toContain("USAGE")
      expect(coloured).toContain("\u001b[")
      expect(plain).toContain("USAGE")
      expect(plain).not.toContain("\u001b[")
    }), 60_000)
})
