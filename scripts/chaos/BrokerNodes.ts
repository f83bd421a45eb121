/**
 * BrokerNodes: the private RabbitMQ node (or 3-node cluster) a chaos run owns, driven
 * through `scripts/rabbit-node.sh`. Never the machine's broker on 5672: every node here is
 * named `dostavka-chaos-…` and listens on a port of its own. The run's broker user has a
 * random password, so the log scan can tell whether a role ever wrote it.
 */
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"

const script = join(import.meta.dirname, "..", "rabbit-node.sh")

/** Runs `rabbit-node.sh ARGS`; resolves with stdout, rejects with stderr's last lines. */
export const rabbitNode = (args: ReadonlyArray<string>, timeoutMs = 180_000): Promise<string> =>
  new Promise((resolve, reject) => {
    execFile(
      "bash",
      [script, ...args],
      { encoding: "utf8", timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) {
          reject(
            new Error(
              `rabbit-node.sh ${args.join(" ")}: ${(stderr.trim() || error.message).split("\n").slice(-6).join(" | ")}`
            )
          )
        } else resolve(stdout)
      }
    )
  })

const onPath = (program: string) =>
  (process.env.PATH ?? "").split(":").some((dir) => dir !== "" && existsSync(join(dir, program)))

/** Why private nodes cannot run here (the same rule as test/support/privateBroker.ts), or undefined. */
export const privateNodesUnsupportedReason = (): string | undefined =>
  process.getuid?.() !== 0
    ? "private RabbitMQ nodes need root (they run as the rabbitmq user)"
    : !onPath("rabbitmq-server") && !existsSync("/usr/lib/rabbitmq/bin/rabbitmq-server")
    ? "rabbitmq-server is not installed (apt-get install rabbitmq-server)"
    : !onPath("runuser")
    ? "runuser is not on PATH"
    : undefined

const canListen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

/** Ports of the machine's broker, which rabbit-node.sh refuses. */
const reserved = new Set([4369, 5672, 15672, 25672])

/**
 * `count` consecutive free ports on 127.0.0.1 (and their +20000 distribution ports),
 * below Linux's ephemeral range (32768–60999): a port in it could be taken as the source
 * port of some outgoing connection while its role or node is down, and the restart fail.
 */
export const freePorts = async (count: number): Promise<number> => {
  for (let attempt = 0; attempt < 200; attempt++) {
    const first = 21_000 + Math.floor(Math.random() * 8_000)
    let ok = true
    for (let i = 0; i < count && ok; i++) {
      ok = !reserved.has(first + i) && (await canListen(first + i)) && (await canListen(first + i + 20_000))
    }
    if (ok) return first
  }
  throw new Error(`no ${count} consecutive free ports found`)
}

export interface BrokerNode {
  /** rabbit-node.sh's NAME; the Erlang node is NAME@localhost. */
  readonly name: string
  readonly port: number
}

/** A queue as `rabbitmqctl list_queues` shows it. */
export interface QueueDepth {
  readonly name: string
  readonly ready: number
  readonly unacked: number
  readonly type: string
  readonly leader: string
}

export class BrokerNodes {
  /** The password of the run's broker user `chaos`: random, so that a log holding it is found. */
  readonly password = randomBytes(12).toString("hex")
  readonly user = "chaos"
  private started = false

  private constructor(readonly base: string, readonly nodes: ReadonlyArray<BrokerNode>, readonly cluster: boolean) {}

  /** One private node on a free port. */
  static async single(): Promise<BrokerNodes> {
    const port = await freePorts(1)
    const base = `dostavka-chaos-${randomBytes(3).toString("hex")}`
    const nodes = new BrokerNodes(base, [{ name: base, port }], false)
    nodes.started = true
    await rabbitNode(["start", base, String(port)])
    await nodes.addUser()
    return nodes
  }

  /** Three private nodes joined into one cluster (`rabbit-node.sh cluster-start`). */
  static async cluster(): Promise<BrokerNodes> {
    const first = await freePorts(3)
    const base = `dostavka-chaos-${randomBytes(3).toString("hex")}`
    const nodes = new BrokerNodes(base, [1, 2, 3].map((i) => ({ name: `${base}-${i}`, port: first + i - 1 })), true)
    nodes.started = true
    await rabbitNode(["cluster-start", base, String(first)], 600_000)
    await nodes.addUser()
    return nodes
  }

  private async addUser() {
    const first = this.nodes[0]!.name
    await this.ctl(first, "add_user", this.user, this.password)
    await this.ctl(first, "set_permissions", "-p", "/", this.user, ".*", ".*", ".*")
  }

  /** The URL of one node, with the run's credentials. */
  urlOf(node: BrokerNode): string {
    return `amqp://${this.user}:${this.password}@127.0.0.1:${node.port}`
  }

