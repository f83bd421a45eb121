import { Layer } from "effect"
import { AuditLogMemory } from "../../src/adapters/memory/AuditLogMemory.js"
import { CatalogStoreMemory } from "../../src/adapters/memory/CatalogStoreMemory.js"
import { IdsMemory } from "../../src/adapters/memory/IdsMemory.js"
import { InboxMemory } from "../../src/adapters/memory/InboxMemory.js"
import { MaterialStoreMemory } from "../../src/adapters/memory/MaterialStoreMemory.js"
import { MemoryDatabase, TransactionMemory } from "../../src/adapters/memory/MemoryDatabase.js"
import { OutboxMemory } from "../../src/adapters/memory/OutboxMemory.js"
import { PublicationRequestsMemory } from "../../src/adapters/memory/PublicationRequestsMemory.js"
import { OutboxSignal } from "../../src/ports/OutboxSignal.js"

/** The API owner's ports in memory, over one fresh MemoryDatabase, with ids from a counter (`memoryUuid`). */
export const ApiMemory = Layer.mergeAll(
  TransactionMemory,
  OutboxMemory,
  MaterialStoreMemory,
  PublicationRequestsMemory,
  OutboxSignal.layer,
  IdsMemory
).pipe(Layer.provideMerge(MemoryDatabase.layer))

/** A receiver's ports in memory (both handlers' stores), over one fresh MemoryDatabase. */
export const ReceiverMemory = Layer.mergeAll(TransactionMemory, InboxMemory, CatalogStoreMemory, AuditLogMemory).pipe(
  Layer.provideMerge(MemoryDatabase.layer)
)
