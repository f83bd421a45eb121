/**
 * A small mutation check: each named mutation below breaks one promise of the kit in a
 * copy of the project, and the unit tests (no broker needed) must then fail. A mutation
 * the tests survive is a promise no test guards. Prints one line per mutation and exits
 * 1 if any survived (or no longer applies: its text is not in the file any more).
 *
 *   npm run mutate [-- NAME_SUBSTRING …]
 */
import { execFile } from "node:child_process"
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

interface Mutation {
  readonly name: string
  readonly file: string
  readonly from: string
  readonly to: string
}

const mutations: ReadonlyArray<Mutation> = [
  {
    name: "publisher: the confirm timeout is one day",
    file: "src/adapters/amqp/AmqpPublisher.ts",
    from: "const confirmTimeout = Duration.decode(options.confirmTimeout)",
    to: "const confirmTimeout = Duration.days(1)"
  },
  {
    name: "publisher: a return is taken for a confirm",
    file: "src/adapters/amqp/AmqpPublisher.ts",
    from: "if (s.returned.delete(m.options.messageId)) {",
    to: "if (s.returned.delete(m.options.messageId) && false) {"
  },
  {
    name: "publisher: a nack is taken for a confirm",
    file: "src/adapters/amqp/AmqpPublisher.ts",
    from: "if (err instanceof Error && err.message === NackMessage) return",
    to: "if (err instanceof Error && err.message === NackMessage) return new Confirmed(); if (false) return"
  },
  {
    name: "publisher: publishes while the broker blocks the connection",
    file: "src/adapters/amqp/AmqpPublisher.ts",
    from: "if (blocked !== undefined) {",
    to: "if (blocked !== undefined && false) {"
  },
  {
    name: "publisher: sends again what is still in flight",
    file: "src/adapters/amqp/AmqpPublisher.ts",
    from: "if (inFlight !== undefined) return inFlight.outcome",
    to: "if (inFlight !== undefined && false) return inFlight.outcome"
  },
  {
    name: "consumer: a hand-back drops the message",
    file: "src/adapters/amqp/AmqpConsumer.ts",
    from: `else channel.nack(message, false, how === "hand-back")`,
    to: "else channel.nack(message, false, false)"
  },
  {
    name: "consumer: acks before the copy is confirmed",
    file: "src/adapters/amqp/AmqpConsumer.ts",
    from: `outcome._tag === "Confirmed"\n        ? "ack"`,
    to: `true\n        ? "ack"`
  },
  {
    name: "consumer: hands back forever",
    file: "src/adapters/amqp/AmqpConsumer.ts",
    from: `return count > options.maxHandBacks ? "reject" : "hand-back"`,
    to: `return "hand-back"`
  },
  {
    name: "http: storage unavailable answers 500",
    file: "src/adapters/http/PublicationHttpApi.ts",
    from: "const storageUnavailable = onTheWire(StorageUnavailable, 503,",
    to: "const storageUnavailable = onTheWire(StorageUnavailable, 500,"
  },
  {
    name: "http: no Retry-After on a 503",
    file: "src/adapters/http/LoopbackHttpServer.ts",
    from: `HttpServerResponse.setHeader(response, "retry-after", "1")`,
    to: "response"
  },
  {
    name: "relay: marks published what was not confirmed",
    file: "src/app/relay.ts",
    from: `if (outcome._tag === "Confirmed") confirmed.push(row.envelope.messageId)`,
    to: "confirmed.push(row.envelope.messageId)"
  },
  {
    name: "relay: a rejected row is never parked",
    file: "src/app/relay.ts",
    from: "retryAtMs: rejections_ >= options.parkAfter ? null :",
    to: "retryAtMs: false ? null :"
  },
  {
    name: "receive: the inbox does not suppress a duplicate",
    file: "src/app/receive.ts",
    from: "if (Option.isSome(yield* inbox.find(handler.name, message.messageId))) {",
    to: "if (false) {"
  },
  {
    name: "receive: a failure is dead at once",
    file: "src/app/failures.ts",
    from: "if (attempts >= policy.maxAttempts || policy.delays.length === 0) return",
    to: "if (true) return"
  },
  {
    name: "receive: one more attempt than allowed",
    file: "src/app/failures.ts",
    from: "if (attempts >= policy.maxAttempts ||",
    to: "if (attempts > policy.maxAttempts ||"
  },
  {
    name: "receive: a defect takes the batch down",
    file: "src/app/receive.ts",
    from: ": failed(policy, batch[i]!.attempts, classifyDefect(exit.cause))",
    to: ": Verdict.Halt({ detail: \"defect\" })"
  },
  {
    name: "domain: an equal revision replaces the held one",
    file: "src/domain/Material.ts",
    from: "held === undefined || incoming > held",
    to: "held === undefined || incoming >= held"
  },
  {
    name: "api: the same key with another body is a replay",
    file: "src/app/publishMaterial.ts",
    from: "if (earlier.value.requestHash !== hash) return yield* new IdempotencyKeyReused({ idempotencyKey })",
    to: ""
  },
  {
    name: "json: no depth bound",
    file: "src/domain/JsonInput.ts",
    from: "if (++depth > maxDepth) return",
    to: "if (++depth > maxDepth && false) return"
  },
  {
    name: "json: invalid UTF-8 is replaced, not refused",
    file: "src/domain/JsonInput.ts",
    from: `const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false })`,
    to: `const strictUtf8 = new TextDecoder("utf-8", { fatal: false, ignoreBOM: false })`
  },
  {
    name: "sqlite: a lost file is not checked before commit",
    file: "src/adapters/sqlite/Database.ts",
    from: "Effect.zipLeft(effect, file.verify)",
    to: "effect"
  },
  {
    name: "memory: a savepoint keeps a failed message's writes",
    file: "src/adapters/memory/MemoryDatabase.ts",
    from: "nested ? undoOnFailure(effect) :",
    to: "nested ? effect :"
  }
]

