import { Data, Effect } from "effect"
import { execFile, execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"

/**
 * Private RabbitMQ nodes for tests that must stop, pause, kill, alarm or reconfigure
 * a broker: each is a node of its own (`scripts/rabbit-node.sh`), on its own ports
 * and data dir, beside the machine's broker, which they never touch.
 */

const script = join(import.meta.dirname, "..", "..", "scripts", "rabbit-node.sh")

/** A `rabbit-node.sh` command that failed; `message` carries its stderr. */
export class PrivateBrokerError extends Data.TaggedError("PrivateBrokerError")<{
  readonly command: string
  readonly message: string
}> {}

const onPath = (program: string) =>
  (process.env.PATH ?? "").split(":").some((dir) => dir !== "" && existsSync(join(dir, program)))

/** Why private nodes cannot run here, or undefined when they can. */
export const privateBrokerUnsupportedReason: string | undefined = process.getuid?.() !== 0
  ? "private RabbitMQ nodes need root (they run as the rabbitmq user)"
  : !onPath("rabbitmq-server")
  ? "rabbitmq-server is not on PATH (apt-get install rabbitmq-server)"
  : !onPath("runuser")
  ? "runuser is not on PATH"
  : undefined

/** True when this process may start private nodes: root, with `rabbitmq-server` on PATH. */
export const hasPrivateBrokerSupport = privateBrokerUnsupportedReason === undefined

const run = (args: ReadonlyArray<string>) =>
  Effect.async<string, PrivateBrokerError>((resume) => {
    const child = execFile(
      "bash",
      [script, ...args],
      { encoding: "utf8", maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resume(
          error
            ? Effect.fail(
              new PrivateBrokerError({
                command: `rabbit-node.sh ${args.join(" ")}`,
                message: stderr.trim() || error.message
              })
            )
            : Effect.succeed(stdout)
        )
    )
    return Effect.sync(() => child.kill())
  })

/** A TCP port that was free on 127.0.0.1 a moment ago (the kernel's pick for port 0). */
export const freePort = Effect.async<number, Error>((resume) => {
  const server = createServer()
  server.once("error", (e) => resume(Effect.fail(e)))
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(port > 0 ? Effect.succeed(port) : Effect.fail(new Error("no port from the kernel"))))
  })
}).pipe(Effect.orDie)

/** Nodes this process started and has not stopped; stopped when the process exits, should a scope never close. */
const live = new Set<string>()
let exitHookInstalled = false
const stopOnExit = (name: string) => {
  live.add(name)
  if (exitHookInstalled) return
  exitHookInstalled = true
  process.once("exit", () => {
    for (const leftover of live) {
      try {
        execFileSync("bash", [script, "stop", leftover], { stdio: "ignore", timeout: 60_000 })
      } catch {
        // best effort: the process is going away
      }
    }
  })
}

export interface PrivateBrokerOptions {
  /** The node is `<name>@localhost`; by default `dostavka-test-<8 hex>`. */
  readonly name?: string
  /** Its AMQP port on 127.0.0.1; by default a free one. */
  readonly port?: number
  /** Enables the management plugin on this port (127.0.0.1 only). */
  readonly mgmtPort?: number
  /** Extra `rabbitmq.conf` lines, such as "frame_max = 4096". */
  readonly conf?: ReadonlyArray<string>
  /** The most files the node may hold open (`ulimit -n`), which bounds its connections. */
  readonly maxFds?: number
}

export interface PrivateBroker {
  readonly name: string
  /** `<name>@localhost`, for `rabbitmqctl -n`. */
  readonly node: string
  readonly port: number
  readonly url: string
  /** Runs `rabbitmqctl -n <node> ...args`; succeeds with its stdout. */
  readonly ctl: (...args: ReadonlyArray<string>) => Effect.Effect<string, PrivateBrokerError>
  /** The OS pid of the node's Erlang VM, for SIGSTOP / SIGCONT / SIGKILL. */
  readonly pid: Effect.Effect<number, PrivateBrokerError>
  /** Stops the node and waits until its VM is gone; its data (durable queues, messages) stays. */
  readonly stop: Effect.Effect<void, PrivateBrokerError>
  /** Starts the node again (after `stop`, or a SIGKILL) on the same port and config, with its data; returns once AMQP answers. */
  readonly start: Effect.Effect<void, PrivateBrokerError>
}

/**
 * Starts a private RabbitMQ node and returns once it accepts AMQP connections on
 * 127.0.0.1; the scope's close stops it (even paused or killed) and removes its data.
 * Takes about 4 s to start and 2 s to stop (7 s with the management plugin).
 */
export const privateBroker = (options: PrivateBrokerOptions = {}) =>
  Effect.gen(function*() {
    const name = options.name ?? `dostavka-test-${randomBytes(4).toString("hex")}`
    const port = options.port ?? (yield* freePort)
    const startArgs = [
      "start",
      name,
      String(port),
      ...(options.mgmtPort === undefined ? [] : ["--mgmt-port", String(options.mgmtPort)]),
      ...(options.maxFds === undefined ? [] : ["--max-fds", String(options.maxFds)]),
      ...(options.conf ?? []).flatMap((line) => ["--conf", line])
    ]
    const start = run(startArgs).pipe(Effect.asVoid)
    const release = run(["stop", name]).pipe(Effect.tap(() => Effect.sync(() => live.delete(name))))
    const broker: PrivateBroker = {
      name,
      node: `${name}@localhost`,
      port,
      url: `amqp://guest:guest@127.0.0.1:${port}`,
      ctl: (...args) => run(["ctl", name, ...args]),
      pid: run(["pid", name]).pipe(
        Effect.flatMap((out) => {
          const pid = Number.parseInt(out.trim(), 10)
          return Number.isInteger(pid) && pid > 0
            ? Effect.succeed(pid)
            : Effect.fail(
              new PrivateBrokerError({ command: `rabbit-node.sh pid ${name}`, message: `not a pid: ${out}` })
            )
        })
      ),
      stop: run(["stop", name, "--keep"]).pipe(Effect.asVoid),
      start
    }
    return yield* Effect.acquireRelease(
      Effect.sync(() => stopOnExit(name)).pipe(
        Effect.zipRight(start),
        // A start that failed half-way may have left a VM behind.
        Effect.tapError(() => Effect.ignore(release)),
        Effect.as(broker)
      ),
      () => release.pipe(Effect.orDie)
    )
  })
