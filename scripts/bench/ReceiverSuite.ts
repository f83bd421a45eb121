/**
 * The receiver suite: N messages already in the catalog's queue → applied, in messages
 * per second. Variants, run back to back in each round, each on a freshly filled queue
 * and a new database, all with the kit's prefetch:
 * - kit: the kit's own `CatalogRole` in this process (decode, inbox receipt and catalog
 *   entry committed in one transaction per batch, then acked); the clock starts when it
 *   logs `consuming` and stops when a read-only connection sees the N-th receipt
 *   committed (polled every 5 ms);
 * - ceiling: raw amqplib consume and ack, no work;
 * - raw + SQLite: raw amqplib doing the same SQLite work as the kit (WAL,
 *   synchronous = FULL), ONE transaction per message, ack after commit;
 * - rascal + SQLite: a rascal subscription doing the same per-message work.
 * The baselines time themselves from basic.consume to the last ack. The per-message
 * transaction variants run on fewer messages: each commit waits for an fsync.
 */
import { join } from "node:path"
import Sqlite from "better-sqlite3"
import { Duration, Effect } from "effect"
import type { ConsumeMessage } from "amqplib"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { databaseFile } from "../../src/adapters/sqlite/Database.js"
import { MaterialPublishedV1 } from "../../src/domain/MaterialPublished.js"
import { CatalogRole } from "../../src/roles/receivers.js"
import { type BenchBroker, purgeQueues } from "./BenchBroker.js"
import { attempt, BenchFailure, orBenchFailure } from "./BenchFailure.js"
import { say } from "./BenchLog.js"
import { envelopes, publishesOf } from "./BenchMessages.js"
import { type BenchOptions, runs } from "./BenchOptions.js"
import { figure, type Figure, ratio, type Ratio, type SuiteResult } from "./Figures.js"
import { declareKitTopology, type KitSettings, markerLogger, settingsLayer, settingsOf, startRole } from "./KitInProcess.js"
import { consumeCount, openConfirmSession, publishStreaming } from "./RawAmqp.js"
import { openRawCatalogStore } from "./RawCatalogStore.js"
import { openRascal, rascalConsume } from "./RascalClient.js"
import { profiled } from "./CpuProfiler.js"
import { tempDir } from "./TempDir.js"

const Prefix = "bench-receiver"
const ConsumingMarker = "consuming"
const RoundTimeout = Duration.minutes(5)

const rate = (count: number, startedAt: number, endedAt: number) => count / (Math.max(1, endedAt - startedAt) / 1000)

/** Polls `catalog.db` read-only until `count` receipts are committed; the time it saw them. */
const untilReceipts = (file: string, count: number) =>
  Effect.acquireUseRelease(
    Effect.sync(() => new Sqlite(file, { readonly: true })),
    (db) => {
      // Receipts are only ever inserted, so the largest rowid is their number.
      const receipts = db.prepare<[], { n: number | null }>("SELECT MAX(rowid) AS n FROM inbox")
      return Effect.gen(function*() {
        while ((receipts.get()?.n ?? 0) < count) yield* Effect.sleep("5 millis")
        return Date.now()
      })
    },
    (db) => Effect.sync(() => db.close())
  )

