// One step of the cluster schema: applied once, in order, inside the transaction that records it
// in fermata_schema_version (cluster/schema/migrate.ts). A migration never changes once released:
// a change to the schema is a new migration with the next version.
export interface Migration {
  /** 1, 2, 3, … with no gaps: the schema version the database is at once this one is applied. */
  readonly version: number;
  /** A few words for fermata_schema_version and the operator. */
  readonly name: string;
  /** Statements run as one transaction's part (DDL in PostgreSQL is transactional). */
  readonly sql: string;
}
