/**
 * `npm run chaos`: runs Dostavka's four roles as separate processes against a private
 * RabbitMQ node (or a 3-node cluster with `--cluster`), pushes publication requests
 * through the HTTP API at a steady rate from several clients, injects faults at moments
 * drawn from a printed seed (`--seed N` replays them), then waits for quiet and checks
 * from the SQLite files and the broker that nothing was lost, nothing applied twice, no
 * catalog entry regressed, and no role died or logged what it must not. Prints the faults
 * with their recovery times, the receivers' stale arrivals and absorbed duplicates, each
 * process's memory, and every invariant; exits 0 when all hold, 1 when one fails, 2 on a
 * usage error or a machine that cannot run private nodes, and 3 when `--cluster` ran but
 * the kit does not accept a list of broker URLs (the run then used the first node only).
 * See scripts/chaos/ChaosOptions.ts for the modes and flags.
 */
import { execFileSync, spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { BrokerNodes, freePorts, privateNodesUnsupportedReason, type QueueDepth } from "./chaos/BrokerNodes.js"
import { type ChaosOptions, parseOptions, profileOf, usage, UsageError } from "./chaos/ChaosOptions.js"
import {
  deliverySection,
  faultsSection,
  invariantsSection,
  logSection,
  memorySection,
  requestsSection
} from "./chaos/ChaosReport.js"
import { readDeliveryFacts, readProgress } from "./chaos/DeliveryFacts.js"
import { FaultInjector } from "./chaos/FaultInjector.js"
import { type FaultKind, planFaults } from "./chaos/FaultPlan.js"
import { type DeadLetterInfo, evaluate } from "./chaos/Invariants.js"
import { LoadClients } from "./chaos/LoadClients.js"
import { scanLogs } from "./chaos/LogScan.js"
import { recoveryTimes } from "./chaos/RecoveryTimes.js"
import { roleEnvironment, type RoleName, RoleNames, RoleProcess, rssOf } from "./chaos/RoleProcess.js"
import { SeededRandom } from "./chaos/SeededRandom.js"
import { waitForSteadyFlow } from "./chaos/SteadyFlow.js"
import { planWorkload } from "./chaos/Workload.js"

const projectDir = join(import.meta.dirname, "..")
const prefix = "chaos"
const startedAt = Date.now()
const say = (line: string) => console.log(`chaos ${((Date.now() - startedAt) / 1000).toFixed(0).padStart(5)}s  ${line}`)
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)))

/** Time a fault of each kind takes beyond its hold (stopping and starting a node, reconnecting, a lease), to size the load around the plan. */
const overheadMs: Record<FaultKind, number> = {
  "kill-relay": 5_000, // a killed relay's lease runs out after 2 s
  "kill-catalog": 5_000,
  "kill-audit": 5_000,
  "kill-api": 8_000,
  "close-connections": 8_000,
  "stop-app": 8_000,
  "broker-stop": 12_000,
  "broker-pause": 8_000,
  "memory-alarm": 4_000,
  "catalog-lock": 5_000,
  "api-lock": 8_000,
  "node-kill": 20_000,
  "leader-kill": 20_000
}

/** Everything the run started, so that any ending (a failure, Ctrl-C) takes it down. */
const owned: {
  broker?: BrokerNodes
  roles?: Record<RoleName, RoleProcess>
  injector?: FaultInjector
  load?: LoadClients
} = {}
let cleaning: Promise<void> | undefined
const cleanup = () => (cleaning ??= (async () => {
  owned.load?.stop()
  owned.injector?.abort()
  for (const role of Object.values(owned.roles ?? {})) {
    role.restartOnDeath = false
    await role.kill9().catch(() => undefined)
  }
  await owned.broker?.destroy()
})())

/** Runs the kit's CLI with `env`; resolves with its exit code, stdout and stderr (appended to `logFile`). */
const runKit = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv, logFile: string, timeoutMs = 60_000) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", ...args], {
      cwd: projectDir,
      env,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")))
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    child.once("exit", (code) => {
      clearTimeout(timer)
      writeFileSync(logFile, `# chaos: main.ts ${args.join(" ")} exited ${code}\n${stderr}`, { flag: "a" })
      resolve({ code, stdout, stderr })
    })
  })