  /** The same URL with the password masked, for printing. */
  shownUrlOf(node: BrokerNode): string {
    return `amqp://${this.user}:***@127.0.0.1:${node.port}`
  }

  nodeNamed(erlangNode: string): BrokerNode | undefined {
    return this.nodes.find((n) => `${n.name}@localhost` === erlangNode)
  }

  ctl(name: string, ...args: ReadonlyArray<string>): Promise<string> {
    return rabbitNode(["ctl", name, ...args], 120_000)
  }

  /** The OS pid of a node's Erlang VM (paused ones included). */
  async pid(name: string): Promise<number> {
    const pid = Number.parseInt((await rabbitNode(["pid", name])).trim(), 10)
    if (!Number.isInteger(pid) || pid <= 0) throw new Error(`no pid for ${name}`)
    return pid
  }

  /** Stops a node and keeps its data (queues, messages, users), to start it again later. */
  stop(node: BrokerNode): Promise<string> {
    return rabbitNode(["stop", node.name, "--keep"])
  }

  /** Starts a node again on its port with its data; resolves once AMQP answers. */
  start(node: BrokerNode): Promise<string> {
    return rabbitNode(["start", node.name, String(node.port)], 300_000)
  }

  /** The connections on `name` as `[pid, connection name]`. */
  async connections(name: string): Promise<Array<{ readonly pid: string; readonly name: string }>> {
    const out = await this.ctl(name, "list_connections", "-q", "--no-table-headers", "pid", "name")
    return out.split("\n").filter((l) => l.trim() !== "").map((line) => {
      const [pid = "", ...rest] = line.split("\t")
      return { pid: pid.trim(), name: rest.join("\t").trim() }
    })
  }

  /** The queues that have a consumer, one entry per consumer. */
  async consumedQueues(name: string): Promise<Array<string>> {
    const out = await this.ctl(name, "list_consumers", "-q", "--no-table-headers", "queue_name")
    return out.split("\n").map((l) => l.trim()).filter((l) => l !== "")
  }

  /** Every queue whose name starts with `prefix.`, with its depth. */
  async queues(name: string, prefix: string): Promise<Array<QueueDepth>> {
    const out = await this.ctl(
      name,
      "list_queues",
      "-q",
      "--no-table-headers",
      "name",
      "messages_ready",
      "messages_unacknowledged",
      "type",
      "leader"
    )
    return out.split("\n").filter((l) => l.startsWith(`${prefix}.`)).map((line) => {
      const [qname = "", ready = "0", unacked = "0", type = "", leader = ""] = line.split("\t")
      return { name: qname, ready: Number(ready), unacked: Number(unacked), type: type.trim(), leader: leader.trim() }
    })
  }

  /**
   * The Erlang node holding a quorum queue's leader, from `rabbitmq-queues quorum_status`
   * (the member whose Raft state is `leader`), or else from `list_queues leader`; with
   * the command that told.
   */
  async quorumLeader(
    askNode: string,
    queue: string
  ): Promise<{ readonly node: string; readonly source: string } | undefined> {
    try {
      const out = await runAsRabbitmq("rabbitmq-queues", [
        "-n",
        `${askNode}@localhost`,
        "quorum_status",
        queue,
        "--formatter",
        "json"
      ])
      const rows = JSON.parse(out.slice(out.indexOf("["))) as Array<Record<string, unknown>>
      const node = rows.find((r) => String(r["Raft State"] ?? "").toLowerCase() === "leader")?.["Node Name"]
      if (typeof node === "string") return { node, source: "rabbitmq-queues quorum_status" }
    } catch {
      // fall through to list_queues
    }
    const queues = await this.queues(askNode, queue.slice(0, queue.indexOf(".")))
    const leader = queues.find((q) => q.name === queue)?.leader
    return leader ? { node: leader, source: "rabbitmqctl list_queues leader" } : undefined
  }

  /** Stops every node of the run and removes its data; never throws. */
  async destroy(): Promise<void> {
    if (!this.started) return
    this.started = false
    if (this.cluster) {
      await rabbitNode(["cluster-stop", this.base], 300_000).catch((e: Error) => console.error(`chaos: ${e.message}`))
    } else await rabbitNode(["stop", this.base], 120_000).catch((e: Error) => console.error(`chaos: ${e.message}`))
  }
}

/** Runs a RabbitMQ CLI tool as the rabbitmq user (its home holds the Erlang cookie the private nodes share). */
const runAsRabbitmq = (tool: string, args: ReadonlyArray<string>): Promise<string> =>
  new Promise((resolve, reject) => {
    execFile("runuser", ["-u", "rabbitmq", "--", `/usr/lib/rabbitmq/bin/${tool}`, ...args], {
      encoding: "utf8",
      timeout: 60_000,
      cwd: "/"
    }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${tool} ${args.join(" ")}: ${stderr.trim() || error.message}`))
      else resolve(stdout)
    })
  })
