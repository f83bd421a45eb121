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
import type { ConsumeMessage } from "amqplib"
import Sqlite from "better-sqlite3"
import { Effect } from "effect"
import { join } from "node:path"
import { namesOf } from "../../src/adapters/amqp/Topology.js"
import { databaseFile } from "../../src/adapters/sqlite/Database.js"
import { MaterialPublishedV1 } from "../../src/domain/MaterialPublished.js"
import { CatalogRole } from "../../src/roles/receivers.js"
import { type BenchBroker, purgeQueues } from "./BenchBroker.js"
import { attempt } from "./BenchFailure.js"
import { envelopes, publishesOf } from "./BenchMessages.js"
import { type BenchOptions, runs } from "./BenchOptions.js"
import { compare, runRounds, type Variant } from "./Comparison.js"
import { profiled } from "./CpuProfiler.js"
import type { SuiteResult } from "./Figures.js"
import { declareKitTopology, kitRound, type KitSettings, settingsOf } from "./KitInProcess.js"
import { openRascal, rascalConsume } from "./RascalClient.js"
import { consumeCount, openConfirmSession, publishStreaming } from "./RawAmqp.js"
import { openRawCatalogStore, type RawCatalogStore } from "./RawCatalogStore.js"
import { type Mark, mark, resultOf } from "./RoundClock.js"
import { tempDir } from "./TempDir.js"

const Prefix = "bench-receiver"
const ConsumingMarker = "consuming"

/** Polls `catalog.db` read-only until `count` receipts are committed; the time it saw them. */
const untilReceipts = (file: string, count: number) =>
  Effect.acquireUseRelease(
    Effect.sync(() => new Sqlite(file, { readonly: true })),
    (db) => {
      // Receipts are only ever inserted, so the largest rowid is their number.
      const receipts = db.prepare<[], { n: number | null }>("SELECT MAX(rowid) AS n FROM inbox")
      return Effect.gen(function*() {
        while ((receipts.get()?.n ?? 0) < count) yield* Effect.sleep("5 millis")
        return mark()
      })
    },
    (db) => Effect.sync(() => db.close())
  )

/** The work of the raw variants: the event's JSON applied to a raw catalog store in one transaction. */
const applyTo = (store: RawCatalogStore) => (message: ConsumeMessage, content?: unknown) =>
  store.apply(
    String(message.properties.messageId),
    (content ?? JSON.parse(message.content.toString("utf8"))) as Parameters<typeof store.apply>[1]
  )

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

    const perMessageTx = (
      name: string,
      consume: (store: RawCatalogStore) => Promise<{ readonly started: Mark; readonly ended: Mark }>
    ) =>
      Effect.scoped(Effect.flatMap(tempDir(name), (dir) =>
        attempt(name, async () => {
          const store = openRawCatalogStore(join(dir, "catalog.db"))
          try {
            const t = await consume(store)
            return resultOf(few, t.started, t.ended)
          } finally {
            store.close()
          }
        })))
    const every: ReadonlyArray<Variant> = [
      {
        name: "kit",
        label: "kit catalog receiver (CatalogRole: batch transaction, inbox + entry)",
        note: `${many} msgs, prefetch ${prefetch}`,
        round: (n) =>
          kitRound({
            what: "kit receiver",
            prefix: Prefix,
            amqpUrl: broker.amqpUrl,
            role: CatalogRole,
            marker: ConsumingMarker,
            count: many,
            prepare: () => fill(many),
            until: (s) => untilReceipts(databaseFile(s.dataDir, "catalog"), many),
            profile: profiled(options.cpuProfileDir, `receiver-kit-round${n}`)
          })
      },
      {
        name: "ceiling",
        label: "raw amqplib consume + ack, no work (ceiling)",
        note: `${many} msgs, prefetch ${prefetch}`,
        round: () =>
          Effect.zipRight(
            fill(many),
            attempt("raw consume", async () => {
              const t = await consumeCount(broker.amqpUrl, queue, prefetch, many)
              return resultOf(many, t.started, t.ended)
            })
          )
      },
      {
        name: "raw-sqlite",
        label: "raw amqplib + SQLite, one transaction per message",
        note: `${few} msgs, prefetch ${prefetch}`,
        round: () =>
          Effect.zipRight(
            fill(few),
            perMessageTx("raw-receiver", (store) => consumeCount(broker.amqpUrl, queue, prefetch, few, applyTo(store)))
          )
      },
      {
        name: "rascal",
        label: "rascal subscription + SQLite, one transaction per message",
        note: `${few} msgs, prefetch ${prefetch}`,
        round: () =>
          Effect.zipRight(
            fill(few),
            perMessageTx("rascal-receiver", async (store) => {
              const rascal = await openRascal({
                url: broker.amqpUrl,
                vhost: broker.vhost,
                exchange: names.exchange,
                routingKey: MaterialPublishedV1.type,
                queue,
                prefetch
              })
              try {
                return await rascalConsume(rascal, few, applyTo(store))
              } finally {
                await rascal.shutdown()
              }
            })
          )
      }
    ]
    const variants = every.filter((v) => runs(options, v.name))
    const results = yield* runRounds("receiver", sizes.rounds, variants, Effect.void)
    yield* purgeQueues(broker, [queue])
    const { figures, ratios, headline } = compare("receiver", variants, results, [
      {
        variant: "ceiling",
        name: "receiver: kit / raw consume+ack",
        meaning: "share of the ceiling the kit reaches",
        short: "receiver kit/ceiling"
      },
      {
        variant: "raw-sqlite",
        name: "receiver: kit / raw + SQLite per message",
        meaning: "above 1: the kit is faster",
        short: "receiver kit/raw-sqlite"
      },
      {
        variant: "rascal",
        name: "receiver: kit / rascal + SQLite per message",
        meaning: "above 1: the kit is faster",
        short: "receiver kit/rascal"
      }
    ])
    return {
      suite: "receiver",
      ratios,
      figures,
      notes: [
        `The queue is purged and filled with the variant's messages (≈1 KiB, persistent, each a new material) before every variant; prefetch ${prefetch} for all.`,
        "The kit's clock starts at its `consuming` log line and stops when a read-only connection sees the last receipt committed (polled every 5 ms); the baselines time basic.consume to their last ack. CPU per message is this process's (the broker's is not counted) over the same window: for every variant, neither connecting nor closing is counted.",
        `The per-message-transaction variants run ${few} messages a round: each commit waits for an fsync (synchronous = FULL), as the kit's batch commit does once per batch.`
      ],
      headline
    } satisfies SuiteResult
  })