/**
 * Whether the kit accepts a comma-separated list in DOSTAVKA_AMQP_URL: a relay started
 * with one (on a data dir of its own) either says "relay started" or stops at once with
 * a configuration error naming the variable.
 */
const probeUrlList = (env: NodeJS.ProcessEnv, logFile: string) =>
  new Promise<{ accepted: boolean; detail: string }>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "--role", "relay"], {
      cwd: projectDir,
      env,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    let settled = false
    const settle = (accepted: boolean, detail: string) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      child.kill("SIGTERM")
      resolve({ accepted, detail })
    }
    const onData = (c: Buffer) => {
      output += c.toString("utf8")
      writeFileSync(logFile, c, { flag: "a" })
      if (/relay started/.test(output)) settle(true, "a relay started with the list")
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    const timer = setTimeout(() => settle(true, "a relay ran 60 s with the list without refusing it"), 60_000)
    child.once(
      "exit",
      (code) => settle(false, `a relay given the list exited ${code}: ${output.trim().split("\n").at(-1) ?? ""}`)
    )
  })

const replayCommand = (options: ChaosOptions) =>
  `npm run chaos -- ${
    [
      options.quick ? "--quick" : "",
      options.cluster ? "--cluster" : "",
      options.requests !== undefined ? `--requests ${options.requests}` : "",
      options.rate !== undefined ? `--rate ${options.rate}` : "",
      options.clients !== undefined ? `--clients ${options.clients}` : "",
      options.faults !== undefined ? `--faults ${options.faults.length === 0 ? "none" : options.faults.join(",")}` : "",
      `--seed ${options.seed}`
    ].filter((s) => s !== "").join(" ")
  }`