const root = join(import.meta.dirname, "..")
const unitTests = [
  "test/domain",
  "test/app",
  "test/jobs",
  "test/adapters",
  "test/property",
  "test/architecture.test.ts",
  "test/config.test.ts"
]

const run = (cwd: string) =>
  new Promise<number>((resolve) => {
    execFile(process.execPath, [join(root, "node_modules", "vitest", "vitest.mjs"), "run", ...unitTests], {
      cwd,
      env: { ...process.env, DOSTAVKA_PROPERTY_RUNS: "100", NO_COLOR: "1" },
      timeout: 300_000,
      maxBuffer: 64 * 1024 * 1024
    }, (error) => resolve(error === null ? 0 : typeof error.code === "number" ? error.code : 1))
  })

const check = async (mutation: Mutation): Promise<"killed" | "survived" | "stale"> => {
  const copy = mkdtempSync(join(tmpdir(), "dostavka-mutant-"))
  try {
    for (const entry of ["src", "test", "package.json", "tsconfig.json", "vitest.config.ts"]) {
      cpSync(join(root, entry), join(copy, entry), { recursive: true })
    }
    symlinkSync(join(root, "node_modules"), join(copy, "node_modules"))
    const file = join(copy, mutation.file)
    const text = readFileSync(file, "utf8")
    if (!text.includes(mutation.from)) return "stale"
    writeFileSync(file, text.replace(mutation.from, mutation.to))
    return (await run(copy)) === 0 ? "survived" : "killed"
  } finally {
    rmSync(copy, { recursive: true, force: true })
  }
}

const wanted = process.argv.slice(2)
const chosen = mutations.filter((m) => wanted.length === 0 || wanted.some((w) => m.name.includes(w)))
const results: Array<readonly [Mutation, string]> = []
const queue = [...chosen]
await Promise.all([0, 1].map(async () => {
  for (let m = queue.shift(); m !== undefined; m = queue.shift()) {
    const result = await check(m)
    results.push([m, result])
    console.log(`${result.padEnd(9)} ${m.name}`)
  }
}))
const bad = results.filter(([, r]) => r !== "killed")
console.log(
  `${results.length - bad.length} of ${results.length} mutations killed by the unit tests${
    bad.length === 0 ? "" : `; ${bad.length} not: ${bad.map(([m, r]) => `${m.name} (${r})`).join("; ")}`
  }`
)
process.exit(bad.length === 0 ? 0 : 1)
