import { Schema } from "effect"

/** `I` with the keys `M` names renamed: the row's column names for a record's fields. */
type Renamed<I, M> = { [K in keyof I as K extends keyof M ? M[K] extends string ? M[K] : K : K]: I[K] }

/**
 * A port's record (`record`, a Struct with the port's field names and domain types) as
 * the row of a table: the same fields, each in the column `columns` names for it, or in a
 * column of its own name when `columns` leaves it out. Decoding a row
 * (`SqlSchema.findOne`/`findAll`'s `Result`) checks every field, brands included, and
 * leaves out the columns the record does not name; encoding a record (`SqlSchema.void`'s
 * `Request`) gives `sql.insert` the row. The fields are declared once, by the port.
 *
 * It is one Struct whose fields read their columns with `Schema.fromKey`, so a row costs
 * one pass (about 7 µs for the outbox's 15 columns here), not a chain of transformations.
 *
 * E.g. `tableRow(CatalogEntry, { materialId: "material_id" })`: a
 * `Schema<CatalogEntry, { material_id: string, revision: number, … }>`.
 */
export const tableRow = <
  Fields extends Schema.Struct.Fields,
  const M extends { readonly [K in keyof Fields]?: string } & { readonly [K in Exclude<keyof M, keyof Fields>]: never }
>(record: Schema.Struct<Fields>, columns: M) => {
  const fields: Record<string, Schema.Struct.Field> = {}
  for (const [name, field] of Object.entries(record.fields)) {
    const column: string | undefined = (columns as Partial<Record<string, string>>)[name]
    if (column === undefined) fields[name] = field
    else {
      const signature: Schema.PropertySignature.Any = Schema.isPropertySignature(field)
        ? field as Schema.PropertySignature.Any
        : Schema.propertySignature(field)
      fields[name] = Schema.fromKey(signature, column)
    }
  }
  // The Struct built above has exactly this type; TypeScript cannot follow the loop.
  return Schema.Struct(fields) as unknown as Schema.Schema<
    Schema.Struct.Type<Fields>,
    Renamed<Schema.Struct.Encoded<Fields>, M>,
    Schema.Struct.Context<Fields>
  >
}

/** The one row of `SELECT COUNT(*) AS n …`. */
export const CountRow = Schema.Struct({ n: Schema.Number })