const main = async (): Promise<number> => {
  let options: ChaosOptions
  try {
    options = parseOptions(process.argv.slice(2))
  } catch (e) {
    if (!(e instanceof UsageError)) throw e
    console.error(`chaos: ${e.message}\n${usage}`)
    return 2
  }
  const unsupported = privateNodesUnsupportedReason()
  if (unsupported !== undefined) {
    console.error(`chaos: cannot run here: ${unsupported}`)
    return 2
  }
  // The roles run compiled, as `npm run main` runs them: compile src/ if it changed.
  execFileSync("bash", ["scripts/build.sh"], { stdio: "inherit" })
  const profile = profileOf(options)
  const random = new SeededRandom(options.seed)
  say(`seed ${options.seed}, ${profile.name} run; replay with: ${replayCommand(options)}`)

  const runDir = mkdtempSync(join(tmpdir(), `dostavka-chaos-${options.seed}-`))
  const dataDir = join(runDir, "data")
  const logDir = join(runDir, "logs")
  mkdirSync(dataDir)
  mkdirSync(logDir)
  say(`data and logs in ${runDir}`)

  // The plan: the workload, and the faults spread over the load, the load long enough to hold them.
  const plan = planWorkload(
    random.fork("workload"),
    profile.requests,
    profile.clients,
    profile.materialsPerClient,
    profile.contended
  )
  const faultCount = Object.values(profile.faults).reduce((a, b) => a + (b ?? 0), 0)
  const faultBudgetMs = Object.entries(profile.faults).reduce((sum, [kind, n]) => {
    const [min, max] = profile.holds[kind as FaultKind]
    return sum + (n ?? 0) * ((min + max) / 2 + overheadMs[kind as FaultKind] + profile.minGapMs)
  }, 0)
  const loadMs = Math.max((profile.requests / profile.rate) * 1000, faultBudgetMs + 40_000)
  const rate = profile.requests / (loadMs / 1000)
  const faults = planFaults(random.fork("faults"), profile.faults, profile.holds, {
    fromMs: 15_000,
    toMs: loadMs - 25_000
  })
  say(
    `${profile.requests} requests from ${profile.clients} clients at ${rate.toFixed(1)}/s (about ${
      (loadMs / 60_000).toFixed(1)
    } min); ${faultCount} faults: ${faults.map((f) => f.kind).join(", ")}`
  )

  // The broker.
  say(options.cluster ? "starting a 3-node cluster of private RabbitMQ nodes" : "starting a private RabbitMQ node")
  const broker = (owned.broker = options.cluster ? await BrokerNodes.cluster() : await BrokerNodes.single())
  say(`broker: ${broker.nodes.map((n) => `${n.name}@localhost on ${broker.shownUrlOf(n)}`).join(", ")}`)
  const brokerRssStart = await broker.pid(broker.nodes[0]!.name).then(rssOf, () => undefined)

  const httpPort = await freePorts(1)
  const settings = (url: string, dir = dataDir) => ({
    DOSTAVKA_AMQP_URL: url,
    DOSTAVKA_DATA_DIR: dir,
    DOSTAVKA_HTTP_PORT: String(httpPort),
    DOSTAVKA_PREFIX: prefix,
    DOSTAVKA_LOG_LEVEL: "info",
    // The readiness lines and the log scan read logfmt (kits with DOSTAVKA_LOG_FORMAT could write JSON).
    DOSTAVKA_LOG_FORMAT: "logfmt",
    ...profile.roleEnv
  })
  let amqpUrl = broker.urlOf(broker.nodes[0]!)
  let limitation: string | undefined
  if (options.cluster) {
    const list = broker.nodes.map((n) => broker.urlOf(n)).join(",")
    const probeDir = join(runDir, "probe")
    mkdirSync(probeDir)
    const probe = await probeUrlList(
      roleEnvironment({ ...settings(list, probeDir), DOSTAVKA_HTTP_PORT: String(await freePorts(1)) }),
      join(logDir, "probe-url-list.log")
    )
    if (probe.accepted) {
      amqpUrl = list
      say(`the kit accepts the list of the three nodes' URLs (${probe.detail})`)
    } else {
      limitation =
        `the kit does not accept a list of broker URLs in DOSTAVKA_AMQP_URL (${probe.detail}); the roles use ${
          broker.shownUrlOf(broker.nodes[0]!)
        } only, so losing that node stops the flow until it is back`
      say(`KIT LIMITATION: ${limitation}`)
    }
  }

  // The roles.
  const env = roleEnvironment(settings(amqpUrl))
  const envOf = (role: RoleName) => ({ ...env, ...profile.roleEnvOf[role] })
  const deaths: Array<string> = []
  const roles = (owned.roles = Object.fromEntries(RoleNames.map((name) => [
    name,
    new RoleProcess(name, projectDir, envOf(name), join(logDir, `${name}.log`), (role, incarnation) => {
      const line =
        `${role} pid ${incarnation.pid} died (code ${incarnation.exit?.code}, signal ${incarnation.exit?.signal}) after ${
          (((incarnation.exit?.at ?? 0) - incarnation.startedAt) / 1000).toFixed(0)
        } s`
      deaths.push(line)
      say(`ROLE DIED: ${line}; started again`)
    })
  ])) as Record<RoleName, RoleProcess>)
  const extras = [
    ...Object.entries(profile.roleEnv).map(([k, v]) => `${k}=${v}`),
    ...Object.entries(profile.roleEnvOf).flatMap(([role, vars]) =>
      Object.entries(vars ?? {}).map(([k, v]) => `${role}: ${k}=${v}`)
    )
  ]
  say(`starting the roles (prefix ${prefix}, data ${dataDir}${extras.length > 0 ? `; ${extras.join(", ")}` : ""})`)
  for (const role of Object.values(roles)) role.start()
  for (const role of Object.values(roles)) {
    if (!(await role.ready(120_000))) {
      throw new Error(`the ${role.role} role did not get ready within 120 s; see ${role.logFile}`)
    }
  }
  say(
    `roles ready: ${
      Object.values(roles).map((r) => `${r.role} pid ${r.current?.pid}`).join(", ")
    }; API on 127.0.0.1:${httpPort}`
  )
  const sampler = setInterval(() => Object.values(roles).forEach((r) => r.sample()), 2_000)

  // The load and the faults, together.
  // The load goes on past its plan until the last fault is over and 30 s more, so every fault has traffic after it.
  let faultsOverAt: number | undefined
  const keepGoing = () => faultsOverAt === undefined || Date.now() < faultsOverAt + 30_000
  const load = (owned.load = new LoadClients(
    plan,
    { baseUrl: `http://127.0.0.1:${httpPort}`, rate, giveUpMs: 300_000, keepGoing },
    random.fork("load")
  ))
  let loadRunning = true
  const steady = (sinceMs: number, timeoutMs: number) =>
    waitForSteadyFlow({ roles, broker, prefix, dataDir, loadRunning: () => loadRunning }, sinceMs, timeoutMs)
  const injector = (owned.injector = new FaultInjector(
    { roles, broker, prefix, dataDir, projectDir, say, steady },
    random.fork("targets"),
    profile.minGapMs
  ))
  const t0 = Date.now()
  const progress = setInterval(() => {
    const answered = load.records.filter((r) => r.outcome !== undefined)
    let db = ""
    try {
      const p = readProgress(dataDir)
      db = ` | outbox pending ${p.pending} | not yet at catalog ${p.missingAtCatalog}, audit ${p.missingAtAudit}`
    } catch (e) {
      db = ` | (databases: ${e instanceof Error ? e.message : e})`
    }
    say(
      `requests ${answered.length}/${profile.requests} (202 ${answered.filter((r) => r.status === 202).length}, 409 ${
        answered.filter((r) => r.status === 409).length
      })${db}${injector.current ? ` | fault: ${injector.current}` : ""}`
    )
  }, 20_000)
  await Promise.all([
    load.run().finally(() => (loadRunning = false)),
    injector.run(faults, t0).finally(() => (faultsOverAt = Date.now()))
  ])
  say(
    `load and faults done: ${load.records.length} requests (${profile.requests} planned) in ${
      (((load.finishedAt ?? Date.now()) - t0) / 1000).toFixed(0)
    } s, ${injector.records.length} faults`
  )

  // Quiet: the outbox drained, every accepted event at both receivers, every queue empty (retry queues too).
  const quietStart = Date.now()
  let quiet = { reached: false, detail: "" }
  let queuesQuiet: Array<QueueDepth> | undefined
  let calm = 0
  while (Date.now() - quietStart < profile.quietTimeoutMs) {
    const p = readProgress(dataDir)
    queuesQuiet = await broker.queues(broker.nodes[0]!.name, prefix).catch(() => undefined)
    const inQueues = queuesQuiet?.filter((q) => !q.name.endsWith(".dead")).reduce((n, q) => n + q.ready + q.unacked, 0)
    const busy = p.pending + p.missingAtCatalog + p.missingAtAudit + (inQueues ?? 1)
    quiet = {
      reached: false,
      detail: `after ${
        ((Date.now() - quietStart) / 1000).toFixed(0)
      } s: outbox pending ${p.pending}, parked ${p.parked}, not at catalog ${p.missingAtCatalog}, not at audit ${p.missingAtAudit}, in queues ${
        inQueues ?? "unknown"
      }`
    }
    calm = busy === 0 ? calm + 1 : 0
    if (calm >= 2) {
      quiet = { reached: true, detail: `quiet ${((Date.now() - quietStart) / 1000).toFixed(0)} s after the load ended` }
      break
    }
    await sleep(3_000)
  }
  clearInterval(progress)
  say(quiet.reached ? quiet.detail : `NOT QUIET within ${profile.quietTimeoutMs / 1000} s: ${quiet.detail}`)

  // Stop the roles as a supervisor would, then look at what the broker still holds.
  clearInterval(sampler)
  Object.values(roles).forEach((r) => {
    r.sample()
    r.restartOnDeath = false
  })
  const unclean: Array<string> = []
  for (const role of Object.values(roles)) {
    const stop = await role.stop()
    if (stop === undefined) unclean.push(`${role.role}: not running at the end`)
    else if (stop.hung) {
      unclean.push(`${role.role}: still running ${(stop.ms / 1000).toFixed(0)} s after SIGTERM, killed`)
    } else if (stop.code !== 0) unclean.push(`${role.role}: exited ${stop.code ?? stop.signal} on SIGTERM`)
  }
  const queuesFinal = await broker.queues(broker.nodes[0]!.name, prefix).catch(() => undefined)
  const deadLetters: Array<DeadLetterInfo> = []
  let deadLettersError: string | undefined
  for (const handler of ["catalog", "audit"] as const) {
    const dead = queuesFinal?.find((q) => q.name === `${prefix}.${handler}.dead`)
    if (dead === undefined || dead.ready + dead.unacked === 0) continue
    const listed = await runKit(
      ["dead", "list", "--handler", handler, "--json", "--limit", "100000"],
      env,
      join(logDir, "dead-list.log")
    )
    try {
      for (
        const d of JSON.parse(listed.stdout) as Array<
          { message_id: string; reason: string; error_tag: string; error: string }
        >
      ) {
        deadLetters.push({ handler, messageId: d.message_id, reason: d.reason, errorTag: d.error_tag, error: d.error })
      }
    } catch {
      deadLettersError = `dead list --handler ${handler} exited ${listed.code}: ${
        listed.stderr.trim().split("\n").at(-1) ?? ""
      }`
    }
  }
  const brokerRssEnd = await broker.pid(broker.nodes[0]!.name).then(rssOf, () => undefined)
  await broker.destroy()
  say("broker stopped; checking")

  const facts = readDeliveryFacts(dataDir)
  const logs = scanLogs(logDir, broker.password)
  const checks = evaluate({
    records: load.records,
    facts,
    queuesQuiet,
    queuesFinal,
    deadLetters,
    deadLettersError,
    quiet,
    deaths,
    unclean,
    faults: injector.records,
    logs
  })
  const recoveries = recoveryTimes(injector.records, facts, load.accepts)
  const passed = checks.every((c) => c.ok)
  const report = [
    "",
    `Dostavka chaos report: ${profile.name} run, seed ${options.seed} (${replayCommand(options)}), ${
      ((Date.now() - startedAt) / 60_000).toFixed(1)
    } min`,
    ...(limitation === undefined ? [] : [`KIT LIMITATION: ${limitation}`]),
    "",
    requestsSection(load, profile.requests),
    "",
    faultsSection(recoveries, t0),
    "",
    deliverySection(facts, logs),
    "",
    memorySection(roles, { start: brokerRssStart, end: brokerRssEnd }),
    "",
    logSection(logs),
    "",
    invariantsSection(checks),
    "",
    passed && limitation !== undefined
      ? `PASSED, DEGRADED (exit 3): every invariant holds (seed ${options.seed}), but the roles could only be given one node's URL`
      : passed
      ? `PASSED: every invariant holds (seed ${options.seed})`
      : `FAILED: ${
        checks.filter((c) => !c.ok).map((c) => c.name).join("; ")
      } (seed ${options.seed}; data and logs kept in ${runDir})`
  ].join("\n")
  console.log(report)
  writeFileSync(join(runDir, "report.txt"), `${report}\n`)
  if (passed && !options.keep) rmSync(runDir, { recursive: true, force: true })
  else say(`kept ${runDir}`)
  return !passed ? 1 : limitation !== undefined ? 3 : 0
}

let exitCode = 1
const interrupted = (signal: NodeJS.Signals) => {
  say(`${signal}: stopping the roles and the broker`)
  void cleanup().finally(() => process.exit(130))
}
process.once("SIGINT", interrupted)
process.once("SIGTERM", interrupted)
try {
  exitCode = await main()
} catch (e) {
  console.error(`chaos: the run itself failed: ${e instanceof Error ? e.message : String(e)}`)
  exitCode = 1
} finally {
  await cleanup()
}
process.exit(exitCode)