const kitRound = (broker: BenchBroker, count: number, profile: <A, E, R>(e: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>) =>
  Effect.scoped(Effect.gen(function*() {
    const s: KitSettings = { amqpUrl: broker.amqpUrl, prefix: Prefix, dataDir: yield* tempDir("receiver") }
    const markers = markerLogger([ConsumingMarker])
    return yield* Effect.gen(function*() {
      const supervisor = yield* startRole(CatalogRole, settingsLayer(s)).pipe(Effect.provide(markers.layer))
      const startedAt = yield* markers.at(ConsumingMarker)
      const endedAt = yield* Effect.raceFirst(untilReceipts(databaseFile(s.dataDir, "catalog"), count), supervisor.failed)
      return rate(count, startedAt, endedAt)
    }).pipe(profile)
  })).pipe(
    orBenchFailure("kit receiver"),
    Effect.timeoutFail({ duration: RoundTimeout, onTimeout: () => new BenchFailure({ what: "kit receiver", detail: "round timed out" }) })
  )

/** The work of the raw variants: the event's JSON applied to a raw catalog store in one transaction. */
const applyTo = (store: ReturnType<typeof openRawCatalogStore>) => (message: ConsumeMessage, content?: unknown) =>
  store.apply(String(message.properties.messageId), (content ?? JSON.parse(message.content.toString("utf8"))) as Parameters<typeof store.apply>[1])

export const receiverSuite = (options: BenchOptions, broker: BenchBroker) =>
  Effect.gen(function*() {
    const { sizes } = options
    const s: KitSettings = { amqpUrl: broker.amqpUrl, prefix: Prefix, dataDir: "unused" }
    const prefetch = (yield* settingsOf(s)).prefetch
    const names = namesOf(Prefix)
    const queue = names.queue("catalog")
    yield* declareKitTopology(s)
    const publishes = publishesOf(envelopes("receiver", sizes.receiverMessages), { queue })
    const fill = (count: number) =>
      Effect.zipRight(
        purgeQueues(broker, [queue]),
        attempt("filling the queue", async () => {
          const session = await openConfirmSession(broker.amqpUrl)
          try {
            await publishStreaming(session, publishes.slice(0, count), 500)
          } finally {
            await session.close()
          }
        })
      )
    const many = sizes.receiverMessages
    const few = Math.min(sizes.receiverPerMessageTxMessages, many)

    let currentRound = 0
    type Variant = { readonly name: string; readonly label: string; readonly count: number; readonly round: (count: number) => Effect.Effect<number, BenchFailure> }
    const every: ReadonlyArray<Variant> = [
      { name: "kit", label: "kit catalog receiver (CatalogRole: batch transaction, inbox + entry)", count: many, round: (n) => kitRound(broker, n, profiled(options.cpuProfileDir, `receiver-kit-round${currentRound}`)) },
      {
        name: "ceiling",
        label: "raw amqplib consume + ack, no work (ceiling)",
        count: many,
        round: (n) => attempt("raw consume", async () => {
          const t = await consumeCount(broker.amqpUrl, queue, prefetch, n)
          return rate(n, t.startedAt, t.endedAt)
        })
      },
      {
        name: "raw-sqlite",
        label: "raw amqplib + SQLite, one transaction per message",
        count: few,
        round: (n) =>
          Effect.scoped(Effect.flatMap(tempDir("raw-receiver"), (dir) =>
            attempt("raw consume + SQLite", async () => {
              const store = openRawCatalogStore(join(dir, "catalog.db"))
              try {
                const t = await consumeCount(broker.amqpUrl, queue, prefetch, n, applyTo(store))
                return rate(n, t.startedAt, t.endedAt)
              } finally {
                store.close()
              }
            })))
      },
      {
        name: "rascal",
        label: "rascal subscription + SQLite, one transaction per message",
        count: few,
        round: (n) =>
          Effect.scoped(Effect.flatMap(tempDir("rascal-receiver"), (dir) =>
            attempt("rascal consume + SQLite", async () => {
              const store = openRawCatalogStore(join(dir, "catalog.db"))
              const rascal = await openRascal({
                url: broker.amqpUrl,
                vhost: broker.vhost,
                exchange: names.exchange,
                routingKey: MaterialPublishedV1.type,
                queue,
                prefetch
              })
              try {
                const t = await rascalConsume(rascal, n, applyTo(store))
                return rate(n, t.startedAt, t.endedAt)
              } finally {
                await rascal.shutdown()
                store.close()
              }
            })))
      }
    ]
    const variants = every.filter((v) => runs(options, v.name))

    const results = new Map<string, Array<number>>(variants.map((v) => [v.name, []]))
    for (let round = 1; round <= sizes.rounds; round++) {
      currentRound = round
      for (const variant of variants) {
        yield* fill(variant.count)
        const value = yield* variant.round(variant.count)
        results.get(variant.name)!.push(value)
        yield* say(`receiver round ${round}: ${variant.name} ${Math.round(value)} msgs/s`)
      }
    }
    yield* purgeQueues(broker, [queue])

    const figures = new Map<string, Figure>(variants.map((v) => [v.name, figure(v.label, "msgs/s", results.get(v.name)!, `${v.count} msgs, prefetch ${prefetch}`)]))
    const kit = figures.get("kit")
    const ratios: Array<Ratio> = []
    const headline: Array<readonly [string, number]> = []
    const compare = (other: string, name: string, meaning: string, short: string) => {
      const b = figures.get(other)
      if (kit === undefined || b === undefined) return
      const r = ratio(name, kit, b, meaning)
      ratios.push(r)
      headline.push([short, r.median])
    }
    compare("ceiling", "receiver: kit / raw consume+ack", "share of the ceiling the kit reaches", "receiver kit/ceiling")
    compare("raw-sqlite", "receiver: kit / raw + SQLite per message", "above 1: the kit is faster", "receiver kit/raw-sqlite")
    compare("rascal", "receiver: kit / rascal + SQLite per message", "above 1: the kit is faster", "receiver kit/rascal")
    return {
      suite: "receiver",
      ratios,
      figures: [...figures.values()],
      notes: [
        `The queue is purged and filled with the variant's messages (≈1 KiB, persistent, each a new material) before every variant; prefetch ${prefetch} for all.`,
        "The kit's clock starts at its `consuming` log line and stops when a read-only connection sees the last receipt committed (polled every 5 ms); the baselines time basic.consume to their last ack.",
        `The per-message-transaction variants run ${few} messages a round: each commit waits for an fsync (synchronous = FULL), as the kit's batch commit does once per batch.`
      ],
      headline
    } satisfies SuiteResult
  })
